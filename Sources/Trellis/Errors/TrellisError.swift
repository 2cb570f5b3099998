public import Foundation
public import HTTPTypes

/// Every failure Trellis reports, as cases a caller can switch on.
///
/// Cancelling the calling task is not one of them: it surfaces as `CancellationError`, as
/// everywhere else in Swift concurrency.
///
/// ```swift
/// do {
///     let post = try await blog.post(id: 7)
/// } catch TrellisError.unacceptableStatus(let failure) where failure.status == .notFound {
///     // …
/// }
/// ```
public enum TrellisError: Error, Sendable {
    /// The server answered with a status the request does not accept (by default, not 2xx).
    case unacceptableStatus(HTTPStatusFailure)
    /// The response body could not be decoded as the declared type.
    case decodingFailed(DecodingFailure)
    /// The request did not complete within its timeout.
    case timedOut(TimeoutFailure)
    /// No connection could be made, or the connection broke before the response was complete.
    case connectionFailed(ConnectionFailure)
    /// The TLS handshake failed (untrusted certificate, wrong host name, protocol mismatch).
    case tlsFailed(ConnectionFailure)
    /// The server did not present what its host is pinned to (``CertificatePinning``); nothing
    /// was sent. The failure names the host and what did not match.
    case pinningFailed(ConnectionFailure)
    /// The request was rejected before anything was sent.
    case invalidRequest(InvalidRequest)
    /// A buffered response body was larger than the client allows.
    case responseTooLarge(ResponseTooLarge)
    /// A request needs an access token and none can be had: none is stored and nothing can
    /// obtain one, the refresh was refused by the server (the stored token is then deleted), or
    /// the token's storage failed (its ``AccessTokenStorageError`` is the failure's
    /// `underlying` error).
    case authenticationRequired(AuthenticationFailure)
    /// A redirect was not followed: too many, a loop, a downgrade from https to http, or a body
    /// that cannot be sent again.
    case redirectFailed(RedirectFailure)
    /// A file being uploaded could not be read, or a download could not be written or moved
    /// into place.
    case fileFailed(FileFailure)
    /// A ``RequestPrecondition`` did not hold; nothing was sent.
    case preconditionFailed(RequestCheckFailure)
    /// A ``ResponseValidation`` did not hold for the response.
    case validationFailed(RequestCheckFailure)
    /// A WebSocket conversation ended with a close code other than 1000 (normal closure):
    /// the server's, or the one Trellis sent for a message it could not accept.
    case webSocketClosed(WebSocketClosure)
    /// One of the client's resilience policies (``Client/Configuration-swift.struct/resilience``)
    /// refused the call before it was sent: the origin's circuit is open, the wait for the
    /// concurrency limit ran out, or the origin asked for a pause longer than the client waits.
    /// Nothing was sent; the refusal names the origin and when it may be tried again.
    case callRefused(CallRefusal)
}

extension TrellisError: CustomStringConvertible, LocalizedError {
    public var description: String {
        switch self {
        case .unacceptableStatus(let failure): failure.description
        case .decodingFailed(let failure): failure.description
        case .timedOut(let failure): failure.description
        case .connectionFailed(let failure): "connection failed: \(failure)"
        case .tlsFailed(let failure): "TLS handshake failed: \(failure)"
        case .pinningFailed(let failure): "certificate pinning failed: \(failure)"
        case .invalidRequest(let failure): "invalid request: \(failure)"
        case .responseTooLarge(let failure): failure.description
        case .authenticationRequired(let failure): "authentication required: \(failure)"
        case .redirectFailed(let failure): "redirect not followed: \(failure)"
        case .fileFailed(let failure): "file operation failed: \(failure)"
        case .preconditionFailed(let failure): "precondition failed, nothing sent: \(failure)"
        case .validationFailed(let failure): "response validation failed: \(failure)"
        case .webSocketClosed(let closure): "the WebSocket was closed: \(closure)"
        case .callRefused(let refusal): refusal.description
        }
    }

    public var errorDescription: String? { description }
}

/// A response whose status the request does not accept, with what the server said.
public struct HTTPStatusFailure: Sendable, CustomStringConvertible {
    /// The status the server sent.
    public let status: HTTPResponse.Status
    /// The response's header fields.
    public let headerFields: HTTPFields
    /// The raw response body (up to the client's buffering limit).
    public let body: Data
    /// The method and URL of the request, for messages and logs.
    public let request: String
    /// The idempotency key the call sent, if it was keyed (``IdempotencyKey-swift.struct``).
    public let idempotencyKey: String?

    let decoder: JSONDecoder

