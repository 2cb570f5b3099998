// A process the tests start: one of a fleet (`PostgresFleetTests`), or a client whose
// environment names a proxy (`PlainHTTPRouteTests`). Its modes:
//
//   rate-limit DATABASE_SOCKET SERVER_URL CALLS QUOTA_PER_SECOND BATCH
//     makes CALLS calls through a rate limit shared through PostgreSQL;
//   tokens DATABASE_SOCKET SERVER_URL SECONDS|until:STOP_FILE [LOCK_WAIT_MS]
//     calls SERVER_URL/me for SECONDS seconds (once when 0), or until STOP_FILE exists, a call
//     every 10 ms, with the access token kept in PostgreSQL, refreshing it at
//     SERVER_URL/oauth/refresh under the fleet's lock (waited for at most LOCK_WAIT_MS when
//     given, else as long as the holder holds it and the call's 60 s allow);
//   cache DATABASE_SOCKET SERVER_URL CALLS
//     calls SERVER_URL/me CALLS times through an HTTP cache kept in PostgreSQL;
//   create-tables DATABASE_SOCKET GATE_FILE
//     creates the four stores' tables once GATE_FILE exists, and prints `created` or the failure;
//   outbox-fleet DATABASE_SOCKET SERVER_URL GATE_FILE
//     once GATE_FILE exists, delivers the outbox kept in PostgreSQL beside the other workers,
//     and prints `drained` once nothing is left;
//
// then prints how many calls were answered and how many failed, with the first failure. And:
//
//   outbox SQLITE_FILE SERVER_URL COUNT [GATE_FILE]
//     once GATE_FILE exists (at once without one), delivers the outbox kept in SQLITE_FILE to
//     SERVER_URL, after enqueueing COUNT orders (`POST /orders`, keyed `call-N`, in eight
//     lanes), printing `enqueued N` as each enqueue returns; prints `drained` and exits once
//     nothing is left to deliver;
//   url-session URL PLAIN_HTTP_POLICY
//     makes one call to URL over URLSessionTransport, with `allowed` or `refusedExceptLoopback`
//     as its plain-HTTP policy, and prints `answered STATUS` or `failed ERROR`. The proxy
//     variables of its environment (which libcurl reads) are the test's.
import Foundation
import Trellis

if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "url-session", let url = URL(string: CommandLine.arguments[2]) {
    let policy: PlainHTTPPolicy = CommandLine.arguments[3] == "allowed" ? .allowed : .refusedExceptLoopback
    let client = Client(baseURL: url, transport: URLSessionTransport()) {
        $0.security.plainHTTP = policy
        $0.timeouts.request = .seconds(10)
    }
    var request = try Request(method: .get, url: url)
    request.headerFields[.authorization] = "Bearer fleet-worker-secret"
    do {
        let response = try await client.send(request)
        print("answered \(response.status.code)")
    } catch {
        print("failed \(error)")
    }
    exit(0)
}

#if SQLite
import TrellisSQLite

