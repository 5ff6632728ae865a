import Crypto
import Foundation
import ServiceKit
import SubscriptionDomain
import SwiftASN1
import X509

/// The App Store environments a signed payload can name.
public enum AppStoreEnvironment: String, Codable, Sendable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"
    case localTesting = "LocalTesting"
}

public struct AppStoreVerificationError: Error, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable { case malformed, invalidChain, invalidSignature, wrongBundleID, wrongEnvironment }
    public var kind: Kind
    public var detail: String
    public var description: String { "\(kind.rawValue): \(detail)" }
    init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }
}

/// Verifies StoreKit 2 / App Store Server signed data (JWS) as Apple's app-store-server-library
/// does: ES256 by the leaf key of a 3-certificate `x5c`; the chain validated to a configured
/// Apple root at the payload's `signedDate`; the leaf carrying OID 1.2.840.113635.100.6.11.1 and
/// the intermediate 1.2.840.113635.100.6.2.1; then bundle id and environment. Payloads from
/// Xcode or LocalTesting (signed by a local key, no Apple chain) pass only when configuration
/// allows those environments, which production never does.
public struct AppStoreSignedDataVerifier: Sendable {
    public static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    public static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    let roots: [Certificate]
    let bundleID: String
    let environment: AppStoreEnvironment
    let allowLocalEnvironments: Bool

    public init(rootCertificatesDER: [[UInt8]], bundleID: String, environment: AppStoreEnvironment, allowLocalEnvironments: Bool) throws {
        roots = try rootCertificatesDER.map { try Certificate(derEncoded: $0) }
        self.bundleID = bundleID
        self.environment = environment
        self.allowLocalEnvironments = allowLocalEnvironments && environment != .production
    }

    /// What is signed; each kind carries its bundle id and environment in its own place, as
    /// Apple's library reads them.
    public enum Kind: Sendable { case transaction, renewalInfo, notification, appTransaction }

    /// The fields the checks read (transaction, renewal info, notification, app transaction).
    struct Envelope: Decodable {
        var bundleId: String?
        var environment: String?
        var receiptType: String?
        var signedDate: Double?
        var data: Nested?
        var summary: Nested?
        struct Nested: Decodable {
            var bundleId: String?
            var environment: String?
        }

        func environment(for kind: Kind) -> String? {
            switch kind {
            case .transaction, .renewalInfo: environment
            case .notification: data?.environment ?? summary?.environment
            case .appTransaction: receiptType ?? environment
            }
        }

        func bundle(for kind: Kind) -> String? {
            switch kind {
            case .transaction, .appTransaction: bundleId
            case .renewalInfo: nil
            case .notification: data?.bundleId ?? summary?.bundleId
            }
        }
    }

    /// Verifies `jws` and returns its payload bytes.
    public func verify(_ jws: String, kind: Kind) async throws -> Data {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2])
        else {
            throw AppStoreVerificationError(.malformed, "not a compact JWS")
        }
        struct Header: Decodable {
            var alg: String
            var x5c: [String]?
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: headerData) else {
            throw AppStoreVerificationError(.malformed, "unreadable header")
        }
        guard header.alg == "ES256" else { throw AppStoreVerificationError(.malformed, "algorithm \(header.alg)") }
        guard let x5c = header.x5c, !x5c.isEmpty else { throw AppStoreVerificationError(.malformed, "no x5c header claim") }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: payload) else {
            throw AppStoreVerificationError(.malformed, "unreadable payload")
        }
        let claimedEnvironment = envelope.environment(for: kind).flatMap(AppStoreEnvironment.init(rawValue:))
        let certificates = try x5c.map { b64 -> Certificate in
            guard let der = Data(base64Encoded: b64) else { throw AppStoreVerificationError(.malformed, "x5c is not base64") }
            return try Certificate(derEncoded: Array(der))
        }
        if claimedEnvironment == .xcode || claimedEnvironment == .localTesting {
            guard allowLocalEnvironments else {
                throw AppStoreVerificationError(.wrongEnvironment, "\(claimedEnvironment!.rawValue) data is not accepted here")
            }
        } else {
            guard certificates.count == 3 else { throw AppStoreVerificationError(.invalidChain, "x5c must hold 3 certificates") }
            let validationTime = envelope.signedDate.map { Date(timeIntervalSince1970: $0 / 1000) } ?? Date()
            try await Self.verifyChain(leaf: certificates[0], intermediate: certificates[1], roots: roots, at: validationTime)
        }
        // The signature by the leaf key (for local environments, the local signing key).
        guard let key = P256.Signing.PublicKey(certificates[0].publicKey),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else {
            throw AppStoreVerificationError(.invalidSignature, "signature does not verify")
        }
        if kind != .renewalInfo {
            let payloadBundle = envelope.bundle(for: kind)
            guard payloadBundle == bundleID else {
                throw AppStoreVerificationError(.wrongBundleID, "bundle id \(payloadBundle ?? "-") is not \(bundleID)")
            }
        }
        if claimedEnvironment != .xcode && claimedEnvironment != .localTesting {
            guard claimedEnvironment == environment else {
                throw AppStoreVerificationError(
                    .wrongEnvironment,
                    "environment \(claimedEnvironment?.rawValue ?? "-") is not \(environment.rawValue)"
                )
            }
        }
        return payload
    }

    /// Apple's rules for its signing chain: leaf ← intermediate ← one of the trusted roots,
    /// valid at `time`, with Apple's OIDs on the leaf and the intermediate.
    public static func verifyChain(leaf: Certificate, intermediate: Certificate, roots: [Certificate], at time: Date) async throws {
        guard leaf.extensions.contains(where: { $0.oid == leafOID }) else {
            throw AppStoreVerificationError(.invalidChain, "leaf lacks OID 1.2.840.113635.100.6.11.1")
        }
        guard intermediate.extensions.contains(where: { $0.oid == intermediateOID }) else {
            throw AppStoreVerificationError(.invalidChain, "intermediate lacks OID 1.2.840.113635.100.6.2.1")
        }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) { RFC5280Policy(validationTime: time) }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate]))
        guard case .validCertificate(let chain) = result, chain.count == 3 else {
            throw AppStoreVerificationError(.invalidChain, "chain does not end at a trusted root at \(time)")
        }
    }
}
