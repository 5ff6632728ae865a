import AuthDomain
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// Sign in with Apple against a local Apple (JWKS, token and revoke endpoints).
final class AppleSignInTests: XCTestCase {
    static func body(_ token: String, code: String? = "valid-code", nonce: String? = nil, name: Bool = true) -> String {
        var c = [#""apple_identity_token":"\#(token)""#]
        if let code { c.append(#""apple_authorization_code":"\#(code)""#) }
        if let nonce { c.append(#""nonce":"\#(nonce)""#) }
        if name { c.append(#""user_info":{"first_name":"Marie","last_name":"Curie","email":"x@privaterelay.appleid.com"}"#) }
        return #"{"provider":"apple","credentials":{\#(c.joined(separator: ","))},"device_info":{"device_id":"iphone"}}"#
    }

    func testRegisterExchangesTheCodeKeepsAppleTokenSealedAndDeletionRevokesIt() async throws {
        try await AuthHarness.run { h in
            let sub = "apple-\(UUID())"
            let email = "\(UUID().uuidString.prefix(8).lowercased())@privaterelay.appleid.com"
            let token = try await h.apple.identityToken(sub: sub, email: email, rawNonce: "raw-nonce-1")
            let r = try await h.post("auth/register", Self.body(token, nonce: "raw-nonce-1"))
            XCTAssertEqual(r.status, .created, String(buffer: r.body))
            let auth = try r.json(AuthResponse.self)
            XCTAssertEqual(auth.user.provider, .apple)
            XCTAssertEqual(auth.user.email, email, "email_verified sent as the string \"true\" is accepted")
            XCTAssertEqual(auth.user.displayName, "Marie Curie", "the name comes from user_info")
            let appleToken = try XCTUnwrap(h.apple.log.exchanged.withLock { $0.last })
            let stored = try await h.scalar(
                """
                SELECT count(*)::int FROM auth.oauth_connections
                WHERE provider = 'apple' AND provider_user_id = '\(sub)' AND refresh_token_sealed IS NOT NULL
                  AND position(convert_to('\(appleToken)', 'UTF8') in refresh_token_sealed) = 0
                """
            )
            XCTAssertEqual(stored, 1, "Apple's refresh token is kept, sealed (not in clear)")
            // Apple sends the name once: a later login without user_info keeps it.
            let again = try await h.post("auth/login", Self.body(try await h.apple.identityToken(sub: sub, email: email), code: nil, name: false))
            XCTAssertEqual(again.status, .ok)
            XCTAssertEqual(try again.json(AuthResponse.self).user.displayName, "Marie Curie")

            // Deletion at J+30 revokes the token at Apple.
            let del = try await h.send(.delete, "auth/me", token: auth.tokens.accessToken)
            XCTAssertEqual(del.status, .accepted)
            h.clock.advance(by: 30 * 24 * 3600 + 60)
            let lifecycle = AccountLifecycle(
                logger: h.runtime.logger,
                clock: h.clock,
                sessions: h.runtime.sessions,
                appleRevoker: AppleRevoker(
                    apple: AppleIdentityVerifier(
                        keySet: RemoteKeySet(url: "\(h.apple.base)/auth/keys", http: h.runtime.http),
                        http: h.runtime.http,
                        tokenURL: "\(h.apple.base)/auth/token",
                        revokeURL: "\(h.apple.base)/auth/revoke"
                    ),
                    configs: TenantSettings(
                        topic: "apple_signin",
                        bootstrap: try AppleClientConfig.parse(h.apple.config(for: h.app.appID)),
                        feed: h.runtime.changes
                    ) { [:] },
                    box: SecretBox(key: try AuthService.dataKey(env: h.runtime.config.environment, signingKey: h.signerKey))
                )
            )
            let queue = JobQueue(client: h.runtime.db, queue: AccountLifecycle.queue, logger: h.runtime.logger, clock: h.clock)
            let ran = try await JobWorker(
                queue: queue,
                handlers: [AccountLifecycle.executeDeletionJob: { try await lifecycle.executeDeletion($0, db: h.runtime.db) }]
            ).runOnce()
            XCTAssertEqual(ran, 1)
            XCTAssertEqual(h.apple.log.revoked.withLock { $0 }, [appleToken])
        }
    }

    func testUnlinkingAppleRevokesItsToken() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email)
            let token = try await h.apple.identityToken(sub: "apple-\(UUID())")
            let link = try await h.post("auth/link", Self.body(token), token: r.tokens.accessToken)
            XCTAssertEqual(link.status, .ok, String(buffer: link.body))
            let appleToken = try XCTUnwrap(h.apple.log.exchanged.withLock { $0.last })
            let unlink = try await h.send(.delete, "auth/link/apple", token: r.tokens.accessToken)
            XCTAssertEqual(unlink.status, .ok)
            XCTAssertTrue(h.apple.log.revoked.withLock { $0 }.contains(appleToken))
        }
    }

    func testForgedAppleTokensAreRefused() async throws {
        try await AuthHarness.run { h in
            let sub = "apple-\(UUID())"
            let other = try await FakeIdentityProvider()
            let cases: [(String, String)] = [
                ("nonce mismatch", Self.body(try await h.apple.identityToken(sub: sub, rawNonce: "one"), nonce: "another")),
                ("nonce missing in token", Self.body(try await h.apple.identityToken(sub: sub), nonce: "raw")),
                // #13: a token bound to a nonce, sent without the raw nonce (a replayed token).
                ("raw nonce missing", Self.body(try await h.apple.identityToken(sub: sub, rawNonce: "bound"))),
                ("wrong aud", Self.body(try await h.apple.identityToken(sub: sub, aud: "com.other.app"))),
                ("wrong iss", Self.body(try await h.apple.identityToken(sub: sub, iss: "https://accounts.google.com"))),
                ("expired", Self.body(try await h.apple.identityToken(sub: sub, expiresIn: -300))),
                (
                    "wrong key",
                    Self.body(try await other.idToken(sub: sub, aud: h.apple.clientID, iss: "https://appleid.apple.com", kid: h.apple.keys.kid))
                ),
                ("bad code", Self.body(try await h.apple.identityToken(sub: sub), code: "stolen-code")),
            ]
            for (name, body) in cases {
                let r = try await h.post("auth/register", body)
                XCTAssertEqual(r.status, .unauthorized, name)
                XCTAssertEqual(try r.envelope().message, "Apple authentication failed", name)
            }
            let users = try await h.scalar("SELECT count(*)::int FROM auth.users WHERE apple_id = '\(sub)'")
            XCTAssertEqual(users, 0)
            try await h.post("auth/register", #"{"provider":"apple","credentials":{}}"#) { r in
                XCTAssertEqual(r.status, .badRequest)
                XCTAssertEqual(try r.envelope().extra["field"], "credentials.apple_identity_token")
            }
        }
    }

    func testNonceRule() {
        let hashed = SHA256.hash(data: Data("r4w".utf8)).hexEncoded
        XCTAssertTrue(AppleIdentityVerifier.nonceMatches(tokenNonce: nil, rawNonce: nil))
        XCTAssertTrue(AppleIdentityVerifier.nonceMatches(tokenNonce: hashed, rawNonce: "r4w"))
        XCTAssertFalse(AppleIdentityVerifier.nonceMatches(tokenNonce: hashed, rawNonce: nil))
        XCTAssertFalse(AppleIdentityVerifier.nonceMatches(tokenNonce: nil, rawNonce: "r4w"))
        XCTAssertFalse(AppleIdentityVerifier.nonceMatches(tokenNonce: hashed, rawNonce: "other"))
    }
}
