// The macros a service protocol is written with. `@Service` reads the others and writes the
// client class; the others expand to nothing and only mark up the protocol's functions.

/// Generates a client for the protocol: `final class <Name>Service: <Name>, TrellisService`
/// (`<Name>Impl` when the name already ends in `Service`), with `init(baseURL:)`,
/// `init(client:)`, each function implemented, an overload of each function taking extra
/// `queryItems:` (an upload also `payloadDescription:`), and overloads without the arguments
/// that have a `{name=default}` in the path. A function declared in Snowdrop's spelling
/// (`@GET(url:)`) also gets Snowdrop's first names for them, `_queryItems:` and
/// `_payloadDescription:`.
///
/// ```swift
/// @Service
/// protocol Blog {
///     @GET("/posts/{id}")
///     func post(id: Int) async throws -> Post
/// }
///
/// let blog = BlogService(baseURL: URL(string: "https://api.example.com/v1")!)
/// let post = try await blog.post(id: 7)
/// ```
@attached(peer, names: suffixed(Service), suffixed(Impl))
@attached(extension, names: arbitrary)
public macro Service() = #externalMacro(module: "TrellisMacros", type: "ServiceMacro")

/// ``Service()`` with a base URL, as Snowdrop 0.1 declares it: the generated class also gets
/// an `init()` for that URL. The URL must be a string literal, an absolute `http`, `https`,
/// `ws` or `wss` URL, which the macro checks when the service compiles (a service of WebSockets
/// may name its server's `ws://` URL).
///
/// ```swift
/// @Service(url: "https://my-endpoint.com")
/// protocol MyEndpoint {
///     @GET(url: "/posts")
///     func getAllPosts() async throws -> [Post]
/// }
///
/// let service = MyEndpointService()
/// ```
@attached(peer, names: suffixed(Service), suffixed(Impl))
@attached(extension, names: arbitrary)
public macro Service(url: String) = #externalMacro(module: "TrellisMacros", type: "ServiceMacro")

