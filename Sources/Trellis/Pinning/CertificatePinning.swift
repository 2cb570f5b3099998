import Crypto
public import Foundation
import NIOSSL

/// Which servers a client trusts, host by host, beyond or instead of the system's trust store.
///
/// Each ``PinnedHost`` names a host pattern and what its server must present: one of the
/// pinned certificates, a key whose hash is pinned, or both. Hosts that match no pattern, and
/// hosts listed in `excluding`, are checked by normal system trust.
///
/// ```swift
/// let pinning = try CertificatePinning([
///     PinnedHost("api.example.com", publicKeys: [PublicKeyPin("sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E=")]),
///     PinnedHost("*.cdn.example.com", certificates: [PinnedCertificate(contentsOf: rootCAFile)]),
/// ], excluding: ["status.example.com"])
/// let client = Client(baseURL: apiURL) { $0.security.pinning = pinning }
/// ```
///
/// The check runs on the connection that carries the request, as its TLS handshake completes
/// and before a byte of the request is written, on both transports and for WebSockets. A
/// mismatch fails the request at once with ``TrellisError/pinningFailed(_:)``.
public struct CertificatePinning: Sendable, Hashable {
    /// The pinned hosts; the first whose pattern matches a host applies to it.
    public let hosts: [PinnedHost]
    /// Host patterns left to normal system trust even when a pinned pattern matches them.
    public let excludedHosts: [String]

    /// Pins `hosts`, except those matching a pattern in `excluding`.
    ///
    /// - Throws: ``InvalidPin`` when an excluded pattern is malformed.
    public init(_ hosts: [PinnedHost], excluding excludedHosts: [String] = []) throws {
        for pattern in excludedHosts {
            try HostPattern.validate(pattern)
        }
        self.hosts = hosts
        self.excludedHosts = excludedHosts.map(HostPattern.canonical)
    }

    /// Pins one host pattern, in one call: the certificates (each PEM or DER, as bundled with an
    /// app) and the public-key pins (`sha256/…` or bare base64) its server must present.
    ///
    /// ```swift
    /// let pinning = try CertificatePinning("api.example.com", certificates: [bundledCertificateData])
    /// ```
    ///
    /// - Throws: ``InvalidPin`` naming what is malformed.
    public init(_ pattern: String, certificates: [Data] = [], publicKeys: [String] = [], excluding excludedHosts: [String] = []) throws {
        let host = try PinnedHost(
            pattern,
            certificates: try certificates.map { try PinnedCertificate($0) },
            publicKeys: try publicKeys.map { try PublicKeyPin($0) }
        )
        try self.init([host], excluding: excludedHosts)
    }

    /// The pins that apply to `host`, or `nil` when it is left to system trust.
    public func pins(for host: String) -> PinnedHost? {
        index(for: host).map { hosts[$0] }
    }

    /// The position in ``hosts`` of the pins for `host`.
    func index(for host: String) -> Int? {
        let host = CanonicalHost.form(host)
        if excludedHosts.contains(where: { HostPattern.matches($0, host: host) }) { return nil }
        return hosts.firstIndex { HostPattern.matches($0.pattern, host: host) }
    }
}

/// What the server of the hosts matching ``pattern`` must present.
///
/// Certificate pins replace system trust for these hosts:
/// - a pinned **CA certificate** (self-signed root) becomes the only trust anchor: the
///   server's chain must lead to it and name the host;
/// - a pinned **server certificate** must be exactly the one the server presents (the TLS
///   handshake proves the server holds its private key) and be within its validity dates.
///
/// Public-key pins keep system trust (or the pinned anchors) and add a check: the SHA-256 of
/// the server certificate's SubjectPublicKeyInfo must be one of the pins, so a pin survives
/// the renewal of a certificate that keeps its key. With both kinds, both must hold.
///
/// Key pins are matched against the server's own certificate on both platforms.
/// AsyncHTTPClient exposes only that certificate after the handshake, and Trellis checks the
/// same thing on Apple platforms so a pin set tested on one platform behaves the same on the
/// other. To pin a certificate authority, pin its certificate.
public struct PinnedHost: Sendable, Hashable {
    /// `api.example.com`, `*.example.com` (exactly one more label) or `**.example.com` (one or
    /// more), matched without regard to case.
    public let pattern: String
    /// Certificates, one of which the server must present or chain to.
    public let certificates: [PinnedCertificate]
    /// Hashes, one of which the server certificate's key must have.
    public let publicKeys: [PublicKeyPin]

