import NIOCore

/// Arithmetic on durations that saturates instead of trapping: a policy or a timeout given as
/// an absurd number (a retry budget of ten million seconds, `.seconds(Int64.max)`) means "a
/// very long time", never a crash.
extension Duration {
    /// The duration in seconds, as a `Double` (lossy, but never trapping). (`package`:
    /// `TrellisPostgres` gives durations to its statements in seconds.)
    package var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// `seconds` as a duration, clamped to zero below and to about 292 years above (what a
    /// 64-bit count of nanoseconds holds), and zero for NaN.
    static func saturating(seconds: Double) -> Duration {
        guard seconds.isFinite else { return seconds > 0 ? longest : .zero }
        if seconds <= 0 { return .zero }
        if seconds >= longest.inSeconds { return longest }
        return .nanoseconds(Int64(seconds * 1e9))
    }

    /// The longest duration Trellis schedules: what `TimeAmount` and `DispatchTime` can hold.
    static var longest: Duration { .nanoseconds(Int64.max) }

    /// `self * factor`, saturating.
    func saturatingMultiplied(by factor: Double) -> Duration {
        .saturating(seconds: inSeconds * factor)
    }

    /// `self` doubled `times` times, and at most `ceiling`: the wait before trying again
    /// something that failed `times` times in a row after the first.
    func doubled(_ times: Int, atMost ceiling: Duration) -> Duration {
        Swift.min(saturatingMultiplied(by: Double(1 << Swift.min(Swift.max(times, 0), 62))), ceiling)
    }
}

extension TimeAmount {
    /// `duration` in nanoseconds, clamped to what a `TimeAmount` holds.
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow {
            self = .nanoseconds(seconds < 0 ? Int64.min : Int64.max)
            return
        }
        let (total, overflowAgain) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        self = .nanoseconds(overflowAgain ? (seconds < 0 ? Int64.min : Int64.max) : total)
    }
}