/// A `GET` endpoint. The path is relative to the client's base URL; `{name}` binds the
/// parameter `name` as one percent-encoded path segment, `{name=value}` gives it a default, and
/// a static query (`?sort=new`) is kept.
@attached(peer) public macro GET(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `POST` endpoint.
@attached(peer) public macro POST(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `PUT` endpoint.
@attached(peer) public macro PUT(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `DELETE` endpoint.
@attached(peer) public macro DELETE(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `PATCH` endpoint.
@attached(peer) public macro PATCH(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `HEAD` endpoint.
@attached(peer) public macro HEAD(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// An `OPTIONS` endpoint.
@attached(peer) public macro OPTIONS(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `QUERY` endpoint (a safe, idempotent request with a body).
@attached(peer) public macro QUERY(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `TRACE` endpoint.
@attached(peer) public macro TRACE(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
/// A `CONNECT` endpoint.
@attached(peer) public macro CONNECT(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// Sends the named parameter as the body: `Data` as raw bytes, `String` as UTF-8 text, any
/// other `Encodable` as JSON with the client's encoder, each with a matching `Content-Type`
/// unless the endpoint sets one.
@attached(peer) public macro Body(_ parameter: String) = #externalMacro(module: "TrellisMacros", type: "MarkerMacro")

/// Sends the body (with `@Body`) or the query parameters (without it) as an
/// `application/x-www-form-urlencoded` form.
@attached(peer) public macro FormURLEncoded() = #externalMacro(module: "TrellisMacros", type: "MarkerMacro")

/// Sends the parameter `parameter` as the header `name`; `nil` sends no header.
@attached(peer) public macro Header(_ name: String, _ parameter: String) = #externalMacro(module: "TrellisMacros", type: "MarkerMacro")

/// Adds fixed headers to every call of the endpoint.
@attached(peer) public macro Headers(_ fields: [String: String]) = #externalMacro(module: "TrellisMacros", type: "MarkerMacro")

/// Stores the service's access token under `label` instead of `"TrellisToken"`, so that two
/// services of one client keep separate tokens.
@attached(peer) public macro TokenLabel(_ label: String) = #externalMacro(module: "TrellisMacros", type: "TokenLabelMacro")

/// Sends the service's access token with every call of the endpoint, refreshing it when it has
/// expired or the server refuses it. See ``TrellisService/onAuthRetry``.
@attached(peer) public macro RequiresAccessToken() = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// Declares a WebSocket endpoint: the function opens the conversation (the upgrade is a GET to
/// the path, with the service's middlewares, and its access token with
/// `@RequiresAccessToken`) and returns it.
///
/// ```swift
/// @WebSocket("/chat/{room}")
/// func chat(room: String) async throws -> WebSocketConnection
/// ```
@attached(peer) public macro WebSocket(_ path: String) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// Streams the response body to a file instead of decoding it. The function returns `URL`
/// (the file, in the temporary directory), ``DownloadedFile``, or a ``DownloadTask`` to watch
/// progress and start it yourself.
///
/// ```swift
/// @GET("/files/{name}")
/// @Download
/// func fetch(name: String) async throws -> URL
/// ```
@attached(peer) public macro Download() = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// Sends the `@Body` parameter (`Data`, or a file `URL` streamed from disk) as the file part of
/// a `multipart/form-data` body, and adds a `_payloadDescription: PayloadDescription` argument
/// naming the field, the file name and the media type, as in Snowdrop.
///
/// ```swift
/// @POST("/avatar")
/// @FileUpload
/// @Body("image")
/// func uploadAvatar(_ image: Data) async throws -> Profile
///
/// try await api.uploadAvatar(png, _payloadDescription: PayloadDescription(name: "avatar", fileName: "me.png"))
/// ```
@attached(peer) public macro FileUpload() = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// Retries the endpoint up to `maximumRetries` times after its first attempt, with the
/// client's ``RetryPolicy`` waits and statuses (the count is the policy's
/// ``RetryPolicy/maximumRetries``). A POST or PATCH endpoint is retried only with
/// `retriesNonIdempotentMethods: true`, for servers that make it safe (an idempotency key).
///
/// ```swift
/// @GET("/feed")
/// @Retry(maximumRetries: 3)
/// func feed() async throws -> Feed
/// ```
@attached(peer) public macro Retry(maximumRetries: Int, retriesNonIdempotentMethods: Bool = false) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// The earlier spelling of ``Retry(maximumRetries:retriesNonIdempotentMethods:)``.
@available(*, deprecated, renamed: "Retry(maximumRetries:retriesNonIdempotentMethods:)")
@attached(peer) public macro Retry(max: Int, retriesNonIdempotentMethods: Bool = false) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// Keys every call of the endpoint (``IdempotencyKey-swift.struct``): each call sends a new random key in
/// `Idempotency-Key` on every attempt, and is retried, hedged and resent like a `GET`.
///
/// ```swift
/// @POST("/orders") @Body("order")
/// @IdempotencyKey
/// func placeOrder(order: Order) async throws -> Receipt
/// ```
@attached(peer) public macro IdempotencyKey() = #externalMacro(module: "TrellisMacros", type: "MarkerMacro")

/// Keys every call of the endpoint with the value of its parameter named `parameter`
/// (``IdempotencyKey-swift.struct/init(_:)``), for keys tied to records of your own: calls with the same
/// value are one operation for the server. The parameter is sent only as the key.
///
/// ```swift
/// @POST("/payments") @Body("payment")
/// @IdempotencyKey("paymentID")
/// func pay(paymentID: String, payment: Payment) async throws -> Receipt
/// ```
@attached(peer) public macro IdempotencyKey(_ parameter: String) = #externalMacro(module: "TrellisMacros", type: "MarkerMacro")

/// How the endpoint uses the client's ``HTTPCache``, in place of HTTP's rules
/// (``CachePolicy/useCache``).
///
/// ```swift
/// @GET("/rates")
/// @CachePolicy(.reload)      // always asks the server; the answer is still stored
/// func rates() async throws -> Rates
/// ```
@attached(peer) public macro CachePolicy(_ policy: CachePolicy) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// Sends the endpoint's body gzipped (`Content-Encoding: gzip`), for a server that accepts it.
///
/// ```swift
/// @POST("/logs")
/// @CompressedBody
/// func upload(@Body _ batch: LogBatch) async throws
/// ```
@attached(peer) public macro CompressedBody() = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")

/// Gives the endpoint a timeout of its own, in place of the client's
/// ``Client/Configuration/Timeouts/request``: from sending to the last byte of a buffered
/// response, or to the head of a streamed one, per attempt. A middleware may still change it.
///
/// ```swift
/// @POST("/reports")
/// @Timeout(.seconds(300))
/// func generateReport(@Body _ query: ReportQuery) async throws -> Report
/// ```
@attached(peer) public macro Timeout(_ duration: Duration) = #externalMacro(module: "TrellisMacros", type: "HTTPMethodMacro")