    /// Pins the hosts matching `pattern`.
    ///
    /// - Throws: ``InvalidPin`` when the pattern is malformed, when there is nothing to pin, or
    ///   when CA certificates and server certificates are mixed (they need different checks
    ///   in the handshake: pin the CA, or the server's certificates, or the key).
    public init(_ pattern: String, certificates: [PinnedCertificate] = [], publicKeys: [PublicKeyPin] = []) throws {
        try HostPattern.validate(pattern)
        guard !certificates.isEmpty || !publicKeys.isEmpty else {
            throw InvalidPin("no certificate and no public key pinned for \(pattern)")
        }
        let authorities = certificates.filter(\.isSelfIssued)
        if !authorities.isEmpty, authorities.count != certificates.count {
            throw InvalidPin(
                "\(pattern) pins both CA certificates and server certificates; pin one kind (or the server's public key)"
            )
        }
        self.pattern = HostPattern.canonical(pattern)
        self.certificates = certificates
        self.publicKeys = publicKeys
    }

    /// Self-signed certificates: the chain must lead to one of them.
    var anchors: [NIOSSLCertificate] {
        certificates.filter(\.isSelfIssued).map(\.certificate)
    }

    /// Certificates the server must present exactly.
    var serverCertificates: [NIOSSLCertificate] {
        certificates.filter { !$0.isSelfIssued }.map(\.certificate)
    }

    /// `base` with these pins' trust: the pinned CA certificates as the only trust roots, or
    /// no chain verification when the server must present a pinned certificate exactly
    /// (``mismatch(of:now:)``, run after the handshake, compares it).
    func enforcing(on base: TLSConfiguration) -> TLSConfiguration {
        var tls = base
        let anchors = anchors
        if !anchors.isEmpty {
            tls.trustRoots = .certificates(anchors)
            tls.additionalTrustRoots = []
            tls.certificateVerification = .fullVerification
        } else if !serverCertificates.isEmpty {
            tls.certificateVerification = .none
        }
        return tls
    }

    /// Throws ``PinMismatch`` unless `leaf`, the certificate the server presented in a
    /// completed handshake, satisfies the pins checked after the handshake.
    func verify(_ leaf: NIOSSLCertificate?) throws {
        guard let leaf else { throw PinMismatch(reason: "the server presented no certificate") }
        if let reason = mismatch(of: leaf) { throw PinMismatch(reason: reason) }
    }

    /// Why `leaf`, the certificate the server presented, does not satisfy the pins that are
    /// checked after the handshake, or `nil` when it does.
    ///
    /// Anchors are checked by the TLS stack during the handshake and are not repeated here.
    func mismatch(of leaf: NIOSSLCertificate, now: Date = Date()) -> String? {
        let serverCertificates = serverCertificates
        if !serverCertificates.isEmpty {
            guard serverCertificates.contains(leaf) else {
                return "the server presented a certificate that is not pinned"
            }
            let seconds = now.timeIntervalSince1970
            if seconds < Double(leaf.notValidBefore) || seconds > Double(leaf.notValidAfter) {
                return "the pinned certificate the server presented is outside its validity dates"
            }
        }
        if !publicKeys.isEmpty {
            guard let key = try? PublicKeyPin(of: leaf) else {
                return "the server certificate's public key could not be read"
            }
            guard publicKeys.contains(key) else {
                return "the server certificate's public key (\(key)) is not pinned"
            }
        }
        return nil
    }
}

/// A certificate to pin, read from DER or PEM.
public struct PinnedCertificate: Sendable, Hashable {
    let certificate: NIOSSLCertificate
    /// Issuer and subject are the same name: a root CA, or a self-signed server certificate.
    let isSelfIssued: Bool

