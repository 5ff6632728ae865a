import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

struct DownloadJobStatus: Encodable, Sendable {
    var jobID: UUID
    var status: String
    var progress: Int
    var downloadedCount: Int
    var totalCount: Int
    var failedCount: Int
    var categoryIDs: [String]
    var errors: [ItemError]
    var startedAt: Date?
    var completedAt: Date?

    struct ItemError: Encodable, Sendable {
        var itemID: String
        var error: String
        enum CodingKeys: String, CodingKey {
            case itemID = "item_id"
            case error
        }
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "job_id"
        case status, progress
        case downloadedCount = "downloaded_count"
        case totalCount = "total_count"
        case failedCount = "failed_count"
        case categoryIDs = "category_ids"
        case errors
        case startedAt = "started_at"
        case completedAt = "completed_at"
    }
}

/// `download_jobs` and their work lists.
struct DownloadStore: Sendable {
    let logger: Logger

    /// One download request of a user at a time, until the transaction ends: the limits are
    /// counted against what that user already holds and has queued.
    func lockUser(app: UUID, user: UUID, on conn: PostgresConnection) async throws {
        try await conn.run("SELECT pg_advisory_xact_lock(hashtextextended(\("download:\(app):\(user)"), 0))", logger: logger)
    }

    func create(
        id: UUID,
        app: UUID,
        user: UUID,
        items: [(category: String, item: String)],
        categories: [String],
        estimatedBytes: Int64,
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        try await conn.run(
            """
            INSERT INTO download_jobs (id, app_id, user_id, category_ids, status, total_count, estimated_size_bytes, cursor, created_at)
            SELECT \(id), \(app), \(user), \(categories), 'pending', \(items.count), \(estimatedBytes),
                   -- A copy made now is up to date now: never below the purge horizon (after tombstones
                   -- are purged the highest stored change can be older than it).
                   GREATEST(COALESCE((SELECT max(change_seq) FROM content_items WHERE app_id = \(app)), 0),
                            COALESCE((SELECT purged_through_seq FROM content_horizon WHERE app_id = \(app)), 0)), \(now)
            """,
            logger: logger
        )
        let cats = items.map(\.category)
        let ids = items.map(\.item)
        try await conn.run(
            """
            INSERT INTO download_job_items (job_id, position, category_id, item_id)
            SELECT \(id), ord::int, c, i FROM unnest(\(cats)::text[], \(ids)::text[]) WITH ORDINALITY AS t(c, i, ord)
            """,
            logger: logger
        )
    }

