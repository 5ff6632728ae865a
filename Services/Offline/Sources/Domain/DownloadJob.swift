import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// The worker side of UC-OFFLINE-3.1: fills the user's copy item by item, in batches, each
/// batch one transaction (an item is written and marked done together, so a pause, a crash or
/// a second worker never writes it twice). A paused job stops at the next batch; resuming
/// enqueues it again and it continues from the first pending item.
struct DownloadJob: Codable, Sendable {
    static let queue = "offline"
    static let kind = "download"
    var jobID: UUID
    enum CodingKeys: String, CodingKey { case jobID = "job_id" }

    struct Deps: Sendable {
        let db: DatabasePool
        let downloads: DownloadStore
        let copies: CopyStore
        let profiles: ProfileStore
        let clock: any WallClock
        let logger: Logger
        var batchSize = 100
    }

    static func handler(_ deps: Deps) -> JobHandler {
        { job in try await run(job.decode(DownloadJob.self).jobID, deps) }
    }

    static func run(_ id: UUID, _ d: Deps) async throws {
        while try await batch(id, d) {}
    }

    /// One batch; returns false when the job is paused, finished or gone.
    static func batch(_ id: UUID, _ d: Deps) async throws -> Bool {
        let now = d.clock.now()
        return try await d.db.withTransaction(logger: d.logger) { conn in
            guard let work = try await d.downloads.work(id: id, on: conn), ["pending", "downloading"].contains(work.status) else { return false }
            if work.status == "pending" {
                try await conn.run("UPDATE download_jobs SET status = 'downloading', started_at = \(now) WHERE id = \(id)", logger: d.logger)
            }
            let items = try await d.downloads.nextItems(job: id, limit: d.batchSize, on: conn)
            if items.isEmpty {
                try await finish(id, work, now: now, d, on: conn)
                return false
            }
            // One read for the batch, one write per item, one update for the work list.
            var content: [String: (String, Int)] = [:]
            for try await r in try await conn.run("""
                SELECT id, data::text, version FROM content_items WHERE app_id = \(work.app) AND id = ANY(\(items.map(\.item))) AND deleted_at IS NULL
                """, logger: d.logger).decode((String, String, Int).self) { content[r.0] = (r.1, r.2) }
            var done: [Int] = []
            for item in items {
                if let (json, version) = content[item.item] {
                    let packed = try PackedItem.pack(Data(json.utf8))
                    try await d.copies.storeItem(app: work.app, user: work.user, category: item.category, item: item.item, packed: packed,
                                                 version: version, now: now, on: conn)
                    done.append(item.position)
                } else {
                    // 15b: this item is gone; it is tried 3 times, then listed as failed.
                    let last = item.attempts + 1 >= OfflineRules.itemAttempts
                    try await d.downloads.markItem(job: id, position: item.position, status: last ? "failed" : "pending",
                                                   error: "item not found in the catalogue", on: conn)
                }
            }
            try await conn.run("""
                UPDATE download_job_items SET status = 'done', attempts = attempts + 1 WHERE job_id = \(id) AND position = ANY(\(done))
                """, logger: d.logger)
            try await d.downloads.recount(job: id, on: conn)
            return true
        }
    }

    static func finish(_ id: UUID, _ work: DownloadStore.Work, now: Date, _ d: Deps, on conn: PostgresConnection) async throws {
        var failedByCategory: [String: Int] = [:]
        for try await (category, n) in try await conn.run("""
            SELECT category_id, count(*)::int FROM download_job_items WHERE job_id = \(id) AND status = 'failed' GROUP BY category_id
            """, logger: d.logger).decode((String, Int).self) { failedByCategory[category] = n }
        for category in work.categories {
            try await d.copies.upsertCategory(app: work.app, user: work.user, category: category, cursor: work.cursor,
                                              complete: failedByCategory[category] == nil, now: now, on: conn)
        }
        try await d.downloads.recount(job: id, on: conn)
        let status = failedByCategory.isEmpty ? "completed" : "completed_with_errors"
        try await conn.run("UPDATE download_jobs SET status = \(status), completed_at = \(now) WHERE id = \(id)", logger: d.logger)
        try await d.profiles.ensure(app: work.app, user: work.user, on: conn)
        try await conn.run("""
            UPDATE sync_profiles SET last_full_sync_at = \(now), last_sync_at = \(now) WHERE app_id = \(work.app) AND user_id = \(work.user)
            """, logger: d.logger)
    }
}
