import Foundation
import NIOConcurrencyHelpers
import Trellis

/// A clock that stands still until a test moves it, for the cache's freshness: what a test
/// expects to be fresh stays fresh however slowly the machine runs it (under ThreadSanitizer,
/// or beside a busy suite), and what it expects to be stale is made so by moving the clock.
final class FrozenClock: Sendable {
    private let current: NIOLockedValueBox<Date>

    init(_ start: Date = Date()) {
        current = NIOLockedValueBox(start)
    }

    var now: @Sendable () -> Date {
        { [current] in current.withLockedValue { $0 } }
    }

    func advance(by seconds: TimeInterval) {
        current.withLockedValue { $0 += seconds }
    }
}

extension HTTPCache {
    /// A cache in memory whose clock stands still unless the test moves it.
    static func frozen(
        memoryCapacity: Int = 16 << 20,
        maximumEntrySize: Int = 4 << 20,
        clock: FrozenClock = FrozenClock()
    ) -> HTTPCache {
        HTTPCache(memoryCapacity: memoryCapacity, maximumEntrySize: maximumEntrySize, now: clock.now)
    }
}
