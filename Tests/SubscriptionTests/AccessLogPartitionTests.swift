import Foundation
import PostgresNIO
import ServiceKit
import TestSupport
import XCTest

@testable import SubscriptionService

/// #48 the access log is partitioned by day: the rows from before the change stay, each day
/// from then on is a partition of its own, and the retention purge drops whole days past the
/// cutoff. Each test has a database of its own: it drops partitions that the shared database's
/// other tests write into.
final class AccessLogPartitionTests: XCTestCase {
    static let partitioning = "0028_access_log_partitions"

    static func withFreshDatabase(_ body: @Sendable (ServiceRuntime) async throws -> Void) async throws {
        try await withScratchDatabase("access_parts", schema: "subscription") { database in
            let runtime = TestEnvironment.runtime(
                .subscription,
                migrations: try SubscriptionService.migrations(),
                overrides: ["DATABASE_NAME": database]
            )
            try await withPostgres(runtime.db) { _ in try await body(runtime) }
        }
    }

    static func decision(_ app: UUID, _ user: UUID, _ content: String, at: Date) -> AccessStore.Decision {
        AccessStore.Decision(app: app, user: user, content: content, granted: true, userStatus: "free", via: "free", device: "phone", at: at)
    }

    /// (content, partition, id) of the app's rows, in id order.
    static func rows(_ rt: ServiceRuntime, _ app: UUID) async throws -> [(String, String, Int64)] {
        var out: [(String, String, Int64)] = []
        let rows = try await rt.db.query(
            "SELECT content_id, tableoid::regclass::text, id FROM subscription.access_logs WHERE app_id = \(app) ORDER BY id",
            logger: rt.logger
        )
        for try await row in rows.decode((String, String, Int64).self) { out.append(row) }
        return out
    }

    static func partitions(_ rt: ServiceRuntime) async throws -> Set<String> {
        var out: Set<String> = []
        let rows = try await rt.db.query(
            """
            SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'subscription.access_logs'::regclass
            """,
            logger: rt.logger
        )
        for try await name in rows.decode(String.self) { out.insert(name) }
        return out
    }

