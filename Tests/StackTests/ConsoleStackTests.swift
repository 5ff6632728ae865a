import Foundation
import PostgresNIO
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// #47 a console team through the gateway: members invited by mail (the stack's mailbox), signed
/// in at auth, their roles enforced by subscription on its own routes, a removal refused there
/// within the operator cache's 5 s.
final class ConsoleStackTests: XCTestCase {
    let http = DocumentedHTTPClient()
    deinit { http.shutdown() }
    var client: StackClient { StackClient(http: http, gateway: TestEnvironment.gatewayURL) }
    static let password = "Atlas-of-Capitals-1987"

    /// The console's own headers: the app named, no app key.
    func console(_ bearer: String) throws -> [(String, String)] {
        let app = try XCTUnwrap(try DemoApp.tenantHeaders().first { $0.0 == "X-App-ID" })
        return [app, ("Authorization", "Bearer \(bearer)"), ("Content-Type", "application/json")]
    }

    /// Invited by the platform's token, the link read from the mailbox, accepted, signed in.
    func member(_ role: OperatorRole) async throws -> (id: String, email: String, token: String) {
        let email = "\(role.rawValue)-\(UUID().uuidString.prefix(8).lowercased())@team.example"
        let (invited, body) = try await client.call(
            "POST",
            "/auth/v1/admin/invites",
            try console("local-admin-token"),
            #"{"email":"\#(email)","role":"\#(role.rawValue)"}"#
        )
        XCTAssertEqual(invited, 201, "\(body)")
        var token: String?
        let deadline = Date().addingTimeInterval(15)
        while token == nil, Date() < deadline {
            for m in (try? FileManager.default.contentsOfDirectory(atPath: ".data/mail")) ?? [] where m.hasSuffix(".eml") {
                let text = ((try? String(contentsOfFile: ".data/mail/" + m, encoding: .utf8)) ?? "").replacingOccurrences(of: "=\r\n", with: "")
                    .replacingOccurrences(of: "=\n", with: "").replacingOccurrences(of: "=3D", with: "=")
                guard text.contains(email), let r = text.range(of: "#/invite/") else { continue }
                token = String(text[r.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            }
            if token == nil { try await Task.sleep(for: .milliseconds(200)) }
        }
        let invite = try XCTUnwrap(token, "no invite for \(email) in .data/mail")
        let (accepted, joined) = try await client.call(
            "POST",
            "/auth/v1/console/invites/accept",
            [("Content-Type", "application/json")],
            #"{"token":"\#(invite)","password":"\#(Self.password)"}"#
        )
        XCTAssertEqual(accepted, 201, "\(joined)")
        let app = try XCTUnwrap(try DemoApp.tenantHeaders().first { $0.0 == "X-App-ID" })
        let (signed, session) = try await client.call(
            "POST",
            "/auth/v1/console/sign-in",
            [app, ("Content-Type", "application/json")],
            #"{"email":"\#(email)","password":"\#(Self.password)"}"#
        )
        XCTAssertEqual(signed, 200, "\(session)")
        guard case .string(let access)? = session["access_token"], case .string(let id)? = joined["id"] else {
            throw XCTSkip("no session: \(session)")
        }
        return (id, email, access)
    }

    func testSupportGrantsCreditsAViewerCannotAndARemovedMemberIsRefusedEverywhere() async throws {
        let support = try await member(.support)
        let viewer = try await member(.viewer)
        let player = try await client.guest()
        let uid = player.userID.lowercasedString

        let (granted, grantBody) = try await client.call(
            "POST",
            "/subscription/v1/admin/users/\(uid)/credits",
            try console(support.token) + [("Idempotency-Key", UUID().uuidString)],
            #"{"amount":5,"reason":"console stack test"}"#
        )
        XCTAssertEqual(granted, 201, "\(grantBody)")
        // A viewer's token forged into the same POST: 403 at subscription, nothing credited.
        let (forged, forgedBody) = try await client.call(
            "POST",
            "/subscription/v1/admin/users/\(uid)/credits",
            try console(viewer.token) + [("Idempotency-Key", UUID().uuidString)],
            #"{"amount":500,"reason":"forged"}"#
        )
        XCTAssertEqual(forged, 403, "\(forgedBody)")
        XCTAssertEqual(forgedBody["error"], .string("insufficient_role"))
        let (read, balance) = try await client.call("GET", "/subscription/v1/credits/balance", player.headers)
        XCTAssertEqual(read, 200)
        XCTAssertEqual(balance["balance"], .int(5), "\(balance)")
        // The viewer reads.
        let (seen, _) = try await client.call("GET", "/subscription/v1/admin/users/\(uid)/credits", try console(viewer.token))
        XCTAssertEqual(seen, 200)

        // Subscription's audit names the member, the refusal too.
        let audited = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase)) { db in
            var n = 0
            for try await c in try await db.query(
                "SELECT count(*)::int FROM subscription.operator_audit WHERE operator = \("member:\(viewer.id):\(viewer.email)") AND status = 403"
            ).decode(Int.self) { n = c }
            return n
        }
        XCTAssertEqual(audited, 1)

        // Removed by the platform: refused at subscription within the 5 s cache.
        let (removed, _) = try await client.call("DELETE", "/auth/v1/admin/members/\(support.id)", try console("local-admin-token"))
        XCTAssertEqual(removed, 204)
        let start = Date()
        var status = 0
        while Date().timeIntervalSince(start) < 8 {
            (status, _) = try await client.call("GET", "/subscription/v1/admin/users/\(uid)/credits", try console(support.token))
            if status == 401 { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        XCTAssertEqual(status, 401, "a removed member is refused at subscription")
        XCTAssertLessThan(Date().timeIntervalSince(start), 6.5, "within OPERATOR_CACHE_SECONDS (5) and a poll")
    }
}
