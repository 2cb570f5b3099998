public import Foundation
public import HTTPTypes
public import OpenAPIRuntime
public import Trellis

/// A swift-openapi-runtime `ClientTransport` that sends every operation of a generated client
/// through a Trellis ``Client``, and so through all of its stages: access tokens and their
/// refresh, retries with `Retry-After`, redirects that drop credentials, certificate pinning,
/// the plain-HTTP policy, limits, timeouts, redacted logging, tracing, metrics and event
/// monitors.
///
/// ```swift
/// let trellis = Client(baseURL: URL(string: "https://pets.example.com/v1")!, accessTokens: tokens)
/// let transport = TrellisClientTransport(client: trellis, operations: [
///     "getOwner": .requiringAccessToken(),
/// ])
/// let api = PetStore.Client(serverURL: try Servers.Server1.url(), transport: transport)
/// let owner = try await api.getOwner().ok.body.json
/// ```
///
/// The operation ID names the call in spans, metrics, debug logs and ``CallSummary``
/// (``Request/endpointName``). Request bodies stream. A response body is read whole, held to
/// the client's ``Client/maximumBodySize`` and to its timeout, as generated clients read JSON
/// and text bodies into memory with no limit of their own; an operation whose settings say it
/// is a stream (``OperationSettings/streamsResponse``: a download) gets its body as it
/// arrives instead, with no limit. Cancelling the calling task cancels the request.
///
/// Errors reach the generated client's caller as swift-openapi-runtime wraps them: a
/// `ClientError` whose `underlyingError` is the ``TrellisError``.
public struct TrellisClientTransport: ClientTransport {
    /// The client every operation is sent through; its base URL is not used, since each
    /// operation comes with the server URL the generated client was made with.
    public let client: Client
    /// Settings by operation ID.
    public let operations: [String: OperationSettings]
    /// The settings of operations not in ``operations``.
    public let defaultSettings: OperationSettings

    /// A transport sending through `client`.
    ///
    /// - Parameters:
    ///   - client: the Trellis client; share one with `@Service` protocols to share its
    ///     connections, token storage and pins.
    ///   - operations: settings by the document's `operationId`.
    ///   - defaultSettings: the settings of every other operation (``OperationSettings/default``
    ///     adds nothing to the client's).
    public init(
        client: Client,
        operations: [String: OperationSettings] = [:],
        defaultSettings: OperationSettings = .default
    ) {
        self.client = client
        self.operations = operations
        self.defaultSettings = defaultSettings
    }

    public func send(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let settings = operations[operationID] ?? defaultSettings
        var outgoing = try self.request(request, baseURL: baseURL)
        outgoing.endpointName = operationID
        outgoing.accessToken = settings.accessToken
        outgoing.timeout = settings.timeout
        if let retryPolicy = settings.retryPolicy { outgoing.retryPolicy = retryPolicy }
        if let body {
            outgoing.body = try await BodyConversion.requestBody(body, contentType: request.headerFields[.contentType])
        }
        let hasBody = switch request.method {
        case .head, .connect, .trace: false
        default: true
        }
        if settings.streamsResponse {
            let response = try await client.send(outgoing)
            return (response.head, hasBody ? BodyConversion.streamedResponseBody(response.body) : nil)
        }
        // Generated clients read JSON and text bodies whole, with no limit of their own: such
        // a call is buffered by Trellis, under the client's size limit and with the timeout
        // covering the body, whatever its status.
        let response = try await client.data(for: outgoing, accepting: Self.everyStatus)
        return (response.head, hasBody ? HTTPBody(response.body) : nil)
    }

    /// Every status is the generated client's to interpret (a documented 404 is an output,
    /// not an error).
    private static let everyStatus = Set(100...999)

    /// The Trellis request for an operation: the generated client gives a path and query
    /// relative to the server URL, already percent-encoded.
    func request(_ request: HTTPRequest, baseURL: URL) throws -> Trellis.Request {
        let server = try ServerURL(baseURL)
        var head = request
        head.scheme = server.scheme
        head.authority = server.authority
        head.path = server.pathPrefix + (request.path ?? "")
        return Trellis.Request(head: head)
    }
}

/// The scheme, authority and path of a server URL, which every operation's path follows.
struct ServerURL {
    let scheme: String
    let authority: String
    /// The server URL's path without its trailing `/`, which every operation path starts with.
    let pathPrefix: String

    init(_ url: URL) throws {
        guard url.query == nil, url.fragment == nil else {
            throw TrellisError.invalidRequest(InvalidRequest(.url, "the server URL \"\(url.absoluteString)\" has a query or fragment, which no operation path can follow"))
        }
        // Trellis's own check of an absolute http or https URL with a host.
        let head = try Trellis.Request(method: .get, url: url).head
        var prefix = head.path ?? ""
        while prefix.hasSuffix("/") { prefix.removeLast() }
        self.scheme = head.scheme ?? "https"
        self.authority = head.authority ?? ""
        self.pathPrefix = prefix
    }
}
