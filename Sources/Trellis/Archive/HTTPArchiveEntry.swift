public import Foundation

// The entries of an archive: each exchange's request, response and timings, as HAR 1.2 names
// them.
extension HTTPArchive {
    /// One exchange: a request, its response, and its timings.
    public struct Entry: Codable, Sendable, Equatable {
        /// When the request started, in ISO 8601 with milliseconds (`2026-11-27T07:30:00.123Z`).
        public var startedDateTime: String
        /// The exchange's time in milliseconds: the sum of the known ``timings``.
        public var time: Double
        /// The request as it was sent, redacted.
        public var request: Request
        /// The response as it was received, redacted; status 0 when the exchange failed before
        /// one arrived (the ``comment`` says why).
        public var response: Response
        /// The format's cache information, which the format requires; Trellis records the
        /// network's answers only, so it is empty, and kept from the API.
        var cache: Cache
        /// Where the exchange's time went.
        public var timings: Timings
        /// A note on the exchange: the error it ended with, a body cut at the recording limit.
        public var comment: String?

        /// An entry from its parts.
        public init(startedDateTime: String, time: Double, request: Request, response: Response, timings: Timings, comment: String? = nil) {
            self.startedDateTime = startedDateTime
            self.time = time
            self.request = request
            self.response = response
            self.cache = Cache()
            self.timings = timings
            self.comment = comment
        }
    }

    /// A request in an archive.
    public struct Request: Codable, Sendable, Equatable {
        /// The method: `GET`, `POST`, …
        public var method: String
        /// The absolute URL.
        public var url: String
        /// The protocol version, as far as it is known.
        public var httpVersion: String
        /// The cookies sent.
        public var cookies: [Cookie]
        /// The header fields sent, in order.
        public var headers: [NameValue]
        /// The query's items, in order.
        public var queryString: [NameValue]
        /// The body, when there was one.
        public var postData: PostData?
        /// The size of the head in bytes; -1, unknown, since the transport writes it.
        public var headersSize: Int
        /// The size of the body in bytes; -1 when unknown (a stream).
        public var bodySize: Int
        /// A note on the request.
        public var comment: String?

        /// A request from its parts; ``init(_:body:bodySize:redaction:)`` makes one from a
        /// ``Trellis/Request``.
        public init(
            method: String,
            url: String,
            httpVersion: String = "HTTP/1.1",
            cookies: [Cookie] = [],
            headers: [NameValue] = [],
            queryString: [NameValue] = [],
            postData: PostData? = nil,
            headersSize: Int = -1,
            bodySize: Int = 0,
            comment: String? = nil
        ) {
            self.method = method
            self.url = url
            self.httpVersion = httpVersion
            self.cookies = cookies
            self.headers = headers
            self.queryString = queryString
            self.postData = postData
            self.headersSize = headersSize
            self.bodySize = bodySize
            self.comment = comment
        }
    }

    /// A response in an archive.
    public struct Response: Codable, Sendable, Equatable {
        /// The status code; 0 when no response arrived.
        public var status: Int
        /// The reason phrase.
        public var statusText: String
        /// The protocol version, as far as it is known.
        public var httpVersion: String
        /// The cookies set (`Set-Cookie`).
        public var cookies: [Cookie]
        /// The header fields received, in order.
        public var headers: [NameValue]
        /// The body.
        public var content: Content
        /// The target of a redirect (`Location`), or empty.
        public var redirectURL: String
        /// The size of the head in bytes; -1, unknown, since the transport reads it.
        public var headersSize: Int
        /// The size of the body as received in bytes; -1 when unknown.
        public var bodySize: Int
        /// A note on the response.
        public var comment: String?

        /// A response from its parts.
        public init(
            status: Int,
            statusText: String,
            httpVersion: String = "HTTP/1.1",
            cookies: [Cookie] = [],
            headers: [NameValue] = [],
            content: Content,
            redirectURL: String = "",
            headersSize: Int = -1,
            bodySize: Int = -1,
            comment: String? = nil
        ) {
            self.status = status
            self.statusText = statusText
            self.httpVersion = httpVersion
            self.cookies = cookies
            self.headers = headers
            self.content = content
            self.redirectURL = redirectURL
            self.headersSize = headersSize
            self.bodySize = bodySize
            self.comment = comment
        }
    }

    /// A header field or a query item.
    public struct NameValue: Codable, Sendable, Equatable {
        /// The name.
        public var name: String
        /// The value.
        public var value: String
        /// A note.
        public var comment: String?

