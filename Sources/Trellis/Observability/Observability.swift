public import CoreMetrics
public import Tracing

extension Client.Configuration {
    /// Where a client's calls are traced, measured and reported.
    ///
    /// By default a client uses whatever the process bootstrapped: the tracer of
    /// swift-distributed-tracing's `InstrumentationSystem` and the factory of swift-metrics'
    /// `MetricsSystem`. With neither bootstrapped and no monitor, nothing is recorded and the
    /// stages that would record are passed over.
    ///
    /// ```swift
    /// let client = Client(baseURL: url) {
    ///     $0.observability.eventMonitors = [MyAuditLog()]
    /// }
    /// ```
    public struct Observability: Sendable {
        /// The tracer of this client's spans; `nil` uses `InstrumentationSystem.tracer`.
        public var tracer: (any Tracer)?
        /// The factory of this client's metrics; `nil` uses `MetricsSystem.factory`.
        public var metricsFactory: (any MetricsFactory)?
        /// Told of every hop, retry, redirect and token refresh of every call, in order.
        public var eventMonitors: [any ClientEventMonitor]

        /// A tracer and a metrics factory (`nil`: whatever the process bootstrapped) and the
        /// monitors that follow every call.
        public init(
            tracer: (any Tracer)? = nil,
            metricsFactory: (any MetricsFactory)? = nil,
            eventMonitors: [any ClientEventMonitor] = []
        ) {
            self.tracer = tracer
            self.metricsFactory = metricsFactory
            self.eventMonitors = eventMonitors
        }

        /// The tracer to use now, or `nil` when it would record nothing. Read per call: the
        /// process may bootstrap its tracer after the client is made.
        var activeTracer: (any Tracer)? {
            let tracer = self.tracer ?? InstrumentationSystem.tracer
            return tracer is NoOpTracer ? nil : tracer
        }

        /// The metrics factory to use now, or `nil` when it would record nothing.
        var activeMetricsFactory: (any MetricsFactory)? {
            let factory = metricsFactory ?? MetricsSystem.factory
            return ObjectIdentifier(type(of: factory)) == ObjectIdentifier(NOOPMetricsHandler.self) ? nil : factory
        }
    }
}
