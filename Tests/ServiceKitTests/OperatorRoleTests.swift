import ServiceKit
import XCTest

final class OperatorRoleTests: XCTestCase {
    func testRolesIncludeTheOnesBelow() {
        XCTAssertEqual(OperatorRole.allCases.sorted(), [.viewer, .support, .admin, .owner])
        XCTAssertTrue(OperatorRole.owner >= .admin && OperatorRole.admin >= .support && OperatorRole.support >= .viewer)
        XCTAssertFalse(OperatorRole.viewer >= .support)
    }

    /// The issue's table, route by route (one of each kind in each service).
    func testEachAdminRouteNeedsItsRole() {
        let cases: [(String, String, OperatorRole)] = [
            ("GET", "/auth/v1/admin/users", .viewer),
            ("GET", "/auth/v1/admin/users/{id}/timeline", .viewer),
            ("GET", "/ads/v1/admin/campaigns/{id}/results", .viewer),
            ("GET", "/ads/v1/analytics/dashboard", .viewer),
            ("GET", "/auth/v1/admin/members", .viewer),
            ("POST", "/subscription/v1/admin/users/{id}/credits", .support),
            ("POST", "/subscription/v1/admin/users/{id}/premium", .support),
            ("DELETE", "/subscription/v1/admin/users/{id}/premium", .support),
            ("POST", "/auth/v1/admin/users/{id}/sessions/revoke", .support),
            ("PUT", "/auth/v1/admin/email-settings", .admin),
            ("PUT", "/subscription/v1/admin/stores/{store}", .admin),
            ("POST", "/ads/v1/admin/campaigns", .admin),
            ("PATCH", "/ads/v1/admin/campaigns/{id}", .admin),
            ("POST", "/auth/v1/admin/push/test", .admin),
            ("POST", "/auth/v1/admin/webhooks/{id}/rotate-secret", .admin),
            ("PUT", "/offline/v1/admin/categories/{id}", .admin),
            ("POST", "/ads/v1/analytics/refresh", .admin),
            ("POST", "/auth/v1/admin/invites", .owner),
            ("GET", "/auth/v1/admin/invites", .owner),
            ("PATCH", "/auth/v1/admin/members/{id}", .owner),
            ("DELETE", "/auth/v1/admin/members/{id}", .owner),
            ("POST", "/auth/v1/admin/app/disable", .owner),
            ("PUT", "/auth/v1/admin/console-settings", .owner),
            // An unmatched path is judged as written (a write outside the known areas: admin).
            ("POST", "/auth/v1/admin/nothing-here", .admin),
        ]
        for (method, route, role) in cases {
            XCTAssertEqual(AdminAccess.required(method: method, route: route), role, "\(method) \(route)")
        }
    }

    func testAMemberIsNamedInTheAuditAndKeysKeepTheirReach() {
        let id = UUID()
        XCTAssertEqual(Operator.member(id: id, email: "ana@example.com", role: .support).auditName, "member:\(id.lowercasedString):ana@example.com")
        XCTAssertEqual(Operator.member(id: id, email: "a@b.co", role: .viewer).role, .viewer)
        XCTAssertEqual(Operator.key(id: id, name: "ci").role, .owner)
        XCTAssertEqual(Operator.platform.role, .owner)
    }

    func testOnlyAConsoleAudienceIsAMembersToken() {
        XCTAssertTrue(OperatorKeys.isConsoleToken(Data(#"{"aud":"console","sub":"x"}"#.utf8)))
        XCTAssertFalse(OperatorKeys.isConsoleToken(Data(#"{"aud":"0b1c5e1e-0000-4000-8000-000000000000","user_id":"x"}"#.utf8)), "a player's")
        XCTAssertFalse(OperatorKeys.isConsoleToken(Data(#"{"sub":"x"}"#.utf8)))
        XCTAssertFalse(OperatorKeys.isConsoleToken(Data("not json".utf8)))
    }

    func testOnlyATokenShapedBearerIsAskedAboutAsAMember() {
        XCTAssertTrue(OperatorKeys.looksLikeMemberToken("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln"))
        XCTAssertFalse(OperatorKeys.looksLikeMemberToken("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0"))
        XCTAssertFalse(OperatorKeys.looksLikeMemberToken("platform-admin-token"))
        XCTAssertFalse(OperatorKeys.looksLikeMemberToken("eyJ" + String(repeating: "a.", count: 2) + String(repeating: "x", count: 3_000)))
    }
}
