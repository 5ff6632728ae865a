import AuthDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// Google sign-in against a local key server that signs with a key the test generates.
final class GoogleSignInTests: XCTestCase {
    static func body(_ token: String, device: String = "phone") -> String {
        #"{"provider":"google","credentials":{"google_id_token":"\#(token)"},"device_info":{"device_id":"\#(device)","platform":"android"}}"#
    }

    func testRegisterThenRegisterAgainLogsIn() async throws {
        try await AuthHarness.run { h in
            let sub = "google-\(UUID().uuidString)"
            let email = uniqueEmail("gmail")
            let token = try await h.google.idToken(sub: sub, aud: h.googleClientID, email: email)
            let first = try await h.post("auth/register", Self.body(token))
            XCTAssertEqual(first.status, .created, String(buffer: first.body))
            let user = try first.json(AuthResponse.self).user
            XCTAssertEqual(user.provider, .google)
            XCTAssertEqual(user.email, email)
            XCTAssertTrue(user.emailVerified, "Google confirmed the email")
            XCTAssertEqual(user.displayName, "Ada Lovelace")
            // Seed 12a: the same Google identity registering again is a login.
            let again = try await h.post("auth/register", Self.body(try await h.google.idToken(sub: sub, aud: h.googleClientID, email: email)))
            XCTAssertEqual(again.status, .ok)
            XCTAssertEqual(try again.json(AuthResponse.self).user.id, user.id)
            let login = try await h.post("auth/login", Self.body(token))
            XCTAssertEqual(login.status, .ok)
            let connections = try await h.scalar("SELECT count(*)::int FROM auth.oauth_connections WHERE provider_user_id = '\(sub)'")
            XCTAssertEqual(connections, 1)
            XCTAssertEqual(h.google.fetches.value.withLock { $0 }, 1, "the key set is cached per Cache-Control")
        }
    }

    func testLoginWithUnknownGoogleIdentityOffersToRegister() async throws {
        try await AuthHarness.run { h in
            let token = try await h.google.idToken(sub: "nobody-\(UUID())", aud: h.googleClientID)
            let r = try await h.post("auth/login", Self.body(token))
            XCTAssertEqual(r.status, .notFound)
            XCTAssertEqual(try r.envelope().error, "user_not_found")
            XCTAssertEqual(try r.envelope().extra["can_register"], true)
        }
    }

    func testUnverifiedGoogleEmailIsNotTrusted() async throws {
        try await AuthHarness.run { h in
            let token = try await h.google.idToken(sub: "g-\(UUID())", aud: h.googleClientID, email: uniqueEmail(), verified: false)
            let r = try await h.post("auth/register", Self.body(token))
            XCTAssertEqual(r.status, .created)
            let user = try r.json(AuthResponse.self).user
            XCTAssertNil(user.email)
            XCTAssertFalse(user.emailVerified)
        }
    }

    func testEmailOfAnotherProviderIsAConflictThatCanBeLinked() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            _ = try await h.registerEmail(email)
            let token = try await h.google.idToken(sub: "g-\(UUID())", aud: h.googleClientID, email: email)
            let r = try await h.post("auth/register", Self.body(token))
            XCTAssertEqual(r.status, .conflict)
            let e = try r.envelope()
            XCTAssertEqual(e.error, "email_already_exists")
            XCTAssertEqual(e.extra["existing_provider"], "email")
            XCTAssertEqual(e.message, "Email already registered with email and password")
        }
    }

    func testUnreachableGoogleKeysAre503NotARefusal() async throws {
        let dead = "http://127.0.0.1:\(try TestEnvironment.freePort())/certs"
        try await AuthHarness.run(overrides: ["GOOGLE_JWKS_URL": dead]) { h in
            let token = try await h.google.idToken(sub: "g-\(UUID())", aud: h.googleClientID)
            let r = try await h.post("auth/register", Self.body(token))
            XCTAssertEqual(r.status, .serviceUnavailable)
            XCTAssertEqual(try r.envelope().error, "provider_unavailable")
        }
    }

    func testForgedTokensAreRefused() async throws {
        try await AuthHarness.run { h in
            let other = try await FakeIdentityProvider()
            let now = Date()
            let valid = try await h.google.idToken(sub: "g-forged", aud: h.googleClientID)
            let parts = valid.split(separator: ".")
            let algNone = Base64URL.encode(Data(#"{"alg":"none","kid":"\#(h.google.kid)"}"#.utf8)) + "." + parts[1] + "."
            let hs256 = Base64URL.encode(Data(#"{"alg":"HS256","kid":"\#(h.google.kid)"}"#.utf8)) + "." + parts[1] + "." + parts[2]
            let forged: [(String, String)] = [
                ("wrong key, same kid", try await other.idToken(sub: "g-forged", aud: h.googleClientID, kid: h.google.kid)),
                ("unknown kid", try await other.idToken(sub: "g-forged", aud: h.googleClientID, kid: "unknown")),
                ("wrong aud", try await h.google.idToken(sub: "g-forged", aud: "someone-else.apps.googleusercontent.com")),
                ("wrong iss", try await h.google.idToken(sub: "g-forged", aud: h.googleClientID, iss: "https://evil.example.com")),
                ("expired", try await h.google.idToken(sub: "g-forged", aud: h.googleClientID, expiresIn: -600, now: now)),
                ("alg none", algNone),
                ("alg HS256", hs256),
                ("tampered", parts[0] + "." + Base64URL.encode(Data(#"{"sub":"admin"}"#.utf8)) + "." + parts[2]),
                ("garbage", "not.a.jwt"),
            ]
            for (name, token) in forged {
                let r = try await h.post("auth/register", Self.body(token))
                XCTAssertEqual(r.status, .unauthorized, name)
                let e = try r.envelope()
                XCTAssertEqual(e.error, "invalid_token", name)
                XCTAssertEqual(e.message, "Google authentication failed", name)
            }
            // Both issuer spellings are Google's.
            let bare = try await h.google.idToken(sub: "g-\(UUID())", aud: h.googleClientID, iss: "accounts.google.com")
            let ok = try await h.post("auth/register", Self.body(bare))
            XCTAssertEqual(ok.status, .created)
            // Missing token.
            try await h.post("auth/register", #"{"provider":"google","credentials":{}}"#) { r in
                XCTAssertEqual(r.status, .badRequest)
                XCTAssertEqual(try r.envelope().extra["field"], "credentials.google_id_token")
            }
            let failures = try await h.scalar(
                "SELECT count(*)::int FROM auth.audit_logs WHERE app_id = '\(h.app.appID)' AND result = 'failure' AND details->>'provider' = 'google'"
            )
            XCTAssertEqual(failures, forged.count)
        }
    }
}
