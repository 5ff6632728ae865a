import AuthDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// Email verification, password reset and email one-time codes.
final class EmailFlowsTests: XCTestCase {
    func testVerifyEmailWithTheEmailedTokenOnce() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email)
            let token = try XCTUnwrap(h.mailer.token(to: email))
            try await h.post("auth/verify-email", #"{"token":"\#(token)"}"#) { XCTAssertEqual($0.status, .ok) }
            let me = try await h.send(.get, "auth/me", token: r.tokens.accessToken)
            XCTAssertTrue(String(buffer: me.body).contains(#""email_verified":true"#))
            // Single use, and a resend is refused once verified.
            try await h.post("auth/verify-email", #"{"token":"\#(token)"}"#) { r in
                XCTAssertEqual(r.status, .badRequest)
                XCTAssertEqual(try r.envelope().error, "invalid_or_expired_token")
            }
            try await h.post("auth/verify-email/resend", "{}", token: r.tokens.accessToken) { XCTAssertEqual($0.status, .conflict) }
            try await h.post("auth/verify-email", #"{"token":5}"#) { XCTAssertEqual($0.status, .badRequest) }
        }
    }

    func testVerificationTokenExpiresAfter24HoursAndCanBeResent() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email)
            let token = try XCTUnwrap(h.mailer.token(to: email))
            h.clock.advance(by: 24 * 3600 + 1)
            try await h.post("auth/verify-email", #"{"token":"\#(token)"}"#) { XCTAssertEqual($0.status, .badRequest) }
            let fresh = try await h.registerEmailTokenRefresh(r)
            try await h.post("auth/verify-email/resend", "{}", token: fresh) { XCTAssertEqual($0.status, .ok) }
            let second = try XCTUnwrap(h.mailer.token(to: email))
            XCTAssertNotEqual(second, token)
            try await h.post("auth/verify-email", #"{"token":"\#(second)"}"#) { XCTAssertEqual($0.status, .ok) }
        }
    }

    func testForgotAnswersTheSameAndResetRevokesEverySession() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email)
            let known = try await h.post("auth/password/forgot", #"{"email":"\#(email)"}"#)
            let unknown = try await h.post("auth/password/forgot", #"{"email":"\#(uniqueEmail())"}"#)
            XCTAssertEqual(known.status, .ok)
            XCTAssertEqual(unknown.status, .ok)
            XCTAssertEqual(String(buffer: known.body), String(buffer: unknown.body))
            // The email leaves in the background.
            var token: String?
            for _ in 0..<50 where token == nil {
                token = h.mailer.sent.withLock { $0.last { $0.subject.contains("mot de passe") && $0.to == [email] } }
                    .flatMap { m in m.text.range(of: "token=").map { String(m.text[$0.upperBound...].prefix { !$0.isWhitespace }) } }
                if token == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            let resetToken = try XCTUnwrap(token)
            // A weak password does not use up the link.
            try await h.post("auth/password/reset", #"{"token":"\#(resetToken)","new_password":"azerty123"}"#) { r in
                XCTAssertEqual(r.status, .unprocessableContent)
                XCTAssertEqual(try r.envelope().error, "weak_password")
            }
            try await h.post("auth/password/reset", #"{"token":"\#(resetToken)","new_password":"N3w-Capital-Cities-Quiz"}"#) { r in
                XCTAssertEqual(r.status, .ok)
            }
            try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#) { XCTAssertEqual($0.status, .unauthorized) }
            let old = try await h.loginEmail(email)
            XCTAssertEqual(old.status, .unauthorized)
            let new = try await h.loginEmail(email, password: "N3w-Capital-Cities-Quiz")
            XCTAssertEqual(new.status, .ok)
            try await h.post("auth/password/reset", #"{"token":"\#(resetToken)","new_password":"An0ther-Capital-Cities"}"#) { r in
                XCTAssertEqual(r.status, .badRequest, "single use")
            }
        }
    }

    static func otpCode(_ h: AuthHarness, _ email: String) throws -> String {
        let text = try XCTUnwrap(h.mailer.sent.withLock { $0.last { $0.to == [email] && $0.subject == "Votre code de connexion" } }?.text)
        return String(text.split(separator: ":")[1].trimmingCharacters(in: .whitespaces).prefix(6))
    }

    func testOTPCreatesAVerifiedAccountThenLogsIn() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            try await h.post("auth/otp/send", #"{"email":"\#(email)"}"#) { XCTAssertEqual($0.status, .ok) }
            let code = try Self.otpCode(h, email)
            XCTAssertEqual(code.count, 6)
            let created = try await h.post("auth/otp/verify", #"{"email":"\#(email)","code":"\#(code)"}"#)
            XCTAssertEqual(created.status, .created)
            let user = try created.json(AuthResponse.self).user
            XCTAssertTrue(user.emailVerified)
            // The code is spent.
            try await h.post("auth/otp/verify", #"{"email":"\#(email)","code":"\#(code)"}"#) { XCTAssertEqual($0.status, .unauthorized) }
            // One send per minute per address.
            try await h.post("auth/otp/send", #"{"email":"\#(email)"}"#) { r in
                XCTAssertEqual(r.status, .tooManyRequests)
                XCTAssertNotNil(try r.envelope().extra["retry_after"])
            }
            h.clock.advance(by: 61)
            try await h.post("auth/otp/send", #"{"email":"\#(email)"}"#) { XCTAssertEqual($0.status, .ok) }
            let again = try await h.post("auth/otp/verify", #"{"email":"\#(email)","code":"\#(try Self.otpCode(h, email))"}"#)
            XCTAssertEqual(again.status, .ok)
            XCTAssertEqual(try again.json(AuthResponse.self).user.id, user.id)
        }
    }

    func testThreeWrongCodesInvalidateAndCodesExpire() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            try await h.post("auth/otp/send", #"{"email":"\#(email)"}"#)
            let code = try Self.otpCode(h, email)
            let wrong = code == "000000" ? "111111" : "000000"
            for remaining in [2, 1] {
                try await h.post("auth/otp/verify", #"{"email":"\#(email)","code":"\#(wrong)"}"#) { r in
                    XCTAssertEqual(r.status, .unauthorized)
                    XCTAssertEqual(try r.envelope().extra["attempts_remaining"], .int(remaining))
                }
            }
            try await h.post("auth/otp/verify", #"{"email":"\#(email)","code":"\#(wrong)"}"#) { r in
                XCTAssertEqual(try r.envelope().error, "otp_invalidated")
            }
            try await h.post("auth/otp/verify", #"{"email":"\#(email)","code":"\#(code)"}"#) { r in
                XCTAssertEqual(r.status, .unauthorized, "the right code no longer works after three wrong ones")
            }
            // Expiry after 5 minutes.
            h.clock.advance(by: 61)
            try await h.post("auth/otp/send", #"{"email":"\#(email)"}"#)
            let fresh = try Self.otpCode(h, email)
            h.clock.advance(by: 301)
            try await h.post("auth/otp/verify", #"{"email":"\#(email)","code":"\#(fresh)"}"#) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "invalid_otp")
            }
            // Bad input.
            try await h.post("auth/otp/verify", #"{"email":"\#(email)","code":"12ab56"}"#) { XCTAssertEqual($0.status, .unprocessableContent) }
            try await h.post("auth/otp/send", #"{"email":"nope"}"#) { XCTAssertEqual($0.status, .unprocessableContent) }
            try await h.post("auth/otp/send", #"{}"#) { XCTAssertEqual($0.status, .badRequest) }
            let stored = try await h.scalar("SELECT count(*)::int FROM auth.otps WHERE email = '\(email)' AND code_hash IN ('\(code)', '\(fresh)')")
            XCTAssertEqual(stored, 0, "codes are never stored in clear")
        }
    }
}

extension AuthHarness {
    /// A fresh access token for a registered user (after the clock moved past the old one).
    func registerEmailTokenRefresh(_ r: AuthResponse) async throws -> String {
        let resp = try await post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#)
        struct Refreshed: Decodable { var tokens: TokenPair }
        return try resp.json(Refreshed.self).tokens.accessToken
    }
}
