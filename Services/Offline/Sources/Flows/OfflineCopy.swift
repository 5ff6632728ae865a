import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.1 and 3.6 the user's offline copy: the sync profile, a download checked against
/// every limit before anything is created (then the job and its work list with the queue entry),
/// a job paused and resumed, the catalogue's changes applied to the copy, and the copy deleted.
/// The flow owns the transactions (#50); the routes validate and answer what it returns.
struct OfflineCopy: Sendable {
    let db: DatabasePool
    let catalog: CatalogStore
    let copies: CopyStore
    let downloads: DownloadStore
    let profiles: ProfileStore
    let sync: SyncStore
    let logger: Logger

    struct ProfilePatch: Decodable {
        var autoSyncEnabled: Bool?, syncOnWifiOnly: Bool?, syncFrequencyHours: Int?, conflictStrategy: String?
        enum CodingKeys: String, CodingKey {
            case autoSyncEnabled = "auto_sync_enabled"
            case syncOnWifiOnly = "sync_on_wifi_only"
            case syncFrequencyHours = "sync_frequency_hours"
            case conflictStrategy = "conflict_strategy"
        }
    }

    struct DownloadResponse: Encodable {
        var jobID: UUID, estimatedSizeMB: Double, estimatedTimeSeconds: Int, totalCount: Int
        enum CodingKeys: String, CodingKey {
            case jobID = "job_id"
            case estimatedSizeMB = "estimated_size_mb"
            case estimatedTimeSeconds = "estimated_time_seconds"
            case totalCount = "total_count"
        }
    }

    struct RefreshResponse: Encodable {
        struct Changes: Encodable { var added: Int, updated: Int, deleted: Int }
        /// A change the copy's limits could not take (the item count or the storage limit).
        struct NotApplied: Encodable {
            var itemID: String, reason: String
            enum CodingKeys: String, CodingKey {
                case itemID = "item_id"
                case reason
            }
        }
        var updated: Bool, changes: Changes, cursor: Int64, notApplied: [NotApplied]
        enum CodingKeys: String, CodingKey {
            case updated, changes, cursor
            case notApplied = "not_applied"
        }
    }

    struct Deleted: Encodable {
        var deleted: Bool, categoriesDeleted: Int, spaceFreedMB: Double
        enum CodingKeys: String, CodingKey {
            case deleted
            case categoriesDeleted = "categories_deleted"
            case spaceFreedMB = "space_freed_mb"
        }
    }

    func updateProfile(app: UUID, user: UUID, _ patch: ProfilePatch) async throws -> SyncProfile {
        try await db.withTransaction(logger: logger) { conn -> SyncProfile in
            var p = try await profiles.profile(app: app, user: user, on: conn)
            p.autoSyncEnabled = patch.autoSyncEnabled ?? p.autoSyncEnabled
            p.syncOnWifiOnly = patch.syncOnWifiOnly ?? p.syncOnWifiOnly
            p.syncFrequencyHours = patch.syncFrequencyHours ?? p.syncFrequencyHours
            p.conflictStrategy = patch.conflictStrategy ?? p.conflictStrategy
            try await profiles.save(app: app, user: user, p, on: conn)
            return p
        }
    }

