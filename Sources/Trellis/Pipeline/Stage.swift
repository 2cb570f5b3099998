/// One step of a ``Pipeline``: a ``Middleware`` that also sees the call's ``CallContext``.
/// Every built-in behaviour is one; a caller's middleware joins the pipeline as a
/// ``MiddlewareStage``.
protocol Stage: Sendable {
    typealias Next = Pipeline.Next

    /// Handles `request`, calling `next` to pass it on with the call's context.
    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody>

    /// Whether `request` has anything for this stage to do; the pipeline passes over a stage
    /// that has not, without entering it. `true` unless the stage says otherwise.
    func isNeeded(for request: Request, _ call: CallContext) -> Bool

    /// The stage's name, as "The pipeline" article lists it.
    var name: String { get }

    /// Whether the stage works on the record of the call's origin (``OriginRecord``), which
    /// ``RetryStage`` then looks up once per call for it. `false` unless the stage says
    /// otherwise.
    var keepsStatePerOrigin: Bool { get }
}

extension Stage {
    func isNeeded(for request: Request, _ call: CallContext) -> Bool { true }

    var name: String { String(describing: Self.self) }

    var keepsStatePerOrigin: Bool { false }
}

/// A caller's ``Middleware`` in the pipeline: the call's context passes it by, unchanged.
struct MiddlewareStage: Stage {
    let middleware: any Middleware

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        try await middleware.intercept(request) { request in try await next(request, call) }
    }

    var name: String { String(describing: type(of: middleware)) }
}
