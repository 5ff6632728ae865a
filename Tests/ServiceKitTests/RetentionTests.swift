import AdsService
import AuthDomain
import AuthService
import Foundation
import OfflineService
import PostgresNIO
import ServiceKit
import TestSupport
import XCTest

@testable import SubscriptionService

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
                """,
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

    /// `count` outbox rows of `tag` delivered 8 days ago (`/p1`, `/p2`, ...): due for a purge that keeps 7.
    static func delivered(_ db: DatabasePool, _ tag: String, _ count: Int) async throws {
        try await db.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO outbox (target_service, method, path, status, delivered_at)
                    SELECT '\(tag)', 'PUT', '/p' || g, 'delivered', now() - interval '8 days' FROM generate_series(1, \(count)) g
                    """
            )
        )
    }

    /// A row a request holds is skipped, not waited for: the purge finishes while the lock is
    /// held, and takes the row on its next run.
    func testAPurgeNeverWaitsOnARowARequestHolds() async throws {
        try await withMigratedRuntime(kitRuntime(.ads)) { rt in
            let db = rt.db
            let tag = "retention-lock-\(UUID().uuidString.prefix(8))"
            try await Self.delivered(db, tag, 5)
            let rule = RetentionRule(
                name: "outbox_delivered",
                table: "outbox",
                due: "status = 'delivered' AND delivered_at < $1 AND target_service = '\(tag)'",
                keep: .seconds(7 * 86_400),
                batch: 2
            )
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

    /// A rule's prepare that fails (a partitioned table's maintenance) is logged, and the rule's
    /// purge and the rules after it still run.
    func testAFailingPrepareLeavesThePurgeToRun() async throws {
        try await withMigratedRuntime(kitRuntime(.ads)) { rt in
            let db = rt.db
            let tag = "retention-prepare-\(UUID().uuidString.prefix(8))"
            try await Self.delivered(db, tag, 3)
            let due = "status = 'delivered' AND delivered_at < $1 AND target_service = '\(tag)'"
            let rules = [
                RetentionRule(
                    name: "failing",
                    table: "outbox",
                    due: due + " AND path = '/p1'",
                    keep: .seconds(7 * 86_400),
                    prepare: "SELECT 1 / (0 * $1::float8)::int"
                ),
                RetentionRule(name: "after", table: "outbox", due: due, keep: .seconds(7 * 86_400)),
            ]
            let purged = try await RetentionPurger(db: db, rules: rules, interval: .seconds(600), logger: rt.logger).runOnce()
            XCTAssertEqual(purged["failing"], 1, "the rule's own purge ran")
            XCTAssertEqual(purged["after"], 2, "the next rule ran")
            let left = try await Self.count(db, "SELECT count(*)::int FROM outbox WHERE target_service = '\(tag)'")
            XCTAssertEqual(left, 0)
        }
    }

    /// Every periodic query each service lists (the statements it runs, built by the same
    /// functions), EXPLAINed with sequential scans priced out: an index serves each.
    func testEveryPeriodicQueryIsServedByAnIndex() async throws {
        let env = EnvironmentVariables([:])
        let lists: [(ServiceName, [PeriodicQuery])] = [
            (.auth, AuthService.periodicQueries(env)), (.subscription, SubscriptionService.periodicQueries(env)),
            (.offline, OfflineService.periodicQueries(env)), (.ads, AdsService.periodicQueries(env)),
        ]
        for (service, queries) in lists {
            let names = Set(queries.map(\.name))
            for expected in ["job claim", "outbox delivery", "session watcher (states)", "retention outbox_delivered", "retention idempotency_keys"] {
                XCTAssertTrue(names.contains(expected), "\(service) does not list \(expected)")
            }
            try await withMigratedRuntime(kitRuntime(service)) { rt in
                for plan in try await rt.db.explain(queries, analyze: false, forbidSequentialScans: true, logger: rt.logger) {
                    XCTAssertTrue(plan.usesIndex, "\(service) \(plan.name) has no index:\n\(plan.plan)")
                    XCTAssertFalse(plan.readsWholeTable, "\(service) \(plan.name) reads the whole table:\n\(plan.plan)")
                }
                // With ANALYZE each runs, rolled back: a time is reported and nothing changes.
                let analyzed = try await rt.db.explain(queries, analyze: true, logger: rt.logger)
                XCTAssertEqual(analyzed.count, queries.count)
                for plan in analyzed { XCTAssertNotNil(plan.executionMilliseconds, "\(service) \(plan.name):\n\(plan.plan)") }
            }
        }
        XCTAssertTrue(SubscriptionService.periodicQueries(env).map(\.name).contains("expiry sweep"))
        XCTAssertTrue(AuthService.periodicQueries(env).map(\.name).contains("guest expiry"))
        XCTAssertTrue(AdsService.periodicQueries(env).map(\.name).contains("daily stats: days touched"))
        XCTAssertTrue(OfflineService.periodicQueries(env).map(\.name).contains("tombstone purge"))
    }

    /// EXPLAIN ANALYZE of a purge runs it inside a transaction that is rolled back: a due row
    /// is still there afterwards.
    func testExplainingWithAnalyzeChangesNothing() async throws {
        try await withMigratedRuntime(kitRuntime(.ads)) { rt in
            let tag = "explain-\(UUID().uuidString.prefix(8))"
            try await rt.db.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO outbox (target_service, method, path, status, created_at, delivered_at)
                        VALUES ('\(tag)', 'PUT', '/old', 'delivered', now() - interval '30 days', now() - interval '30 days')
                        """
                )
            )
            let rule = RetentionRule.platform(EnvironmentVariables([:])).first { $0.name == "outbox_delivered" }!
            let plans = try await rt.db.explain([PeriodicQuery("purge", rule.purgeQuery)], analyze: true, logger: rt.logger)
            XCTAssertTrue(plans[0].plan.contains("Delete on outbox"), plans[0].plan)
            let left = try await Self.count(rt.db, "SELECT count(*)::int FROM outbox WHERE target_service = '\(tag)'")
            XCTAssertEqual(left, 1)
        }
    }
}
