import Foundation
import SubscriptionDomain
import X509
import XCTest

@testable import SubscriptionService

/// Apple's own vectors (Tests/Fixtures/apple-app-store, MIT): they pass and fail as described.
final class AppStoreSignedDataTests: XCTestCase {
    static let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/apple-app-store").standardized

    static func file(_ path: String) throws -> String {
        try String(contentsOf: vectors.appendingPathComponent(path), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func testRoot() throws -> [UInt8] { Array(try Data(contentsOf: vectors.appendingPathComponent("certs/testCA.der"))) }

    struct Chains: Decodable {
        var effective_date_unix: Double
        var certificates: [String: String]
    }
    static func chains() throws -> Chains {
        try JSONDecoder().decode(Chains.self, from: Data(contentsOf: vectors.appendingPathComponent("chains.json")))
    }
    static func cert(_ name: String, _ c: Chains) throws -> Certificate {
        try Certificate(derEncoded: Array(Data(base64Encoded: c.certificates[name]!)!))
    }

    static func verifier(
        roots: [[UInt8]]? = nil,
        bundle: String = "com.example",
        env: AppStoreEnvironment = .sandbox,
        allowLocal: Bool = false
    ) throws -> AppStoreSignedDataVerifier {
        try AppStoreSignedDataVerifier(
            rootCertificatesDER: roots ?? [try Self.testRoot()],
            bundleID: bundle,
            environment: env,
            allowLocalEnvironments: allowLocal
        )
    }

    static func expect(_ kind: AppStoreVerificationError.Kind, _ body: () async throws -> Void) async {
        do {
            try await body()
            XCTFail("expected \(kind)")
        } catch let e as AppStoreVerificationError {
            XCTAssertEqual(e.kind, kind, e.description)
        } catch { XCTFail("unexpected \(error)") }
    }

    func testMockSignedDataVerifiesAgainstTheTestRoot() async throws {
        let v = try Self.verifier()
        let tx = try await v.verify(try Self.file("mock_signed_data/transactionInfo"), kind: .transaction)
        XCTAssertTrue(String(decoding: tx, as: UTF8.self).contains("com.example"))
        _ = try await v.verify(try Self.file("mock_signed_data/renewalInfo"), kind: .renewalInfo)
        let n = try await v.verify(try Self.file("mock_signed_data/testNotification"), kind: .notification)
        XCTAssertTrue(String(decoding: n, as: UTF8.self).contains("9ad56bd2-0bc6-42e0-af24-fd996d87a1e6"))
    }

    func testRejections() async throws {
        let v = try Self.verifier()
        await Self.expect(.wrongBundleID) { _ = try await v.verify(try Self.file("mock_signed_data/wrongBundleId"), kind: .notification) }
        await Self.expect(.malformed) { _ = try await v.verify(try Self.file("mock_signed_data/missingX5CHeaderClaim"), kind: .notification) }
        await Self.expect(.malformed) { _ = try await v.verify(try Self.file("mock_signed_data/legacyTransaction"), kind: .transaction) }
        // Another bundle or environment configured.
        await Self.expect(.wrongBundleID) {
            _ = try await Self.verifier(bundle: "com.other").verify(try Self.file("mock_signed_data/transactionInfo"), kind: .transaction)
        }
        await Self.expect(.wrongEnvironment) {
            _ = try await Self.verifier(env: .production).verify(try Self.file("mock_signed_data/transactionInfo"), kind: .transaction)
        }
        // A chain that ends at another root (production trusts only Apple Root CA - G3).
        let c = try Self.chains()
        let appleRoot = Array(Data(base64Encoded: c.certificates["real_apple_root"]!)!)
        await Self.expect(.invalidChain) {
            _ = try await Self.verifier(roots: [appleRoot]).verify(try Self.file("mock_signed_data/transactionInfo"), kind: .transaction)
        }
        // A tampered payload: same header and signature, different claims.
        let parts = try Self.file("mock_signed_data/transactionInfo").split(separator: ".")
        let forged =
            parts[0] + "."
            + Base64URLTest.encode(#"{"environment":"Sandbox","bundleId":"com.example","signedDate":1672956154000,"productId":"free.lifetime"}"#)
            + "." + parts[2]
        await Self.expect(.invalidSignature) { _ = try await v.verify(String(forged), kind: .transaction) }
    }

    func testXcodeDataOnlyWhereConfigurationAllowsIt() async throws {
        let bundle = "com.example.naturelab.backyardbirds.example"
        let tx = try Self.file("xcode/xcode-signed-transaction")
        await Self.expect(.wrongEnvironment) { _ = try await Self.verifier(bundle: bundle).verify(tx, kind: .transaction) }
        // Never in production, whatever the flag says.
        await Self.expect(.wrongEnvironment) {
            _ = try await Self.verifier(bundle: bundle, env: .production, allowLocal: true).verify(tx, kind: .transaction)
        }
        let local = try Self.verifier(bundle: bundle, allowLocal: true)
        _ = try await local.verify(tx, kind: .transaction)
        _ = try await local.verify(try Self.file("xcode/xcode-signed-renewal-info"), kind: .renewalInfo)
        _ = try await local.verify(try Self.file("xcode/xcode-signed-app-transaction"), kind: .appTransaction)
        await Self.expect(.wrongBundleID) { _ = try await Self.verifier(bundle: "com.example", allowLocal: true).verify(tx, kind: .transaction) }
    }

    func testChainsFromAppleLibrary() async throws {
        let c = try Self.chains()
        let at = Date(timeIntervalSince1970: c.effective_date_unix)
        let testRoot = try Self.cert("root_ca", c)
        try await AppStoreSignedDataVerifier.verifyChain(
            leaf: try Self.cert("leaf_cert", c),
            intermediate: try Self.cert("intermediate_ca", c),
            roots: [testRoot],
            at: at
        )
        await Self.expect(.invalidChain) {
            try await AppStoreSignedDataVerifier.verifyChain(
                leaf: try Self.cert("leaf_cert_invalid_oid", c),
                intermediate: try Self.cert("intermediate_ca", c),
                roots: [testRoot],
                at: at
            )
        }
        await Self.expect(.invalidChain) {
            try await AppStoreSignedDataVerifier.verifyChain(
                leaf: try Self.cert("leaf_cert_for_intermediate_ca_invalid_oid", c),
                intermediate: try Self.cert("intermediate_ca_invalid_oid", c),
                roots: [testRoot],
                at: at
            )
        }
        // The real Apple chain, valid at its effective date against the real root only.
        let appleRoot = try Self.cert("real_apple_root", c)
        try await AppStoreSignedDataVerifier.verifyChain(
            leaf: try Self.cert("real_apple_signing_certificate", c),
            intermediate: try Self.cert("real_apple_intermediate", c),
            roots: [appleRoot],
            at: at
        )
        await Self.expect(.invalidChain) {
            try await AppStoreSignedDataVerifier.verifyChain(
                leaf: try Self.cert("real_apple_signing_certificate", c),
                intermediate: try Self.cert("real_apple_intermediate", c),
                roots: [testRoot],
                at: at
            )
        }
        // Outside its validity period the same chain fails.
        await Self.expect(.invalidChain) {
            try await AppStoreSignedDataVerifier.verifyChain(
                leaf: try Self.cert("real_apple_signing_certificate", c),
                intermediate: try Self.cert("real_apple_intermediate", c),
                roots: [appleRoot],
                at: Date(timeIntervalSince1970: 2_000_000_000)
            )
        }
    }
}

enum Base64URLTest {
    static func encode(_ s: String) -> String {
        Data(s.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