    /// `access_logs_YYYYMMDD` of the UTC day `days` from now.
    static func day(_ days: Int) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyyMMdd"
        return "access_logs_" + f.string(from: Date().addingTimeInterval(Double(days) * 86_400))
    }

    /// A database logged into before the change: its rows are all there after it, in the
    /// partition of the rows from before; a check logged after it goes into its day's partition,
    /// one from a clock years ahead into the default partition; ids go on from one sequence.
    func testTheRowsFromBeforeStayAndEachDayFromNowOnIsAPartitionOfItsOwn() async throws {
        try await Self.withFreshDatabase { rt in
            let all = rt.migrations.migrations
            let before = Array(all.prefix { $0.name != Self.partitioning })
            XCTAssertLessThan(before.count, all.count, "the partitioning is among the migrations")
            try await MigrationRunner(schema: "subscription", migrations: before).run(on: rt.db, logger: rt.logger)
            let (app, user) = (UUID(), UUID())
            let store = AccessStore(logger: rt.logger)
            try await store.log(
                [Self.decision(app, user, "old", at: Date().addingTimeInterval(-30 * 86_400)), Self.decision(app, user, "recent", at: Date())],
                db: rt.db
            )

            try await rt.migrations.run(on: rt.db, logger: rt.logger)
            try await store.log(
                [
                    Self.decision(app, user, "after", at: Date().addingTimeInterval(1)),
                    Self.decision(app, user, "ahead", at: Date().addingTimeInterval(3 * 365 * 86_400)),
                ],
                db: rt.db
            )

            let rows = try await Self.rows(rt, app)
            XCTAssertEqual(rows.map(\.0), ["old", "recent", "after", "ahead"])
            XCTAssertEqual(rows.map(\.1), ["access_logs_before", "access_logs_before", Self.day(0), "access_logs_default"])
            XCTAssertEqual(rows.map(\.2), rows.map(\.2).sorted())
            XCTAssertEqual(Set(rows.map(\.2)).count, 4)
            let days = try await Self.partitions(rt)
            for d in 0...7 { XCTAssertTrue(days.contains(Self.day(d)), "\(Self.day(d)) made ahead: \(days.sorted())") }
        }
    }

    /// Every replica that runs workers makes the days before its purge: one that comes while
    /// another's run is open (its new day made, not yet committed) returns at once, without an
    /// error, and the day is there once. (Before, it waited for the other's lock and then failed
    /// on the table the other had made, and its purge stopped there.)
    func testTwoReplicasMakingTheDaysAtOnceBothSucceed() async throws {
        try await Self.withFreshDatabase { rt in
            try await rt.migrations.run(on: rt.db, logger: rt.logger)
            let ahead = "SELECT subscription.access_log_partitions(now() + interval '30 days', NULL, 0)"
            let (first, second) = try await rt.db.withConnection { conn -> (Int, Int) in
                try await conn.run("BEGIN", logger: rt.logger)
                var first = -1
                for try await n in try await conn.query(PostgresQuery(unsafeSQL: ahead), logger: rt.logger).decode(Int.self) { first = n }
                // The other replica's call, while this one's is open; this one commits soon after.
                let other = Task {
                    var n = -1
                    for try await v in try await rt.db.query(PostgresQuery(unsafeSQL: ahead), logger: rt.logger).decode(Int.self) { n = v }
                    return n
                }
                try await Task.sleep(for: .milliseconds(300))
                try await conn.run("COMMIT", logger: rt.logger)
                return (first, try await other.value)
            }
            XCTAssertEqual(first, 1, "the first run made the day")
            XCTAssertEqual(second, 0, "the second made nothing, and did not fail")
            let days = try await Self.partitions(rt)
            XCTAssertTrue(days.contains(Self.day(30)), "\(days.sorted())")
        }
    }

    /// The erasure fence is the parent's: a batch holding an erased user's decision is refused
    /// whole, whether its rows go to a day's partition or to the default one, and nothing of it
    /// is stored.
    func testAnErasedUsersDecisionIsRefusedInEveryPartition() async throws {
        try await Self.withFreshDatabase { rt in
            try await rt.migrations.run(on: rt.db, logger: rt.logger)
            let (app, user, erased) = (UUID(), UUID(), UUID())
            try await rt.db.query(
                "INSERT INTO subscription.session_state (app_id, user_id, version, session_epoch, state) VALUES (\(app), \(erased), 1, 1, 'erased')",
                logger: rt.logger
            )
            let store = AccessStore(logger: rt.logger)
            for at in [Date(), Date().addingTimeInterval(3 * 365 * 86_400)] {
                do {
                    try await store.log([Self.decision(app, user, "kept?", at: at), Self.decision(app, erased, "refused", at: at)], db: rt.db)
                    XCTFail("an erased user's decision was stored (at \(at))")
                } catch {
                    XCTAssertTrue(ErasureFence.isRefusal(error), String(reflecting: error))
                }
            }
            let rows = try await Self.rows(rt, app)
            XCTAssertEqual(rows.count, 0, "nothing of the refused batches stored: \(rows)")
        }
    }

    /// The purge drops the days wholly past the cutoff, makes the week ahead, and deletes the
    /// due rows of what is left, and only those. A due row in the default partition has the
    /// same ctid as a row of today's: the delete must not take today's.
    func testThePurgeDropsTheDaysPastTheCutoffAndDeletesOnlyTheDueRowsOfTheRest() async throws {
        try await Self.withFreshDatabase { rt in
            try await rt.migrations.run(on: rt.db, logger: rt.logger)
            // As if partitioned 100 days ago: the days made then, and no rows from before.
            try await rt.db.query("DROP TABLE subscription.access_logs_before", logger: rt.logger)
            try await rt.db.query("SELECT subscription.access_log_partitions(now() - interval '100 days', NULL, 3)", logger: rt.logger)
            let (app, user) = (UUID(), UUID())
            let store = AccessStore(logger: rt.logger)
            // Today's first row first: ctid (0,1) of its partition, as the default's will be.
            try await store.log([Self.decision(app, user, "today", at: Date())], db: rt.db)
            try await store.log(
                [
                    Self.decision(app, user, "100 days ago", at: Date().addingTimeInterval(-100 * 86_400)),
                    Self.decision(app, user, "97 days ago", at: Date().addingTimeInterval(-97 * 86_400)),
                ],
                db: rt.db
            )
            try await store.log([Self.decision(app, user, "95 days ago", at: Date().addingTimeInterval(-95 * 86_400))], db: rt.db)
            let placed = try await Self.rows(rt, app)
            XCTAssertEqual(placed.map(\.1), [Self.day(0), Self.day(-100), Self.day(-97), "access_logs_default"])

            let purger = RetentionPurger(
                db: rt.db,
                rules: [SubscriptionService.accessLogRetention(EnvironmentVariables([:]))],
                interval: .seconds(600),
                logger: rt.logger
            )
            let purged = try await purger.runOnce()

            XCTAssertEqual(purged["access_logs"], 1, "the default partition's due row deleted, the days dropped whole")
            let left = try await Self.rows(rt, app)
            XCTAssertEqual(left.map(\.0), ["today"])
            let days = try await Self.partitions(rt)
            for d in [-100, -99, -98, -97] { XCTAssertFalse(days.contains(Self.day(d)), "\(Self.day(d)) dropped: \(days.sorted())") }
            for d in 0...7 { XCTAssertTrue(days.contains(Self.day(d)), "\(Self.day(d)) made ahead: \(days.sorted())") }

            // Nothing more is due: a second run changes nothing.
            let again = try await purger.runOnce()
            XCTAssertEqual(again["access_logs"], 0)
            let daysAfter = try await Self.partitions(rt)
            XCTAssertEqual(daysAfter, days)
        }
    }
}
