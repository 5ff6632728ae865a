import AuthDomain
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

            // A hard cut (a leaked key): the old key is refused at once.
            let rotated = try await repo.rotateKey(appID: issued.appID, keepPreviousFor: .zero)!
            XCTAssertNil(rotated.previousValidUntil)
            let oldStillValid = try await repo.verify(appID: issued.appID, apiKey: issued.apiKey)
            let newValid = try await repo.verify(appID: issued.appID, apiKey: rotated.apiKey)
            XCTAssertFalse(oldStillValid)
            XCTAssertTrue(newValid)

            let updated = try await repo.setProviderSettings(
                appID: issued.appID,
                googleClientIDs: ["a.apps.googleusercontent.com"],
                appleBundleIDs: ["com.example.quiz"]
            )
            XCTAssertEqual(updated?.googleClientIDs, ["a.apps.googleusercontent.com"])
            XCTAssertEqual(updated?.appleBundleIDs, ["com.example.quiz"])
            let missing = try await repo.setProviderSettings(appID: UUID(), googleClientIDs: ["x"], appleBundleIDs: nil)
            XCTAssertNil(missing)
        }
    }

    /// #16: a rotation keeps the previous API key valid until its expiry (installed copies keep
    /// working while users update), then refuses it; a second rotation drops the key before.
    func testRotationWithOverlapKeepsThePreviousKeyUntilItsExpiry() async throws {
        let runtime = TestEnvironment.runtime(.auth, migrations: try AuthService.migrations())
        try await withMigratedRuntime(runtime) { runtime in
            let repo = PostgresApplicationRepository(db: runtime.db, logger: runtime.logger)
            let first = try await repo.create(name: "Overlap")
            let second = try await repo.rotateKey(appID: first.appID, keepPreviousFor: .seconds(30 * 86_400))!
            let until = try XCTUnwrap(second.previousValidUntil)
            XCTAssertEqual(until.timeIntervalSinceNow, 30 * 86_400, accuracy: 60)
            for (key, expected) in [(first.apiKey, true), (second.apiKey, true), (first.apiKey + "x", false)] {
                let ok = try await repo.verify(appID: first.appID, apiKey: key)
                XCTAssertEqual(ok, expected, key)
            }
            // Another app's key is not this app's previous key.
            let other = try await repo.create(name: "Other")
            let crossed = try await repo.verify(appID: other.appID, apiKey: first.apiKey)
            XCTAssertFalse(crossed)

            // The expiry passes (on the database's clock): the previous key is refused, the current one is not.
            try await runtime.db.query(
                "UPDATE applications SET previous_api_key_expires_at = now() - interval '1 second' WHERE id = \(first.appID)",
                logger: runtime.logger
            )
            let expired = try await repo.verify(appID: first.appID, apiKey: first.apiKey)
            let current = try await repo.verify(appID: first.appID, apiKey: second.apiKey)
            XCTAssertFalse(expired)
            XCTAssertTrue(current)

            // Two rotations: only the key just before the current one is kept.
            let third = try await repo.rotateKey(appID: first.appID, keepPreviousFor: .seconds(3600))!
            for (key, expected) in [(first.apiKey, false), (second.apiKey, true), (third.apiKey, true)] {
                let ok = try await repo.verify(appID: first.appID, apiKey: key)
                XCTAssertEqual(ok, expected)
            }
            // Ended early by the operator.
            let ended = try await repo.endPreviousKey(appID: first.appID)
            XCTAssertTrue(ended)
            let afterEnd = try await repo.verify(appID: first.appID, apiKey: second.apiKey)
            XCTAssertFalse(afterEnd)
            let unknown = try await repo.endPreviousKey(appID: UUID())
            XCTAssertFalse(unknown)
            let missing = try await repo.rotateKey(appID: UUID(), keepPreviousFor: .seconds(60))
            XCTAssertNil(missing)
        }
    }

    /// #16: signing-key rotation without logging anyone out. Phase 1 publishes the next key
    /// before it signs; phase 2 signs with it and still publishes the old one: a token signed
    /// before the switch verifies against the published document, as other services check it.
    func testSigningKeyRotationPublishesBothKeys() async throws {
        let old = Curve25519.Signing.PrivateKey()
        let next = Curve25519.Signing.PrivateKey()
        let app = UUID()
        @Sendable func claims() -> AccessTokenClaims {
            let now = Int(Date().timeIntervalSince1970)
            return AccessTokenClaims(
                userID: UUID(),
                appID: app,
                email: nil,
                status: .free,
                isGuest: true,
                issuer: "auth",
                issuedAt: now,
                expiresAt: now + 600,
                jti: UUID().uuidString
            )
        }
        for (signing, published) in [(old, next), (next, old)] {
            let runtime = TestEnvironment.runtime(.auth, migrations: try AuthService.migrations())
            let auth = try AuthService.buildApplication(
                runtime: runtime,
                signingKey: signing,
                publishedKeys: [published.publicKey, signing.publicKey]
            )
            try await auth.test(.router) { client in
                let doc = try await client.execute(uri: "/auth/v1/.well-known/jwks.json", method: .get) { try $0.json(JWKSDocument.self) }
                // The signing key first, each key once.
                XCTAssertEqual(doc.keys.map(\.kid), [AccessTokenSigner(privateKey: signing).kid, AccessTokenSigner.kid(of: published.publicKey)])
                let verifier = AccessTokenVerifier(source: StaticJWKSSource(doc))
                for key in [old, next] {
                    let token = try AccessTokenSigner(privateKey: key).sign(claims())
                    let verified = try await verifier.verify(token, appID: app)
                    XCTAssertEqual(verified.appID, app)
                }
                // A key that is neither signing nor published is refused.
                let stranger = try AccessTokenSigner(privateKey: Curve25519.Signing.PrivateKey()).sign(claims())
                do {
                    _ = try await verifier.verify(stranger, appID: app)
                    XCTFail("a token of an unpublished key was accepted")
                } catch {}
            }
        }
    }

    func testJWKSAndInternalVerification() async throws {
        let runtime = TestEnvironment.runtime(.auth, migrations: try AuthService.migrations())
        let key = Curve25519.Signing.PrivateKey()
        let app = try AuthService.buildApplication(runtime: runtime, signingKey: key)
        try await app.test(.router) { client in
            // `GET /live/events` is taken off the connection before the router (#46): LiveStackTests
            // checks it, and its refusals, on the real server through the gateway.
            let problems = try await documentedOperationProblems(client, prefix: "auth", takenBeforeRouter: ["/auth/v1/live/events"])
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
            try await client.execute(
                uri: "/internal/apps/verify",
                method: .post,
                headers: credential,
                body: ByteBuffer(string: #"{"app_id":"not-a-uuid","api_key":"x"}"#)
            ) { r in
                XCTAssertEqual(r.status, .badRequest)
                XCTAssertEqual(try r.envelope().extra["field"], "app_id")
            }
            try await client.execute(uri: "/internal/apps/verify", method: .post, headers: [.contentType: "application/json"], body: body) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
        }
    }
}