    /// The certificate in DER (binary) form.
    public init(der: [UInt8]) throws {
        do {
            self.init(try NIOSSLCertificate(bytes: der, format: .der))
        } catch {
            throw InvalidPin("not a DER certificate: \(error)")
        }
    }

    /// The first certificate of a PEM text (`-----BEGIN CERTIFICATE-----`).
    public init(pem: String) throws {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8))
        } catch {
            throw InvalidPin("not a PEM certificate: \(error)")
        }
        guard let first = certificates.first else { throw InvalidPin("the PEM text holds no certificate") }
        self.init(first)
    }

    /// The certificate in a file, PEM or DER (`.pem`, `.crt`, `.cer`, `.der`).
    public init(contentsOf file: URL) throws {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw InvalidPin("\(file.path) could not be read: \(error.localizedDescription)")
        }
        try self.init(data)
    }

    /// The certificate in `data`, PEM or DER, whichever it is.
    public init(_ data: Data) throws {
        let bytes = Array(data)
        if String(decoding: bytes.prefix(200), as: UTF8.self).contains("-----BEGIN") {
            try self.init(pem: String(decoding: bytes, as: UTF8.self))
        } else {
            try self.init(der: bytes)
        }
    }

    init(_ certificate: NIOSSLCertificate) {
        self.certificate = certificate
        self.isSelfIssued = certificate.subjectName == certificate.issuerName
    }

    /// The pin of this certificate's public key.
    public var publicKeyPin: PublicKeyPin {
        get throws { try PublicKeyPin(of: certificate) }
    }

    /// The certificate in DER form.
    public var derBytes: [UInt8] {
        (try? certificate.toDERBytes()) ?? []
    }
}

/// The SHA-256 of a SubjectPublicKeyInfo, as OkHttp and HPKP write it: base64, optionally
/// prefixed `sha256/`.
///
/// Compute one from a certificate file with:
///
/// ```sh
/// openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform der \
///   | openssl dgst -sha256 -binary | openssl base64
/// ```
public struct PublicKeyPin: Sendable, Hashable, CustomStringConvertible {
    /// The 32 bytes of the hash.
    public let sha256: [UInt8]

    /// A pin written as `sha256/<base64>` or as the bare base64 of the 32-byte hash.
    public init(_ text: String) throws {
        var encoded = Substring(text.trimmingCharacters(in: .whitespaces))
        if encoded.hasPrefix("sha256/") {
            encoded = encoded.dropFirst("sha256/".count)
        } else if let algorithm = ["sha1/", "sha384/", "sha512/"].first(where: { encoded.hasPrefix($0) }) {
            throw InvalidPin("\(text) is a \(algorithm.dropLast()) pin; only sha256 pins are supported")
        }
        guard let hash = Data(base64Encoded: String(encoded)) else {
            throw InvalidPin("\(text) is not base64")
        }
        guard hash.count == SHA256.byteCount else {
            throw InvalidPin("\(text) decodes to \(hash.count) bytes; a SHA-256 pin has 32")
        }
        self.sha256 = Array(hash)
    }

    /// The pin of `certificate`'s public key.
    init(of certificate: NIOSSLCertificate) throws {
        let spki = try certificate.extractPublicKey().toSPKIBytes()
        self.sha256 = Array(SHA256.hash(data: spki))
    }

    /// `sha256/<base64>`.
    public var description: String { "sha256/" + Data(sha256).base64EncodedString() }
}

/// A pinning configuration that cannot be used, and why.
public struct InvalidPin: Error, Sendable, CustomStringConvertible {
    /// What is wrong, in words.
    public let reason: String

    init(_ reason: String) {
        self.reason = reason
    }

    public var description: String { "invalid pin: \(reason)" }
}

/// A server that did not present what its host is pinned to; thrown inside the transport and
/// reported as ``TrellisError/pinningFailed(_:)``.
struct PinMismatch: Error {
    let reason: String
}
