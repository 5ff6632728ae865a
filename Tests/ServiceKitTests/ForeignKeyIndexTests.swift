import PostgresNIO
import ServiceKit
import TestSupport
import XCTest

/// A foreign key whose referencing column leads no index makes every delete of a referenced
/// row (an erased or expired user, a purged event) scan the referencing table, and every
/// query by owner too: on a grown database a sign-in ended the device's previous token by a
/// sequential scan of 1.1 M refresh tokens (~200 ms). Each key is served by an index, unless
/// its referenced rows are never deleted (listed below, with why).
final class ForeignKeyIndexTests: XCTestCase {
    /// table.column -> why no index is needed.
    static let neverDeleted: [String: String] = [
        "auth.users.app_id": "applications are deactivated, never deleted",
        "auth.otps.app_id": "applications are deactivated, never deleted",
        "auth.webhook_events.app_id": "applications are deactivated, never deleted",
        "subscription.subscriptions.plan_id": "plans are deactivated, never deleted",
        "subscription.content_unlocks.ledger_id": "the ledger is append-only",
        "subscription.iap_receipts.subscription_id": "subscriptions are kept (their store's history), never deleted",
    ]

    func testEveryForeignKeyIsServedByAnIndex() async throws {
        var missing: [String] = []
        for service in [ServiceName.auth, .subscription, .offline, .ads] {
            let unserved = try await withMigratedRuntime(kitRuntime(service)) { rt -> [String] in
                let rows = try await rt.db.query(
                    """
                    SELECT \(service.rawValue) || '.' || t.relname || '.' || a.attname
                    FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                    JOIN pg_class t ON t.oid = c.conrelid
                    WHERE c.contype = 'f' AND c.connamespace = to_regnamespace(\(service.rawValue))
                      AND NOT EXISTS (SELECT 1 FROM pg_index i
                                      WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1] AND i.indpred IS NULL)
                    """
                )
                var keys: [String] = []
                for try await key in rows.decode(String.self) where Self.neverDeleted[key] == nil { keys.append(key) }
                return keys
            }
            missing += unserved
        }
        XCTAssertEqual(missing.sorted(), [], "foreign keys with no index leading with their column")
    }
}
