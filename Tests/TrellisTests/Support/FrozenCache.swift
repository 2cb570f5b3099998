import Trellis
import TrellisTesting

extension Client.Configuration {
    /// A cache in memory, on a client clock that stands still unless the test moves it (or
    /// something waits on it): what a test expects to be fresh stays fresh however slowly the
    /// machine runs it (under ThreadSanitizer, or beside a busy suite), and what it expects to
    /// be stale is made so by moving the clock.
    mutating func useFrozenCache(
        memoryCapacity: Int = 16 << 20,
        maximumEntrySize: Int = 4 << 20,
        clock: ManualClock = ManualClock(advancesWhenSleeping: true)
    ) {
        cache = HTTPCache(memoryCapacity: memoryCapacity, maximumEntrySize: maximumEntrySize)
        self.clock = clock
    }
}
