import AuthService
import Foundation
import PostgresNIO
import ServiceKit
@testable import SubscriptionService
import TestSupport
import XCTest

/// #19: each append-only table keeps its rows for its retention only (purged in small batches
/// that skip what a request holds), the pending and the dead are kept, and every periodic query
/// is served by an index (EXPLAIN with sequential scans priced out shows an index scan).
final class RetentionTests: XCTestCase {
    static func count(_ db: DatabasePool, _ sql: String) async throws -> Int {
        for try await n in try await db.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) { return n }
        return -1
    }

    func testPlatformRetentionPurgesWhatIsPastItAndKeepsTheRest() async throws {
        try await withMigratedRuntime(kitRuntime(.ads)) { rt in
            let db = rt.db
            let tag = "retention-\(UUID().uuidString.prefix(8))"
            let app = UUID()
            for statement in [
                """
                INSERT INTO outbox (target_service, method, path, status, created_at, delivered_at) VALUES
                  ('\(tag)', 'PUT', '/old-delivered', 'delivered', now() - interval '9 days', now() - interval '8 days'),
                  ('\(tag)', 'PUT', '/young-delivered', 'delivered', now() - interval '2 days', now() - interval '1 day'),
                  ('\(tag)', 'PUT', '/old-pending', 'pending', now() - interval '30 days', NULL),
                  ('\(tag)', 'PUT', '/old-dead', 'dead', now() - interval '30 days', NULL)
                """,
                """
                INSERT INTO jobs (queue, kind, status, finished_at) VALUES
                  ('\(tag)', 'old-done', 'done', now() - interval '8 days'), ('\(tag)', 'young-done', 'done', now() - interval '1 day'),
                  ('\(tag)', 'old-dead', 'dead', now() - interval '30 days'), ('\(tag)', 'pending', 'pending', NULL)
                """,
                """
                INSERT INTO idempotency_keys (scope, key, created_at) VALUES
                  ('\(tag)', 'old', now() - interval '25 hours'), ('\(tag)', 'young', now() - interval '23 hours')
                """,
                """
                INSERT INTO rate_limits (scope, key, window_start, count) VALUES
                  ('\(tag)', 'old', now() - interval '2 days', 1), ('\(tag)', 'young', now() - interval '1 hour', 1)
                """,
                """
                INSERT INTO operator_audit (app_id, operator, method, route, path, status, at) VALUES
                  ('\(app)', 'platform', 'GET', '/x', '/old', 200, now() - interval '401 days'),
                  ('\(app)', 'platform', 'GET', '/x', '/young', 200, now() - interval '399 days')
                """
            ] { try await db.query(PostgresQuery(unsafeSQL: statement)) }
            let purger = RetentionPurger(db: db, rules: RetentionRule.platform(EnvironmentVariables([:])), interval: .seconds(600), logger: rt.logger)
            let purged = try await purger.runOnce()
            XCTAssertGreaterThanOrEqual(purged["outbox_delivered"] ?? 0, 1)
            let outbox = try await Self.rows(db, "SELECT path FROM outbox WHERE target_service = '\(tag)' ORDER BY path")
            XCTAssertEqual(outbox, ["/old-dead", "/old-pending", "/young-delivered"], "dead and pending stay; delivered past 7 days goes")
            let jobs = try await Self.rows(db, "SELECT kind FROM jobs WHERE queue = '\(tag)' ORDER BY kind")
            XCTAssertEqual(jobs, ["old-dead", "pending", "young-done"])
            let keys = try await Self.rows(db, "SELECT key FROM idempotency_keys WHERE scope = '\(tag)'")
            XCTAssertEqual(keys, ["young"])
            let limits = try await Self.rows(db, "SELECT key FROM rate_limits WHERE scope = '\(tag)'")
            XCTAssertEqual(limits, ["young"])
            let audit = try await Self.rows(db, "SELECT path FROM operator_audit WHERE app_id = '\(app)'")
            XCTAssertEqual(audit, ["/young"])
        }
    }

    static func rows(_ db: DatabasePool, _ sql: String) async throws -> [String] {
        var out: [String] = []
        for try await v in try await db.query(PostgresQuery(unsafeSQL: sql)).decode(String.self) { out.append(v) }
        return out
    }

    /// A row a request holds is skipped, not waited for: the purge finishes while the lock is
    /// held, and takes the row on its next run.
    func testAPurgeNeverWaitsOnARowARequestHolds() async throws {
        try await withMigratedRuntime(kitRuntime(.ads)) { rt in
            let db = rt.db
            let tag = "retention-lock-\(UUID().uuidString.prefix(8))"
            try await db.query(PostgresQuery(unsafeSQL: """
                INSERT INTO outbox (target_service, method, path, status, delivered_at)
                SELECT '\(tag)', 'PUT', '/p' || g, 'delivered', now() - interval '8 days' FROM generate_series(1, 5) g
                """))
            let rule = RetentionRule(name: "outbox_delivered", table: "outbox", due: "status = 'delivered' AND delivered_at < $1 AND target_service = '\(tag)'",
                                     keep: .seconds(7 * 86_400), batch: 2)
            let purger = RetentionPurger(db: db, rules: [rule], interval: .seconds(600), logger: rt.logger)
            let held = try await db.withConnection { conn -> Int in
                try await conn.run("BEGIN", logger: rt.logger)
                try await conn.run("SELECT 1 FROM outbox WHERE target_service = \(tag) AND path = '/p1' FOR UPDATE", logger: rt.logger)
                let start = ContinuousClock.now
                let first = try await purger.runOnce()
                XCTAssertLessThan(ContinuousClock.now - start, .seconds(5), "the purge did not wait for the held row")
                let left = try await Self.count(db, "SELECT count(*)::int FROM outbox WHERE target_service = '\(tag)'")
                try await conn.run("COMMIT", logger: rt.logger)
                XCTAssertEqual(first["outbox_delivered"], 4)
                return left
            }
            XCTAssertEqual(held, 1, "only the held row is left")
            let second = try await purger.runOnce()
            XCTAssertEqual(second["outbox_delivered"], 1)
        }
    }

    /// Every periodic query, EXPLAINed with sequential scans priced out: an index serves each.
    func testEveryPeriodicQueryIsServedByAnIndex() async throws {
        let env = EnvironmentVariables([:])
        let platform = RetentionRule.platform(env).map { ($0.name, $0.selection) }
        let checks: [(ServiceName, [(String, String)])] = [
            (.ads, platform),
            (.auth, [("audit_logs", RetentionRule(name: "audit_logs", table: "audit_logs", due: "timestamp < $1", keep: .seconds(1)).selection),
                     // GuestExpirySweeper (AccountStore.deleteExpiredGuests)
                     ("guest expiry", "SELECT id FROM users WHERE is_guest AND guest_expires_at < now() ORDER BY guest_expires_at LIMIT 100")]),
            (.subscription, [("access_logs", SubscriptionService.accessLogRetention(env).selection),
                             ("expiry sweep", """
                                SELECT id FROM subscriptions WHERE \(SubscriptionStore.running) AND \(SubscriptionStore.periodEnd) <= now()
                                ORDER BY \(SubscriptionStore.periodEnd) LIMIT 100
                                """)]),
            // OfflineMaintenance.runOnce, CatalogStore.purgeTombstones, SyncStore.autoResolveOld, LocationStore.anonymize
            (.offline, [("copies expired", "SELECT 1 FROM offline_categories WHERE expires_at < now()"),
                        ("copies unopened", "SELECT 1 FROM offline_categories WHERE COALESCE(last_accessed_at, downloaded_at) < now() - interval '90 days'"),
                        ("old conflicts", "SELECT 1 FROM sync_conflicts WHERE NOT resolved AND created_at < now() - interval '7 days'"),
                        ("tombstones", "SELECT 1 FROM content_items WHERE deleted_at IS NOT NULL AND deleted_at < now() - interval '30 days'"),
                        ("locations to anonymise", "SELECT 1 FROM user_locations WHERE NOT anonymized AND created_at < now() - interval '90 days'")]),
        ]
        for (service, queries) in checks {
            try await withMigratedRuntime(kitRuntime(service)) { rt in
                try await rt.db.withConnection { conn in
                    try await conn.run("SET enable_seqscan = off", logger: rt.logger)
                    for (name, sql) in queries {
                        var plan: [String] = []
                        let explained = sql.replacingOccurrences(of: "$1", with: "86400::float8")
                        for try await line in try await conn.query(PostgresQuery(unsafeSQL: "EXPLAIN " + explained), logger: rt.logger).decode(String.self) {
                            plan.append(line)
                        }
                        let text = plan.joined(separator: "\n")
                        XCTAssertTrue(text.contains("Index"), "\(service) \(name) has no index:\n\(text)")
                        XCTAssertFalse(text.contains("Seq Scan"), "\(service) \(name) reads the whole table:\n\(text)")
                    }
                    try await conn.run("RESET enable_seqscan", logger: rt.logger)
                }
            }
        }
    }
}