    /// What the user's unfinished jobs (pending, downloading, paused) will still add: their
    /// categories, and the bytes of the items not yet written. The limits count them, or
    /// two quick requests (or two replicas) would each see room for the same slot.
    func unfinished(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> (categories: Set<String>, bytes: Int64) {
        var categories: Set<String> = []
        var bytes: Int64 = 0
        for try await (ids, left) in try await conn.run(
            """
            SELECT category_ids, (estimated_size_bytes * GREATEST(total_count - downloaded_count - failed_count, 0) / GREATEST(total_count, 1))::int8
            FROM download_jobs WHERE app_id = \(app) AND user_id = \(user) AND status IN ('pending', 'downloading', 'paused')
            """,
            logger: logger
        ).decode(([String], Int64).self) {
            categories.formUnion(ids)
            bytes += left
        }
        return (categories, bytes)
    }

    func status(id: UUID, app: UUID, user: UUID, on conn: PostgresConnection) async throws -> DownloadJobStatus? {
        var out: DownloadJobStatus?
        for try await r in try await conn.run(
            """
            SELECT status, downloaded_count, total_count, failed_count, category_ids, started_at, completed_at FROM download_jobs
            WHERE id = \(id) AND app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        ).decode((String, Int, Int, Int, [String], Date?, Date?).self) {
            let done = r.1 + r.3
            out = DownloadJobStatus(
                jobID: id,
                status: r.0,
                progress: r.2 == 0 ? 100 : done * 100 / r.2,
                downloadedCount: r.1,
                totalCount: r.2,
                failedCount: r.3,
                categoryIDs: r.4,
                errors: [],
                startedAt: r.5,
                completedAt: r.6
            )
        }
        guard var status = out else { return nil }
        for try await (item, error) in try await conn.run(
            """
            SELECT item_id, COALESCE(error, 'failed') FROM download_job_items WHERE job_id = \(id) AND status = 'failed' ORDER BY position
            """,
            logger: logger
        ).decode((String, String).self) { status.errors.append(.init(itemID: item, error: error)) }
        return status
    }

    /// Moves a job between states when allowed; returns the new status or nil.
    func transition(id: UUID, app: UUID, user: UUID, from: [String], to: String, on conn: PostgresConnection) async throws -> Bool {
        for try await _ in try await conn.run(
            """
            UPDATE download_jobs SET status = \(to) WHERE id = \(id) AND app_id = \(app) AND user_id = \(user) AND status = ANY(\(from)) RETURNING 1
            """,
            logger: logger
        ) { return true }
        return false
    }

    struct Work: Sendable {
        var app: UUID
        var user: UUID
        var status: String
        var cursor: Int64
        var categories: [String]
    }

    func work(id: UUID, on conn: PostgresConnection) async throws -> Work? {
        for try await r in try await conn.run(
            """
            SELECT app_id, user_id, status, cursor, category_ids FROM download_jobs WHERE id = \(id) FOR UPDATE
            """,
            logger: logger
        ).decode((UUID, UUID, String, Int64, [String]).self) {
            return Work(app: r.0, user: r.1, status: r.2, cursor: r.3, categories: r.4)
        }
        return nil
    }

    struct PendingItem: Sendable {
        var position: Int
        var category: String
        var item: String
        var attempts: Int
    }

    struct Batch: Sendable {
        /// The categories of the batch's items and how many there were (none: the job is done).
        var categories: [String: Int] = [:]
        /// Items that could not be copied as packed: not packed yet, or gone from the catalogue.
        var rest: [PendingItem] = []
        /// Whether pending items remain after this batch.
        var more = false
    }

    /// The next `limit` pending items of the job, in one statement: those packed at publication
    /// are copied into the user's copy, marked done and counted on the job; the others are
    /// returned for the job to deal with. The job's row lock (taken by `work`) keeps a second
    /// worker off the same batch.
    func copyNextBatch(job: UUID, app: UUID, user: UUID, limit: Int, now: Date, on conn: PostgresConnection) async throws -> Batch {
        let expires = now.addingTimeInterval(OfflineRules.copyLifetime)
        var batch = Batch()
        for try await r in try await conn.run(
            """
            WITH pending AS (
                SELECT position, category_id, item_id, attempts FROM download_job_items
                WHERE job_id = \(job) AND status = 'pending' ORDER BY position LIMIT \(limit + 1)),
            next AS (
                SELECT n.position, n.category_id, n.item_id, n.attempts, i.id IS NOT NULL AS ready,
                       i.packed, i.packed_compressed, i.packed_checksum, i.packed_size, i.version
                FROM (SELECT * FROM pending ORDER BY position LIMIT \(limit)) n
                -- One primary-key lookup per item, whatever the statistics of a just-published catalogue say.
                LEFT JOIN LATERAL (SELECT i.id, i.packed, i.packed_compressed, i.packed_checksum, i.packed_size, i.version FROM content_items i
                                   WHERE i.app_id = \(app) AND i.id = n.item_id AND i.deleted_at IS NULL AND i.packed IS NOT NULL LIMIT 1) i ON true),
            copied AS (
                INSERT INTO offline_items (app_id, user_id, category_id, item_id, data, compressed, checksum, size_bytes, version, downloaded_at, expires_at)
                SELECT \(app), \(user), r.category_id, r.item_id, r.packed, r.packed_compressed, r.packed_checksum, r.packed_size, r.version, \(now), \(expires)
                FROM next r WHERE r.ready
                ON CONFLICT (app_id, user_id, item_id) DO UPDATE SET category_id = EXCLUDED.category_id, data = EXCLUDED.data,
                    compressed = EXCLUDED.compressed, checksum = EXCLUDED.checksum, size_bytes = EXCLUDED.size_bytes, version = EXCLUDED.version,
                    downloaded_at = EXCLUDED.downloaded_at, expires_at = EXCLUDED.expires_at
                RETURNING 1),
            done AS (
                -- Positions as an array: one primary-key probe each, whatever the estimates.
                UPDATE download_job_items SET status = 'done', attempts = attempts + 1
                WHERE job_id = \(job) AND position = ANY(ARRAY(SELECT position FROM next WHERE ready)) RETURNING 1),
            counted AS (
                UPDATE download_jobs SET downloaded_count = downloaded_count + (SELECT count(*) FROM next WHERE ready)::int
                WHERE id = \(job) RETURNING 1)
            SELECT 'rest', position, category_id, item_id, attempts FROM next WHERE NOT ready
            UNION ALL
            SELECT 'category', count(*)::int, category_id, '', 0 FROM next GROUP BY category_id
            UNION ALL
            SELECT 'more', (SELECT count(*) FROM pending)::int, '', '', 0 WHERE (SELECT count(*) FROM pending) > \(limit)
            """,
            logger: logger
        ).decode((String, Int, String, String, Int).self) {
            switch r.0 {
            case "category": batch.categories[r.2] = r.1
            case "more": batch.more = true
            default: batch.rest.append(PendingItem(position: r.1, category: r.2, item: r.3, attempts: r.4))
            }
        }
        return batch
    }

    func relaxCommit(on conn: PostgresConnection) async throws {
        try await conn.run("SET LOCAL synchronous_commit TO off", logger: logger)
    }

    func start(_ id: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE download_jobs SET status = 'downloading', started_at = \(now) WHERE id = \(id)", logger: logger)
    }

    func complete(_ id: UUID, withErrors: Bool, now: Date, on conn: PostgresConnection) async throws {
        let status = withErrors ? "completed_with_errors" : "completed"
        for try await (app, user) in try await conn.run(
            """
            UPDATE download_jobs SET status = \(status), completed_at = \(now) WHERE id = \(id) RETURNING app_id, user_id
            """,
            logger: logger
        ).decode((UUID, UUID).self) {
            // #46: the user's app hears it live (and an app's servers by webhook), iff this commits.
            try await Outbox.write(
                try OutboxMessage(
                    InternalRoutes.events,
                    path: InternalRoutes.events.path(),
                    body: WebhookEventMessage(
                        type: "download.completed",
                        id: id,
                        appID: app,
                        createdAt: now,
                        version: 1,
                        data: ["user_id": .string(user.lowercasedString), "job_id": .string(id.lowercasedString), "status": .string(status)]
                    )
                ),
                on: conn,
                logger: logger
            )
        }
    }

    func failedByCategory(job: UUID, on conn: PostgresConnection) async throws -> [String: Int] {
        var out: [String: Int] = [:]
        for try await (category, n) in try await conn.run(
            """
            SELECT category_id, count(*)::int FROM download_job_items WHERE job_id = \(job) AND status = 'failed' GROUP BY category_id
            """,
            logger: logger
        ).decode((String, Int).self) { out[category] = n }
        return out
    }

    func markDone(job: UUID, positions: [Int], on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE download_job_items SET status = 'done', attempts = attempts + 1 WHERE job_id = \(job) AND position = ANY(\(positions))
            """,
            logger: logger
        )
    }

    func markItem(job: UUID, position: Int, status: String, error: String?, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE download_job_items SET status = \(status), error = \(error), attempts = attempts + 1 WHERE job_id = \(job) AND position = \(position)
            """,
            logger: logger
        )
    }

    /// Deleting categories from the copy (all when nil) cancels what unfinished downloads would
    /// still add to them: their pending items, and a job left with no category at all.
    func cancel(app: UUID, user: UUID, categories: [String]?, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE download_job_items SET status = 'cancelled'
            WHERE status = 'pending' AND (\(categories)::text[] IS NULL OR category_id = ANY(\(categories)))
              AND job_id IN (SELECT id FROM download_jobs WHERE app_id = \(app) AND user_id = \(user)
                             AND status IN ('pending', 'downloading', 'paused'))
            """,
            logger: logger
        )
        try await conn.run(
            """
            UPDATE download_jobs SET category_ids = CASE WHEN \(categories)::text[] IS NULL THEN '{}'::text[]
                                                         ELSE ARRAY(SELECT c FROM unnest(category_ids) c WHERE c <> ALL(\(categories))) END
            WHERE app_id = \(app) AND user_id = \(user) AND status IN ('pending', 'downloading', 'paused')
            """,
            logger: logger
        )
        try await conn.run(
            """
            UPDATE download_jobs SET status = 'cancelled', completed_at = now()
            WHERE app_id = \(app) AND user_id = \(user) AND status IN ('pending', 'downloading', 'paused') AND cardinality(category_ids) = 0
            """,
            logger: logger
        )
    }

    func recount(job: UUID, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE download_jobs j SET downloaded_count = c.done, failed_count = c.failed, total_count = c.total
            FROM (SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*) FILTER (WHERE status = 'failed')::int AS failed,
                         count(*) FILTER (WHERE status <> 'cancelled')::int AS total
                  FROM download_job_items WHERE job_id = \(job)) c
            WHERE j.id = \(job)
            """,
            logger: logger
        )
    }
}
