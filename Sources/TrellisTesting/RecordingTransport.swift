public import Foundation
public import Trellis

/// A ``Transport`` wrapper that records every exchange of another as HAR, so that a test can
/// capture a real API once and replay it with ``ReplayTransport`` ever after.
///
/// ```swift
/// let recording = RecordingTransport(wrapping: AsyncHTTPClientTransport.shared)
/// let blog = BlogService(client: Client(baseURL: URL(string: "https://api.example.com")!, transport: recording))
/// _ = try await blog.post(id: 7)
/// try recording.write(to: URL(fileURLWithPath: "Tests/Recordings/posts.har"))
/// ```
///
/// Each exchange is an entry with the request as sent, the response as received, their
/// bodies (text as text, anything else in base64) and timings, redacted as the client's logs
/// are, and more (see ``HTTPArchive/Redaction``), so that the file can be committed. A
/// streamed body (a download, an event stream, JSON Lines) is recorded as the caller reads it,
/// with when each part arrived, up to the recorder's body limit; an entry whose body was cut
/// says so.
public struct RecordingTransport: Transport {
    /// The transport that carries the exchanges.
    public let wrapped: any Transport
    /// The entries recorded so far.
    public let recorder: HTTPArchiveRecorder

    /// A wrapper of `transport` recording into `recorder`.
    public init(wrapping transport: any Transport, recorder: HTTPArchiveRecorder = HTTPArchiveRecorder()) {
        self.wrapped = transport
        self.recorder = recorder
    }

    /// The exchanges recorded so far.
    public var archive: HTTPArchive { recorder.archive }

    /// Writes the exchanges recorded so far to `url` as a HAR file.
    public func write(to url: URL) throws {
        try recorder.write(to: url)
    }

    public var decodesContentEncoding: Bool { wrapped.decodesContentEncoding }

    public func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        try await recorder.record(request, bodyDecodedByTransport: wrapped.decodesContentEncoding) {
            try await wrapped.send($0, within: limits)
        }
    }
}