if (5...6).contains(CommandLine.arguments.count), CommandLine.arguments[1] == "outbox", let url = URL(string: CommandLine.arguments[3]),
    let count = Int(CommandLine.arguments[4])
{
    if CommandLine.arguments.count == 6 {
        while !FileManager.default.fileExists(atPath: CommandLine.arguments[5]) { try await Task.sleep(for: .milliseconds(1)) }
    }
    let storage = try await SQLiteOutboxStorage(path: CommandLine.arguments[2])
    let client = Client(baseURL: url) { $0.timeouts.request = .seconds(10) }
    let outbox = Outbox(
        client: client, storage: storage,
        settings: OutboxSettings(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(200), concurrency: 4)
    )
    let delivery = Task { try await outbox.run() }
    for number in 0..<count {
        var request = try Request(method: .post, url: url.appending(path: "orders"))
        request.body = RequestBody(#"{"item":"\#(number)"}"#, contentType: "application/json")
        request.idempotencyKey = IdempotencyKey("call-\(number)")
        try await outbox.enqueue(request, lane: "lane-\(number % 8)")
        // Written at once, not buffered: the test reads which enqueues returned after a kill.
        FileHandle.standardOutput.write(Data("enqueued \(number)\n".utf8))
    }
    // A worker process's own wait, not a test's: it looks at what is left every 20 ms.
    while try await !outbox.pending().isEmpty { try await Task.sleep(for: .milliseconds(20)) }
    delivery.cancel()
    FileHandle.standardOutput.write(Data("drained\n".utf8))
    exit(0)
}
#endif

#if Postgres
import PostgresNIO
import TrellisPostgres

/// Exchanges the stored refresh token at the test's token server.
struct Refresher: TokenRefresher {
    let url: URL

    func refreshToken(_ current: AccessToken?, label: String, client: Client) async throws -> any AccessTokenConvertible {
        var request = try Request(method: .post, url: url.appending(path: "oauth/refresh"))
        request.body = RequestBody(#"{"refresh_token":"\#(current?.refreshToken ?? "")"}"#, contentType: "application/json")
        let response = try await client.data(for: request)
        return try JSONDecoder().decode(AccessToken.self, from: response.body)
    }
}

let arguments = CommandLine.arguments

/// The test's PostgreSQL server, reached through its Unix socket.
func database(_ socket: String) -> PostgresClient {
    var configuration = PostgresClient.Configuration(unixSocketPath: socket, username: "trellis", password: nil, database: "postgres")
    // Keep-alive off, as in the tests' own clients (PostgresServer.configuration): postgres-nio
    // 1.33.2 can leave `run()` waiting for ever on a keep-alive sent to a connection it has closed.
    configuration.options.keepAliveBehavior = nil
    return PostgresClient(configuration: configuration)
}

// create-tables DATABASE_SOCKET GATE_FILE: once GATE_FILE exists (the test makes it when every
// worker has started, so that they all begin at once), creates the four stores' tables, as
// FleetOfClients.md's example does at start, and prints `created` or the failure.
if arguments.count == 4, arguments[1] == "create-tables" {
    let postgres = database(arguments[2])
    while !FileManager.default.fileExists(atPath: arguments[3]) { try await Task.sleep(for: .milliseconds(1)) }
    await withTaskGroup(of: Void.self) { group in
        group.addTask { await postgres.run() }
        do {
            try await PostgresRateLimitStorage(client: postgres).createTable()
            try await PostgresPauseStorage(client: postgres).createTable()
            try await PostgresAccessTokenStorage(client: postgres).createTable()
            try await PostgresHTTPCacheStorage(client: postgres).createTable()
            print("created")
        } catch {
            print("failed: \(error)")
        }
        group.cancelAll()
    }
    exit(0)
}

// outbox-fleet DATABASE_SOCKET SERVER_URL GATE_FILE: once GATE_FILE exists, delivers the outbox
// kept in PostgreSQL (the test has made its table and enqueued the calls) beside the other
// workers, with a lease of a second on its claims, sending its process id in `X-Worker`;
// prints `drained` once nothing is left to deliver (or what is left after two minutes).
if arguments.count == 5, arguments[1] == "outbox-fleet", let url = URL(string: arguments[3]) {
    let postgres = database(arguments[2])
    await withTaskGroup(of: Void.self) { group in
        group.addTask { await postgres.run() }
        while !FileManager.default.fileExists(atPath: arguments[4]) { try? await Task.sleep(for: .milliseconds(1)) }
        let client = Client(baseURL: url) {
            $0.timeouts.request = .seconds(10)
            $0.defaultHeaders[HTTPField.Name("X-Worker")!] = "\(ProcessInfo.processInfo.processIdentifier)"
        }
        let outbox = Outbox(
            client: client,
            storage: PostgresOutboxStorage(client: postgres, timeLimit: .seconds(30), pollInterval: .milliseconds(20)),
            settings: OutboxSettings(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(200), concurrency: 4, claimLease: .seconds(1))
        )
        let delivery = Task { try await outbox.run() }
        // A worker process's own wait, not a test's: it looks at what is left every 20 ms, and
        // gives up after two minutes, so that calls left for ever fail the test, not hang it.
        let giveUp = ContinuousClock.now + .seconds(120)
        var left = -1
        while left != 0, ContinuousClock.now < giveUp {
            left = (try? await outbox.pending().count) ?? -1
            if left != 0 { try? await Task.sleep(for: .milliseconds(20)) }
        }
        delivery.cancel()
        FileHandle.standardOutput.write(Data((left == 0 ? "drained\n" : "gave up with \(left) calls left\n").utf8))
        group.cancelAll()
    }
    exit(0)
}

// DATABASE_SOCKET is the path of the test's PostgreSQL server's Unix socket.
let stopFile = arguments.count >= 5 && arguments[4].hasPrefix("until:") ? String(arguments[4].dropFirst("until:".count)) : nil
guard arguments.count >= 5, case let socket = arguments[2], let url = URL(string: arguments[3]), let count = Int(arguments[4]) ?? (stopFile != nil ? 0 : nil) else {
    print("usage: trellis-fleet-worker rate-limit DATABASE_SOCKET SERVER_URL CALLS QUOTA_PER_SECOND BATCH")
    print("       trellis-fleet-worker tokens DATABASE_SOCKET SERVER_URL SECONDS|until:STOP_FILE [LOCK_WAIT_MS]")
    print("       trellis-fleet-worker cache DATABASE_SOCKET SERVER_URL CALLS")
    exit(2)
}
let postgres = database(socket)
let client: Client
// The database's operations get 30 s: the tests are not about their time limits, and under
// ThreadSanitizer with a build beside the suite a round trip took more than the default 2 s.
let storeLimit = Duration.seconds(30)
// The calls to make: a number of them, or calls until a deadline.
let more: (_ made: Int) -> Bool
var request = try Request(method: .get, url: url.appending(path: "me"))
switch arguments[1] {
case "rate-limit" where arguments.count == 7:
    guard let quota = Int(arguments[5]), let batch = Int(arguments[6]) else { exit(2) }
    let store = PostgresRateLimitStorage(client: postgres)
    client = Client(baseURL: url) {
        $0.resilience.rateLimit = RateLimit(
            requests: quota, per: .seconds(1), maximumWait: .seconds(60),
            sharing: RateLimitSharing(storage: store, batch: batch, timeLimit: storeLimit, whenStorageFails: .refuseCalls)
        )
    }
    more = { $0 < count }
case "tokens":
    let lockWait = arguments.count >= 6 ? Int(arguments[5]).map { Duration.milliseconds($0) } : nil
    let storage = PostgresAccessTokenStorage(client: postgres, timeLimit: storeLimit, lockWait: lockWait)
    client = Client(baseURL: url) {
        $0.accessTokens = AccessTokenSettings(storage: storage, refresher: Refresher(url: url), expiryLeeway: .milliseconds(500))
        $0.timeouts.request = .seconds(60)
    }
    request.requireAccessToken()
    request.headerFields[HTTPField.Name("X-Worker")!] = "\(ProcessInfo.processInfo.processIdentifier)"
    if let stopFile {
        more = { $0 == 0 || !FileManager.default.fileExists(atPath: stopFile) }
    } else {
        let deadline = ContinuousClock.now + .seconds(count)
        more = { $0 == 0 || ContinuousClock.now < deadline }
    }
case "cache":
    let storage = PostgresHTTPCacheStorage(client: postgres, timeLimit: storeLimit)
    client = Client(baseURL: url) { $0.cache = HTTPCache(storage: storage, timeLimit: storeLimit) }
    more = { $0 < count }
default:
    print("unknown mode \(arguments[1])")
    exit(2)
}
await withTaskGroup(of: Void.self) { group in
    group.addTask { await postgres.run() }
    var (answered, failed) = (0, 0)
    var firstFailure: (any Error)?
    while more(answered + failed) {
        if arguments[1] == "tokens", answered + failed > 0 { try? await Task.sleep(for: .milliseconds(10)) }
        do {
            _ = try await client.data(for: request)
            answered += 1
        } catch {
            failed += 1
            firstFailure = firstFailure ?? error
        }
    }
    print("answered \(answered) failed \(failed)" + (firstFailure.map { " first failure: \($0)" } ?? ""))
    group.cancelAll()
}
#else
print("trellis-fleet-worker needs the Postgres trait")
#endif
