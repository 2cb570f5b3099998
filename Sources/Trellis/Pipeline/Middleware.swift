public import Foundation
import NIOFoundationCompat

/// A step in a ``Client``'s pipeline, between the caller and the ``Transport``.
///
/// A middleware receives the request and a `next` function that runs the rest of the chain.
/// It may change the request, answer it without calling `next`, call `next` more than once
/// (a retry of its own), or change the response on the way back. Every built-in behaviour of
/// a ``Client`` is a middleware too, in the order <doc:ThePipeline> lists.
///
/// A middleware's ``scope`` says where it goes: once per call (the default), outside the
/// client's retries and redirects, or on every hop, where it runs again for each retry
/// attempt and each redirect and sees the URL that hop goes to. Anything that decides by
/// destination (a credential for one origin, say) belongs on every hop, so that nothing it
/// added for one origin follows a redirect to another.
///
/// ```swift
/// struct UserAgent: Middleware {
///     func intercept(
///         _ request: Request,
///         next: @Sendable (Request) async throws -> Response<ResponseBody>
///     ) async throws -> Response<ResponseBody> {
///         var request = request
///         request.headerFields[.userAgent] = "MyApp/1.0"
///         return try await next(request)
///     }
/// }
/// ```
public protocol Middleware: Sendable {
    /// Handles `request`, calling `next` to pass it on.
    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody>

    /// Where the middleware runs; ``MiddlewareScope/call`` unless it says otherwise.
    var scope: MiddlewareScope { get }
}

/// Where in a ``Client``'s pipeline a ``Middleware`` runs.
public enum MiddlewareScope: Sendable {
    /// Once per call, before the client's preconditions, retries and redirects: it sees the
    /// request as the caller made it and the final response.
    case call
    /// On every hop: each retry attempt and each redirect, after the redirect is decided and
    /// before the access token, with the URL of that hop. Credentials belong here.
    case hop
}

extension Middleware {
    public var scope: MiddlewareScope { .call }
}

/// Rewrites or rejects a request before it is sent. Throwing stops the request: nothing is
/// sent and the caller gets the error.
public typealias BeforeSending = @Sendable (Request) async throws -> Request

/// Inspects or replaces a response, with its body in memory, before it is validated and
/// decoded. It gets the request that produced it.
public typealias OnResponse = @Sendable (Response<Data>, Request) async throws -> Response<Data>
