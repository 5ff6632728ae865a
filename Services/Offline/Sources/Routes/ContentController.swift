import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.1, 3.2 and 3.6: the profile, downloads, the user's packs, updates and storage.
struct ContentController: Sendable {
    let db: DatabasePool
    let catalog: CatalogStore
    let copies: CopyStore
    let downloads: DownloadStore
    let profiles: ProfileStore
    var sync: SyncStore { SyncStore(logger: logger) }
    let entitlements: any EntitlementSource
    let clock: any WallClock
    let logger: Logger
    /// While subscription is down every request falls back: said once per interval.
    let fallbackLog = LogThrottle()

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.get("sync/profile") { _, context in try await profile(context) }
        user.patch("sync/profile") { request, context in try await updateProfile(request, context) }
        user.post("categories/download") { request, context in try await download(request, context) }
        user.get("categories/download/:job") { _, context in try await jobStatus(context) }
        user.post("categories/download/:job/pause") { _, context in try await move(context, from: ["pending", "downloading"], to: "paused") }
        user.post("categories/download/:job/resume") { _, context in try await move(context, from: ["paused"], to: "downloading") }
        user.get("categories/downloaded") { _, context in
            let (app, userID) = try context.requireUser()
            return try context.json(["categories": try await db.withConnection { try await copies.downloaded(app: app, user: userID, on: $0) }])
        }
        user.get("categories/:id/items") { request, context in try await items(request, context) }
        user.get("categories/:id/check-updates") { request, context in try await checkUpdates(request, context) }
        user.post("categories/:id/refresh") { _, context in try await refresh(context) }
        user.delete("categories/:id") { request, context in try await deleteCategories(request, context, all: false) }
        user.delete("categories") { request, context in try await deleteCategories(request, context, all: true) }
        user.get("storage/suggestions") { _, context in try await suggestions(context) }
    }

    func limits(app: UUID, user: UUID, context: ServiceRequestContext) async -> OfflineLimits {
        do { return .forPremium(try await entitlements.entitlement(app: app, user: user).isPremium) } catch {
            fallbackLog.warning(logger, "entitlement unavailable, using the token's status", metadata: ["error": "\(error)"])
            return .forPremium(context.identity?.status == .premium)
        }
    }

    static func categoryID(_ context: ServiceRequestContext) throws -> String {
        guard let id = context.parameters.get("id"), Self.validID(id) else { throw AppError.badRequest("Invalid category id", field: "id") }
        return id
    }

    static func validID(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 100 && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }
    }

    // MARK: profile

    struct ProfileResponse: Encodable {
        struct Category: Encodable {
            var id: String, name: String, itemCount: Int, estimatedSizeMB: Double, status: String
            enum CodingKeys: String, CodingKey { case id, name, itemCount = "item_count", estimatedSizeMB = "estimated_size_mb", status }
        }
        struct Storage: Encodable {
            var usedBytes: Int64, usedMB: Double, limitMB: Double
            enum CodingKeys: String, CodingKey { case usedBytes = "used_bytes", usedMB = "used_mb", limitMB = "limit_mb" }
        }
        struct Limits: Encodable {
            var tier: String, maxCategories: Int?, maxItemsPerCategory: Int?, storageLimitMB: Double
            enum CodingKeys: String, CodingKey {
                case tier, maxCategories = "max_categories", maxItemsPerCategory = "max_items_per_category", storageLimitMB = "storage_limit_mb"
            }
        }
        var profile: SyncProfile
        var storage: Storage
        var limits: Limits
        var categories: [Category]
    }

    func profile(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let l = await limits(app: app, user: user, context: context)
        let body = try await db.withConnection { conn -> ProfileResponse in
            let p = try await profiles.profile(app: app, user: user, on: conn)
            let mine = Dictionary(try await copies.downloaded(app: app, user: user, on: conn).map { ($0.categoryID, $0) }, uniquingKeysWith: { a, _ in a })
            let used = try await copies.storageUsed(app: app, user: user, on: conn)
            let cats = try await catalog.categories(app: app, on: conn).map { c -> ProfileResponse.Category in
                let count = min(c.itemCount, l.maxItemsPerCategory ?? c.itemCount)
                let size = c.itemCount == 0 ? 0 : c.sizeBytes * Int64(count) / Int64(c.itemCount)
                let status = mine[c.id].map { $0.cursor < c.changeSeq ? "update_available" : "downloaded" } ?? "not_downloaded"
                return .init(id: c.id, name: c.name, itemCount: count, estimatedSizeMB: OfflineRules.megabytes(size), status: status)
            }
            return ProfileResponse(
                profile: p,
                storage: .init(
                    usedBytes: used, usedMB: OfflineRules.megabytes(used),
                    limitMB: OfflineRules.megabytes(l.storageLimitBytes)),
                limits: .init(
                    tier: l.tier, maxCategories: l.maxCategories, maxItemsPerCategory: l.maxItemsPerCategory,
                    storageLimitMB: OfflineRules.megabytes(l.storageLimitBytes)), categories: cats)
        }
        return try context.json(body)
    }

    struct ProfilePatch: Decodable {
        var autoSyncEnabled: Bool?, syncOnWifiOnly: Bool?, syncFrequencyHours: Int?, conflictStrategy: String?
        enum CodingKeys: String, CodingKey {
            case autoSyncEnabled = "auto_sync_enabled", syncOnWifiOnly = "sync_on_wifi_only", syncFrequencyHours = "sync_frequency_hours"
            case conflictStrategy = "conflict_strategy"
        }
    }

    func updateProfile(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let patch = try await request.decodeJSON(as: ProfilePatch.self, context: context)
        if let h = patch.syncFrequencyHours, !(1...168).contains(h) {
            throw AppError.validation("sync_frequency_hours", "sync_frequency_hours must be 1 to 168")
        }
        if let s = patch.conflictStrategy, !["server_wins", "local_wins", "manual"].contains(s) {
            throw AppError.validation("conflict_strategy", "conflict_strategy must be server_wins, local_wins or manual")
        }
        if patch.syncOnWifiOnly == false, await limits(app: app, user: user, context: context).tier != "premium" {
            throw AppError(OfflineErrorCode.premiumRequired, "Syncing over mobile data is a Premium option; FREE syncs on Wi-Fi only")
        }
        let p = try await db.withTransaction(logger: logger) { conn -> SyncProfile in
            var p = try await profiles.profile(app: app, user: user, on: conn)
            p.autoSyncEnabled = patch.autoSyncEnabled ?? p.autoSyncEnabled
            p.syncOnWifiOnly = patch.syncOnWifiOnly ?? p.syncOnWifiOnly
            p.syncFrequencyHours = patch.syncFrequencyHours ?? p.syncFrequencyHours
            p.conflictStrategy = patch.conflictStrategy ?? p.conflictStrategy
            try await profiles.save(app: app, user: user, p, on: conn)
            return p
        }
        return try context.json(["profile": p])
    }

    // MARK: downloads

    struct DownloadBody: Decodable {
        var categoryIDs: [String]
        enum CodingKeys: String, CodingKey { case categoryIDs = "category_ids" }
    }

    struct DownloadResponse: Encodable {
        var jobID: UUID, estimatedSizeMB: Double, estimatedTimeSeconds: Int, totalCount: Int
        enum CodingKeys: String, CodingKey {
            case jobID = "job_id", estimatedSizeMB = "estimated_size_mb", estimatedTimeSeconds = "estimated_time_seconds", totalCount = "total_count"
        }
    }

    /// Checks every limit before creating anything, then the job and its work list, in one
    /// transaction with the job queue entry.
    func download(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let body = try await request.decodeJSON(as: DownloadBody.self, context: context)
        let wanted = Array(NSOrderedSet(array: body.categoryIDs)) as? [String] ?? []
        guard (1...50).contains(wanted.count) else { throw AppError.validation("category_ids", "category_ids must name 1 to 50 categories") }
        guard wanted.allSatisfy(Self.validID) else { throw AppError.validation("category_ids", "category ids are letters, digits, '-', '_' or '.'") }
        let l = await limits(app: app, user: user, context: context)
        let now = clock.now()
        let response = try await db.withTransaction(logger: logger) { conn -> DownloadResponse in
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
                    OfflineErrorCode.categoryLimitExceeded, "FREE keeps at most \(max) categories offline; Premium removes the limit",
                    extra: ["limit": .int(max), "downloaded": .int(have.count), "requested": .int(wanted.filter { !have.contains($0) }.count)])
            }
            var items: [(category: String, item: String)] = []
            var bytes: Int64 = 0
            for c in wanted {
                for (id, size) in try await catalog.itemIDs(app: app, category: c, limit: l.maxItemsPerCategory, on: conn) {
                    items.append((c, id)); bytes += Int64(size)
                }
            }
            let used = try await copies.storageUsed(app: app, user: user, on: conn)
            // Re-downloading a category replaces its copy: its current size is freed first.
            let replaced = try await copies.downloaded(app: app, user: user, on: conn).filter { wanted.contains($0.categoryID) }.reduce(0) { $0 + $1.sizeBytes }
            let available = l.storageLimitBytes - (used - replaced) - unfinished.bytes
            if bytes > available {
                throw AppError(
                    OfflineErrorCode.storageLimitExceeded,
                    "Not enough offline space: \(OfflineRules.megabytes(bytes)) MB needed, \(OfflineRules.megabytes(max(0, available))) MB available",
                    extra: [
                        "required_mb": .double(OfflineRules.megabytes(bytes)), "available_mb": .double(OfflineRules.megabytes(max(0, available))),
                        "limit_mb": .double(OfflineRules.megabytes(l.storageLimitBytes))
                    ])
            }
            let id = UUID()
            try await downloads.create(id: id, app: app, user: user, items: items, categories: wanted, estimatedBytes: bytes, now: now, on: conn)
            try await JobQueue.enqueue(on: conn, queue: DownloadJob.queue, kind: DownloadJob.kind, payload: DownloadJob(jobID: id), logger: logger)
            return DownloadResponse(
                jobID: id, estimatedSizeMB: OfflineRules.megabytes(bytes),
                estimatedTimeSeconds: max(1, Int((Double(bytes) / OfflineRules.estimatedBytesPerSecond).rounded(.up))), totalCount: items.count)
        }
        return try context.json(response, status: .accepted)
    }

    static func jobID(_ context: ServiceRequestContext) throws -> UUID {
        guard let id = context.parameters.get("job", as: UUID.self) else { throw AppError.badRequest("Job id must be a UUID", field: "job_id") }
        return id
    }

    func jobStatus(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let id = try Self.jobID(context)
        guard let s = try await db.withConnection({ try await downloads.status(id: id, app: app, user: user, on: $0) }) else {
            throw AppError.notFound("Download job")
        }
        return try context.json(s)
    }

    /// 15a: pause keeps what was downloaded; resume queues the job again and it continues
    /// from the first item not yet stored.
    func move(_ context: ServiceRequestContext, from: [String], to: String) async throws -> Response {
        let (app, user) = try context.requireUser()
        let id = try Self.jobID(context)
        let status = try await db.withTransaction(logger: logger) { conn -> DownloadJobStatus in
            guard let current = try await downloads.status(id: id, app: app, user: user, on: conn) else { throw AppError.notFound("Download job") }
            guard try await downloads.transition(id: id, app: app, user: user, from: from, to: to, on: conn) else {
                throw AppError(OfflineErrorCode.invalidJobState, "The job is \(current.status)", extra: ["status": .string(current.status)])
            }
            if to == "downloading" {
                try await JobQueue.enqueue(on: conn, queue: DownloadJob.queue, kind: DownloadJob.kind, payload: DownloadJob(jobID: id), logger: logger)
            }
            return try await downloads.status(id: id, app: app, user: user, on: conn)!
        }
        return try context.json(status)
    }

    // MARK: the pack

    struct ItemView: Encodable {
        var id: String, version: Int, data: String, encoding: String, checksum: String, sizeBytes: Int
        enum CodingKeys: String, CodingKey { case id, version, data, encoding, checksum, sizeBytes = "size_bytes" }
    }

    func items(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let category = try Self.categoryID(context)
        let q = request.uri.queryParameters
        var limit = 100
        if let raw = q.get("limit") {
            guard let l = Int(raw), (1...500).contains(l) else { throw AppError.badRequest("limit must be 1 to 500", field: "limit") }
            limit = l
        }
        let after = q.get("after")
        if let after, !Self.validID(after) { throw AppError.badRequest("after must be an item id", field: "after") }
        let rows = try await db.withConnection { conn -> [CopyStore.PackedRow] in
            guard try await copies.downloaded(app: app, user: user, on: conn).contains(where: { $0.categoryID == category }) else {
                throw AppError(OfflineErrorCode.categoryNotDownloaded, "This category is not in your offline copy")
            }
            return try await copies.items(app: app, user: user, category: category, after: after, limit: limit, on: conn)
        }
        // `data` is base64 of the stored bytes (gzip when `encoding` says so); `checksum` is the
        // SHA-256 of the JSON after decoding.
        let views = rows.map {
            ItemView(
                id: $0.id, version: $0.version, data: $0.data.base64EncodedString(), encoding: $0.compressed ? "gzip" : "identity",
                checksum: $0.checksum, sizeBytes: $0.sizeBytes)
        }
        struct Page: Encodable { var items: [ItemView]; var next: String?; enum CodingKeys: String, CodingKey { case items, next = "next_after" } }
        return try context.json(Page(items: views, next: rows.count == limit ? rows.last?.id : nil))
    }

    // MARK: updates

    struct UpdateCheck: Encodable {
        var categoryID: String, cursor: Int64, nextCursor: Int64, added: Int, updated: Int, deleted: Int, hasUpdates: Bool, fullDownloadRequired: Bool
        enum CodingKeys: String, CodingKey {
            case categoryID = "category_id", cursor, nextCursor = "next_cursor", added, updated, deleted, hasUpdates = "has_updates"
            case fullDownloadRequired = "full_download_required"
        }
    }

    func checkUpdates(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let category = try Self.categoryID(context)
        var given: Int64?
        if let raw = request.uri.queryParameters.get("cursor") {
            guard let c = Int64(raw), c >= 0 else { throw AppError.badRequest("cursor must be a non-negative integer", field: "cursor") }
            given = c
        }
        let body = try await db.withConnection { conn -> UpdateCheck in
            guard try await catalog.categoryExists(app: app, id: category, on: conn) else { throw AppError.notFound("Category") }
            let mine = try await copies.downloaded(app: app, user: user, on: conn).first { $0.categoryID == category }
            guard let cursor = given ?? mine?.cursor else {
                throw AppError(OfflineErrorCode.categoryNotDownloaded, "This category is not in your offline copy")
            }
            if cursor < (try await catalog.horizon(app: app, on: conn)) {
                return UpdateCheck(
                    categoryID: category, cursor: cursor, nextCursor: cursor, added: 0, updated: 0, deleted: 0, hasUpdates: true,
                    fullDownloadRequired: true)
            }
            let (changes, next) = try await catalog.changes(app: app, category: category, after: cursor, on: conn)
            let n = { (k: String) in changes.filter { $0.kind == k }.count }
            return UpdateCheck(
                categoryID: category, cursor: cursor, nextCursor: next, added: n("added"), updated: n("updated"), deleted: n("deleted"),
                hasUpdates: !changes.isEmpty, fullDownloadRequired: false)
        }
        return try context.json(body)
    }

    struct RefreshResponse: Encodable {
        struct Changes: Encodable { var added: Int, updated: Int, deleted: Int }
        /// A change the copy's limits could not take (the item count or the storage limit).
        struct NotApplied: Encodable {
            var itemID: String, reason: String
            enum CodingKeys: String, CodingKey { case itemID = "item_id", reason }
        }
        var updated: Bool, changes: Changes, cursor: Int64, notApplied: [NotApplied]
        enum CodingKeys: String, CodingKey { case updated, changes, cursor, notApplied = "not_applied" }
    }

    /// 7a-7e: applies the catalogue's changes since the copy's cursor to the copy.
    func refresh(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let category = try Self.categoryID(context)
        let l = await limits(app: app, user: user, context: context)
        let now = clock.now()
        let body = try await db.withTransaction(logger: logger) { conn -> RefreshResponse in
            guard let mine = try await copies.downloaded(app: app, user: user, on: conn).first(where: { $0.categoryID == category }) else {
                throw AppError(OfflineErrorCode.categoryNotDownloaded, "This category is not in your offline copy")
            }
            if mine.cursor < (try await catalog.horizon(app: app, on: conn)) {
                throw AppError(OfflineErrorCode.fullDownloadRequired, "This copy is older than the 30-day change history; download the category again")
            }
            let (changes, next) = try await catalog.changes(app: app, category: category, after: mine.cursor, on: conn)
            // The limits hold here too: the whole copy's storage, this category's item count.
            var held = try await copies.itemSizes(app: app, user: user, category: category, on: conn)
            var budget = CopyBudget(itemCount: held.count, usedBytes: try await copies.storageUsed(app: app, user: user, on: conn), limits: l)
            var added = 0, updated = 0, deleted = 0
            var notApplied: [RefreshResponse.NotApplied] = []
            let gone = changes.filter { $0.kind == "deleted" }.map(\.id).filter { held[$0] != nil }
            try await copies.deleteItems(app: app, user: user, ids: gone, on: conn)
            for id in gone { budget.remove(size: held.removeValue(forKey: id) ?? 0); deleted += 1 }
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
                try await copies.storeItem(app: app, user: user, category: category, item: c.id, packed: packed, version: c.version, now: now, on: conn)
            }
            try await copies.upsertCategory(
                app: app, user: user, category: category, cursor: next, complete: mine.complete && notApplied.isEmpty,
                now: now, on: conn)
            try await profiles.touchSync(app: app, user: user, now: now, on: conn)
            return RefreshResponse(
                updated: !changes.isEmpty, changes: .init(added: added, updated: updated, deleted: deleted), cursor: next,
                notApplied: notApplied)
        }
        return try context.json(body)
    }

    // MARK: storage

    func deleteCategories(_ request: Request, _ context: ServiceRequestContext, all: Bool) async throws -> Response {
        let (app, user) = try context.requireUser()
        let categories: [String]? = all ? nil : [try Self.categoryID(context)]
        let force = request.uri.queryParameters.get("force") == "true"
        struct Deleted: Encodable {
            var deleted: Bool, categoriesDeleted: Int, spaceFreedMB: Double
            enum CodingKeys: String, CodingKey { case deleted, categoriesDeleted = "categories_deleted", spaceFreedMB = "space_freed_mb" }
        }
        let body = try await db.withTransaction(logger: logger) { conn -> Deleted in
            if let one = categories?.first, !(try await copies.downloaded(app: app, user: user, on: conn).contains { $0.categoryID == one }),
                !(try await downloads.unfinished(app: app, user: user, on: conn).categories.contains(one))
            {
                throw AppError(OfflineErrorCode.categoryNotDownloaded, "This category is not in your offline copy")
            }
            // Items with actions still in the sync queue: warn before deleting.
            let waiting = try await sync.pendingActions(app: app, user: user, categories: categories, on: conn)
            if waiting > 0 && !force {
                throw AppError(
                    OfflineErrorCode.pendingSyncActions, "\(waiting) action(s) for this content are not synced yet; sync first or repeat with ?force=true",
                    extra: ["pending_actions": .int(waiting)])
            }
            // What an unfinished download would still add to these categories is cancelled first.
            try await downloads.cancel(app: app, user: user, categories: categories, on: conn)
            let (n, bytes) = try await copies.delete(app: app, user: user, categories: categories, on: conn)
            if all { try await profiles.delete(app: app, user: user, on: conn) }
            return Deleted(deleted: true, categoriesDeleted: n, spaceFreedMB: OfflineRules.megabytes(bytes))
        }
        return try context.json(body)
    }

    func suggestions(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let now = clock.now()
        struct Suggestion: Encodable {
            var categoryID: String, reason: String, sizeMB: Double
            enum CodingKeys: String, CodingKey { case categoryID = "category_id", reason, sizeMB = "size_mb" }
        }
        let mine = try await db.withConnection { try await copies.downloaded(app: app, user: user, on: $0) }
        let list: [Suggestion] = mine.compactMap { c in
            let reason: String? =
                if c.lastAccessedAt == nil { "never_opened" } else if let last = c.lastAccessedAt, now.timeIntervalSince(last) > 30 * 86400 {
                    "not_opened_30_days"
                } else if !c.complete { "partial" } else { nil }
            return reason.map { Suggestion(categoryID: c.categoryID, reason: $0, sizeMB: OfflineRules.megabytes(c.sizeBytes)) }
        }
        struct Body: Encodable {
            var suggestions: [Suggestion], freeableMB: Double
            enum CodingKeys: String, CodingKey { case suggestions, freeableMB = "freeable_mb" }
        }
        return try context.json(Body(suggestions: list, freeableMB: (list.reduce(0) { $0 + $1.sizeMB } * 100).rounded() / 100))
    }
}
