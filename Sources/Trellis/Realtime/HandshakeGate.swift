import Crypto
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import NIOWebSocket

/// Holds back the upgrade request until the TLS handshake is done and the server certificate
/// satisfies the pins, and names the host when a name override chose the address: the
/// request carries the access token, which must not reach an unverified server.
final class HandshakeGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let pins: PinnedHost?
    private let nameCheck: CertificateNameCheck?
    private let host: String
    // Failing an already completed promise does nothing, so every path may call it.
    private let fail: (any Error) -> Void
    private let onVerified: () throws -> Void

    init<Value>(
        pins: PinnedHost?,
        nameCheck: CertificateNameCheck?,
        host: String,
        promise: EventLoopPromise<Value>,
        onVerified: @escaping () throws -> Void
    ) {
        self.pins = pins
        self.nameCheck = nameCheck
        self.host = host
        self.fail = { promise.fail($0) }
        self.onVerified = onVerified
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted = event as? TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        do {
            let certificate = try context.pipeline.syncOperations.handler(type: NIOSSLHandler.self).peerCertificate
            try pins?.verify(certificate)
            try nameCheck?.verify(certificate)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            try onVerified()
        } catch {
            fail(error)
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(TrellisError.connectionFailed(ConnectionFailure(host: host, reason: "the server closed the connection during the TLS handshake")))
        context.fireChannelInactive()
    }
}
