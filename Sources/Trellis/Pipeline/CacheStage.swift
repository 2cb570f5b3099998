import Foundation
import HTTPTypes
import NIOCore

/// Serves a buffered `GET` from the client's ``HTTPCache`` while the stored response is fresh,
/// revalidates it once stale, and stores what the server sends when HTTP allows it (RFC 9111),
/// on each hop, for that hop's URL.
///
/// A request that is conditional or ranged on its own (`If-None-Match`, `If-Modified-Since`,
/// `Range`) passes through: its caller is managing validators itself.
struct CacheStage: Stage {
    let cache: HTTPCache
    /// The client's clock, which stored responses' ages are read on.
    let clock: any ClientClock

    /// The statuses whose rules this cache follows, for `must-understand` (RFC 9111 section
    /// 5.2.2.3): those RFC 9110 defines.
    private static let understoodStatuses = Set([200, 201, 202, 203, 204, 205])
        .union(300...308).subtracting([306]).union(400...417).union([421, 422, 426]).union(500...505)

    /// The methods that change nothing on the server (RFC 9110 section 9.2.1); any other one,
    /// unknown methods included, invalidates what the cache holds for its target.
    private static let safeMethods: Set<HTTPRequest.Method> = [.get, .head, .options, .trace, HTTPRequest.Method("QUERY")!]

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        (request.method == .get && call.bufferLimit != nil) || !Self.safeMethods.contains(request.method)
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        try await cache.withinOneTimeLimit(on: clock) { try await lookUpOrFetch(request, call, next: next) }
    }

    private func lookUpOrFetch(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        guard request.method == .get else {
            let response = try await next(request, call)
            await invalidate(after: response, to: request)
            return response
        }
        let fields = request.headerFields
        // A keyed call is an operation of its own: it neither takes a stored answer nor stores one.
        guard fields[.ifNoneMatch] == nil, fields[.ifModifiedSince] == nil, fields[.range] == nil, request.sentIdempotencyKey == nil else {
            return try await next(request, call)
        }
        let key = request.urlString
        let control = CacheControl(fields)
        var policy = request.cachePolicy ?? .useCache
        if control.onlyIfCached { policy = .onlyIfCached }
        if policy == .reload || control.noStore {
            return try await fetch(request, key: key, revalidating: nil, storing: !control.noStore, call: call, next: next)
        }
        let stored = await cache.lookup(key).flatMap { entry in entry.0.matches(request) ? entry : nil }
        try refuseIfTheStorageFailed(request, call)
        let now = clock.now
        switch policy {
        case .onlyIfCached:
            return stored.map { Self.serve($0.0, $0.1, at: now) } ?? Response(head: HTTPResponse(status: .gatewayTimeout), body: ResponseBody())
        case .cachedElseLoad:
            if let stored { return Self.serve(stored.0, stored.1, at: now) }
        case .useCache, .reload:
            if let stored, stored.0.isUsable(for: control, at: now) {
                return Self.serve(stored.0, stored.1, at: now, omittingNoCacheFields: true)
            }
        }
        guard cache.isShared else { return try await fetch(request, key: key, revalidating: stored, storing: true, call: call, next: next) }
        // A fleet's storage lets one process fetch a key at a time; the others, once they have
        // the lock, find what it stored (usable, since what was stored before was not).
        return try await cache.fetchingOnce(key) {
            let again = await cache.lookup(key).flatMap { entry in entry.0.matches(request) ? entry : nil }
            if let again, case let now = clock.now, again.0.isUsable(for: control, at: now) {
                return Self.serve(again.0, again.1, at: now, omittingNoCacheFields: true)
            }
            return try await fetch(request, key: key, revalidating: again ?? stored, storing: true, call: call, next: next)
        }
    }

    /// Sends the request, conditional on a stored response's validators when there is one;
    /// a `304` refreshes and serves the stored response.
    /// Refuses the call when its lookup found the storage failing and the cache's settings say
    /// so (`whenStorageFails: .refuseCalls`): reported as every shared feature's failing storage
    /// is, and refused before anything is sent.
    private func refuseIfTheStorageFailed(_ request: Request, _ call: CallContext) throws {
        guard let failure = cache.storageFailureRefusingTheCall() else { return }
        let origin = request.origin
        call.observation?.resilienceEvent(.sharedStateFailed(origin: origin, policy: "http_cache", detail: failure), for: request)
        let refusal = CallRefusal(request: request, origin: origin, reason: .sharedStorageFailed, retryAt: nil, detail: "the HTTP cache's storage: \(failure)")
        call.observation?.resilienceEvent(.callRefused(refusal), for: request)
        throw TrellisError.callRefused(refusal)
    }

    private func fetch(
        _ request: Request,
        key: String,
        revalidating stored: (CachedResponse, ByteBuffer)?,
        storing: Bool,
        call: CallContext,
        next: Next
    ) async throws -> Response<ResponseBody> {
        var outgoing = request
        if let stored {
            let head = stored.0.head
            if let etag = head.headerFields[.eTag] { outgoing.headerFields[.ifNoneMatch] = etag }
            if let modified = head.headerFields[.lastModified] { outgoing.headerFields[.ifModifiedSince] = modified }
        }
        let requestTime = clock.now
        let response = try await next(outgoing, call)
        let responseTime = clock.now
        if let stored, response.status.code == 304 {
            var head = stored.0.head
            for field in response.headerFields where ![.contentLength, .contentEncoding, .transferEncoding].contains(field.name) {
                head.headerFields[field.name] = response.headerFields[field.name]
            }
            let refreshed = CachedResponse(
                url: key, head: head, request: request, requestTime: requestTime, responseTime: responseTime,
                bodyLength: stored.1.readableBytes, bodyDigest: stored.0.bodyDigest
            )
            await cache.save(key, refreshed, body: stored.1)
            return Self.serve(refreshed, stored.1, at: clock.now)
        }
        guard storing, let body = response.body.bytes, isStorable(response, for: request, size: body.readableBytes) else {
            // What the server now says replaces what was stored, even when it cannot be kept.
            if stored != nil, response.status.code < 500 { await cache.remove(key) }
            return response
        }
        let entry = CachedResponse(
            url: key, head: response.head, request: request, requestTime: requestTime, responseTime: responseTime,
            bodyLength: body.readableBytes, bodyDigest: HTTPCache.digest(body)
        )
        await cache.save(key, entry, body: body)
        return response
    }

    /// After a non-error response to an unsafe method, removes what is stored for the target
    /// and for the `Location` and `Content-Location` the response names on the same origin
    /// (RFC 9111 section 4.4): a `POST /r` that succeeded may have changed what `GET /r` returns.
    private func invalidate(after response: Response<ResponseBody>, to request: Request) async {
        guard (200..<400).contains(response.status.code) else { return }
        let target = request.urlString
        await cache.remove(target)
        guard let base = URL(string: target) else { return }
        for name in [HTTPField.Name.location, .contentLocation] {
            guard let value = response.headerFields[name], let url = URL(string: value, relativeTo: base)?.absoluteURL,
                Request.origin(of: url) == request.origin, let other = try? Request(method: .get, url: url)
            else { continue }
            await cache.remove(other.urlString)
        }
    }

    /// Whether HTTP lets the response be stored (RFC 9111 section 3), and it gives the cache
    /// something to go on later: a lifetime, or a validator to revalidate with.
    private func isStorable(_ response: Response<ResponseBody>, for request: Request, size: Int) -> Bool {
        let code = response.status.code
        // A final status, and not a part of a body (this cache does not store ranges).
        guard code >= 200, code < 600, code != 206, code != 304, size <= cache.maximumEntrySize else { return false }
        let control = CacheControl(response.headerFields)
        if control.noStore, !(control.mustUnderstand && Self.understoodStatuses.contains(code)) { return false }
        guard !CachedResponse.varyNames(of: response.head).contains("*") else { return false }
        // A response to a request with credentials may be kept only when it says so
        // (RFC 9111 section 3.5). Clients derived from one share its cache, each with
        // credentials of its own: an API key in a header is a credential as much as
        // `Authorization` is, and the credential stages mark every field they add as secret.
        let credentialed = request.headerFields.contains { $0.name == .authorization || $0.indexingStrategy == .disallow }
        if credentialed, !(control.isPublic || control.sharedMaxAge != nil || control.mustRevalidate) {
            return false
        }
        let fields = response.headerFields
        let isExplicit = control.maxAge != nil || fields[.expires] != nil
        guard isExplicit || control.isPublic || CachedResponse.heuristicallyCacheableStatuses.contains(code) else { return false }
        return isExplicit || fields[.eTag] != nil || fields[.lastModified] != nil
    }

    /// A stored response as the caller gets it, with its age, and, when asked (a fresh one
    /// served without revalidation), without the fields its `no-cache="…"` names.
    private static func serve(
        _ entry: CachedResponse,
        _ body: ByteBuffer,
        at now: Date,
        omittingNoCacheFields: Bool = false
    ) -> Response<ResponseBody> {
        var head = entry.head
        if omittingNoCacheFields {
            for name in CacheControl(head.headerFields).noCacheFields {
                if let fieldName = HTTPField.Name(name) { head.headerFields[fieldName] = nil }
            }
        }
        // An age past delta-seconds' largest value is that value, as a cache must send it.
        let age = min(entry.currentAge(at: now, head: head), TimeInterval(CacheControl.largestDeltaSeconds))
        head.headerFields[.age] = String(age.isNaN ? 0 : Int(max(0, age)))
        return Response(head: head, body: ResponseBody(body))
    }
}

extension ResponseBody {
    /// The bytes of a body already in memory (a buffered call's, at the hop stages); `nil`
    /// for one still streaming.
    var bytes: ByteBuffer? {
        if case .bytes(let buffer) = storage { return buffer }
        return nil
    }
}
