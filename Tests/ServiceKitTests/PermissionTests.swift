import PostgresNIO
import ServiceKit
import TestSupport
import XCTest

/// Each service's role is granted its own schema only.
final class PermissionTests: XCTestCase {
    func testAServiceRoleCannotReadAnotherServicesSchema() async throws {
        // Make sure the ads schema has a table to try.
        let ads = kitRuntime(.ads)
        try await withMigratedRuntime(ads) { _ in }

        for (service, foreign) in [(ServiceName.auth, "ads"), (.ads, "auth"), (.offline, "subscription"), (.subscription, "offline")] {
            let runtime = kitRuntime(service)
            try await withMigratedRuntime(runtime) { runtime in
                // Its own schema works...
                try await runtime.db.query("SELECT count(*) FROM outbox")
                // ...another's is refused by Postgres.
                do {
                    try await runtime.db.query("SELECT count(*) FROM \(unescaped: foreign).outbox")
                    XCTFail("\(service) could read \(foreign).outbox")
                } catch {
                    XCTAssertEqual(DatabaseErrors.sqlState(error), "42501", "\(service) → \(foreign): \(String(reflecting: error))")
                }
            }
        }
    }
}
