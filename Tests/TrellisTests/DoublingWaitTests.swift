import Testing
@testable import Trellis

/// The one doubling wait that the outbox, the idempotency key's `409` and an event stream's
/// reconnections share: it doubles, stops at its ceiling, and never traps on absurd input.
@Suite("A wait that doubles")
struct DoublingWaitTests {
    @Test func itDoublesUpToItsCeilingAndNeverTraps() {
        let start = Duration.milliseconds(100)
        #expect(start.doubled(0, atMost: .seconds(2)) == .milliseconds(100))
        #expect(start.doubled(3, atMost: .seconds(2)) == .milliseconds(800))
        #expect(start.doubled(5, atMost: .seconds(2)) == .seconds(2))
        #expect(start.doubled(10_000, atMost: .seconds(2)) == .seconds(2))
        #expect(start.doubled(-4, atMost: .seconds(2)) == .milliseconds(100))
        #expect(Duration.seconds(Int64.max).doubled(62, atMost: .longest) == .longest)
    }
}
