import AuthService
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// Applications (tenants), the JWKS document and the internal app-verification endpoint.
final class ApplicationsTests: XCTestCase {
    func testCreateVerifyRotateAndProviderSettings() async throws {
        let runtime = TestEnvironment.runtime(.auth, migrations: try AuthService.migrations())
        try await withMigratedRuntime(runtime) { runtime in
            let repo = PostgresApplicationRepository(db: runtime.db, logger: runtime.logger)
            let issued = try await repo.create(name: "Quiz Geography")
            XCTAssertTrue(issued.apiKey.hasPrefix("ak_"))
            let ok = try await repo.verify(appID: issued.appID, apiKey: issued.apiKey)
            XCTAssertTrue(ok)
            let wrong = try await repo.verify(appID: issued.appID, apiKey: issued.apiKey + "x")
            XCTAssertFalse(wrong)
            let unknown = try await repo.verify(appID: UUID(), apiKey: issued.apiKey)
            XCTAssertFalse(unknown)

            // Only a hash is stored.
            let stored = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db -> String in
                let rows = try await db.query("SELECT api_key_hash FROM auth.applications WHERE id = \(issued.appID)")
                for try await h in rows.decode(String.self) { return h }
                return ""
            }
            XCTAssertNotEqual(stored, issued.apiKey)
            XCTAssertEqual(stored, APIKeys.hash(issued.apiKey))

            let rotated = try await repo.rotateKey(appID: issued.appID)!
            let oldStillValid = try await repo.verify(appID: issued.appID, apiKey: issued.apiKey)
            let newValid = try await repo.verify(appID: issued.appID, apiKey: rotated.apiKey)
            XCTAssertFalse(oldStillValid)
            XCTAssertTrue(newValid)

            let updated = try await repo.setProviderSettings(appID: issued.appID, googleClientIDs: ["a.apps.googleusercontent.com"],
                                                             appleBundleIDs: ["com.example.quiz"])
            XCTAssertEqual(updated?.googleClientIDs, ["a.apps.googleusercontent.com"])
            XCTAssertEqual(updated?.appleBundleIDs, ["com.example.quiz"])
            let missing = try await repo.setProviderSettings(appID: UUID(), googleClientIDs: ["x"], appleBundleIDs: nil)
            XCTAssertNil(missing)
        }
    }

    func testJWKSAndInternalVerification() async throws {
        let runtime = TestEnvironment.runtime(.auth, migrations: try AuthService.migrations())
        let key = Curve25519.Signing.PrivateKey()
        let app = try AuthService.buildApplication(runtime: runtime, signingKey: key)
        try await app.test(.router) { client in
            let problems = try await documentedOperationProblems(client, prefix: "auth")
            XCTAssertEqual(problems, [])
            try await client.execute(uri: "/auth/v1/.well-known/jwks.json", method: .get) { r in
                XCTAssertEqual(r.status, .ok)
                let doc = try r.json(JWKSDocument.self)
                XCTAssertEqual(doc.keys.count, 1)
                XCTAssertEqual(doc.keys[0].kty, "OKP")
                XCTAssertEqual(doc.keys[0].crv, "Ed25519")
                XCTAssertEqual(doc.keys[0].x, Base64URL.encode(key.publicKey.rawRepresentation))
                XCTAssertEqual(doc.keys[0].kid, AccessTokenSigner(privateKey: key).kid)
            }
            let issued = try await PostgresApplicationRepository(db: runtime.db, logger: runtime.logger).create(name: "Internal check")
            let credential: HTTPFields = [.authorization: "Bearer local-internal-ads", .xServiceName: "ads", .contentType: "application/json"]
            let body = ByteBuffer(string: #"{"app_id":"\#(issued.appID)","api_key":"\#(issued.apiKey)"}"#)
            try await client.execute(uri: "/internal/apps/verify", method: .post, headers: credential, body: body) { r in
                XCTAssertEqual(r.status, .ok)
                let v = try r.json(AppVerificationResponse.self)
                XCTAssertTrue(v.valid)
                XCTAssertEqual(v.name, "Internal check")
            }
            let bad = ByteBuffer(string: #"{"app_id":"\#(issued.appID)","api_key":"nope"}"#)
            try await client.execute(uri: "/internal/apps/verify", method: .post, headers: credential, body: bad) { r in
                XCTAssertEqual(r.status, .ok)
                XCTAssertFalse(try r.json(AppVerificationResponse.self).valid)
            }
            try await client.execute(uri: "/internal/apps/verify", method: .post, headers: credential,
                                     body: ByteBuffer(string: #"{"app_id":"not-a-uuid","api_key":"x"}"#)) { r in
                XCTAssertEqual(r.status, .badRequest)
                XCTAssertEqual(try r.envelope().extra["field"], "app_id")
            }
            try await client.execute(uri: "/internal/apps/verify", method: .post, headers: [.contentType: "application/json"], body: body) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
        }
    }
}
