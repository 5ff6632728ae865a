import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle

/// `ad_daily_stats`: folded from raw requests and views by the aggregation job, read by the
/// revenue report.
struct StatsStore: Sendable {
    let logger: Logger

    /// UC-ADS-4.5: detailed requests and views are kept two years; the daily aggregates stay.
    static let detailRetention: TimeInterval = 730 * 86400

    /// Deletes the requests (and, by cascade, the views) made before `cutoff`, in batches.
    /// Aggregates are recomputed only for days that get new rows, so purged days keep theirs.
    static let purgeBatch = 5000
    @discardableResult
    func purgeDetail(before cutoff: Date, db: DatabasePool, batch: Int = Self.purgeBatch) async throws -> Int {
        var total = 0
        while true {
            var deleted = 0
            for try await n in try await db.query(Self.purgeDetailQuery(before: cutoff, batch: batch), logger: logger).decode(Int.self) {
                deleted = n
            }
            total += deleted
            if deleted < batch { return total }
        }
    }

    /// One batch of the detail purge (a periodic query).
    static func purgeDetailQuery(before cutoff: Date, batch: Int) -> PostgresQuery {
        """
        WITH gone AS (DELETE FROM ad_requests WHERE id IN (SELECT id FROM ad_requests WHERE created_at < \(cutoff) LIMIT \(batch)) RETURNING 1)
        SELECT count(*)::int FROM gone
        """
    }

    /// The (app, UTC day) pairs with requests or views recorded since `since`: what the refresh
    /// recomputes (a periodic query).
    static func touchedDaysQuery(since: Date) -> PostgresQuery {
        """
        SELECT app_id, (created_at AT TIME ZONE 'UTC')::date::text FROM ad_requests WHERE recorded_at >= \(since)
        UNION SELECT app_id, (created_at AT TIME ZONE 'UTC')::date::text FROM ad_views WHERE recorded_at >= \(since)
        """
    }

    /// Recomputes every (app, UTC day) with requests or views recorded since the last run (in
    /// the database's time, with an hour of overlap for transactions that committed late), in
    /// the caller's transaction. Two replicas serialise on an advisory lock it takes.
    @discardableResult
    func refresh(on conn: PostgresConnection) async throws -> Int {
        try await conn.run("SELECT pg_advisory_xact_lock(hashtextextended('ads:daily-stats', 0))", logger: logger)
        var since = Date.distantPast
        for try await until in try await conn.run("SELECT refreshed_until FROM ad_stats_state WHERE id = 1", logger: logger).decode(Date.self) {
            since = until.addingTimeInterval(-3600)
        }
        var apps: [UUID] = []
        var days: [String] = []
        for try await (app, day) in try await conn.run(Self.touchedDaysQuery(since: since), logger: logger).decode((UUID, String).self) {
            apps.append(app)
            days.append(day)
        }
        if !apps.isEmpty {
            try await conn.run(
                """
                DELETE FROM ad_daily_stats WHERE (app_id, day) IN (SELECT a, d::date FROM unnest(\(apps)::uuid[], \(days)::text[]) AS t(a, d))
                """,
                logger: logger
            )
            try await conn.run(
                """
                WITH touched AS (SELECT a AS app_id, d::date AS day FROM unnest(\(apps)::uuid[], \(days)::text[]) AS t(a, d)),
                q AS (
                    SELECT r.app_id, (r.created_at AT TIME ZONE 'UTC')::date AS day, r.ad_type, r.provider, r.placement, count(*) AS requests
                    FROM ad_requests r JOIN touched t ON t.app_id = r.app_id AND t.day = (r.created_at AT TIME ZONE 'UTC')::date
                    GROUP BY 1, 2, 3, 4, 5),
                v AS (
                    SELECT w.app_id, (w.created_at AT TIME ZONE 'UTC')::date AS day, w.ad_type, w.provider, w.placement,
                           count(*) AS impressions, count(*) FILTER (WHERE w.ad_clicked) AS clicks,
                           count(*) FILTER (WHERE w.ad_completed) AS completions, COALESCE(sum(w.revenue_usd), 0) AS revenue,
                           count(*) FILTER (WHERE w.revenue_usd IS NULL) AS without_revenue, COALESCE(sum(w.display_duration_ms), 0) AS duration
                    FROM ad_views w JOIN touched t ON t.app_id = w.app_id AND t.day = (w.created_at AT TIME ZONE 'UTC')::date
                    GROUP BY 1, 2, 3, 4, 5)
                INSERT INTO ad_daily_stats (app_id, day, ad_type, provider, placement, requests, impressions, clicks, completions,
                                            revenue_usd, impressions_without_revenue, duration_ms_sum, refreshed_at)
                SELECT COALESCE(q.app_id, v.app_id), COALESCE(q.day, v.day), COALESCE(q.ad_type, v.ad_type), COALESCE(q.provider, v.provider),
                       COALESCE(q.placement, v.placement), COALESCE(q.requests, 0), COALESCE(v.impressions, 0), COALESCE(v.clicks, 0),
                       COALESCE(v.completions, 0), COALESCE(v.revenue, 0), COALESCE(v.without_revenue, 0), COALESCE(v.duration, 0), now()
                FROM q FULL JOIN v ON q.app_id = v.app_id AND q.day = v.day AND q.ad_type = v.ad_type AND q.provider = v.provider
                                  AND q.placement = v.placement
                """,
                logger: logger
            )
        }
        try await conn.run(
            """
            INSERT INTO ad_stats_state (id, refreshed_until) VALUES (1, now())
            ON CONFLICT (id) DO UPDATE SET refreshed_until = GREATEST(ad_stats_state.refreshed_until, EXCLUDED.refreshed_until)
            """,
            logger: logger
        )
        return apps.count
    }

    struct Filter: Sendable {
        var start: String
        var end: String
        var adType: String?
        var provider: String?
        var placement: String?
    }

    func rows(app: UUID, _ f: Filter, on conn: PostgresConnection) async throws -> [StatsRow] {
        let rows = try await conn.run(
            """
            SELECT day::text, ad_type, provider, placement, requests::int, impressions::int, clicks::int, completions::int,
                   revenue_usd::float8, impressions_without_revenue::int
            FROM ad_daily_stats
            WHERE app_id = \(app) AND day BETWEEN \(f.start)::date AND \(f.end)::date
              AND (\(f.adType)::text IS NULL OR ad_type = \(f.adType)) AND (\(f.provider)::text IS NULL OR provider = \(f.provider))
              AND (\(f.placement)::text IS NULL OR placement = \(f.placement))
            ORDER BY day DESC, ad_type, provider, placement
            """,
            logger: logger
        )
        var out: [StatsRow] = []
        for try await r in rows.decode((String, String, String, String, Int, Int, Int, Int, Double, Int).self) {
            out.append(
                StatsRow(
                    day: r.0,
                    adType: r.1,
                    provider: r.2,
                    placement: r.3,
                    requests: r.4,
                    impressions: r.5,
                    clicks: r.6,
                    completions: r.7,
                    revenueUSD: r.8,
                    impressionsWithoutRevenue: r.9
                )
            )
        }
        return out
    }

    func refreshedUntil(on conn: PostgresConnection) async throws -> Date? {
        for try await d in try await conn.run("SELECT refreshed_until FROM ad_stats_state WHERE id = 1", logger: logger).decode(Date.self) {
            return d
        }
        return nil
    }
}
