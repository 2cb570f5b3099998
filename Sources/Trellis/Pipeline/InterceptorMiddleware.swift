import Foundation

/// Snowdrop's interceptors (`Client.Configuration.interceptors`, a service's `beforeSending`
/// and `onResponse`) as a middleware:
/// `beforeSending` runs on the way out, `onResponse` on the way back.
///
/// `onResponse` sees the body in memory, so a response passing through it is buffered (within
/// `maximumBodySize`); streamed transfers that must not be buffered should use a
/// ``Middleware`` instead.
struct InterceptorMiddleware: Middleware {
    /// Runs before the request is sent.
    var beforeSending: BeforeSending?
    /// Runs when the response head and body have arrived.
    var onResponse: OnResponse?
    /// The largest body `onResponse` will buffer.
    var maximumBodySize: Int

    /// Creates the interceptors.
    init(
        beforeSending: BeforeSending? = nil,
        onResponse: OnResponse? = nil,
        maximumBodySize: Int = Client.defaultMaximumBodySize
    ) {
        self.beforeSending = beforeSending
        self.onResponse = onResponse
        self.maximumBodySize = maximumBodySize
    }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        let outgoing = try await beforeSending?(request) ?? request
        let response = try await next(outgoing)
        guard let onResponse else { return response }
        let buffer = try await response.body.collect(upTo: maximumBodySize)
        let replaced = try await onResponse(response.withBody(Data(buffer: buffer)), outgoing)
        return replaced.withBody(ResponseBody(replaced.body))
    }
}
