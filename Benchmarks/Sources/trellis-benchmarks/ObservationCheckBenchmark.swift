import CoreMetrics
import Tracing

/// What a call costs when nothing is bootstrapped: `ObservationStage` looks at the process's
/// tracer and metrics factory (both no-ops here) and passes itself over. Timed here over many
/// checks, since one is far below the noise of a call.
enum ObservationCheckBenchmark {
    static func run() -> String {
        let checks = 2_000_000
        var listening = 0
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for _ in 0..<checks {
                if !(InstrumentationSystem.tracer is NoOpTracer) || !(MetricsSystem.factory is NOOPMetricsHandler) {
                    listening += 1
                }
            }
        }
        let nanoseconds = Double(elapsed.components.attoseconds) / 1e9 + Double(elapsed.components.seconds) * 1e9
        return String(format: "nothing bootstrapped: %.0f ns per call for the observation check (%d checks, %d found a listener)", nanoseconds / Double(checks), checks, listening)
    }
}
