import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOHTTP1

/// AsyncHTTPClient requests already made for the method and URL of recent calls, so that a call
/// to a URL sent to lately skips parsing it again.
///
/// Making an `HTTPClient.Request` parses its URL twice, with Foundation's `URL` and then with
/// `URLComponents` for the path. What keeping them buys: about 4% more GETs per second,
/// sequential or concurrent (A/B of 2026-11-26, `Benchmarks/README.md`). Apps call the same
/// few URLs over and over (a feed, a profile, a poll), so the transport keeps the requests it
/// made for recent URLs and gives a kept one each call's header fields. Only calls without a request body go this way (the
/// others go through AsyncHTTPClient's async API, which takes the URL as a string).
///
/// The cache holds at most ``capacity`` entries and drops an arbitrary one to make room: a
/// service whose URLs rarely repeat (an id in every path) pays one dictionary lookup per call
/// and keeps no more than that many URLs alive. The URLs kept include their query strings, so
/// a credential sent in a query stays in memory until its entry is displaced.
final class PreparedRequests: Sendable {
    static let capacity = 64

    /// The method and the URL in the parts a request's head keeps them in, so that a call
    /// whose request is kept does not join them into one string.
    private struct Key: Hashable {
        var method: String
        var scheme: String
        var authority: String
        var path: String
    }

    private let requests = NIOLockedValueBox<[Key: HTTPClient.Request]>([:])

    /// A request for the method and URL of `request` with `headers`, and no body.
    ///
    /// - Throws: `HTTPClientError.invalidURL` and the other errors of `HTTPClient.Request`'s
    ///   initializer, for a URL AsyncHTTPClient cannot send to; such a URL is not kept.
    func request(for call: Request, headers: HTTPHeaders) throws -> HTTPClient.Request {
        let head = call.head
        let key = Key(method: head.method.rawValue, scheme: head.scheme ?? "https", authority: head.authority ?? "", path: head.path ?? "/")
        var request: HTTPClient.Request
        if let known = requests.withLockedValue({ $0[key] }) {
            request = known
        } else {
            request = try HTTPClient.Request(url: call.urlString, method: HTTPMethod(rawValue: key.method))
            requests.withLockedValue { requests in
                if requests.count >= Self.capacity {
                    requests.remove(at: requests.startIndex)
                }
                requests[key] = request
            }
        }
        request.headers = headers
        return request
    }

    /// How many requests are kept: for tests.
    var count: Int { requests.withLockedValue(\.count) }
}
