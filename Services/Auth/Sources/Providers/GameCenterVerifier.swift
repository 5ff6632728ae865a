import AuthDomain
import Crypto
import Foundation
import Logging
import ServiceKit
import SwiftASN1
import Synchronization
import X509
import _CryptoExtras

/// What `generateIdentityVerificationSignature` gives the app, as it posts it.
public struct GameCenterProof: Sendable {
    public var playerID: String
    public var publicKeyURL: String
    public var signature: Data
    public var salt: Data
    public var timestamp: UInt64
}

public struct GameCenterError: Error, CustomStringConvertible { public var description: String }

public protocol GameCenterVerifying: Sendable {
    func verify(_ proof: GameCenterProof, bundleIDs: [String], now: Date) async throws
}

/// Verifies a Game Center identity signature: the certificate at `public_key_url` (https, a
/// host under apple.com) must chain to a trusted root and be valid now; its RSA key must have
/// signed player id ‖ bundle id ‖ timestamp (big-endian UInt64) ‖ salt with SHA-256; and the
/// timestamp must be less than 5 minutes old. Certificates are cached by URL.
public final class GameCenterVerifier: GameCenterVerifying {
    let http: CurlHTTPClient
    let roots: CertificateStore
    let allowedHostSuffix: String
    /// TLS trust and address pinning for the key host (operators with a private mirror).
    let caBundlePath: String?
    let resolve: [String]
    private let cache = Mutex([String: Certificate]())
    public static let maxAge: TimeInterval = 5 * 60

    public init(
        http: CurlHTTPClient,
        roots: CertificateStore,
        allowedHostSuffix: String = "apple.com",
        caBundlePath: String? = nil,
        resolve: [String] = []
    ) {
        self.http = http
        self.roots = roots
        self.allowedHostSuffix = allowedHostSuffix
        self.caBundlePath = caBundlePath
        self.resolve = resolve
    }

    /// Roots from a PEM file (`GAMECENTER_TRUST_ROOTS`), else the system's.
    public static func roots(pemPath: String?) throws -> CertificateStore {
        guard let pemPath else { return CertificateStore.systemTrustRoots }
        let pem = try String(contentsOfFile: pemPath, encoding: .utf8)
        return CertificateStore(try PEMDocument.parseMultiple(pemString: pem).map { try Certificate(pemDocument: $0) })
    }

    func checkURL(_ raw: String) throws -> URL {
        guard let url = URL(string: raw), url.scheme == "https", let host = url.host?.lowercased(),
            host == allowedHostSuffix || host.hasSuffix("." + allowedHostSuffix)
        else {
            throw GameCenterError(description: "public key URL must be https on a host under \(allowedHostSuffix)")
        }
        return url
    }

    func certificate(at url: URL) async throws -> Certificate {
        if let cached = cache.withLock({ $0[url.absoluteString] }) { return cached }
        let response = try await http.send(
            HTTPRequest(
                url: url.absoluteString,
                timeout: .seconds(5),
                caBundlePath: caBundlePath,
                resolve: resolve
            ),
            retries: 2
        )
        guard response.isSuccess else { throw GameCenterError(description: "key download answered \(response.status)") }
        let cert: Certificate
        if let der = try? Certificate(derEncoded: Array(response.body)) {
            cert = der
        } else {
            cert = try Certificate(pemEncoded: String(decoding: response.body, as: UTF8.self))
        }
        cache.withLock { c in
            if c.count > 64 { c.removeAll() }
            c[url.absoluteString] = cert
        }
        return cert
    }

    public func verify(_ proof: GameCenterProof, bundleIDs: [String], now: Date) async throws {
        // Apple's timestamp is in milliseconds; accept seconds too.
        let seconds = proof.timestamp > 100_000_000_000 ? Double(proof.timestamp) / 1000 : Double(proof.timestamp)
        guard abs(now.timeIntervalSince1970 - seconds) <= Self.maxAge else { throw GameCenterError(description: "timestamp too old") }
        let url = try checkURL(proof.publicKeyURL)
        let cert = try await certificate(at: url)
        var verifier = Verifier(rootCertificates: roots) { RFC5280Policy(validationTime: now) }
        guard case .validCertificate = await verifier.validate(leaf: cert, intermediates: CertificateStore()) else {
            throw GameCenterError(description: "certificate does not chain to a trusted root or is not valid now")
        }
        guard let key = _RSA.Signing.PublicKey(cert.publicKey) else { throw GameCenterError(description: "not an RSA key") }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: proof.signature)
        for bundleID in bundleIDs {
            var payload = Data(proof.playerID.utf8)
            payload.append(Data(bundleID.utf8))
            withUnsafeBytes(of: proof.timestamp.bigEndian) { payload.append(contentsOf: $0) }
            payload.append(proof.salt)
            if key.isValidSignature(signature, for: SHA256.hash(data: payload), padding: .insecurePKCS1v1_5) { return }
        }
        throw GameCenterError(description: "signature does not verify")
    }
}
