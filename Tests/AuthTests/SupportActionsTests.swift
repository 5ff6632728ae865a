import AuthDomain
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// #47 support acting for a player from the console: sign them out everywhere, cancel their
/// scheduled deletion. Each with a reason, in the user's audit with the operator; another app's
/// operator finds nobody and changes nothing.
final class SupportActionsTests: XCTestCase {
    static func call(_ h: AuthHarness, _ path: String, _ json: String?, app: IssuedAPIKey? = nil) async throws -> TestResponse {
        try await h.client.execute(
            uri: "/auth/v1/\(path)",
            method: .post,
            headers: EmailSettingsTests.admin(h, app: app ?? h.app),
            body: json.map { ByteBuffer(string: $0) }
        ) { $0 }
    }

    func testSupportSignsAPlayerOutEverywhereAndCancelsTheirDeletion() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail("support-acts")
            let r = try await h.registerEmail(email)
            let uid = r.user.id.lowercasedString
            let tablet = try await h.loginEmail(email, device: "tablet").json(AuthResponse.self)
            let refreshWorks: (AuthResponse) async throws -> HTTPResponse.Status = { a in
                try await h.post("auth/refresh", #"{"refresh_token":"\#(a.tokens.refreshToken)"}"#).status
            }

            // Bad input and another app's operator: refused, nothing revoked.
            for (body, status) in [
                (nil, HTTPResponse.Status.badRequest), (#"{}"#, .badRequest), (#"{"reason":5}"#, .badRequest),
                (#"{"reason":"   "}"#, .unprocessableContent), (#"{"reason":"\#(String(repeating: "x", count: 501))"}"#, .unprocessableContent),
            ] {
                let refused = try await Self.call(h, "admin/users/\(uid)/sessions/revoke", body)
                XCTAssertEqual(refused.status, status, body ?? "no body")
                XCTAssertNotNil(try? refused.envelope().error)
            }
            let elsewhere = try await Self.call(h, "admin/users/\(uid)/sessions/revoke", #"{"reason":"ticket 1"}"#, app: h.otherApp)
            XCTAssertEqual(elsewhere.status, .notFound)
            let unknown = try await Self.call(h, "admin/users/\(UUID())/sessions/revoke", #"{"reason":"ticket 1"}"#)
            XCTAssertEqual(unknown.status, .notFound)
            let stillOK = try await refreshWorks(tablet)
            XCTAssertEqual(stillOK, .ok, "a refused revoke revokes nothing")

            // Signed out everywhere: no refresh works, the audit names the operator and the reason.
            let phone = try await h.loginEmail(email, device: "phone").json(AuthResponse.self)
            let revoked = try await Self.call(h, "admin/users/\(uid)/sessions/revoke", #"{"reason":"ticket 4711: stolen phone"}"#)
            XCTAssertEqual(revoked.status, .ok, String(buffer: revoked.body))
            XCTAssertGreaterThanOrEqual(try revoked.json([String: Int].self)["revoked_sessions"] ?? 0, 2)
            let afterPhone = try await refreshWorks(phone)
            XCTAssertEqual(afterPhone, .unauthorized)
            let audited = try await h.scalar(
                """
                SELECT count(*)::int FROM auth.audit_logs WHERE user_id = '\(uid)' AND action = 'support.sessions_revoked'
                AND details->>'operator' = 'platform' AND details->>'reason' = 'ticket 4711: stolen phone'
                """
            )
            XCTAssertEqual(audited, 1)

            // A deletion scheduled by the player, cancelled by support; a second cancel is a 409.
            let fresh = try await h.loginEmail(email, device: "phone").json(AuthResponse.self)
            let noneYet = try await Self.call(h, "admin/users/\(uid)/deletion/cancel", #"{"reason":"ticket 4712"}"#)
            XCTAssertEqual(noneYet.status, .conflict)
            XCTAssertEqual(try noneYet.envelope().error, "deletion_not_scheduled")
            let scheduled = try await h.send(.delete, "auth/me", token: fresh.tokens.accessToken)
            XCTAssertEqual(scheduled.status, .accepted)
            let otherApp = try await Self.call(h, "admin/users/\(uid)/deletion/cancel", #"{"reason":"ticket 4712"}"#, app: h.otherApp)
            XCTAssertEqual(otherApp.status, .notFound)
            let pending = "SELECT count(*)::int FROM auth.deletions WHERE user_id = '\(uid)' AND status = 'scheduled'"
            let stillScheduled = try await h.scalar(pending)
            XCTAssertEqual(stillScheduled, 1, "another app's operator cancels nothing")
            let cancelled = try await Self.call(h, "admin/users/\(uid)/deletion/cancel", #"{"reason":"ticket 4712: changed their mind"}"#)
            XCTAssertEqual(cancelled.status, .ok, String(buffer: cancelled.body))
            let left = try await h.scalar(pending)
            XCTAssertEqual(left, 0)
            let flag = try await h.scalar("SELECT count(*)::int FROM auth.users WHERE id = '\(uid)' AND deletion_scheduled_at IS NULL")
            XCTAssertEqual(flag, 1)
            let twice = try await Self.call(h, "admin/users/\(uid)/deletion/cancel", #"{"reason":"ticket 4712"}"#)
            XCTAssertEqual(try twice.envelope().error, "deletion_not_scheduled")
        }
    }
}