    init(status: HTTPResponse.Status, headerFields: HTTPFields, body: Data, request: String, idempotencyKey: String? = nil, decoder: JSONDecoder) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
        self.request = request
        self.idempotencyKey = idempotencyKey
        self.decoder = decoder
    }

    /// Decodes the body as a server error model of your own.
    public func decodeBody<T: Decodable>(as type: T.Type) throws -> T {
        try decoder.decode(T.self, from: body)
    }

    /// The RFC 9457 problem details, when the body is `application/problem+json` (or JSON of
    /// that shape).
    public var problem: ProblemDetails? {
        guard let contentType = headerFields[.contentType]?.lowercased(),
            contentType.hasPrefix("application/problem+json") || contentType.hasPrefix("application/json")
        else { return nil }
        guard let problem = try? decoder.decode(ProblemDetails.self, from: body),
            problem.title != nil || problem.detail != nil || problem.type != nil
        else { return nil }
        return problem
    }

    /// The wheel-style `{ "error": "…", "domainCode": 42 }` body, when the body has that shape.
    public var richError: RichErrorBody? {
        try? decoder.decode(RichErrorBody.self, from: body)
    }

    public var description: String {
        var text = "\(request) answered \(status.code) \(status.reasonPhrase)"
        if let problem, let summary = problem.title ?? problem.detail {
            text += ": \(summary)"
        } else if let richError {
            text += ": \(richError.error)"
        } else if !body.isEmpty {
            text += ": " + BodyExcerpt.make(body)
        }
        if let meaning = idempotencyMeaning { text += " (\(meaning))" }
        return text
    }
}

/// A body that could not be decoded as the type the endpoint declares.
public struct DecodingFailure: Sendable, CustomStringConvertible {
    /// The type that was expected.
    public let type: String
    /// Where in the body decoding stopped (`posts[2].author.name`), empty at the top.
    public let codingPath: String
    /// What the decoder said.
    public let reason: String
    /// The status of the response.
    public let status: HTTPResponse.Status
    /// The first bytes of the body (up to 512), as text; of the line, for a line of a
    /// ``JSONLines`` stream.
    public let bodyExcerpt: String
    /// The number of the line that could not be decoded, from 1, for a ``JSONLines`` stream.
    public internal(set) var line: Int?

    init(type: Any.Type, error: any Error, status: HTTPResponse.Status, body: Data) {
        self.type = String(reflecting: type)
        self.status = status
        self.bodyExcerpt = BodyExcerpt.make(body)
        switch error as? DecodingError {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context),
            .dataCorrupted(let context):
            self.codingPath = Self.render(context.codingPath)
            if case .keyNotFound(let key, _) = error as? DecodingError {
                self.reason = "no value for key \"\(key.stringValue)\""
            } else {
                self.reason = context.debugDescription
            }
        default:
            self.codingPath = ""
            self.reason = String(describing: error)
        }
    }

    init(type: Any.Type, reason: String, status: HTTPResponse.Status, body: Data) {
        self.type = String(reflecting: type)
        self.codingPath = ""
        self.reason = reason
        self.status = status
        self.bodyExcerpt = BodyExcerpt.make(body)
    }

    private static func render(_ path: [any CodingKey]) -> String {
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return text
    }

    public var description: String {
        let location = codingPath.isEmpty ? "" : " at \(codingPath)"
        if let line {
            return "could not decode \(type)\(location) from line \(line) of a \(status.code) response: \(reason); line: \(bodyExcerpt)"
        }
        return "could not decode \(type)\(location) from a \(status.code) response: \(reason); body: \(bodyExcerpt)"
    }
}

/// A request that ran out of time.
public struct TimeoutFailure: Sendable, CustomStringConvertible {
    /// The time the request was allowed.
    public let timeout: Duration
    /// The method and URL of the request.
    public let request: String
    /// What the request was waiting for when its time ran out (the next byte of a streamed
    /// body, say); `nil` for the whole exchange.
    public var waitingFor: String?

    init(timeout: Duration, request: String, waitingFor: String? = nil) {
        self.timeout = timeout
        self.request = request
        self.waitingFor = waitingFor
    }

    public var description: String {
        let waiting = waitingFor.map { " waiting for \($0)" } ?? ""
        return "\(request) timed out after \(timeout)\(waiting)"
    }
}

/// A connection that could not be made or broke down.
public struct ConnectionFailure: Sendable, CustomStringConvertible {
    /// The host the request was for.
    public let host: String
    /// What went wrong, in words.
    public let reason: String
    /// The error the transport reported.
    public let underlying: (any Error)?
    /// Whether the connection broke in a way a connection the server had already closed
    /// (a stale pooled keep-alive connection) breaks, before any byte of a response: such a
    /// request is sent once more on a fresh connection, whatever the retry policy.
    var mayBeStaleConnection = false
    /// Whether the connection was one that had carried an answer before, and broke on what
    /// that answer left on it (``ReusedConnectionGuard``), before any of this request's answer:
    /// such a request is sent again on another connection, a few times at most, since a server
    /// that overruns every answer leaves that behind on each connection it answers on.
    var failedOnReusedConnection = false
    /// Whether the server's answer broke HTTP itself (it is not HTTP, or its framing allows
    /// two readings). Sending the request again would only get the same answer, so it is not
    /// retried, as OkHttp does not retry a protocol error.
    var isProtocolViolation = false