    func startDownload(app: UUID, user: UUID, categories wanted: [String], limits l: OfflineLimits, now: Date) async throws -> DownloadResponse {
        try await db.withTransaction(logger: logger) { conn -> DownloadResponse in
            try await downloads.lockUser(app: app, user: user, on: conn)
            let all = Dictionary(try await catalog.categories(app: app, on: conn).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            if let missing = wanted.first(where: { all[$0] == nil }) {
                throw AppError(OfflineErrorCode.categoryNotFound, "Category \(missing) does not exist", extra: ["category_id": .string(missing)])
            }
            let unfinished = try await downloads.unfinished(app: app, user: user, on: conn)
            let have = Set(try await copies.downloaded(app: app, user: user, on: conn).map(\.categoryID)).union(unfinished.categories)
            let total = have.union(wanted).count
            if let max = l.maxCategories, total > max {
                throw AppError(
                    OfflineErrorCode.categoryLimitExceeded,
                    "FREE keeps at most \(max) categories offline; Premium removes the limit",
                    extra: ["limit": .int(max), "downloaded": .int(have.count), "requested": .int(wanted.filter { !have.contains($0) }.count)]
                )
            }
            var items: [(category: String, item: String)] = []
            var bytes: Int64 = 0
            for c in wanted {
                for (id, size) in try await catalog.itemIDs(app: app, category: c, limit: l.maxItemsPerCategory, on: conn) {
                    items.append((c, id))
                    bytes += Int64(size)
                }
            }
            let used = try await copies.storageUsed(app: app, user: user, on: conn)
            // Re-downloading a category replaces its copy: its current size is freed first.
            let replaced = try await copies.downloaded(app: app, user: user, on: conn).filter { wanted.contains($0.categoryID) }.reduce(0) {
                $0 + $1.sizeBytes
            }
            let available = l.storageLimitBytes - (used - replaced) - unfinished.bytes
            if bytes > available {
                throw AppError(
                    OfflineErrorCode.storageLimitExceeded,
                    "Not enough offline space: \(OfflineRules.megabytes(bytes)) MB needed, \(OfflineRules.megabytes(max(0, available))) MB available",
                    extra: [
                        "required_mb": .double(OfflineRules.megabytes(bytes)), "available_mb": .double(OfflineRules.megabytes(max(0, available))),
                        "limit_mb": .double(OfflineRules.megabytes(l.storageLimitBytes)),
                    ]
                )
            }
            let id = UUID()
            try await downloads.create(id: id, app: app, user: user, items: items, categories: wanted, estimatedBytes: bytes, now: now, on: conn)
            try await JobQueue.enqueue(on: conn, queue: DownloadJob.queue, kind: DownloadJob.kind, payload: DownloadJob(jobID: id), logger: logger)
            return DownloadResponse(
                jobID: id,
                estimatedSizeMB: OfflineRules.megabytes(bytes),
                estimatedTimeSeconds: max(1, Int((Double(bytes) / OfflineRules.estimatedBytesPerSecond).rounded(.up))),
                totalCount: items.count
            )
        }
    }

    /// 15a: pause keeps what was downloaded; resume queues the job again and it continues from
    /// the first item not yet stored.
    func move(app: UUID, user: UUID, job id: UUID, from: [String], to: String) async throws -> DownloadJobStatus {
        try await db.withTransaction(logger: logger) { conn -> DownloadJobStatus in
            guard let current = try await downloads.status(id: id, app: app, user: user, on: conn) else { throw AppError.notFound("Download job") }
            guard try await downloads.transition(id: id, app: app, user: user, from: from, to: to, on: conn) else {
                throw AppError(OfflineErrorCode.invalidJobState, "The job is \(current.status)", extra: ["status": .string(current.status)])
            }
            if to == "downloading" {
                try await JobQueue.enqueue(
                    on: conn,
                    queue: DownloadJob.queue,
                    kind: DownloadJob.kind,
                    payload: DownloadJob(jobID: id),
                    logger: logger
                )
            }
            return try await downloads.status(id: id, app: app, user: user, on: conn)!
        }
    }

    /// 7a-7e: the catalogue's changes since the copy's cursor, applied within the copy's limits.
    func refresh(app: UUID, user: UUID, category: String, limits l: OfflineLimits, now: Date) async throws -> RefreshResponse {
        try await db.withTransaction(logger: logger) { conn -> RefreshResponse in
            guard let mine = try await copies.downloaded(app: app, user: user, on: conn).first(where: { $0.categoryID == category }) else {
                throw AppError(OfflineErrorCode.categoryNotDownloaded, "This category is not in your offline copy")
            }
            if mine.cursor < (try await catalog.horizon(app: app, on: conn)) {
                throw AppError(
                    OfflineErrorCode.fullDownloadRequired,
                    "This copy is older than the 30-day change history; download the category again"
                )
            }
            let (changes, next) = try await catalog.changes(app: app, category: category, after: mine.cursor, on: conn)
            // The limits hold here too: the whole copy's storage, this category's item count.
            var held = try await copies.itemSizes(app: app, user: user, category: category, on: conn)
            var budget = CopyBudget(itemCount: held.count, usedBytes: try await copies.storageUsed(app: app, user: user, on: conn), limits: l)
            var added = 0
            var updated = 0
            var deleted = 0
            var notApplied: [RefreshResponse.NotApplied] = []
            let gone = changes.filter { $0.kind == "deleted" }.map(\.id).filter { held[$0] != nil }
            try await copies.deleteItems(app: app, user: user, ids: gone, on: conn)
            for id in gone {
                budget.remove(size: held.removeValue(forKey: id) ?? 0)
                deleted += 1
            }
            for c in changes where c.kind != "deleted" {
                guard let json = c.data else { continue }
                let packed = try PackedItem.pack(Data(json.utf8))
                let old = held[c.id]
                if let refusal = budget.admit(newSize: Int64(packed.sizeBytes), oldSize: old) {
                    notApplied.append(.init(itemID: c.id, reason: refusal.rawValue))
                    continue
                }
                if old == nil { added += 1 } else { updated += 1 }
                held[c.id] = Int64(packed.sizeBytes)
                try await copies.storeItem(
                    app: app,
                    user: user,
                    category: category,
                    item: c.id,
                    packed: packed,
                    version: c.version,
                    now: now,
                    on: conn
                )
            }
            try await copies.upsertCategory(
                app: app,
                user: user,
                category: category,
                cursor: next,
                complete: mine.complete && notApplied.isEmpty,
                now: now,
                on: conn
            )
            try await profiles.touchSync(app: app, user: user, now: now, on: conn)
            return RefreshResponse(
                updated: !changes.isEmpty,
                changes: .init(added: added, updated: updated, deleted: deleted),
                cursor: next,
                notApplied: notApplied
            )
        }
    }

    /// One category (`categories` names it) or the whole copy (`all`), with what an unfinished
    /// download would still add; refused while actions on it wait to sync, unless `force`.
    func delete(app: UUID, user: UUID, categories: [String]?, force: Bool, all: Bool) async throws -> Deleted {
        try await db.withTransaction(logger: logger) { conn -> Deleted in
            if let one = categories?.first, !(try await copies.downloaded(app: app, user: user, on: conn).contains { $0.categoryID == one }),
                !(try await downloads.unfinished(app: app, user: user, on: conn).categories.contains(one))
            {
                throw AppError(OfflineErrorCode.categoryNotDownloaded, "This category is not in your offline copy")
            }
            // Items with actions still in the sync queue: warn before deleting.
            let waiting = try await sync.pendingActions(app: app, user: user, categories: categories, on: conn)
            if waiting > 0 && !force {
                throw AppError(
                    OfflineErrorCode.pendingSyncActions,
                    "\(waiting) action(s) for this content are not synced yet; sync first or repeat with ?force=true",
                    extra: ["pending_actions": .int(waiting)]
                )
            }
            // What an unfinished download would still add to these categories is cancelled first.
            try await downloads.cancel(app: app, user: user, categories: categories, on: conn)
            let (n, bytes) = try await copies.delete(app: app, user: user, categories: categories, on: conn)
            if all { try await profiles.delete(app: app, user: user, on: conn) }
            return Deleted(deleted: true, categoriesDeleted: n, spaceFreedMB: OfflineRules.megabytes(bytes))
        }
    }
}
