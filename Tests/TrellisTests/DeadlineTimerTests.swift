import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import Trellis

/// One event-loop timer watches the deadlines of many calls: each deadline expires once, in
/// order, unless its call ended first, whatever order the calls came in. The loop is an
/// embedded one, whose clock moves only when the test moves it.
@Suite("Deadlines sharing one timer")
struct DeadlineTimerTests {
    private let loop = EmbeddedEventLoop()
    private let expired = NIOLockedValueBox<[String]>([])
    private let timer: DeadlineTimer<String>

    init() {
        let expired = expired
        timer = DeadlineTimer(loop: loop) { name in expired.withLockedValue { $0.append(name) } }
    }

    private func watch(_ name: String, in milliseconds: Int64) -> DeadlineTimer<String>.Token {
        timer.watch(name, until: loop.now + .milliseconds(milliseconds))
    }

    private func advance(by milliseconds: Int64) -> [String] {
        loop.advanceTime(by: .milliseconds(milliseconds))
        return expired.withLockedValue { $0 }
    }

    @Test
    func aDeadlineExpiresOnceItHasPassedAndNotBefore() {
        _ = watch("call", in: 100)
        #expect(advance(by: 99).isEmpty)
        #expect(advance(by: 1) == ["call"])
        #expect(advance(by: 1_000) == ["call"], "once")
        #expect(timer.watchedCount == 0)
    }

    @Test
    func aDeadlineUnwatchedBeforeItPassesNeverExpires() {
        let ended = watch("ended in time", in: 20)
        _ = watch("stalled", in: 60)
        timer.unwatch(ended)
        #expect(advance(by: 60) == ["stalled"])
        #expect(timer.watchedCount == 0)
    }

    @Test
    func anEarlierDeadlineWatchedLaterExpiresFirst() {
        _ = watch("late", in: 300)
        // The loop's timer, set for the late one, must be brought forward.
        _ = watch("early", in: 20)
        #expect(advance(by: 20) == ["early"])
        #expect(timer.watchedCount == 1)
        #expect(advance(by: 280) == ["early", "late"])
    }

    @Test
    func deadlinesLeftWhenTheTimerFiresExpireAtTheirOwnTime() {
        // Watched in an order of their own.
        for offset in [50, 10, 40, 20, 30] {
            _ = watch("\(offset)", in: Int64(offset))
        }
        #expect(advance(by: 25) == ["10", "20"])
        #expect(advance(by: 25) == ["10", "20", "30", "40", "50"])
    }

    @Test
    func deadlinesThatFallDueTogetherExpireInTheirOrder() {
        for offset in [50, 10, 40, 20, 30] {
            _ = watch("\(offset)", in: Int64(offset))
        }
        // The loop ran late: the first firing finds every deadline passed.
        #expect(advance(by: 500) == ["10", "20", "30", "40", "50"])
    }

    @Test
    func aDeadlineWatchedAfterTheOthersEndedStillExpires() {
        let first = watch("first", in: 10)
        timer.unwatch(first)
        // The timer set for the first one fires with nothing due, and sets nothing more.
        #expect(advance(by: 10).isEmpty)
        _ = watch("second", in: 10)
        #expect(advance(by: 10) == ["second"])
    }
}
