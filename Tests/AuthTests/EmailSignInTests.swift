import AuthDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// UC-AUTH-1.1 (email) and UC-AUTH-1.2 (email login) through the HTTP API.
final class EmailSignInTests: XCTestCase {
    func testRegisterReturnsUserAndTokensAndSendsAVerificationEmail() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email.uppercased())
            XCTAssertEqual(r.user.email, email, "stored lower-cased")
            XCTAssertEqual(r.user.provider, .email)
            XCTAssertEqual(r.user.status, .free)
            XCTAssertFalse(r.user.emailVerified)
            XCTAssertEqual(r.tokens.expiresIn, 604800)
            XCTAssertEqual(r.tokens.tokenType, "Bearer")
            XCTAssertFalse(r.tokens.refreshToken.isEmpty)
            // The access token is accepted by the auth service itself.
            let me = try await h.send(.get, "auth/me", token: r.tokens.accessToken)
            XCTAssertEqual(me.status, .ok)
            // A verification email with a 24 h token went out.
            let mail = try XCTUnwrap(h.mailer.last)
            XCTAssertEqual(mail.to, [email])
            XCTAssertEqual(mail.subject, "Vérifiez votre email")
            XCTAssertNotNil(h.mailer.token(to: email))
            // The password is stored as a bcrypt-12 hash, never in clear.
            let cost12 = try await h.scalar("SELECT count(*)::int FROM auth.users WHERE email = '\(email)' AND password_hash LIKE '$2b$12$%'")
            XCTAssertEqual(cost12, 1)
            // Privacy settings exist with every consent off, and the register is audited.
            let consents = try await h.scalar(
                """
                SELECT count(*)::int FROM auth.privacy_settings p JOIN auth.users u ON u.id = p.user_id
                WHERE u.email = '\(email)' AND NOT (consent_analytics OR consent_third_party OR consent_geolocation OR consent_personalized_ads)
                """
            )
            XCTAssertEqual(consents, 1)
            let audits = try await h.scalar(
                "SELECT count(*)::int FROM auth.audit_logs WHERE user_id = '\(r.user.id)' AND action = 'register' AND result = 'success'"
            )
            XCTAssertEqual(audits, 1)
        }
    }

    func testRegisterRefusesBadInput() async throws {
        try await AuthHarness.run { h in
            let cases: [(String, HTTPResponse.Status, String, String?)] = [
                (
                    #"{"provider":"email","credentials":{"email":"not-an-email","password":"Tr1cky-Geography-42"}}"#, .unprocessableContent,
                    "validation_error",
                    "credentials.email"
                ),
                (
                    #"{"provider":"email","credentials":{"email":"a@example.com","password":"password1"}}"#, .unprocessableContent, "weak_password",
                    "credentials.password"
                ),
                (#"{"provider":"email","credentials":{"email":"a@example.com"}}"#, .badRequest, "invalid_request", "credentials.password"),
                (#"{"provider":"email","credentials":{"email":42,"password":"x"}}"#, .badRequest, "invalid_request", "credentials.email"),
                (#"{"provider":"myspace","credentials":{}}"#, .badRequest, "invalid_request", "provider"),
                (#"{"credentials":{}}"#, .badRequest, "invalid_request", "provider"),
                (#"{"provider":"email""#, .badRequest, "invalid_request", nil),
            ]
            for (body, status, code, field) in cases {
                try await h.post("auth/register", body) { r in
                    XCTAssertEqual(r.status, status, body)
                    let e = try r.envelope()
                    XCTAssertEqual(e.error, code, body)
                    if let field { XCTAssertEqual(e.extra["field"], .string(field), body) }
                }
            }
            // Another tenant's key, or none at all.
            var wrong = h.headers()
            wrong[.xAPIKey] = h.otherApp.apiKey
            try await h.client.execute(
                uri: "/auth/v1/auth/register",
                method: .post,
                headers: wrong,
                body: ByteBuffer(string: "{}")
            ) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "invalid_api_key")
            }
        }
    }

    func testEmailAlreadyRegistered() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            _ = try await h.registerEmail(email)
            try await h.post("auth/register", #"{"provider":"email","credentials":{"email":"\#(email)","password":"An0ther-Str0ng-Passphrase"}}"#) {
                r in
                XCTAssertEqual(r.status, .conflict)
                let e = try r.envelope()
                XCTAssertEqual(e.error, "email_already_exists")
                XCTAssertEqual(e.extra["existing_provider"], "email")
                XCTAssertEqual(e.extra["can_link"], false, "the account already has a password")
            }
            // Same email in another application is another account.
            try await h.post(
                "auth/register",
                #"{"provider":"email","credentials":{"email":"\#(email)","password":"Tr1cky-Geography-42"}}"#,
                app: h.otherApp
            ) { r in XCTAssertEqual(r.status, .created) }
        }
    }

    func testTwentySimultaneousRegistrationsOfOneEmailCreateOneUser() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await h.post(
                            "auth/register",
                            #"{"provider":"email","credentials":{"email":"\#(email)","password":"Tr1cky-Geography-42"}}"#
                        ).status
                    }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            XCTAssertEqual(statuses.filter { $0 == .created }.count, 1)
            XCTAssertEqual(statuses.filter { $0 == .conflict }.count, 19)
            let users = try await h.scalar("SELECT count(*)::int FROM auth.users WHERE email = '\(email)'")
            XCTAssertEqual(users, 1)
        }
    }

    func testLoginMainFlowAndUnknownUser() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let registered = try await h.registerEmail(email)
            let r = try await h.loginEmail(email)
            XCTAssertEqual(r.status, .ok)
            let body = try r.json(AuthResponse.self)
            XCTAssertEqual(body.user.id, registered.user.id)
            XCTAssertNotNil(body.user.lastLogin)
            XCTAssertEqual(body.user.privacySettings?.consentGeolocation, false)
            // Signing in again on the same device revokes that device's previous refresh token.
            let old = try await h.post("auth/refresh", #"{"refresh_token":"\#(registered.tokens.refreshToken)"}"#)
            XCTAssertEqual(old.status, .unauthorized)

            let unknown = try await h.loginEmail(uniqueEmail())
            XCTAssertEqual(unknown.status, .notFound)
            let e = try unknown.envelope()
            XCTAssertEqual(e.error, "user_not_found")
            XCTAssertEqual(e.extra["can_register"], true)
        }
    }

    /// 13b/14b: four wrong passwords count down, the fifth locks for 15 minutes, the lock
    /// holds even for the right password, and lifts when the clock moves past it.
    func testWrongPasswordsLockTheAccountThenTheLockLifts() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            _ = try await h.registerEmail(email)
            for expected in [4, 3, 2, 1] {
                let r = try await h.loginEmail(email, password: "Wrong-password-\(expected)")
                XCTAssertEqual(r.status, .unauthorized)
                let e = try r.envelope()
                XCTAssertEqual(e.error, "invalid_credentials")
                XCTAssertEqual(e.extra["attempts_remaining"], .int(expected))
            }
            let fifth = try await h.loginEmail(email, password: "Wrong-password-5")
            XCTAssertEqual(fifth.status, .tooManyRequests)
            let locked = try fifth.envelope()
            XCTAssertEqual(locked.error, "account_locked")
            XCTAssertEqual(locked.extra["retry_after"], .int(900))
            XCTAssertNotNil(locked.extra["locked_until"]?.stringValue)

            h.clock.advance(by: 600)
            let stillLocked = try await h.loginEmail(email)
            XCTAssertEqual(stillLocked.status, .tooManyRequests)
            XCTAssertEqual(try stillLocked.envelope().extra["retry_after"], .int(300))

            h.clock.advance(by: 301)
            let ok = try await h.loginEmail(email)
            XCTAssertEqual(ok.status, .ok)
            // The counter was reset by the success: one more failure leaves four attempts.
            let again = try await h.loginEmail(email, password: "Wrong-again")
            XCTAssertEqual(try again.envelope().extra["attempts_remaining"], .int(4))
            let failures = try await h.scalar(
                """
                SELECT count(*)::int FROM auth.audit_logs a JOIN auth.users u ON u.id = a.user_id
                WHERE u.email = '\(email)' AND a.action = 'login' AND a.result = 'failure'
                """
            )
            XCTAssertEqual(failures, 7)
        }
    }

    func testSuspendedAccountIsRefused() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email)
            try await h.sql("UPDATE auth.users SET status = 'suspended', suspension_reason = 'Terms of service violation' WHERE email = '\(email)'")
            let login = try await h.loginEmail(email)
            XCTAssertEqual(login.status, .forbidden)
            let e = try login.envelope()
            XCTAssertEqual(e.error, "account_suspended")
            XCTAssertEqual(e.extra["reason"], "Terms of service violation")
            XCTAssertEqual(e.extra["contact"], "support@example.com")
            // Refresh and /me refuse too.
            let refresh = try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#)
            XCTAssertEqual(refresh.status, .forbidden)
            let me = try await h.send(.get, "auth/me", token: r.tokens.accessToken)
            XCTAssertEqual(me.status, .forbidden)
        }
    }

    /// 5 sign-in attempts per 15 minutes per client IP; refresh is not counted.
    /// bcrypt reads 72 bytes: two passwords sharing their first 72 bytes would both open the
    /// account. A longer one is refused with a clear 400 at register, link and reset.
    func testPasswordsLongerThanBcryptReadsAreRefused() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let long = "Tr1cky-Geography-" + String(repeating: "x", count: 56)  // 73 bytes
            XCTAssertEqual(long.utf8.count, 73)
            let r = try await h.post("auth/register", #"{"provider":"email","credentials":{"email":"\#(email)","password":"\#(long)"}}"#)
            XCTAssertEqual(r.status, .badRequest)
            XCTAssertEqual(try r.envelope().error, "password_too_long")
            XCTAssertEqual(try r.envelope().extra["field"], .string("credentials.password"))
            do {
                let v = try await h.scalar("SELECT count(*)::int FROM auth.users WHERE email = '\(email)'")
                XCTAssertEqual(v, 0, "nothing created")
            }
            // 72 bytes is fine.
            let ok = try await h.post("auth/register", #"{"provider":"email","credentials":{"email":"\#(email)","password":"\#(long.dropLast())"}}"#)
            XCTAssertEqual(ok.status, .created, String(buffer: ok.body))
            let reset = try await h.post("auth/password/reset", #"{"token":"whatever","new_password":"\#(long)"}"#)
            XCTAssertEqual(reset.status, .badRequest)
            XCTAssertEqual(try reset.envelope().extra["field"], .string("new_password"))
        }
    }

    /// #13: a client calling the service directly (its peer is not a trusted proxy) cannot reset
    /// its sign-in budget with a new `X-Forwarded-For` each time; behind a trusted proxy (the
    /// loopback gateway by default) the forwarded address is the client's.
    func testForwardedForCountsOnlyFromATrustedProxy() async throws {
        try await AuthHarness.run(overrides: ["AUTH_SIGNIN_LIMIT_PER_15_MINUTES": "5", "TRUSTED_PROXIES": "10.0.0.0/8"], live: true) { h in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<6 { statuses.append(try await h.loginEmail(uniqueEmail("nobody")).status) }  // a new X-Forwarded-For each time
            XCTAssertTrue(statuses.contains(.tooManyRequests), "one budget for the socket address: \(statuses)")
            let bySocket = try await h.scalar(
                "SELECT count(*)::int FROM auth.audit_logs WHERE app_id = '\(h.app.appID)' AND result = 'rate_limited' AND host(ip_address::inet) = '127.0.0.1'"
            )
            XCTAssertGreaterThanOrEqual(bySocket, 1, "refused under the socket's address")
            let spoofed = try await h.scalar(
                "SELECT count(*)::int FROM auth.audit_logs WHERE app_id = '\(h.app.appID)' AND host(ip_address::inet) <> '127.0.0.1'"
            )
            XCTAssertEqual(spoofed, 0, "no forwarded address was believed")
        }
        try await AuthHarness.run(overrides: ["AUTH_SIGNIN_LIMIT_PER_15_MINUTES": "5"], live: true) { h in
            let ip = "198.51.100.\(Int.random(in: 1...250))"
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<6 { statuses.append(try await h.loginEmail(uniqueEmail("nobody"), ip: ip).status) }
            XCTAssertEqual(statuses.last, .tooManyRequests, "behind the loopback gateway, the forwarded address is the client's")
            let audited = try await h.scalar("SELECT count(*)::int FROM auth.audit_logs WHERE ip_address = '\(ip)' AND result = 'rate_limited'")
            XCTAssertEqual(audited, 1)
        }
    }

    func testSignInRateLimitPerIP() async throws {
        // The seed's limit, set here: the test asserts on it, whatever the environment says.
        try await AuthHarness.run(overrides: ["AUTH_SIGNIN_LIMIT_PER_15_MINUTES": "5"]) { h in
            let ip = "192.0.2.\(Int.random(in: 1...250))"
            let email = uniqueEmail()
            let reg = try await h.post(
                "auth/register",
                #"{"provider":"email","credentials":{"email":"\#(email)","password":"Tr1cky-Geography-42"}}"#,
                ip: ip
            )
            XCTAssertEqual(reg.status, .created)
            let tokens = try reg.json(AuthResponse.self).tokens
            for _ in 0..<4 { _ = try await h.loginEmail(email, ip: ip) }
            let sixth = try await h.loginEmail(email, ip: ip)
            XCTAssertEqual(sixth.status, .tooManyRequests)
            let e = try sixth.envelope()
            XCTAssertEqual(e.error, "rate_limit_exceeded")
            XCTAssertNotNil(e.extra["retry_after"]?.intValue)
            XCTAssertEqual(sixth.headers[.retryAfter], e.extra["retry_after"]?.intValue.map(String.init))
            let audited = try await h.scalar("SELECT count(*)::int FROM auth.audit_logs WHERE ip_address = '\(ip)' AND result = 'rate_limited'")
            XCTAssertEqual(audited, 1)
            // Another address is not affected, nor is refresh from this one.
            let elsewhere = try await h.loginEmail(email)
            XCTAssertEqual(elsewhere.status, .ok)
            let refresh = try await h.post("auth/refresh", #"{"refresh_token":"\#(tokens.refreshToken)"}"#, ip: ip)
            XCTAssertNotEqual(refresh.status, .tooManyRequests)
            // The window passes.
            h.clock.advance(by: 15 * 60)
            let later = try await h.loginEmail(email, ip: ip)
            XCTAssertEqual(later.status, .ok)
        }
    }
}
