/// The clock of the client a task works for, which a storage a fleet shares holds its time
/// limits on: the access-token stage sets it, so that a test's ``ClientClock`` reaches the
/// storage's limits as it reaches every policy's. (`package`: `TrellisPostgres` reads it.)
package enum SharedStateClock {
    @TaskLocal package static var current: any ClientClock = SystemClock()
}
