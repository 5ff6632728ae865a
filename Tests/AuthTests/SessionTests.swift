import AuthDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// Refresh-token rotation (UC-AUTH-1.8), logout, `/auth/me`, guests.
final class SessionTests: XCTestCase {
    struct Refreshed: Decodable { var tokens: TokenPair }

    func testRefreshRotatesAndGraceThenReuseRevokesTheFamily() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            let first = try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#)
            XCTAssertEqual(first.status, .ok)
            let pair = try first.json(Refreshed.self).tokens
            XCTAssertNotEqual(pair.refreshToken, r.tokens.refreshToken)
            // The successor (written from the rotated row in the same statement) keeps its
            // family, device and device details; the old one is marked, not revoked.
            let kept = try await h.scalar(
                """
                SELECT count(*)::int FROM auth.refresh_tokens old JOIN auth.refresh_tokens new
                  ON new.family_id = old.family_id AND new.device_id = old.device_id AND new.device_info = old.device_info
                 AND new.user_id = old.user_id AND new.id <> old.id
                WHERE old.user_id = '\(r.user.id)' AND old.rotated_at IS NOT NULL AND NOT old.revoked AND old.successor_sealed IS NOT NULL
                  AND new.rotated_at IS NULL AND NOT new.revoked AND new.device_info->>'platform' = 'ios' AND new.device_id = 'device-1'
                """
            )
            XCTAssertEqual(kept, 1)
            // Within 10 s, the rotated token gives the current pair (a concurrent refresh).
            h.clock.advance(by: 5)
            let again = try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#)
            XCTAssertEqual(again.status, .ok)
            XCTAssertEqual(try again.json(Refreshed.self).tokens.refreshToken, pair.refreshToken)
            // After that, presenting it again is reuse: the whole family ends.
            h.clock.advance(by: 10)
            let reuse = try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#)
            XCTAssertEqual(reuse.status, .unauthorized)
            XCTAssertEqual(try reuse.envelope().error, "token_reused")
            let current = try await h.post("auth/refresh", #"{"refresh_token":"\#(pair.refreshToken)"}"#)
            XCTAssertEqual(current.status, .unauthorized, "the family was revoked")
        }
    }

    func testTwentySimultaneousRefreshesKeepOneFamilyAndNoLogout() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            let token = r.tokens.refreshToken
            let results = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let resp = try await h.post("auth/refresh", #"{"refresh_token":"\#(token)"}"#)
                        return (resp.status, try? resp.json(Refreshed.self).tokens.refreshToken)
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            XCTAssertEqual(results.filter { $0.0 == .ok }.count, 20, "no refresh was refused")
            XCTAssertEqual(Set(results.compactMap(\.1)).count, 1, "every caller got the same new token")
            let active = try await h.scalar(
                """
                SELECT count(*)::int FROM auth.refresh_tokens WHERE user_id = '\(r.user.id)' AND NOT revoked AND rotated_at IS NULL
                """
            )
            XCTAssertEqual(active, 1)
            let families = try await h.scalar(
                "SELECT count(DISTINCT family_id)::int FROM auth.refresh_tokens WHERE user_id = '\(r.user.id)' AND NOT revoked"
            )
            XCTAssertEqual(families, 1)
            // The session goes on.
            let next = try await h.post("auth/refresh", #"{"refresh_token":"\#(results[0].1!)"}"#)
            XCTAssertEqual(next.status, .ok)
        }
    }

    func testRefreshBadInput() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            try await h.post("auth/refresh", #"{"refresh_token":"nope"}"#) { XCTAssertEqual($0.status, .unauthorized) }
            try await h.post("auth/refresh", #"{}"#) { XCTAssertEqual($0.status, .badRequest) }
            try await h.post("auth/refresh", #"{"refresh_token":12}"#) { XCTAssertEqual($0.status, .badRequest) }
            // Another tenant cannot use this tenant's refresh token.
            try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#, app: h.otherApp) {
                XCTAssertEqual($0.status, .unauthorized)
            }
            // Expired after 30 days.
            h.clock.advance(by: 31 * 24 * 3600)
            try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#) { XCTAssertEqual($0.status, .unauthorized) }
        }
    }

    func testLogoutThisDeviceAndEverywhere() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let phone = try await h.registerEmail(email, device: "phone")
            let tabletResp = try await h.loginEmail(email, device: "tablet")
            let tablet = try tabletResp.json(AuthResponse.self)
            // This device only.
            let out = try await h.post("auth/logout", #"{"refresh_token":"\#(phone.tokens.refreshToken)"}"#, token: phone.tokens.accessToken)
            XCTAssertEqual(out.status, .ok)
            try await h.post("auth/refresh", #"{"refresh_token":"\#(phone.tokens.refreshToken)"}"#) { XCTAssertEqual($0.status, .unauthorized) }
            // The phone's access token is refused at once; the tablet's is not.
            let phoneMe = try await h.send(.get, "auth/me", token: phone.tokens.accessToken)
            XCTAssertEqual(phoneMe.status, .unauthorized)
            XCTAssertEqual(try phoneMe.envelope().error, "session_revoked")
            do {
                let v = try await h.send(.get, "auth/me", token: tablet.tokens.accessToken).status
                XCTAssertEqual(v, .ok)
            }
            let stillIn = try await h.post("auth/refresh", #"{"refresh_token":"\#(tablet.tokens.refreshToken)"}"#)
            XCTAssertEqual(stillIn.status, .ok)
            let tabletNow = try stillIn.json(Refreshed.self).tokens
            do {
                let v = try await h.send(.get, "auth/me", token: tabletNow.accessToken).status
                XCTAssertEqual(v, .ok, "a refreshed token keeps its session")
            }
            // Everywhere: every access token of the user ends, and the other services are told.
            try await h.post("auth/logout", #"{"all":true}"#, token: tabletNow.accessToken) { XCTAssertEqual($0.status, .ok) }
            try await h.post("auth/refresh", #"{"refresh_token":"\#(tabletNow.refreshToken)"}"#) { XCTAssertEqual($0.status, .unauthorized) }
            for token in [tablet.tokens.accessToken, tabletNow.accessToken] {
                do {
                    let v = try await h.send(.get, "auth/me", token: token).status
                    XCTAssertEqual(v, .unauthorized)
                }
            }
            let told = try await h.scalar(
                """
                SELECT count(DISTINCT target_service)::int FROM auth.outbox WHERE path LIKE '/internal/users/\(phone.user.id.uuidString.lowercased())/sessions?app_id=%'
                AND (body->>'session_epoch')::int = 1
                """
            )
            XCTAssertEqual(told, 3, "subscription, offline and ads")
            // A new sign-in works.
            let again = try await h.loginEmail(email, device: "tablet").json(AuthResponse.self)
            do {
                let v = try await h.send(.get, "auth/me", token: again.tokens.accessToken).status
                XCTAssertEqual(v, .ok)
            }
            let tabletNow2 = again.tokens
            // Bad input.
            try await h.post("auth/logout", #"{}"#, token: tabletNow2.accessToken) { XCTAssertEqual($0.status, .badRequest) }
            try await h.post("auth/logout", #"{"all":true}"#) { XCTAssertEqual($0.status, .unauthorized) }
            // Someone else's token.
            let other = try await h.registerEmail(uniqueEmail())
            try await h.post("auth/logout", #"{"refresh_token":"\#(other.tokens.refreshToken)"}"#, token: tabletNow2.accessToken) {
                XCTAssertEqual($0.status, .unauthorized)
            }
        }
    }

    func testMeShowsProfileAndRefusesOtherTenantsToken() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            let me = try await h.send(.get, "auth/me", token: r.tokens.accessToken)
            XCTAssertEqual(me.status, .ok)
            struct Me: Decodable { var user: UserView }
            let user = try me.json(Me.self).user
            XCTAssertEqual(user.id, r.user.id)
            XCTAssertEqual(user.linkedProviders, ["email"])
            XCTAssertFalse(user.emailVerified)
            XCTAssertNotNil(user.privacySettings)
            // A token of this app under another app's headers.
            let cross = try await h.send(.get, "auth/me", token: r.tokens.accessToken, app: h.otherApp)
            XCTAssertEqual(cross.status, .unauthorized)
            XCTAssertEqual(try cross.envelope().error, "invalid_token")
            let none = try await h.send(.get, "auth/me")
            XCTAssertEqual(none.status, .unauthorized)
            // Expired after 7 days.
            let expired = try await h.client.execute(
                uri: "/auth/v1/auth/me",
                method: .get,
                headers: h.headers(
                    token: try h.signer.sign(
                        AccessTokenClaims(
                            userID: r.user.id,
                            appID: h.app.appID,
                            email: nil,
                            status: .free,
                            isGuest: false,
                            issuer: "auth",
                            issuedAt: Int(Date().timeIntervalSince1970) - 700_000,
                            expiresAt: Int(Date().timeIntervalSince1970) - 100,
                            jti: "x"
                        )
                    )
                )
            ) { $0 }
            XCTAssertEqual(expired.status, .unauthorized)
        }
    }

    func testGuestIsOnePerDeviceAndFlagged() async throws {
        try await AuthHarness.run { h in
            let device = "guest-\(UUID().uuidString)"
            let first = try await h.post("auth/register", #"{"provider":"guest","credentials":{"device_id":"\#(device)"}}"#)
            XCTAssertEqual(first.status, .created)
            let a = try first.json(AuthResponse.self)
            XCTAssertTrue(a.user.isGuest)
            XCTAssertNil(a.user.email)
            let expiry = try XCTUnwrap(a.user.guestExpiresAt)
            XCTAssertEqual(expiry.timeIntervalSince(h.clock.now()), 30 * 24 * 3600, accuracy: 2)
            // #13: the device id alone opens nothing; with the secret given once, the same guest.
            let secret = try XCTUnwrap(a.guestSecret)
            XCTAssertGreaterThanOrEqual(secret.count, 40)
            let sessionsBefore = try await h.scalar("SELECT count(*)::int FROM auth.refresh_tokens WHERE user_id = '\(a.user.id)'")
            for path in ["auth/register", "auth/login"] {
                let bare = try await h.post(path, #"{"provider":"guest","credentials":{"device_id":"\#(device)"}}"#)
                XCTAssertEqual(bare.status, .unauthorized, path)
                XCTAssertEqual(try bare.envelope().error, "guest_secret_required", path)
                let wrong = try await h.post(path, #"{"provider":"guest","credentials":{"device_id":"\#(device)","guest_secret":"guessed"}}"#)
                XCTAssertEqual(wrong.status, .unauthorized, path)
                XCTAssertEqual(try wrong.envelope().error, "invalid_credentials", path)
            }
            let sessionsAfter = try await h.scalar("SELECT count(*)::int FROM auth.refresh_tokens WHERE user_id = '\(a.user.id)'")
            XCTAssertEqual(sessionsAfter, sessionsBefore, "no session was opened")
            let stillIn = try await h.send(.get, "auth/me", token: a.tokens.accessToken)
            XCTAssertEqual(stillIn.status, .ok, "the owner is not logged out")
            let second = try await h.post(
                "auth/register",
                #"{"provider":"guest","credentials":{"device_id":"\#(device)","guest_secret":"\#(secret)"}}"#
            )
            XCTAssertEqual(second.status, .ok)
            let s2 = try second.json(AuthResponse.self)
            XCTAssertEqual(s2.user.id, a.user.id)
            XCTAssertNil(s2.guestSecret, "the secret is given once")
            let login = try await h.post("auth/login", #"{"provider":"guest","credentials":{"device_id":"\#(device)","guest_secret":"\#(secret)"}}"#)
            XCTAssertEqual(try login.json(AuthResponse.self).user.id, a.user.id)
            // A guest from before secrets: its next sign-in claims one, and from then on it is required.
            try await h.sql("UPDATE auth.users SET guest_secret_hash = NULL WHERE id = '\(a.user.id)'")
            let claimed = try await h.post("auth/login", #"{"provider":"guest","credentials":{"device_id":"\#(device)"}}"#).json(AuthResponse.self)
            let newSecret = try XCTUnwrap(claimed.guestSecret)
            let bareAgain = try await h.post("auth/login", #"{"provider":"guest","credentials":{"device_id":"\#(device)"}}"#)
            XCTAssertEqual(bareAgain.status, .unauthorized)
            let withNew = try await h.post(
                "auth/login",
                #"{"provider":"guest","credentials":{"device_id":"\#(device)","guest_secret":"\#(newSecret)"}}"#
            )
            XCTAssertEqual(withNew.status, .ok)
            let stored = try await h.scalar(
                "SELECT count(*)::int FROM auth.users WHERE id = '\(a.user.id)' AND guest_secret_hash = encode(sha256(convert_to('\(newSecret)', 'UTF8')), 'hex')"
            )
            XCTAssertEqual(stored, 1, "stored as its SHA-256, never in clear")
            // The token says guest, so other services can limit what guests do.
            let me = try await h.send(.get, "auth/me", token: a.tokens.accessToken)
            XCTAssertTrue(String(buffer: me.body).contains(#""is_guest":true"#))
            try await h.post("auth/register", #"{"provider":"guest","credentials":{}}"#) { r in
                XCTAssertEqual(r.status, .badRequest)
                XCTAssertEqual(try r.envelope().extra["field"], "credentials.device_id")
            }
        }
    }
}
