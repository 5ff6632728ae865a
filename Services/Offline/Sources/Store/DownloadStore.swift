import Foundation
import Logging
import PostgresNIO
import ServiceKit

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
        enum CodingKeys: String, CodingKey { case itemID = "item_id", error }
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "job_id", status, progress, downloadedCount = "downloaded_count", totalCount = "total_count"
        case failedCount = "failed_count", categoryIDs = "category_ids", errors, startedAt = "started_at", completedAt = "completed_at"
    }
}

/// `download_jobs` and their work lists.
struct DownloadStore: Sendable {
    let logger: Logger

    func create(id: UUID, app: UUID, user: UUID, items: [(category: String, item: String)], categories: [String], estimatedBytes: Int64,
                now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("""
            INSERT INTO download_jobs (id, app_id, user_id, category_ids, status, total_count, estimated_size_bytes, cursor, created_at)
            SELECT \(id), \(app), \(user), \(categories), 'pending', \(items.count), \(estimatedBytes),
                   -- A copy made now is up to date now: never below the purge horizon (after tombstones
                   -- are purged the highest stored change can be older than it).
                   GREATEST(COALESCE((SELECT max(change_seq) FROM content_items WHERE app_id = \(app)), 0),
                            COALESCE((SELECT purged_through_seq FROM content_horizon WHERE app_id = \(app)), 0)), \(now)
            """, logger: logger)
        let cats = items.map(\.category), ids = items.map(\.item)
        try await conn.run("""
            INSERT INTO download_job_items (job_id, position, category_id, item_id)
            SELECT \(id), ord::int, c, i FROM unnest(\(cats)::text[], \(ids)::text[]) WITH ORDINALITY AS t(c, i, ord)
            """, logger: logger)
    }

