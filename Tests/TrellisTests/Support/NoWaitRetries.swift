import Trellis
import TrellisTesting

extension Client.Configuration {
    /// Retries by `policy` on a clock that moves itself by each wait, so that no real time
    /// passes between attempts.
    mutating func retryWithoutWaiting(_ policy: RetryPolicy) {
        retry = policy
        clock = ManualClock(advancesWhenSleeping: true)
    }
}
