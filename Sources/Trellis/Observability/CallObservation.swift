import CoreMetrics
import HTTPTypes
import NIOConcurrencyHelpers
import Tracing

/// What one call records while it travels: its span, its monitors and its hop count. The
/// first stage makes one when anything is listening; later stages find it on the request
/// (``Request/observation``) and tell it what they did. A call with nothing listening has
/// none, and those stages only check for `nil`.
final class CallObservation: Sendable {
    /// What writes the trace context into each hop's header fields: the client's tracer, or
    /// every instrument the process bootstrapped (a propagator may be one of several).
    let propagator: (any Instrument)?
    let span: (any Span)?
    let monitors: [any ClientEventMonitor]
    /// The recorders of the monitors that record each hop as HAR (``HTTPArchiveMonitor``).
    let archiveRecorders: [HTTPArchiveRecorder]
    let metricsFactory: (any MetricsFactory)?
    let endpoint: String
    let started: ContinuousClock.Instant
    private let hopCount = NIOLockedValueBox(0)

    init(
        propagator: (any Instrument)?,
        span: (any Span)?,
        monitors: [any ClientEventMonitor],
        archiveRecorders: [HTTPArchiveRecorder],
        metricsFactory: (any MetricsFactory)?,
        endpoint: String
    ) {
        self.propagator = propagator
        self.span = span
        self.monitors = monitors
        self.archiveRecorders = archiveRecorders
        self.metricsFactory = metricsFactory
        self.endpoint = endpoint
        self.started = .now
    }

    var hops: Int { hopCount.withLockedValue { $0 } }

    /// Counts a hop about to be sent and returns its number, from 1.
    func hopStarted(_ request: Request) -> Int {
        let hop = hopCount.withLockedValue { count in
            count += 1
            return count
        }
        for monitor in monitors { monitor.requestWillBeSent(request, hop: hop) }
        return hop
    }

    func responseHead(_ head: HTTPResponse, for request: Request, hop: Int) {
        for monitor in monitors { monitor.responseHeadReceived(head, for: request, hop: hop) }
    }

    func bodyFinished(byteCount: Int, error: (any Error)?, for request: Request, hop: Int) {
        for monitor in monitors { monitor.responseBodyFinished(byteCount: byteCount, error: error, for: request, hop: hop) }
    }

    func hopFailed(_ error: any Error, for request: Request, hop: Int) {
        for monitor in monitors { monitor.hopFailed(error, for: request, hop: hop) }
    }

    func retryScheduled(retry: Int, delay: Duration, cause: RetryCause, for request: Request) {
        if let span {
            var attributes: SpanAttributes = [:]
            attributes["http.request.resend_count"] = retry
            attributes["trellis.retry.delay_ms"] = Int(delay / .milliseconds(1))
            switch cause {
            case .status(let status): attributes["http.response.status_code"] = status.code
            case .error(let error): attributes["error.type"] = Self.errorType(error)
            }
            span.addEvent(SpanEvent(name: "retry scheduled", attributes: attributes))
        }
        for monitor in monitors { monitor.retryScheduled(retry: retry, delay: delay, cause: cause, for: request) }
    }

    func redirectFollowed(from request: Request, to redirected: Request, status: HTTPResponse.Status) {
        if let span {
            var attributes: SpanAttributes = [:]
            attributes["http.response.status_code"] = status.code
            attributes["url.full"] = RequestLog.redactedURL(redirected)
            span.addEvent(SpanEvent(name: "redirect followed", attributes: attributes))
        }
        for monitor in monitors { monitor.redirectFollowed(from: request, to: redirected, status: status) }
    }

    func accessTokenRefreshed(label: String, for request: Request) {
        if let span {
            var attributes: SpanAttributes = [:]
            attributes["trellis.token.label"] = label
            span.addEvent(SpanEvent(name: "access token refreshed", attributes: attributes))
        }
        for monitor in monitors { monitor.accessTokenRefreshed(label: label, for: request) }
    }

    func resilienceEvent(_ event: ResilienceEvent, for request: Request) {
        if let span {
            var attributes: SpanAttributes = [:]
            attributes["trellis.resilience.origin"] = event.origin
            if case .callRefused(let refusal) = event { attributes["trellis.resilience.refusal"] = refusal.description }
            span.addEvent(SpanEvent(name: event.name, attributes: attributes))
        }
        if let metricsFactory {
            let (host, port) = request.server
            let counter = Counter(
                label: "trellis.resilience.events",
                dimensions: [("trellis.resilience.event", event.name), ("server.address", host), ("server.port", String(port))],
                factory: metricsFactory
            )
            counter.increment()
        }
        for monitor in monitors { monitor.resilienceEvent(event, for: request) }
    }

    /// The `error.type` OpenTelemetry asks for: the status code for a refused status, the
    /// ``TrellisError`` case otherwise (`timedOut`, `connectionFailed`, …), or the error's type.
    static func errorType(_ error: any Error) -> String {
        if case TrellisError.unacceptableStatus(let failure) = error { return String(failure.status.code) }
        if error is CancellationError { return "cancelled" }
        if error is TrellisError, let name = Mirror(reflecting: error).children.first?.label { return name }
        return String(describing: type(of: error))
    }
}
