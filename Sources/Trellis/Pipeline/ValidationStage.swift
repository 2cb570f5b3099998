import Foundation
import NIOFoundationCompat

/// Runs the client's response validations, then the request's, on the final response of a
/// buffered call whose status is accepted; a failing one becomes the call's error.
struct ValidationStage: Stage {
    let validations: [ResponseValidation]
    let acceptedStatuses: Set<Int>

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        !validations.isEmpty || !request.validations.isEmpty
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let response = try await next(request, call)
        guard case .bytes(let body) = response.body.storage,
            (request.acceptedStatuses ?? acceptedStatuses).contains(response.status.code)
        else { return response }
        let buffered = response.withBody(Data(buffer: body))
        for validation in validations + request.validations {
            do {
                try validation.check(buffered, request)
            } catch {
                throw TrellisError.validationFailed(RequestCheckFailure(
                    name: validation.name,
                    request: RequestLog.summary(request),
                    status: response.status.code,
                    underlying: error
                ))
            }
        }
        return response
    }
}
