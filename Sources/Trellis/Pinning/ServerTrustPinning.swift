#if canImport(Darwin)
import Foundation
import NIOSSL
import Security

/// Pins checked in a URLSession server-trust challenge.
enum ServerTrustPinning {
    /// Why the server behind `trust` does not satisfy `pins`, or `nil` when it does.
    ///
    /// Pinned CA certificates become the only anchors of the evaluation; a pinned server
    /// certificate replaces the evaluation with an exact comparison; key pins alone keep the
    /// system's evaluation. The same rules as on AsyncHTTPClient, so a pin set behaves alike
    /// on both transports.
    static func mismatch(of trust: SecTrust, pins: PinnedHost) -> String? {
        let anchors = pins.anchors
        if !anchors.isEmpty {
            let certificates = anchors.compactMap { try? $0.toDERBytes() }.compactMap {
                SecCertificateCreateWithData(nil, Data($0) as CFData)
            }
            SecTrustSetAnchorCertificates(trust, certificates as CFArray)
            SecTrustSetAnchorCertificatesOnly(trust, true)
            if let reason = evaluationFailure(of: trust) {
                return "the server's certificate chain does not lead to a pinned CA certificate (\(reason))"
            }
        } else if pins.serverCertificates.isEmpty, let reason = evaluationFailure(of: trust) {
            return "the server's certificate is not trusted (\(reason))"
        }
        guard let chain = SecTrustCopyCertificateChain(trust) as? [SecCertificate], let leaf = chain.first else {
            return "the server presented no certificate"
        }
        let der = SecCertificateCopyData(leaf) as Data
        guard let certificate = try? NIOSSLCertificate(bytes: Array(der), format: .der) else {
            return "the server certificate could not be read"
        }
        return pins.mismatch(of: certificate)
    }

    private static func evaluationFailure(of trust: SecTrust) -> String? {
        var error: CFError?
        if SecTrustEvaluateWithError(trust, &error) { return nil }
        return error.map { CFErrorCopyDescription($0) as String } ?? "untrusted"
    }
}
#endif
