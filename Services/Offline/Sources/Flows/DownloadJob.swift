import Foundation
import Logging
import OfflineDomain
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
        var catalog: CatalogStore { CatalogStore(logger: logger) }
        let clock: any WallClock
        let logger: Logger
        var batchSize = 1000
    }

    static func handler(_ deps: Deps) -> JobHandler {
        { job in try await run(job.decode(DownloadJob.self).jobID, deps) }
    }

    static func run(_ id: UUID, _ d: Deps) async throws {
        // Cancelled when the worker lost the job's lease (#34): no batch after that.
        while try await batch(id, d) { try Task.checkCancellation() }
    }

    /// One batch; returns false when the job is paused, finished or gone.
    static func batch(_ id: UUID, _ d: Deps) async throws -> Bool {
        let now = d.clock.now()
        return try await d.db.withTransaction(logger: d.logger) { conn in
            // A batch is re-derivable (its items are marked done in the same transaction): it
            // need not wait for the WAL flush; a crash loses at most a batch, done again.
            try await d.downloads.relaxCommit(on: conn)
            guard let work = try await d.downloads.work(id: id, on: conn), ["pending", "downloading"].contains(work.status) else { return false }
            if work.status == "pending" { try await d.downloads.start(id, now: now, on: conn) }
            // Items packed at publication are copied and marked done in one statement; one not
            // packed yet (published before packing existed) is packed here once, for the
            // catalogue, then copied.
            let batch = try await d.downloads.copyNextBatch(job: id, app: work.app, user: work.user, limit: d.batchSize, now: now, on: conn)
            if batch.categories.isEmpty {
                try await finish(id, work, now: now, d, on: conn)
                return false
            }
            let rest = batch.rest
            let content = rest.isEmpty ? [:] : try await d.catalog.liveItems(app: work.app, ids: rest.map(\.item), on: conn)
            var done: [Int] = []
            for item in rest {
                if let (json, version) = content[item.item] {
                    let packed = try PackedItem.pack(Data(json.utf8))
                    try await d.catalog.setPacked(app: work.app, id: item.item, packed, on: conn)
                    try await d.copies.storeItem(
                        app: work.app,
                        user: work.user,
                        category: item.category,
                        item: item.item,
                        packed: packed,
                        version: version,
                        now: now,
                        on: conn
                    )
                    done.append(item.position)
                } else {
                    // 15b: this item is gone; it is tried 3 times, then listed as failed.
                    let last = item.attempts + 1 >= OfflineRules.itemAttempts
                    try await d.downloads.markItem(
                        job: id,
                        position: item.position,
                        status: last ? "failed" : "pending",
                        error: "item not found in the catalogue",
                        on: conn
                    )
                }
            }
            if !rest.isEmpty {
                if !done.isEmpty { try await d.downloads.markDone(job: id, positions: done, on: conn) }
                try await d.downloads.recount(job: id, on: conn)
            }
            // Nothing left: finished in this transaction rather than in an empty one.
            if !batch.more && rest.isEmpty {
                try await finish(id, work, now: now, d, on: conn)
                return false
            }
            // The partial copy is visible (listed `complete: false`, counted, deletable) while
            // the job runs or is paused, not only once it finishes.
            for category in batch.categories.keys.sorted() {
                try await d.copies.upsertCategory(
                    app: work.app,
                    user: work.user,
                    category: category,
                    cursor: work.cursor,
                    complete: false,
                    now: now,
                    on: conn
                )
            }
            return true
        }
    }

    static func finish(_ id: UUID, _ work: DownloadStore.Work, now: Date, _ d: Deps, on conn: PostgresConnection) async throws {
        let failedByCategory = try await d.downloads.failedByCategory(job: id, on: conn)
        for category in work.categories {
            try await d.copies.upsertCategory(
                app: work.app,
                user: work.user,
                category: category,
                cursor: work.cursor,
                complete: failedByCategory[category] == nil,
                now: now,
                on: conn
            )
        }
        try await d.downloads.recount(job: id, on: conn)
        try await d.downloads.complete(id, withErrors: !failedByCategory.isEmpty, now: now, on: conn)
        try await d.profiles.ensure(app: work.app, user: work.user, on: conn)
        try await d.profiles.touchFullSync(app: work.app, user: work.user, now: now, on: conn)
    }
}
