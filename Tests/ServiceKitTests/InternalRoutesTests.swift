import Foundation
import WireTypes
import XCTest

@testable import ServiceKit

/// #50 typed internal calls: each route's path is built from its declaration, the router path
/// matches it, and docs/DESIGN.md shows the table the declarations make.
final class InternalRoutesTests: XCTestCase {
    let user = UUID(uuidString: "6F1C1A4E-2B7D-4C7A-9B39-3E0B4C1D2E3F")!
    let app = UUID(uuidString: "0A1B2C3D-4E5F-4061-8293-A4B5C6D7E8F9")!

    func testPathsAreBuiltFromTheirDeclaration() {
        let u = user.lowercasedString
        let a = app.lowercasedString
        let cases: [(String, String)] = [
            (InternalRoutes.events.path(), "/internal/events"),
            (InternalRoutes.verifyApp.path(), "/internal/apps/verify"),
            (InternalRoutes.notifyUser.path(user: user, app: app), "/internal/users/\(u)/notifications?app_id=\(a)"),
            (InternalRoutes.notifyUsers.path(app: app), "/internal/notifications?app_id=\(a)"),
            (InternalRoutes.consentFact.path(user: user, consent: "geolocation", app: app), "/internal/users/\(u)/consents/geolocation?app_id=\(a)"),
            (InternalRoutes.erase.path(user: user, app: app, query: [("version", "7")]), "/internal/users/\(u)?app_id=\(a)&version=7"),
            (InternalRoutes.timeline.path(user: user, app: app, query: [("limit", "50")]), "/internal/users/\(u)/timeline?app_id=\(a)&limit=50"),
        ]
        for (built, expected) in cases { XCTAssertEqual(built, expected) }
        XCTAssertEqual(InternalRoutes.consentFact.routerPath.description, "/users/{id}/consents/{consent}")
        XCTAssertEqual(InternalRoutes.erase.method, .delete)
        XCTAssertEqual(InternalRoutes.earnCredits.callee, .subscription)
    }

    /// Every route: one declaration per method and path, answered by someone, and each path
    /// parameter is one `path(...)` fills.
    func testTheTableIsWellFormed() {
        let rows = InternalRoutes.rows
        XCTAssertEqual(Set(rows.map { "\($0.method) \($0.path)" }).count, rows.count, "one declaration per route")
        for r in rows {
            XCTAssertFalse(r.callees.isEmpty, r.path)
            XCTAssertFalse(r.path.replacingOccurrences(of: "{id}", with: "").replacingOccurrences(of: "{consent}", with: "").contains("{"), r.path)
            XCTAssertFalse(r.purpose.isEmpty, r.path)
        }
    }

    func testDesignShowsTheTableTheDeclarationsMake() throws {
        let design = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/DESIGN.md").standardized
        let text = try String(contentsOf: design, encoding: .utf8)
        let open = "<!-- internal-routes: generated from InternalRoutes.markdown -->\n"
        let close = "<!-- /internal-routes -->"
        let start = try XCTUnwrap(text.range(of: open), "DESIGN.md has no internal-routes marker")
        let end = try XCTUnwrap(text.range(of: close, range: start.upperBound..<text.endIndex))
        let shown = String(text[start.upperBound..<end.lowerBound])
        XCTAssertEqual(
            shown,
            InternalRoutes.markdown,
            "docs/DESIGN.md's table differs from the declarations; put this between its markers:\n\(InternalRoutes.markdown)"
        )
    }
}