/// `auth-service admin operator-keys` run as the binary: the key is printed once, listed by
/// prefix only, revoked with a reason; bad input is refused with a message and a failing status.
final class OperatorKeysCommandTests: XCTestCase {
    func run(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try runServiceCommand("auth-service", ["admin", "operator-keys"] + args)
    }

    func testIssueListRevokeThroughTheCommand() async throws {
        let runtime = TestEnvironment.runtime(.auth, migrations: try AuthService.migrations())
        let app = try await withMigratedRuntime(runtime) { runtime in
            try await PostgresApplicationRepository(db: runtime.db, logger: runtime.logger).create(name: "Second app").appID.lowercasedString
        }
        let created = try run(["create", "--app-id", app, "--name", "Grace (support)"])
        XCTAssertEqual(created.status, 0, created.err)
        let lines = Dictionary(
            created.out.split(separator: "\n").compactMap { line -> (String, String)? in
                let parts = line.split(separator: "=", maxSplits: 1)
                return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
            },
            uniquingKeysWith: { a, _ in a }
        )
        let key = try XCTUnwrap(lines["OPERATOR_KEY"])
        let keyID = try XCTUnwrap(lines["OPERATOR_KEY_ID"])
        XCTAssertTrue(key.hasPrefix("opk_"))

        let listed = try run(["list", "--app-id", app])
        XCTAssertEqual(listed.status, 0, listed.err)
        XCTAssertTrue(listed.out.contains(keyID) && listed.out.contains("live") && listed.out.contains("Grace (support)"), listed.out)
        XCTAssertFalse(listed.out.contains(key), "the key is shown once, at its creation")

        for bad in [
            ["create", "--app-id", "not-a-uuid", "--name", "x"], ["create", "--app-id", UUID().uuidString, "--name", "x"],
            ["create", "--app-id", app, "--name", ""], ["revoke", "--app-id", app, "--key-id", keyID, "--reason", " "],
            ["revoke", "--app-id", UUID().uuidString, "--key-id", keyID, "--reason", "wrong app"],
        ] {
            let r = try run(bad)
            XCTAssertNotEqual(r.status, 0, "\(bad) must fail")
            XCTAssertFalse(r.err.isEmpty, "\(bad) must say why")
        }
        let revoked = try run(["revoke", "--app-id", app, "--key-id", keyID, "--reason", "left the team"])
        XCTAssertEqual(revoked.status, 0, revoked.err)
        XCTAssertTrue(try run(["list", "--app-id", app]).out.contains("revoked"))
        let audit = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db -> [String] in
            var out: [String] = []
            for try await (action, reason) in try await db.query(
                """
                SELECT action, coalesce(details->>'reason', '') FROM auth.audit_logs WHERE app_id = \(UUID(uuidString: app)!) ORDER BY timestamp
                """
            ).decode((String, String).self) { out.append("\(action):\(reason)") }
            return out
        }
        XCTAssertEqual(audit, ["operator.key.create:", "operator.key.revoke:left the team"])
    }
}

