import AuthDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// UC-AUTH-1.7 linking and unlinking; the operator's suspend command.
final class LinkTests: XCTestCase {
    struct Linked: Decodable {
        var user: UserView
        var tokens: TokenPair
    }

    static func guest(_ h: AuthHarness) async throws -> AuthResponse {
        let r = try await h.post("auth/register", #"{"provider":"guest","credentials":{"device_id":"g-\#(UUID())"}}"#)
        return try r.json(AuthResponse.self)
    }

    func testGuestLinksEmailAndKeepsItsID() async throws {
        try await AuthHarness.run { h in
            let g = try await Self.guest(h)
            let email = uniqueEmail()
            let r = try await h.post(
                "auth/link",
                #"{"provider":"email","credentials":{"email":"\#(email)","password":"Tr1cky-Geography-42"}}"#,
                token: g.tokens.accessToken
            )
            XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            let linked = try r.json(Linked.self)
            XCTAssertEqual(linked.user.id, g.user.id, "same user id: all data kept")
            XCTAssertFalse(linked.user.isGuest)
            XCTAssertEqual(linked.user.linkedProviders, ["email"])
            XCTAssertNotNil(h.mailer.token(to: email), "verification email sent")
            let login = try await h.loginEmail(email)
            XCTAssertEqual(try login.json(AuthResponse.self).user.id, g.user.id)
            // The new access token no longer says guest.
            let me = try await h.send(.get, "auth/me", token: linked.tokens.accessToken)
            XCTAssertTrue(String(buffer: me.body).contains(#""is_guest":false"#))
        }
    }

    func testGuestLinksGoogleAndAdoptsItsVerifiedEmail() async throws {
        try await AuthHarness.run { h in
            let g = try await Self.guest(h)
            let email = uniqueEmail("g")
            let token = try await h.google.idToken(sub: "link-\(UUID())", aud: h.googleClientID, email: email)
            let r = try await h.post(
                "auth/link",
                #"{"provider":"google","credentials":{"google_id_token":"\#(token)"}}"#,
                token: g.tokens.accessToken
            )
            XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            let linked = try r.json(Linked.self)
            XCTAssertEqual(linked.user.id, g.user.id)
            XCTAssertEqual(linked.user.email, email)
            XCTAssertTrue(linked.user.emailVerified)
            XCTAssertEqual(linked.user.provider, .google)
            let login = try await h.post("auth/login", #"{"provider":"google","credentials":{"google_id_token":"\#(token)"}}"#)
            XCTAssertEqual(try login.json(AuthResponse.self).user.id, g.user.id)
        }
    }

    /// #13: the 409 `email_already_exists` says `can_link` truthfully: true exactly when signing
    /// in to the existing account and linking the refused method works.
    func testCanLinkSaysWhatIsTrue() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail("owner")
            let owner = try await h.registerEmail(email)
            let first = try await h.google.idToken(sub: "g1-\(UUID())", aud: h.googleClientID, email: email)
            let refused = try await h.post("auth/register", #"{"provider":"google","credentials":{"google_id_token":"\#(first)"}}"#)
            XCTAssertEqual(refused.status, .conflict)
            XCTAssertEqual(try refused.envelope().extra["can_link"], .bool(true), "an email account without Google can link it")
            let linked = try await h.post(
                "auth/link",
                #"{"provider":"google","credentials":{"google_id_token":"\#(first)"}}"#,
                token: owner.tokens.accessToken
            )
            XCTAssertEqual(linked.status, .ok, "and it does: \(String(buffer: linked.body))")
            // Now a second Google identity with the same email: Google is taken on that account.
            let second = try await h.google.idToken(sub: "g2-\(UUID())", aud: h.googleClientID, email: email)
            let again = try await h.post("auth/register", #"{"provider":"google","credentials":{"google_id_token":"\#(second)"}}"#)
            XCTAssertEqual(try again.envelope().extra["can_link"], .bool(false))
            let tried = try await h.post(
                "auth/link",
                #"{"provider":"google","credentials":{"google_id_token":"\#(second)"}}"#,
                token: owner.tokens.accessToken
            )
            XCTAssertEqual(tried.status, .conflict, "and linking it indeed fails")
            // A password on an account that has one: false; on a Google-only account: true.
            let dup = try await h.post(
                "auth/register",
                #"{"provider":"email","credentials":{"email":"\#(email)","password":"An0ther-Str0ng-Passphrase"}}"#
            )
            XCTAssertEqual(try dup.envelope().extra["can_link"], .bool(false))
            let googleEmail = uniqueEmail("gonly")
            let gtoken = try await h.google.idToken(sub: "g3-\(UUID())", aud: h.googleClientID, email: googleEmail)
            let gUser = try await h.post("auth/register", #"{"provider":"google","credentials":{"google_id_token":"\#(gtoken)"}}"#).json(
                AuthResponse.self
            )
            let pw = try await h.post(
                "auth/register",
                #"{"provider":"email","credentials":{"email":"\#(googleEmail)","password":"An0ther-Str0ng-Passphrase"}}"#
            )
            XCTAssertEqual(try pw.envelope().extra["can_link"], .bool(true))
            let linkedPw = try await h.post(
                "auth/link",
                #"{"provider":"email","credentials":{"email":"\#(googleEmail)","password":"An0ther-Str0ng-Passphrase"}}"#,
                token: gUser.tokens.accessToken
            )
            XCTAssertEqual(linkedPw.status, .ok, String(buffer: linkedPw.body))
        }
    }

    func testIdentityOfAnotherUserIsRefusedAndChangesNothing() async throws {
        try await AuthHarness.run { h in
            let sub = "owner-\(UUID())"
            let ownerToken = try await h.google.idToken(sub: sub, aud: h.googleClientID, email: uniqueEmail())
            _ = try await h.post("auth/register", #"{"provider":"google","credentials":{"google_id_token":"\#(ownerToken)"}}"#)
            let ownerEmail = uniqueEmail()
            _ = try await h.registerEmail(ownerEmail)
            let g = try await Self.guest(h)
            try await h.post("auth/link", #"{"provider":"google","credentials":{"google_id_token":"\#(ownerToken)"}}"#, token: g.tokens.accessToken) {
                r in
                XCTAssertEqual(r.status, .conflict)
                XCTAssertEqual(try r.envelope().error, "identity_already_linked")
            }
            try await h.post(
                "auth/link",
                #"{"provider":"email","credentials":{"email":"\#(ownerEmail)","password":"Tr1cky-Geography-42"}}"#,
                token: g.tokens.accessToken
            ) { r in
                XCTAssertEqual(r.status, .conflict)
                XCTAssertEqual(try r.envelope().error, "identity_already_linked")
            }
            let stillGuest = try await h.scalar(
                "SELECT count(*)::int FROM auth.users WHERE id = '\(g.user.id)' AND is_guest AND email IS NULL AND google_id IS NULL AND password_hash IS NULL"
            )
            XCTAssertEqual(stillGuest, 1, "nothing was half-linked")
            // Bad input.
            try await h.post("auth/link", #"{"provider":"guest","credentials":{"device_id":"x"}}"#, token: g.tokens.accessToken) {
                XCTAssertEqual($0.status, .unprocessableContent)
            }
            try await h.post(
                "auth/link",
                #"{"provider":"email","credentials":{"email":"x@example.com","password":"weak"}}"#,
                token: g.tokens.accessToken
            ) {
                XCTAssertEqual($0.status, .unprocessableContent)
            }
            try await h.post("auth/link", #"{"provider":"google","credentials":{}}"#, token: g.tokens.accessToken) {
                XCTAssertEqual($0.status, .badRequest)
            }
            try await h.post("auth/link", #"{"provider":"google","credentials":{"google_id_token":"\#(ownerToken)"}}"#) {
                XCTAssertEqual($0.status, .unauthorized)
            }
        }
    }

    func testUnlinkRefusesTheLastWayToSignIn() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email)
            let last = try await h.send(.delete, "auth/link/email", token: r.tokens.accessToken)
            XCTAssertEqual(last.status, .conflict)
            XCTAssertEqual(try last.envelope().error, "last_sign_in_method")
            let token = try await h.google.idToken(sub: "u-\(UUID())", aud: h.googleClientID)
            let linked = try await h.post(
                "auth/link",
                #"{"provider":"google","credentials":{"google_id_token":"\#(token)"}}"#,
                token: r.tokens.accessToken
            )
            XCTAssertEqual(try linked.json(Linked.self).user.linkedProviders, ["email", "google"])
            let unlink = try await h.send(.delete, "auth/link/email", token: r.tokens.accessToken)
            XCTAssertEqual(unlink.status, .ok)
            let noPassword = try await h.loginEmail(email)
            XCTAssertEqual(noPassword.status, .notFound, "no password any more")
            let googleLogin = try await h.post("auth/login", #"{"provider":"google","credentials":{"google_id_token":"\#(token)"}}"#)
            XCTAssertEqual(googleLogin.status, .ok)
            let lastGoogle = try await h.send(.delete, "auth/link/google", token: r.tokens.accessToken)
            XCTAssertEqual(lastGoogle.status, .conflict)
            let unknown = try await h.send(.delete, "auth/link/myspace", token: r.tokens.accessToken)
            XCTAssertEqual(unknown.status, .badRequest)
            let notLinked = try await h.send(.delete, "auth/link/apple", token: r.tokens.accessToken)
            XCTAssertEqual(notLinked.status, .notFound)
        }
    }

    func testSuspendCommandEndsSessionsAndRefusesSignIn() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email)
            let suspend = try runServiceCommand(
                "auth-service",
                ["admin", "users", "suspend", "--app-id", h.app.appID.uuidString, "--user-id", r.user.id.uuidString, "--reason", "Cheating"]
            )
            XCTAssertEqual(suspend.status, 0, suspend.err)
            let login = try await h.loginEmail(email)
            XCTAssertEqual(login.status, .forbidden)
            XCTAssertEqual(try login.envelope().extra["reason"], "Cheating")
            // Refresh says why (not "invalid token"); the access token is refused by every auth
            // route (this process learns it from its schema: the command ran elsewhere).
            try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#) {
                XCTAssertEqual($0.status, .forbidden)
                XCTAssertEqual(try $0.envelope().error, "account_suspended")
            }
            let deadline = Date() + 5
            while try await h.send(.get, "auth/privacy", token: r.tokens.accessToken).status == .ok && Date() < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            let me = try await h.send(.get, "auth/me", token: r.tokens.accessToken)
            XCTAssertEqual(me.status, .forbidden)
            XCTAssertEqual(try me.envelope().error, "account_suspended")
            XCTAssertEqual(try me.envelope().extra["reason"], "Cheating")
            for (method, path, body) in [
                (HTTPRequest.Method.get, "auth/privacy", nil), (.patch, "auth/privacy", #"{"consent_analytics":true}"#),
                (.post, "auth/privacy/export", "{}"),
            ] {
                do {
                    let v = try await h.send(method, path, body, token: r.tokens.accessToken).status
                    XCTAssertEqual(v, .forbidden, path)
                }
            }
            let told = try await h.scalar(
                "SELECT count(*)::int FROM auth.outbox WHERE path LIKE '/internal/users/\(r.user.id.uuidString.lowercased())/sessions%' AND body->>'state' = 'suspended'"
            )
            XCTAssertEqual(told, 3)
        }
    }
}
