import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import Trellis

struct RefreshGrant: Codable, Sendable {
    var refreshToken: String
}

struct Me: Codable, Sendable {
    var token: String
}

@Service
@TokenLabel("bench")
protocol Protected {
    @POST("/oauth/refresh") @Body("grant")
    func refresh(grant: RefreshGrant) async throws -> AccessToken

    @GET("/me") @RequiresAccessToken
    func me() async throws -> Me
}

/// Issues tokens and accepts only the current ones; counts refreshes.
final class BenchmarkTokenServer: Sendable {
    private struct State {
        var issued = 0
        var refreshes = 0
        var valid: Set<String> = []
    }

    private let state = NIOLockedValueBox(State())

    var refreshes: Int { state.withLockedValue { $0.refreshes } }

    func issue(refreshing: Bool) -> AccessToken {
        state.withLockedValue { state in
            state.issued += 1
            if refreshing { state.refreshes += 1 }
            state.valid.insert("t\(state.issued)")
            return AccessToken(accessToken: "t\(state.issued)", refreshToken: "r\(state.issued)", expiresIn: 3600)
        }
    }

    func revokeAll() {
        state.withLockedValue { $0.valid = [] }
    }

    func install(_ router: Router<BasicRequestContext>) {
        router.post("oauth/refresh") { _, _ in
            let token = self.issue(refreshing: true)
            let body = #"{"access_token":"\#(token.accessToken)","refresh_token":"\#(token.refreshToken!)","expires_in":3600}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.get("me") { request, _ in
            let token = String((request.headers[.authorization] ?? "").dropFirst("Bearer ".count))
            guard self.state.withLockedValue({ $0.valid.contains(token) }) else {
                return Response(status: .unauthorized, headers: [.wwwAuthenticate: "Bearer"])
            }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"token":"\#(token)"}"#))
            )
        }
    }
}

/// 1,000 concurrent protected calls: with a valid token, with a token the client knows has
/// expired (refreshed before sending), and with a token the server refuses (1,000 401s, one
/// refresh, 1,000 replays).
enum TokenRefreshBenchmark {
    static let calls = 1_000

    static func run(rounds: Int) async throws -> [Row] {
        let server = BenchmarkTokenServer()
        return try await withServer(server.install) { url in
            let service = ProtectedService(client: Client(baseURL: url))
            service.onAuthRetry = { service in
                try await service.refresh(grant: RefreshGrant(refreshToken: service.accessToken()?.refreshToken ?? ""))
            }
            func burst() async throws {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<calls { group.addTask { _ = try await service.me() } }
                    try await group.waitForAll()
                }
            }
            try await service.setAccessToken(server.issue(refreshing: false))
            try await burst()  // warm-up: connections, code paths

            var valid: [Double] = []
            var expired: [Double] = []
            var refused: [Double] = []
            for _ in 0..<rounds {
                valid.append(try await milliseconds(burst))

                var token = try require(try await service.accessToken(), "stored token")
                token.expiresAt = Date().addingTimeInterval(-1)
                try await service.setAccessToken(token)
                let beforeExpired = server.refreshes
                expired.append(try await milliseconds(burst))
                guard server.refreshes == beforeExpired + 1 else {
                    throw BenchmarkFailure(description: "expected one refresh, the server saw \(server.refreshes - beforeExpired)")
                }

                server.revokeAll()
                let beforeRefused = server.refreshes
                refused.append(try await milliseconds(burst))
                guard server.refreshes == beforeRefused + 1 else {
                    throw BenchmarkFailure(description: "expected one refresh, the server saw \(server.refreshes - beforeRefused)")
                }
            }
            let baseline = median(valid)
            return [
                Row(name: "\(calls) calls, token expired (client knows)", baseline: "\(calls) calls, valid token",
                    baselineValue: baseline, value: median(expired), unit: "ms", note: "1 refresh"),
                Row(name: "\(calls) calls, token refused (401)", baseline: "\(calls) calls, valid token",
                    baselineValue: baseline, value: median(refused), unit: "ms", note: "\(calls) 401s, 1 refresh, \(calls) replays"),
            ]
        }
    }
}

/// `try #require` without Swift Testing: unwraps or fails the benchmark.
func require<Value>(_ value: Value?, _ what: String = "value") throws -> Value {
    guard let value else { throw BenchmarkFailure(description: "missing \(what)") }
    return value
}