/// #16: `AUTH_DATA_KEY` changes without losing a sealed secret: with the old key as
/// `AUTH_DATA_KEY_PREVIOUS` everything still opens, `admin reseal` seals it again under the new
/// key (once: a second run changes nothing), after which the old key is not needed.
final class DataKeyChangeTests: XCTestCase {
    func testResealMovesEverySecretToTheNewKey() async throws {
        let runtime = TestEnvironment.runtime(.auth, migrations: try AuthService.migrations())
        try await withMigratedRuntime(runtime) { runtime in
            let repo = PostgresApplicationRepository(db: runtime.db, logger: runtime.logger)
            let old = SymmetricKey(size: .bits256)
            let new = SymmetricKey(size: .bits256)
            let pem = P256.Signing.PrivateKey().pemRepresentation
            var apps: [UUID] = []
            for i in 0..<3 {
                let app = try await repo.create(name: "Reseal \(i)").appID
                apps.append(app)
                _ = try await SignInSettingsStore(db: runtime.db, box: SecretBox(key: old), logger: runtime.logger)
                    .setApple(app: app, .init(teamID: "TEAM12345\(i)", keyID: "KEY123456\(i)", clientID: "com.example.\(i)", privateKeyPEM: pem))
            }
            let onlyNew = SignInSettingsStore(db: runtime.db, box: SecretBox(key: new), logger: runtime.logger)
            let before = try await onlyNew.loadApple()
            XCTAssertTrue(apps.allSatisfy { before[$0] == nil }, "the new key alone cannot open what the old one sealed")
            let both = SecretBox(key: new, previous: old)
            let during = try await SignInSettingsStore(db: runtime.db, box: both, logger: runtime.logger).loadApple()
            XCTAssertTrue(apps.allSatisfy { during[$0] != nil }, "during the change, the previous key still opens them")

            let first = try await DataKeyResealing(db: runtime.db, box: both, logger: runtime.logger).run(batch: 2)
            XCTAssertGreaterThanOrEqual(first["apple_signin_settings"] ?? 0, 3)
            let after = try await onlyNew.loadApple()
            XCTAssertTrue(apps.allSatisfy { after[$0] != nil }, "after the re-seal the new key alone opens them")
            XCTAssertEqual(after[apps[0]]?.teamID, "TEAM123450")
            let second = try await DataKeyResealing(db: runtime.db, box: both, logger: runtime.logger).run()
            XCTAssertEqual(second["apple_signin_settings"], 0, "a second run changes nothing")
        }
    }
}
