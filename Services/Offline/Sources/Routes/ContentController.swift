import Foundation
import Hummingbird
import OfflineDomain
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
    let copy: OfflineCopy
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
            enum CodingKeys: String, CodingKey {
                case id, name
                case itemCount = "item_count"
                case estimatedSizeMB = "estimated_size_mb"
                case status
            }
        }
        struct Storage: Encodable {
            var usedBytes: Int64, usedMB: Double, limitMB: Double
            enum CodingKeys: String, CodingKey {
                case usedBytes = "used_bytes"
                case usedMB = "used_mb"
                case limitMB = "limit_mb"
            }
        }
        struct Limits: Encodable {
            var tier: String, maxCategories: Int?, maxItemsPerCategory: Int?, storageLimitMB: Double
            enum CodingKeys: String, CodingKey {
                case tier
                case maxCategories = "max_categories"
                case maxItemsPerCategory = "max_items_per_category"
                case storageLimitMB = "storage_limit_mb"
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
            let mine = Dictionary(
                try await copies.downloaded(app: app, user: user, on: conn).map { ($0.categoryID, $0) },
                uniquingKeysWith: { a, _ in a }
            )
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
                    usedBytes: used,
                    usedMB: OfflineRules.megabytes(used),
                    limitMB: OfflineRules.megabytes(l.storageLimitBytes)
                ),
                limits: .init(
                    tier: l.tier,
                    maxCategories: l.maxCategories,
                    maxItemsPerCategory: l.maxItemsPerCategory,
                    storageLimitMB: OfflineRules.megabytes(l.storageLimitBytes)
                ),
                categories: cats
            )
        }
        return try context.json(body)
    }

    func updateProfile(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let patch = try await request.decodeJSON(as: OfflineCopy.ProfilePatch.self, context: context)
        if let h = patch.syncFrequencyHours, !(1...168).contains(h) {
            throw AppError.validation("sync_frequency_hours", "sync_frequency_hours must be 1 to 168")
        }
        if let s = patch.conflictStrategy, !["server_wins", "local_wins", "manual"].contains(s) {
            throw AppError.validation("conflict_strategy", "conflict_strategy must be server_wins, local_wins or manual")
        }
        if patch.syncOnWifiOnly == false, await limits(app: app, user: user, context: context).tier != "premium" {
            throw AppError(OfflineErrorCode.premiumRequired, "Syncing over mobile data is a Premium option; FREE syncs on Wi-Fi only")
        }
        let p = try await copy.updateProfile(app: app, user: user, patch)
        return try context.json(["profile": p])
    }

    // MARK: downloads

    struct DownloadBody: Decodable {
        var categoryIDs: [String]
        enum CodingKeys: String, CodingKey { case categoryIDs = "category_ids" }
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
        let response = try await copy.startDownload(app: app, user: user, categories: wanted, limits: l, now: clock.now())
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
        let status = try await copy.move(app: app, user: user, job: id, from: from, to: to)
        return try context.json(status)
    }

    // MARK: the pack

    struct ItemView: Encodable {
        var id: String, version: Int, data: String, encoding: String, checksum: String, sizeBytes: Int
        enum CodingKeys: String, CodingKey {
            case id, version, data, encoding, checksum
            case sizeBytes = "size_bytes"
        }
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
                id: $0.id,
                version: $0.version,
                data: $0.data.base64EncodedString(),
                encoding: $0.compressed ? "gzip" : "identity",
                checksum: $0.checksum,
                sizeBytes: $0.sizeBytes
            )
        }
        struct Page: Encodable {
            var items: [ItemView]
            var next: String?
            enum CodingKeys: String, CodingKey {
                case items
                case next = "next_after"
            }
        }
        return try context.json(Page(items: views, next: rows.count == limit ? rows.last?.id : nil))
    }

    // MARK: updates

    struct UpdateCheck: Encodable {
        var categoryID: String, cursor: Int64, nextCursor: Int64, added: Int, updated: Int, deleted: Int, hasUpdates: Bool, fullDownloadRequired: Bool
        enum CodingKeys: String, CodingKey {
            case categoryID = "category_id"
            case cursor
            case nextCursor = "next_cursor"
            case added, updated, deleted
            case hasUpdates = "has_updates"
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
                    categoryID: category,
                    cursor: cursor,
                    nextCursor: cursor,
                    added: 0,
                    updated: 0,
                    deleted: 0,
                    hasUpdates: true,
                    fullDownloadRequired: true
                )
            }
            let (changes, next) = try await catalog.changes(app: app, category: category, after: cursor, on: conn)
            let n = { (k: String) in changes.filter { $0.kind == k }.count }
            return UpdateCheck(
                categoryID: category,
                cursor: cursor,
                nextCursor: next,
                added: n("added"),
                updated: n("updated"),
                deleted: n("deleted"),
                hasUpdates: !changes.isEmpty,
                fullDownloadRequired: false
            )
        }
        return try context.json(body)
    }

    /// 7a-7e: applies the catalogue's changes since the copy's cursor to the copy.
    func refresh(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let category = try Self.categoryID(context)
        let l = await limits(app: app, user: user, context: context)
        let body = try await copy.refresh(app: app, user: user, category: category, limits: l, now: clock.now())
        return try context.json(body)
    }

    // MARK: storage

    func deleteCategories(_ request: Request, _ context: ServiceRequestContext, all: Bool) async throws -> Response {
        let (app, user) = try context.requireUser()
        let categories: [String]? = all ? nil : [try Self.categoryID(context)]
        let force = request.uri.queryParameters.get("force") == "true"
        let body = try await copy.delete(app: app, user: user, categories: categories, force: force, all: all)
        return try context.json(body)
    }

    func suggestions(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let now = clock.now()
        struct Suggestion: Encodable {
            var categoryID: String, reason: String, sizeMB: Double
            enum CodingKeys: String, CodingKey {
                case categoryID = "category_id"
                case reason
                case sizeMB = "size_mb"
            }
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
            enum CodingKeys: String, CodingKey {
                case suggestions
                case freeableMB = "freeable_mb"
            }
        }
        return try context.json(Body(suggestions: list, freeableMB: (list.reduce(0) { $0 + $1.sizeMB } * 100).rounded() / 100))
    }
}
