import Foundation
import PostgresNIO
import ServiceKit
import TestSupport
import XCTest

/// Every table of a service that holds a user's data carries the erasure fence's trigger, so a
/// table added later cannot be forgotten. The platform's own fact tables are left out: they hold
/// the erased marker itself, and a late fact for an erased user is already ignored by its rules.
final class ErasureFenceTests: XCTestCase {
    static let platformFacts: Set<String> = ["session_state", "revoked_sessions", "fact_counters", "fact_versions", "entitlement_state"]

    func testEveryTableHoldingAUsersDataIsFenced() async throws {
        for service in [ServiceName.subscription, .offline, .ads] {
            try await withMigratedRuntime(kitRuntime(service)) { rt in
                let rows = try await rt.db.query(
                    """
                    SELECT c.relname, a.attname, EXISTS (
                        -- An insert trigger (tgtype bit 2) of the fence, on each row or on the statement's rows.
                        SELECT 1 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                        WHERE t.tgrelid = c.oid AND p.proname IN ('refuse_erased_user', 'refuse_erased_users')
                          AND t.tgtype & 4 <> 0 AND t.tgenabled <> 'D'
                    )
                    FROM pg_class c
                    JOIN pg_namespace n ON n.oid = c.relnamespace
                    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname IN ('user_id', 'referee_id') AND NOT a.attisdropped
                    WHERE n.nspname = \(service.rawValue) AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                    """,
                    logger: rt.logger
                )
                var fenced = 0
                for try await (table, column, hasFence) in rows.decode((String, String, Bool).self) where !Self.platformFacts.contains(table) {
                    XCTAssertTrue(hasFence, "\(service).\(table).\(column) holds a user's data and has no erasure fence")
                    fenced += 1
                }
                XCTAssertGreaterThan(fenced, 7, "\(service): the catalog query found the user tables")
            }
        }
    }
}
