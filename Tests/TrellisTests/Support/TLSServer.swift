import Crypto
import Foundation
import Hummingbird
import NIOSSL
import X509

/// A certificate authority and a leaf for `localhost` (or the names a test gives) signed by
/// it, made fresh for each use.
struct TestCertificates: Sendable {
    let authority: NIOSSLCertificate
    let leaf: NIOSSLCertificate
    let leafKey: NIOSSLPrivateKey
    private let authorityKey: P256.Signing.PrivateKey
    private let authorityName: DistinguishedName
    private let leafSigningKey: P256.Signing.PrivateKey
    private let leafNames: [GeneralName]

    init(leafNames: [GeneralName] = [.dnsName("localhost")]) throws {
        let authorityKey = P256.Signing.PrivateKey()
        let authorityName = try DistinguishedName { CommonName("Trellis Test CA") }
        let now = Date()
        let authority = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(authorityKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 86400,
            issuer: authorityName,
            subject: authorityName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(authorityKey)
        )
        try self.init(
            authority: try Self.nio(authority),
            authorityKey: authorityKey,
            authorityName: authorityName,
            leafSigningKey: P256.Signing.PrivateKey(),
            leafNames: leafNames
        )
    }

    private init(
        authority: NIOSSLCertificate,
        authorityKey: P256.Signing.PrivateKey,
        authorityName: DistinguishedName,
        leafSigningKey: P256.Signing.PrivateKey,
        leafNames: [GeneralName]
    ) throws {
        let now = Date()
        let leaf = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(leafSigningKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 86400,
            issuer: authorityName,
            subject: try DistinguishedName { CommonName("localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                SubjectAlternativeNames(leafNames)
                try ExtendedKeyUsage([.serverAuth])
            },
            issuerPrivateKey: .init(authorityKey)
        )
        self.authority = authority
        self.authorityKey = authorityKey
        self.authorityName = authorityName
        self.leafSigningKey = leafSigningKey
        self.leafNames = leafNames
        self.leaf = try Self.nio(leaf)
        self.leafKey = try NIOSSLPrivateKey(bytes: Array(leafSigningKey.pemRepresentation.utf8), format: .pem)
    }

    /// A new leaf certificate (new serial number) from the same authority for the same key,
    /// as a renewal makes it.
    func reissued() throws -> TestCertificates {
        try TestCertificates(
            authority: authority,
            authorityKey: authorityKey,
            authorityName: authorityName,
            leafSigningKey: leafSigningKey,
            leafNames: leafNames
        )
    }

    /// The authority, the leaf and the leaf's key as PEM, for a server outside the process.
    func pem() throws -> (authority: String, leaf: String, leafKey: String) {
        (
            try Certificate(derEncoded: authority.toDERBytes()).serializeAsPEM().pemString,
            try Certificate(derEncoded: leaf.toDERBytes()).serializeAsPEM().pemString,
            leafSigningKey.pemRepresentation
        )
    }

    /// A client certificate for `name` signed by the authority, for mutual TLS: its PEM and
    /// its private key's PEM.
    func clientIdentity(named name: String) throws -> (certificate: String, key: String) {
        let key = P256.Signing.PrivateKey()
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 86400,
            issuer: authorityName,
            subject: try DistinguishedName { CommonName(name) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                try ExtendedKeyUsage([.clientAuth])
            },
            issuerPrivateKey: .init(authorityKey)
        )
        return (try certificate.serializeAsPEM().pemString, key.pemRepresentation)
    }

    private static func nio(_ certificate: Certificate) throws -> NIOSSLCertificate {
        try NIOSSLCertificate(bytes: Array(certificate.serializeAsPEM().pemString.utf8), format: .pem)
    }
}

enum TLSTestServer {
    /// Runs `body` with the `https://localhost:<port>` URL of a Hummingbird TLS server built by
    /// `configure`, presenting `certificates.leaf`.
    static func with<Result: Sendable>(
        _ certificates: TestCertificates,
        _ configure: (Router<BasicRequestContext>) -> Void,
        _ body: (URL) async throws -> Result
    ) async throws -> Result {
        try await TestServer.with(tls: presenting(certificates), configure, body)
    }

    /// Runs `body` with the URL of such a server that also asks every client for a
    /// certificate signed by `certificates.authority`, and refuses a connection without one.
    static func requiringClientCertificates<Result: Sendable>(
        _ certificates: TestCertificates,
        _ configure: (Router<BasicRequestContext>) -> Void,
        _ body: (URL) async throws -> Result
    ) async throws -> Result {
        var tls = presenting(certificates)
        tls.certificateVerification = .noHostnameVerification
        tls.trustRoots = .certificates([certificates.authority])
        return try await TestServer.with(tls: tls, configure, body)
    }

    /// A server configuration presenting `certificates.leaf`.
    private static func presenting(_ certificates: TestCertificates) -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificates.leaf)],
            privateKey: .privateKey(certificates.leafKey)
        )
    }
}