    /// What the user's unfinished jobs (pending, downloading, paused) will still add: their
    /// categories, and the bytes of the items not yet written. The limits count them, or
    /// two quick requests (or two replicas) would each see room for the same slot.
    func unfinished(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> (categories: Set<String>, bytes: Int64) {
        var categories: Set<String> = [], bytes: Int64 = 0
        for try await (ids, left) in try await conn.run("""
            SELECT category_ids, (estimated_size_bytes * GREATEST(total_count - downloaded_count - failed_count, 0) / GREATEST(total_count, 1))::int8
            FROM download_jobs WHERE app_id = \(app) AND user_id = \(user) AND status IN ('pending', 'downloading', 'paused')
            """, logger: logger).decode(([String], Int64).self) {
            categories.formUnion(ids)
            bytes += left
        }
        return (categories, bytes)
    }

    func status(id: UUID, app: UUID, user: UUID, on conn: PostgresConnection) async throws -> DownloadJobStatus? {
        var out: DownloadJobStatus?
        for try await r in try await conn.run("""
            SELECT status, downloaded_count, total_count, failed_count, category_ids, started_at, completed_at FROM download_jobs
            WHERE id = \(id) AND app_id = \(app) AND user_id = \(user)
            """, logger: logger).decode((String, Int, Int, Int, [String], Date?, Date?).self) {
            let done = r.1 + r.3
            out = DownloadJobStatus(jobID: id, status: r.0, progress: r.2 == 0 ? 100 : done * 100 / r.2, downloadedCount: r.1, totalCount: r.2,
                                    failedCount: r.3, categoryIDs: r.4, errors: [], startedAt: r.5, completedAt: r.6)
        }
        guard var status = out else { return nil }
        for try await (item, error) in try await conn.run("""
            SELECT item_id, COALESCE(error, 'failed') FROM download_job_items WHERE job_id = \(id) AND status = 'failed' ORDER BY position
            """, logger: logger).decode((String, String).self) { status.errors.append(.init(itemID: item, error: error)) }
        return status
    }

    /// Moves a job between states when allowed; returns the new status or nil.
    func transition(id: UUID, app: UUID, user: UUID, from: [String], to: String, on conn: PostgresConnection) async throws -> Bool {
        for try await _ in try await conn.run("""
            UPDATE download_jobs SET status = \(to) WHERE id = \(id) AND app_id = \(app) AND user_id = \(user) AND status = ANY(\(from)) RETURNING 1
            """, logger: logger) { return true }
        return false
    }

    struct Work: Sendable { var app: UUID; var user: UUID; var status: String; var cursor: Int64; var categories: [String] }

    func work(id: UUID, on conn: PostgresConnection) async throws -> Work? {
        for try await r in try await conn.run("""
            SELECT app_id, user_id, status, cursor, category_ids FROM download_jobs WHERE id = \(id) FOR UPDATE
            """, logger: logger).decode((UUID, UUID, String, Int64, [String]).self) {
            return Work(app: r.0, user: r.1, status: r.2, cursor: r.3, categories: r.4)
        }
        return nil
    }

    struct PendingItem: Sendable { var position: Int; var category: String; var item: String; var attempts: Int }

    func nextItems(job: UUID, limit: Int, on conn: PostgresConnection) async throws -> [PendingItem] {
        var out: [PendingItem] = []
        for try await r in try await conn.run("""
            SELECT position, category_id, item_id, attempts FROM download_job_items WHERE job_id = \(job) AND status = 'pending'
            ORDER BY position LIMIT \(limit)
            """, logger: logger).decode((Int, String, String, Int).self) { out.append(PendingItem(position: r.0, category: r.1, item: r.2, attempts: r.3)) }
        return out
    }

    func relaxCommit(on conn: PostgresConnection) async throws {
        try await conn.run("SET LOCAL synchronous_commit TO off", logger: logger)
    }

    func start(_ id: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE download_jobs SET status = 'downloading', started_at = \(now) WHERE id = \(id)", logger: logger)
    }

    func complete(_ id: UUID, withErrors: Bool, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("""
            UPDATE download_jobs SET status = \(withErrors ? "completed_with_errors" : "completed"), completed_at = \(now) WHERE id = \(id)
            """, logger: logger)
    }

    func failedByCategory(job: UUID, on conn: PostgresConnection) async throws -> [String: Int] {
        var out: [String: Int] = [:]
        for try await (category, n) in try await conn.run("""
            SELECT category_id, count(*)::int FROM download_job_items WHERE job_id = \(job) AND status = 'failed' GROUP BY category_id
            """, logger: logger).decode((String, Int).self) { out[category] = n }
        return out
    }

    func markDone(job: UUID, positions: [Int], on conn: PostgresConnection) async throws {
        try await conn.run("""
            UPDATE download_job_items SET status = 'done', attempts = attempts + 1 WHERE job_id = \(job) AND position = ANY(\(positions))
            """, logger: logger)
    }

    func markItem(job: UUID, position: Int, status: String, error: String?, on conn: PostgresConnection) async throws {
        try await conn.run("""
            UPDATE download_job_items SET status = \(status), error = \(error), attempts = attempts + 1 WHERE job_id = \(job) AND position = \(position)
            """, logger: logger)
    }

    /// Deleting categories from the copy (all when nil) cancels what unfinished downloads would
    /// still add to them: their pending items, and a job left with no category at all.
    func cancel(app: UUID, user: UUID, categories: [String]?, on conn: PostgresConnection) async throws {
        try await conn.run("""
            UPDATE download_job_items SET status = 'cancelled'
            WHERE status = 'pending' AND (\(categories)::text[] IS NULL OR category_id = ANY(\(categories)))
              AND job_id IN (SELECT id FROM download_jobs WHERE app_id = \(app) AND user_id = \(user)
                             AND status IN ('pending', 'downloading', 'paused'))
            """, logger: logger)
        try await conn.run("""
            UPDATE download_jobs SET category_ids = CASE WHEN \(categories)::text[] IS NULL THEN '{}'::text[]
                                                         ELSE ARRAY(SELECT c FROM unnest(category_ids) c WHERE c <> ALL(\(categories))) END
            WHERE app_id = \(app) AND user_id = \(user) AND status IN ('pending', 'downloading', 'paused')
            """, logger: logger)
        try await conn.run("""
            UPDATE download_jobs SET status = 'cancelled', completed_at = now()
            WHERE app_id = \(app) AND user_id = \(user) AND status IN ('pending', 'downloading', 'paused') AND cardinality(category_ids) = 0
            """, logger: logger)
    }

    func recount(job: UUID, on conn: PostgresConnection) async throws {
        try await conn.run("""
            UPDATE download_jobs j SET downloaded_count = c.done, failed_count = c.failed, total_count = c.total
            FROM (SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*) FILTER (WHERE status = 'failed')::int AS failed,
                         count(*) FILTER (WHERE status <> 'cancelled')::int AS total
                  FROM download_job_items WHERE job_id = \(job)) c
            WHERE j.id = \(job)
            """, logger: logger)
    }
}