        /// A pair of `name` and `value`.
        public init(name: String, value: String, comment: String? = nil) {
            self.name = name
            self.value = value
            self.comment = comment
        }
    }

    /// A cookie sent or set.
    public struct Cookie: Codable, Sendable, Equatable {
        /// The cookie's name.
        public var name: String
        /// Its value (`<redacted>` in recordings Trellis makes).
        public var value: String
        /// A note.
        public var comment: String?

        /// A cookie named `name` with `value`.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// A request's body.
    public struct PostData: Codable, Sendable, Equatable {
        /// The body's media type (`Content-Type`).
        public var mimeType: String
        /// The posted parameters of a form; Trellis leaves them in ``text``.
        public var params: [NameValue]
        /// The body: as text when it is UTF-8, else in base64 (``encoding`` says so).
        public var text: String
        /// `base64` when ``text`` is the body in base64 (an extension some tools share; HAR
        /// 1.2 has it for responses only).
        public var encoding: String?
        /// A note: how much of a body was cut at the recording limit.
        public var comment: String?

        /// A body of type `mimeType`.
        public init(mimeType: String, text: String, encoding: String? = nil, comment: String? = nil) {
            self.mimeType = mimeType
            self.params = []
            self.text = text
            self.encoding = encoding
            self.comment = comment
        }
    }

    /// A response's body.
    public struct Content: Codable, Sendable, Equatable {
        /// The body's length in bytes as received (before a transport's own decoding).
        public var size: Int
        /// The body's media type (`Content-Type`).
        public var mimeType: String
        /// The body: as text when it is UTF-8, else in base64 (``encoding`` says so).
        public var text: String?
        /// `base64` when ``text`` is the body in base64.
        public var encoding: String?
        /// When each part of a streamed body arrived: Trellis's extension, so that a replay
        /// can hand an event stream over as it came.
        public var chunks: [Chunk]?
        /// A note: how much of a body was cut at the recording limit.
        public var comment: String?

        /// A body of `size` bytes of type `mimeType`.
        public init(size: Int, mimeType: String, text: String? = nil, encoding: String? = nil, chunks: [Chunk]? = nil, comment: String? = nil) {
            self.size = size
            self.mimeType = mimeType
            self.text = text
            self.encoding = encoding
            self.chunks = chunks
            self.comment = comment
        }

        /// The body's bytes: ``text`` decoded from base64 or as UTF-8; `nil` when there is no
        /// text, or base64 that does not decode.
        public var bytes: Data? {
            guard let text else { return nil }
            return encoding == "base64" ? Data(base64Encoded: text) : Data(text.utf8)
        }

        enum CodingKeys: String, CodingKey {
            case size, mimeType, text, encoding, comment
            case chunks = "_chunks"
        }
    }

    /// A part of a streamed body: how many bytes arrived, and when.
    public struct Chunk: Codable, Sendable, Equatable {
        /// Milliseconds from the response's head to this part's arrival.
        public var time: Double
        /// The part's length in bytes.
        public var size: Int

        /// A part of `size` bytes that arrived `time` milliseconds after the head.
        public init(time: Double, size: Int) {
            self.time = time
            self.size = size
        }
    }

    /// The format's cache information, which Trellis leaves empty.
    struct Cache: Codable, Sendable, Equatable {
        var comment: String?
    }

    /// Where an exchange's time went, in milliseconds; -1 for a phase that is not known.
    ///
    /// A transport does not tell its client when it resolved the name, connected or sent the
    /// last byte, so Trellis records `send` as 0, `wait` up to the response's head, and
    /// `receive` to the body's end.
    public struct Timings: Codable, Sendable, Equatable {
        /// Waiting for a connection; -1.
        public var blocked: Double?
        /// Resolving the name; -1.
        public var dns: Double?
        /// Connecting; -1.
        public var connect: Double?
        /// Sending the request.
        public var send: Double
        /// Waiting for the response's head.
        public var wait: Double
        /// Receiving the body.
        public var receive: Double
        /// The TLS handshake; -1.
        public var ssl: Double?
        /// A note.
        public var comment: String?

        /// Timings with the given phases, the unknown ones -1.
        public init(send: Double, wait: Double, receive: Double) {
            self.blocked = -1
            self.dns = -1
            self.connect = -1
            self.send = send
            self.wait = wait
            self.receive = receive
            self.ssl = -1
        }
    }
}
