import Testing
import Trellis

extension Trait where Self == TimeLimitTrait {
    /// The time limit of a test that would hang if the code under test were wrong. It is a
    /// guard, not a measure: long enough that no slow machine reaches it (under
    /// ThreadSanitizer on two cores the whole suite runs at once for about 70 s), so reaching
    /// it means a hang. How fast something happens is measured in the benchmarks, never here.
    static var hangGuard: Self { .timeLimit(.minutes(5)) }
}

extension WebSocketSettings {
    /// Options for a test that is not about the WebSocket timers: no pings, and connect and
    /// close timeouts long enough that a slow machine never reaches them. A test that is about
    /// them sets its own.
    static var patient: WebSocketSettings {
        WebSocketSettings(pingInterval: nil, closeTimeout: .seconds(120), connectTimeout: .seconds(120))
    }
}

extension Client.Configuration.Timeouts {
    /// For a test that moves many bytes and is not about timeouts: under ThreadSanitizer, every
    /// test at once on two cores, one large upload over URLSession took more than the default
    /// minute.
    static var patient: Self { Self(request: .seconds(600), idle: .seconds(600)) }
}

extension Duration {
    /// The time limit on a shared store's operations (PostgreSQL's) in a test that is not about
    /// that limit: under ThreadSanitizer with a build beside the suite, one round trip took more
    /// than the storages' default 2 s.
    /// (The tests that stop the database keep short limits: a call waits them out while it is
    /// stopped, within its own request timeout.)
    static var patientStoreLimit: Duration { .seconds(30) }
}
