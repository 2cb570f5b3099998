import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix

/// Sends an `http://` request through an HTTP proxy the plain way (RFC 9112, section 3.2.2):
/// the request line carries the absolute URL, and the proxy opens the connection to the origin
/// itself. AsyncHTTPClient only tunnels (`CONNECT`), which many proxies allow to port 443 alone
/// (tinyproxy's and squid's default configurations among them).
///
/// Each request has a connection to the proxy of its own, closed when its response has been
/// read: proxies such as tinyproxy close a forwarded connection after one exchange anyway.
struct ProxyForwarding: Sendable {
    let proxy: Proxy
    let connectTimeout: TimeAmount

    /// The response to `request`, held to `limits`.
    func send(_ request: Request, within limits: ExchangeLimits) async throws -> Response<ResponseBody> {
        try await limits.enforce(for: request) { try await exchange(request, timeout: limits.timeout) }
    }

    private func exchange(_ request: Request, timeout: Duration) async throws -> Response<ResponseBody> {
        let proxyName = "\(proxy)"
        let translated: @Sendable (any Error) -> any Error = { error in
            TransportErrors.translate(error, host: proxyName, timeout: timeout, request: request)
        }
        let connection: ForwardedConnection
        do {
            connection = try await ForwardedConnection.open(to: proxy, connectTimeout: connectTimeout)
        } catch {
            throw translated(error)
        }
        do {
            var writeFailure: (any Error)?
            do {
                try await write(request, to: connection.outbound)
            } catch {
                // The proxy may have answered before it stopped reading (a 413, a 407): the
                // answer, if one came, says more than the broken write.
                writeFailure = error
            }
            let head: HTTPResponseHead
            do {
                head = try await Self.finalHead(from: connection)
            } catch {
                throw writeFailure ?? error
            }
            if head.status.code == 407 {
                throw TrellisError.connectionFailed(ConnectionFailure(
                    host: proxyName, reason: "the proxy answered 407", underlying: ProxyTunnelHandler.Refused(status: 407)
                ))
            }
            let response = AsyncHTTPClientTransport.responseHead(status: head.status, headers: head.headers)
            let expectedLength = head.headers.first(name: "content-length").flatMap { Int64($0) }
            let body = ResponseBody(expectedLength: expectedLength) {
                // The iterator keeps the connection open; it closes at the end or when dropped.
                ChunkIterator {
                    do {
                        switch try await connection.nextPart() {
                        case .body(let bytes)?:
                            return bytes
                        case .end?:
                            connection.close()
                            return nil
                        case .head?, nil:
                            connection.close()
                            try Task.checkCancellation()
                            throw HTTPParserError.invalidEOFState
                        }
                    } catch {
                        connection.close()
                        throw translated(error)
                    }
                }
            }
            return Response(head: response, body: body)
        } catch {
            connection.close()
            throw translated(error)
        }
    }

    /// Writes `request` in absolute form, with the proxy's credentials when it has some.
    private func write(_ request: Request, to outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>) async throws {
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headerFields.count + 3)
        request.forEachWireField { name, value in headers.add(name: name, value: value) }
        if !headers.contains(name: "host") { headers.add(name: "Host", value: request.head.authority ?? "") }
        if let credentials = proxy.credentials {
            headers.replaceOrAdd(name: "Proxy-Authorization", value: credentials.basicAuthorization)
        }
        headers.replaceOrAdd(name: "Connection", value: "close")
        let body = request.body
        if let length = body?.bytes?.readableBytes ?? body?.length.map(Int.init) {
            headers.replaceOrAdd(name: "Content-Length", value: "\(length)")
        } else if body != nil {
            headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
        } else if ![.get, .head, .options, .trace].contains(request.method) {
            headers.replaceOrAdd(name: "Content-Length", value: "0")
        }
        let method = HTTPMethod(rawValue: request.method.rawValue)
        try await outbound.write(.head(HTTPRequestHead(version: .http1_1, method: method, uri: request.urlString, headers: headers)))
        if let body {
            var chunks = body.makeChunkIterator()
            while let chunk = try await chunks.next() {
                try await outbound.write(.body(.byteBuffer(chunk)))
            }
        }
        try await outbound.write(.end(nil))
    }

    /// The head of the final response, past any informational (1xx) ones; a status under 100
    /// is refused, as ``ResponseStatusGuard`` refuses it on AsyncHTTPClient's connections.
    private static func finalHead(from connection: ForwardedConnection) async throws -> HTTPResponseHead {
        while true {
            switch try await connection.nextPart() {
            case .head(let head)?:
                guard head.status.code >= 100 else {
                    throw RefusedStatus(status: String(head.status.code), version: "HTTP/1.1")
                }
                if (100..<200).contains(head.status.code), head.status.code != 101 { continue }
                return head
            case .body?, .end?:
                continue
            case nil:
                try Task.checkCancellation()
                throw HTTPParserError.invalidEOFState
            }
        }
    }
}

/// A connection to a proxy, held open while its response is read and closed when ``close()``
/// is called or the last reference goes.
///
/// SwiftNIO closes an async channel at the end of `executeThenClose`'s closure; the closure runs
/// in a task of its own, which hands the streams over and waits for the word to close.
///
/// Unchecked: the response parts are read through one iterator, which SwiftNIO asks not to
/// share between tasks at once. One task at a time reads them: the call's until the head has
/// come, then the reader of the body, which starts once the call has returned it.
final class ForwardedConnection: @unchecked Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>
    private var responseParts: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
    private let closing: AsyncStream<Void>.Continuation

    private init(
        inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>,
        outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>,
        closing: AsyncStream<Void>.Continuation
    ) {
        self.responseParts = inbound.makeAsyncIterator()
        self.outbound = outbound
        self.closing = closing
    }

    /// The next part of the response; `nil` when the connection has ended.
    func nextPart() async throws -> HTTPClientResponsePart? {
        try await responseParts.next()
    }

    deinit { closing.finish() }

    /// Closes the connection (again: harmless).
    func close() { closing.finish() }

    /// A new connection to `proxy` speaking HTTP/1.1.
    static func open(to proxy: Proxy, connectTimeout: TimeAmount) async throws -> ForwardedConnection {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(connectTimeout)
            .connect(host: proxy.host, port: proxy.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(leftOverBytesStrategy: .dropBytes)
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        let (closed, closing) = AsyncStream.makeStream(of: Void.self)
        return await withCheckedContinuation { handOver in
            Task {
                try? await channel.executeThenClose { inbound, outbound in
                    handOver.resume(returning: ForwardedConnection(inbound: inbound, outbound: outbound, closing: closing))
                    for await _ in closed {}
                }
            }
        }
    }
}