    /// Creates a failure description.
    public init(host: String, reason: String, underlying: (any Error)? = nil) {
        self.host = host
        self.reason = reason
        self.underlying = underlying
    }

    public var description: String { "\(host): \(reason)" }

    /// This failure once part of a response had come: the connection was open then, so it is
    /// not the stale connection a replay is for.
    var afterPartOfAResponse: ConnectionFailure {
        var failure = self
        failure.mayBeStaleConnection = false
        return failure
    }

    /// The reason given for an answer that broke HTTP, either transport's, with what was found
    /// wrong: one wording, which the Errors article's table of faults quotes.
    static func notHTTP(_ fault: String, version: String = "HTTP/1.1") -> String {
        "the server's answer is not a valid \(version) response (\(fault))"
    }
}

/// What made a request invalid, found before anything was sent.
public struct InvalidRequest: Sendable, CustomStringConvertible {
    /// The part of the request at fault.
    public enum Part: Sendable, Equatable {
        /// The URL: not absolute, no host, or a scheme other than `http`, `https`, `ws`, `wss`.
        case url
        /// The method: not a valid token.
        case method
        /// The header field of this name: an invalid name, or a value with CR, LF or NUL.
        case header(String)
        /// The path parameter of this name: empty, which would address another resource.
        case pathParameter(String)
        /// The body: not encodable, or a one-shot stream that would have to be sent again.
        case body
    }

    /// The part of the request at fault.
    public let part: Part
    /// What is wrong with it.
    public let reason: String

    /// Creates a description of an invalid request.
    public init(_ part: Part, _ reason: String) {
        self.part = part
        self.reason = reason
    }

    public var description: String { reason }
}

/// A buffered body over the client's limit.
public struct ResponseTooLarge: Sendable, CustomStringConvertible {
    /// The limit in bytes.
    public let limit: Int
    /// The length the server announced, if it did.
    public let announcedLength: Int64?
    /// What was too large: the response body, or one server-sent event of a stream.
    public var subject = "the response body"

    /// Describes a body over `limit`; transports and adapters of your own throw it too, so
    /// that callers see one error for one failure.
    public init(limit: Int, announcedLength: Int64?, subject: String = "the response body") {
        self.limit = limit
        self.announcedLength = announcedLength
        self.subject = subject
    }

    public var description: String {
        let announced = announcedLength.map { " (announced \($0) bytes)" } ?? ""
        return "\(subject) is larger than the limit of \(limit) bytes\(announced)"
    }
}

enum BodyExcerpt {
    static let limit = 512

    static func make(_ body: Data) -> String {
        if body.isEmpty { return "(empty)" }
        let prefix = body.prefix(limit)
        let text = String(decoding: prefix, as: UTF8.self)
        return body.count > limit ? text + "… (\(body.count) bytes)" : text
    }
}

/// Why a request that needs an access token could not get one.
public struct AuthenticationFailure: Sendable, CustomStringConvertible {
    /// The storage label of the token (the service's `@TokenLabel`).
    public let label: String
    /// What happened, in words.
    public let reason: String
    /// The error the refresh or the token's storage failed with, when it did.
    public let underlying: (any Error)?

    /// Describes an authentication failure.
    public init(label: String, reason: String, underlying: (any Error)? = nil) {
        self.label = label
        self.reason = reason
        self.underlying = underlying
    }

    public var description: String { "token \"\(label)\": \(reason)" }
}

/// Why a redirect was not followed.
public struct RedirectFailure: Sendable, CustomStringConvertible {
    /// The URL of the request that was redirected.
    public let from: String
    /// Where the server redirected to.
    public let to: String
    /// What stopped it, in words.
    public let reason: String

    public var description: String { "\(from) -> \(to): \(reason)" }
}

/// A file operation of a transfer that failed, with the file and the system's reason.
public struct FileFailure: Sendable, CustomStringConvertible {
    /// The file's path.
    public let path: String
    /// What was being done: "open", "read", "write", "move into place".
    public let operation: String
    /// Why it failed, as the system reported it.
    public let reason: String

    /// A failure of `operation` (such as "rename") on the file at `path`, because of `reason`.
    public init(path: String, operation: String, reason: String) {
        self.path = path
        self.operation = operation
        self.reason = reason
    }

    public var description: String { "cannot \(operation) \(path): \(reason)" }
}
