public import HTTPTypes

/// Observes what a client does on the wire, call by call, without being part of it: each hop
/// sent, each response head and body, each retry, redirect and token refresh, and each call's
/// end. Alamofire's `EventMonitor` and OkHttp's `EventListener` play the same part.
///
/// Every method has an empty default, so a monitor implements only what it needs. Methods
/// are called on the task making the call, in order, and should return quickly; a monitor
/// must not throw or block. The requests given are the real ones, credentials included:
/// redact before you log them.
///
/// ```swift
/// struct SlowCallReport: ClientEventMonitor {
///     func callFinished(_ call: CallSummary) {
///         if call.duration > .seconds(2) { print("slow: \(call.endpoint) \(call.duration)") }
///     }
/// }
/// let client = Client(baseURL: url) { $0.observability.eventMonitors = [SlowCallReport()] }
/// ```
public protocol ClientEventMonitor: Sendable {
    /// A hop is about to go to the transport: the first attempt, a retry, a redirect, or the
    /// replay after a token refresh. `hop` counts from 1 within the call.
    func requestWillBeSent(_ request: Request, hop: Int)
    /// The head of a hop's response has arrived.
    func responseHeadReceived(_ response: HTTPResponse, for request: Request, hop: Int)
    /// A hop's response body has been read to its end (`error` is `nil`) or has failed.
    func responseBodyFinished(byteCount: Int, error: (any Error)?, for request: Request, hop: Int)
    /// A hop failed before any response head: no connection, a timeout, a TLS failure.
    func hopFailed(_ error: any Error, for request: Request, hop: Int)
    /// The call will be sent again after `delay`, because of `cause`. `retry` counts from 1.
    func retryScheduled(retry: Int, delay: Duration, cause: RetryCause, for request: Request)
    /// A redirect is being followed from `request` to `redirected`.
    func redirectFollowed(from request: Request, to redirected: Request, status: HTTPResponse.Status)
    /// The access token stored under `label` was refreshed (or a refresh another call started
    /// was waited for) before `request` was sent.
    func accessTokenRefreshed(label: String, for request: Request)
    /// A resilience policy acted on the call: a retry refused by the budget, a hedge sent, a
    /// circuit opened, a wait for the concurrency limit or a shared pause, a call joined to
    /// another or refused.
    func resilienceEvent(_ event: ResilienceEvent, for request: Request)
    /// The call has ended: its response is returned (its head, for a streamed call), or it
    /// failed.
    func callFinished(_ call: CallSummary)
}

extension ClientEventMonitor {
    public func requestWillBeSent(_ request: Request, hop: Int) {}
    public func responseHeadReceived(_ response: HTTPResponse, for request: Request, hop: Int) {}
    public func responseBodyFinished(byteCount: Int, error: (any Error)?, for request: Request, hop: Int) {}
    public func hopFailed(_ error: any Error, for request: Request, hop: Int) {}
    public func retryScheduled(retry: Int, delay: Duration, cause: RetryCause, for request: Request) {}
    public func redirectFollowed(from request: Request, to redirected: Request, status: HTTPResponse.Status) {}
    public func accessTokenRefreshed(label: String, for request: Request) {}
    public func resilienceEvent(_ event: ResilienceEvent, for request: Request) {}
    public func callFinished(_ call: CallSummary) {}
}

/// Why a call is being sent again.
public enum RetryCause: Sendable {
    /// The server answered with a status the retry policy retries (503, 429, …).
    case status(HTTPResponse.Status)
    /// The attempt failed with an error the retry policy retries.
    case error(any Error)
}

/// How a call ended, for ``ClientEventMonitor/callFinished(_:)``.
public struct CallSummary: Sendable {
    /// The request as the caller made it, before any hop changed it.
    public let request: Request
    /// The request's ``Request/endpointName`` when it has one (an OpenAPI operation ID);
    /// else `GET /posts/{id}`, the method and the endpoint's path template, or the method alone.
    public let endpoint: String
    /// The status of the final response, also when the call failed because of it.
    public let status: HTTPResponse.Status?
    /// Why the call failed, or `nil`.
    public let error: (any Error)?
    /// How many hops went to the transport (attempts, redirects and replays).
    public let hops: Int
    /// From the call's start to its end.
    public let duration: Duration
}
