import CoreMetrics
import HTTPTypes
import Tracing

/// The first stage of every call: when a tracer, a metrics backend or an event monitor is
/// listening, one client span for the whole call (named after the endpoint's name or template, never
/// the filled-in path), the OpenTelemetry HTTP client metrics, and the call's end for the
/// monitors. The call's later stages add their events to it through
/// ``CallContext/observation``.
///
/// With nothing bootstrapped and no monitor, the stage is passed over.
struct ObservationStage: Stage {
    let settings: Client.Configuration.Observability
    /// The recorders of the monitors that record each hop as HAR, found once per client.
    let archiveRecorders: [HTTPArchiveRecorder]

    init(settings: Client.Configuration.Observability) {
        self.settings = settings
        self.archiveRecorders = settings.eventMonitors.compactMap { ($0 as? HTTPArchiveMonitor)?.recorder }
    }

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        !settings.eventMonitors.isEmpty || settings.activeTracer != nil || settings.activeMetricsFactory != nil
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        let tracer = settings.activeTracer
        let metricsFactory = settings.activeMetricsFactory
        let method = request.method.rawValue
        let endpoint = request.endpointName ?? request.pathTemplate.map { "\(method) \($0)" } ?? method
        let (host, port) = request.server
        let span = tracer.map { tracer in
            let span = tracer.startSpan(endpoint, context: ServiceContext.current ?? .topLevel, ofKind: .client)
            span.attributes["http.request.method"] = method
            span.attributes["server.address"] = host
            span.attributes["server.port"] = port
            span.attributes["url.full"] = RequestLog.redactedURL(request)
            if let template = request.pathTemplate { span.attributes["url.template"] = template }
            if let name = request.endpointName { span.attributes["trellis.endpoint"] = name }
            return span as any Span
        }
        let observation = CallObservation(
            propagator: tracer.map { _ in settings.tracer.map { $0 as any Instrument } ?? InstrumentationSystem.instrument },
            span: span,
            monitors: settings.eventMonitors,
            archiveRecorders: archiveRecorders,
            metricsFactory: metricsFactory,
            endpoint: endpoint
        )
        var observed = call
        observed.observation = observation
        let active = metricsFactory.map { factory in
            Meter(
                label: "http.client.active_requests",
                dimensions: [("http.request.method", method), ("server.address", host), ("server.port", String(port))],
                factory: factory
            )
        }
        active?.increment()
        defer { active?.decrement() }
        do {
            let response: Response<ResponseBody>
            if let span {
                response = try await ServiceContext.withValue(span.context) { try await next(request, observed) }
            } else {
                response = try await next(request, observed)
            }
            finish(observation, request: request, status: response.status, error: nil)
            return response
        } catch {
            var status: HTTPResponse.Status?
            if case TrellisError.unacceptableStatus(let failure) = error { status = failure.status }
            finish(observation, request: request, status: status, error: error)
            throw error
        }
    }

    private func finish(_ observation: CallObservation, request: Request, status: HTTPResponse.Status?, error: (any Error)?) {
        let duration = ContinuousClock.now - observation.started
        let hops = observation.hops
        // OpenTelemetry counts a 4xx or 5xx answer as a client error, named by its code, also
        // when the caller accepts it.
        let errorType = error.map(CallObservation.errorType) ?? status.flatMap { $0.code >= 400 ? String($0.code) : nil }
        if let span = observation.span {
            if let status { span.attributes["http.response.status_code"] = status.code }
            if hops > 1 { span.attributes["http.request.resend_count"] = hops - 1 }
            if let errorType {
                span.attributes["error.type"] = errorType
                span.setStatus(SpanStatus(code: .error))
            }
            if let error { span.recordError(error) }
            span.end()
        }
        if let factory = observation.metricsFactory {
            var dimensions = [
                ("http.request.method", request.method.rawValue),
                ("http.route", request.pathTemplate ?? ""),
            ]
            if let name = request.endpointName { dimensions.append(("trellis.endpoint", name)) }
            if let status { dimensions.append(("http.response.status_code", String(status.code))) }
            if let errorType { dimensions.append(("error.type", errorType)) }
            let timer = CoreMetrics.Timer(label: "http.client.request.duration", dimensions: dimensions, factory: factory)
            timer.recordNanoseconds(Self.nanoseconds(duration))
        }
        if !observation.monitors.isEmpty {
            let summary = CallSummary(
                request: request,
                endpoint: observation.endpoint,
                status: status,
                error: error,
                hops: hops,
                duration: duration
            )
            for monitor in observation.monitors { monitor.callFinished(summary) }
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue + attoseconds / 1_000_000_000
    }
}
