public import Foundation
import NIOSSL

/// TLS for every connection a client opens: which certificate authorities it trusts, the
/// certificate it presents when a server asks for one (mutual TLS), and the lowest TLS
/// version it accepts. Certificate pinning (``CertificatePinning``) is checked on top.
public struct TLSSettings: Sendable {
    /// Which certificate authorities a server's chain may lead to.
    public var trust: Trust = .system
    /// The certificate and key presented to a server that asks for one; none by default.
    public var clientIdentity: ClientIdentity?
    /// The lowest TLS version accepted; TLS 1.2 by default.
    public var minimumVersion: MinimumTLSVersion = .tls12

    /// The defaults: the system's authorities, no client certificate, TLS 1.2 or later.
    public init() {}

    /// Which certificate authorities a server's chain may lead to.
    public enum Trust: Sendable {
        /// The system's authorities.
        case system
        /// The system's authorities and these (a private CA beside public ones).
        case systemAnd([TrustedCertificate])
        /// These authorities alone: a server with a public certificate is refused.
        case only([TrustedCertificate])
    }

    /// The lowest TLS version a client accepts.
    public enum MinimumTLSVersion: Sendable, Hashable {
        /// TLS 1.2.
        case tls12
        /// TLS 1.3.
        case tls13
    }

    var isDefault: Bool {
        if case .system = trust, clientIdentity == nil, minimumVersion == .tls12 { return true }
        return false
    }

    /// `base` with these settings applied.
    func applied(to base: TLSConfiguration) -> TLSConfiguration {
        var configuration = base
        switch trust {
        case .system:
            break
        case .systemAnd(let authorities):
            configuration.additionalTrustRoots.append(.certificates(authorities.map(\.certificate)))
        case .only(let authorities):
            configuration.trustRoots = .certificates(authorities.map(\.certificate))
        }
        if let clientIdentity {
            configuration.certificateChain = clientIdentity.chain.map { .certificate($0) }
            configuration.privateKey = .privateKey(clientIdentity.key)
        }
        configuration.minimumTLSVersion = minimumVersion == .tls13 ? .tlsv13 : .tlsv12
        return configuration
    }
}

/// A certificate authority to trust, read from PEM or DER.
public struct TrustedCertificate: Sendable, Hashable {
    let certificate: NIOSSLCertificate

    /// Every certificate of `data`: PEM (one or more `-----BEGIN CERTIFICATE-----` blocks) or
    /// DER (one certificate), told apart by their content.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when `data` holds no certificate.
    public static func certificates(in data: Data) throws -> [TrustedCertificate] {
        let bytes = Array(data)
        if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE-----") {
            guard let certificates = try? NIOSSLCertificate.fromPEMBytes(bytes), !certificates.isEmpty else {
                throw TrellisError.invalidRequest(.init(.url, "the PEM text holds no readable certificate"))
            }
            return certificates.map(TrustedCertificate.init)
        }
        guard let certificate = try? NIOSSLCertificate(bytes: bytes, format: .der) else {
            throw TrellisError.invalidRequest(.init(.url, "the data is neither a PEM nor a DER certificate"))
        }
        return [TrustedCertificate(certificate: certificate)]
    }

    /// The certificates of the PEM or DER file at `url`.
    public static func certificates(contentsOf url: URL) throws -> [TrustedCertificate] {
        try certificates(in: try Data(contentsOf: url))
    }
}

/// The certificate chain and private key a client presents when a server asks for one.
public struct ClientIdentity: Sendable {
    let chain: [NIOSSLCertificate]
    let key: NIOSSLPrivateKey
    /// The archive and password an identity was read from, for URLSession on Apple platforms,
    /// which takes an identity from PKCS#12 alone; `nil` for one read from PEM.
    var archive: (data: Data, password: String)? = nil

    /// An identity from PEM: the certificate chain (the client's certificate first, then any
    /// intermediates) and its private key, encrypted with `password` when given.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when either is not readable PEM.
    public static func pem(certificateChain: Data, privateKey: Data, password: String? = nil) throws -> ClientIdentity {
        guard let chain = try? NIOSSLCertificate.fromPEMBytes(Array(certificateChain)), !chain.isEmpty else {
            throw TrellisError.invalidRequest(.init(.url, "the client certificate chain is not PEM certificates"))
        }
        let key: NIOSSLPrivateKey
        do {
            if let password {
                key = try NIOSSLPrivateKey(bytes: Array(privateKey), format: .pem) { supply in supply(Array(password.utf8)) }
            } else {
                key = try NIOSSLPrivateKey(bytes: Array(privateKey), format: .pem)
            }
        } catch {
            throw TrellisError.invalidRequest(.init(.url, "the client private key is not a PEM key\(password == nil ? "" : " this password opens")"))
        }
        return ClientIdentity(chain: chain, key: key)
    }

    /// An identity from a PKCS#12 archive (`.p12`, `.pfx`) and its password.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when it is not one, or the password is wrong.
    public static func pkcs12(_ archive: Data, password: String) throws -> ClientIdentity {
        let bundle: NIOSSLPKCS12Bundle
        do {
            bundle = try NIOSSLPKCS12Bundle(buffer: Array(archive), passphrase: Array(password.utf8))
        } catch {
            throw TrellisError.invalidRequest(.init(.url, "the client identity is not a PKCS#12 archive this password opens"))
        }
        return ClientIdentity(chain: bundle.certificateChain, key: bundle.privateKey, archive: (archive, password))
    }
}
