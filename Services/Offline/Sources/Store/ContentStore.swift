import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

struct CategorySummary: Sendable {
    var id: String
    var name: String
    var description: String
    var itemCount: Int
    var sizeBytes: Int64
    var changeSeq: Int64
}

/// The published catalogue (`content_categories`, `content_items`) and its change log.
struct CatalogStore: Sendable {
    let logger: Logger

    func upsertCategory(app: UUID, id: String, name: String, description: String, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO content_categories (app_id, id, name, description) VALUES (\(app), \(id), \(name), \(description))
            ON CONFLICT (app_id, id) DO UPDATE SET name = EXCLUDED.name, description = EXCLUDED.description, active = true,
                change_seq = nextval('content_change_seq'), updated_at = now()
            """,
            logger: logger
        )
    }

    /// A category as the console lists it (#47): what the app downloads, and how much of it.
    struct ListedCategory: Encodable, Sendable {
        var id: String
        var name: String
        var description: String
        var active: Bool
        var items: Int
        var sizeBytes: Int64
        var updatedAt: Date
        enum CodingKeys: String, CodingKey {
            case id, name, description, active, items
            case sizeBytes = "size_bytes"
            case updatedAt = "updated_at"
        }
    }

    /// The app's categories by id, `limit` of them after `after`, with their live items.
    func categories(app: UUID, after: String?, limit: Int, on conn: PostgresConnection) async throws -> [ListedCategory] {
        var out: [ListedCategory] = []
        for try await r in try await conn.query(
            """
            SELECT c.id, c.name, c.description, c.active, c.updated_at,
                (SELECT count(*)::int8 FROM content_items i WHERE i.app_id = c.app_id AND i.category_id = c.id AND i.deleted_at IS NULL),
                (SELECT COALESCE(sum(size_bytes), 0)::int8 FROM content_items i WHERE i.app_id = c.app_id AND i.category_id = c.id AND i.deleted_at IS NULL)
            FROM content_categories c WHERE c.app_id = \(app) AND c.id > \(after ?? "") ORDER BY c.id LIMIT \(limit)
            """,
            logger: logger
        ).decode((String, String, String, Bool, Date, Int64, Int64).self) {
            out.append(ListedCategory(id: r.0, name: r.1, description: r.2, active: r.3, items: Int(r.5), sizeBytes: r.6, updatedAt: r.4))
        }
        return out
    }

    /// UC-OFFLINE-3.2: the players who keep this category offline hear of its update, through
    /// auth (the messenger, #30): one outbox message per 25,000 players, not one per player.
    /// Fewer than 3 changes is a silent sync hint (auth decides from `changes`).
    func announceUpdate(app: UUID, category: String, changes: Int, on conn: PostgresConnection) async throws {
        var name = category
        for try await n in try await conn.run(
            "SELECT name FROM content_categories WHERE app_id = \(app) AND id = \(category)",
            logger: logger
        ).decode(String.self) { name = n }
        var holders: [UUID] = []
        for try await user in try await conn.run(
            """
            SELECT user_id FROM offline_categories WHERE app_id = \(app) AND category_id = \(category)
            """,
            logger: logger
        ).decode(UUID.self) { holders.append(user) }
        let batch = UUID().lowercasedString
        for (i, start) in stride(from: 0, to: holders.count, by: Self.announceChunk).enumerated() {
            let users = Array(holders[start..<min(start + Self.announceChunk, holders.count)])
            try await Outbox.write(
                OutboxMessage(
                    InternalRoutes.notifyUsers,
                    path: InternalRoutes.notifyUsers.path(app: app),
                    body: NotificationRequest(
                        appID: app,
                        key: "content:\(category):\(batch):\(i)",
                        kind: "content_update",
                        data: ["changes": String(changes), "category": name],
                        userIDs: users
                    )
                ),
                on: conn,
                logger: logger
            )
        }
    }

    static let announceChunk = 25_000

    func categoryExists(app: UUID, id: String, on conn: PostgresConnection) async throws -> Bool {
        for try await _ in try await conn.run("SELECT 1 FROM content_categories WHERE app_id = \(app) AND id = \(id) AND active", logger: logger) {
            return true
        }
        return false
    }

    /// Upserts items (a new version and a new change number when the data changed) and
    /// tombstones deleted ones. Returns (upserted, deleted).
    func applyBatch(
        app: UUID,
        category: String,
        upserts: [(String, String)],
        deletes: [String],
        on conn: PostgresConnection
    ) async throws -> (Int, Int) {
        var upserted = 0
        var deleted = 0
        for (id, json) in upserts {
            var stored: String?
            for try await text in try await conn.run(
                """
                INSERT INTO content_items (app_id, id, category_id, data, size_bytes, created_seq, change_seq)
                SELECT \(app), \(id), \(category), d, octet_length(d::text), s, s
                FROM (SELECT \(json)::jsonb AS d, nextval('content_change_seq') AS s) x
                ON CONFLICT (app_id, id) DO UPDATE SET data = EXCLUDED.data, size_bytes = EXCLUDED.size_bytes, category_id = EXCLUDED.category_id,
                    version = content_items.version + 1, change_seq = EXCLUDED.change_seq, deleted_at = NULL, updated_at = now(),
                    created_seq = CASE WHEN content_items.deleted_at IS NOT NULL THEN EXCLUDED.created_seq ELSE content_items.created_seq END
                WHERE content_items.data IS DISTINCT FROM EXCLUDED.data OR content_items.deleted_at IS NOT NULL
                   OR content_items.category_id <> EXCLUDED.category_id
                RETURNING data::text
                """,
                logger: logger
            ).decode(String.self) { stored = text }
            guard let stored else { continue }
            upserted += 1
            // Packed once here, for every user who downloads it.
            try await setPacked(app: app, id: id, try PackedItem.pack(Data(stored.utf8)), on: conn)
        }
        if !deletes.isEmpty {
            deleted += try await conn.run(
                """
                UPDATE content_items SET deleted_at = now(), change_seq = nextval('content_change_seq'), updated_at = now()
                WHERE app_id = \(app) AND category_id = \(category) AND id = ANY(\(deletes)) AND deleted_at IS NULL RETURNING 1
                """,
                logger: logger
            ).count()
        }
        return (upserted, deleted)
    }

    /// The JSON text and version of the live items among `ids`.
    func liveItems(app: UUID, ids: [String], on conn: PostgresConnection) async throws -> [String: (String, Int)] {
        var out: [String: (String, Int)] = [:]
        for try await r in try await conn.run(
            """
            SELECT id, data::text, version FROM content_items WHERE app_id = \(app) AND id = ANY(\(ids)) AND deleted_at IS NULL
            """,
            logger: logger
        ).decode((String, String, Int).self) { out[r.0] = (r.1, r.2) }
        return out
    }

    func setPacked(app: UUID, id: String, _ p: PackedItem, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE content_items SET packed = \(ByteBuffer(data: p.data)), packed_compressed = \(p.compressed), packed_checksum = \(p.checksum),
                   packed_size = \(p.sizeBytes)
            WHERE app_id = \(app) AND id = \(id)
            """,
            logger: logger
        )
    }

    func categories(app: UUID, on conn: PostgresConnection) async throws -> [CategorySummary] {
        let rows = try await conn.run(
            """
            SELECT c.id, c.name, c.description, count(i.id)::int, COALESCE(sum(i.size_bytes), 0)::int8,
                   GREATEST(c.change_seq, COALESCE(max(i.change_seq), 0))::int8
            FROM content_categories c
            LEFT JOIN content_items i ON i.app_id = c.app_id AND i.category_id = c.id AND i.deleted_at IS NULL
            WHERE c.app_id = \(app) AND c.active GROUP BY c.id, c.name, c.description, c.change_seq ORDER BY c.id
            """,
            logger: logger
        )
        var out: [CategorySummary] = []
        for try await r in rows.decode((String, String, String, Int, Int64, Int64).self) {
            out.append(CategorySummary(id: r.0, name: r.1, description: r.2, itemCount: r.3, sizeBytes: r.4, changeSeq: r.5))
        }
        return out
    }

    /// Live items of a category in download order, at most `limit`.
    func itemIDs(app: UUID, category: String, limit: Int?, on conn: PostgresConnection) async throws -> [(String, Int)] {
        let rows = try await conn.run(
            """
            SELECT id, size_bytes FROM content_items WHERE app_id = \(app) AND category_id = \(category) AND deleted_at IS NULL
            ORDER BY id LIMIT \(limit ?? Int(Int32.max))
            """,
            logger: logger
        )
        var out: [(String, Int)] = []
        for try await r in rows.decode((String, Int).self) { out.append(r) }
        return out
    }

    struct Change: Sendable {
        var id: String
        var data: String?
        var version: Int
        var kind: String
    }

    /// What changed in a category after `cursor`: added, updated, deleted (relative to a copy
    /// taken at `cursor`).
    func changes(app: UUID, category: String, after cursor: Int64, on conn: PostgresConnection) async throws -> (changes: [Change], next: Int64) {
        let rows = try await conn.run(
            """
            SELECT id, CASE WHEN deleted_at IS NULL THEN data::text END, version,
                   CASE WHEN deleted_at IS NOT NULL THEN 'deleted' WHEN created_seq > \(cursor) THEN 'added' ELSE 'updated' END, change_seq
            FROM content_items WHERE app_id = \(app) AND category_id = \(category) AND change_seq > \(cursor)
              AND NOT (deleted_at IS NOT NULL AND created_seq > \(cursor))
            ORDER BY change_seq
            """,
            logger: logger
        )
        var out: [Change] = []
        var next = cursor
        for try await r in rows.decode((String, String?, Int, String, Int64).self) {
            out.append(Change(id: r.0, data: r.1, version: r.2, kind: r.3))
            next = max(next, r.4)
        }
        return (out, next)
    }

    func currentSeq(app: UUID, category: String, on conn: PostgresConnection) async throws -> Int64 {
        for try await s in try await conn.run(
            """
            SELECT COALESCE(max(change_seq), 0)::int8 FROM content_items WHERE app_id = \(app) AND category_id = \(category)
            """,
            logger: logger
        ).decode(Int64.self) { return s }
        return 0
    }

    /// The change number before which tombstones were purged (a cursor below it is too old).
    func horizon(app: UUID, on conn: PostgresConnection) async throws -> Int64 {
        for try await s in try await conn.run("SELECT purged_through_seq FROM content_horizon WHERE app_id = \(app)", logger: logger).decode(
            Int64.self
        ) {
            return s
        }
        return 0
    }

    /// One batch of the tombstone purge, by app (a periodic query).
    static func tombstonesQuery(before: Date, batch: Int) -> PostgresQuery {
        """
        WITH gone AS (
            DELETE FROM content_items WHERE ctid = ANY(ARRAY(
                SELECT ctid FROM content_items WHERE deleted_at IS NOT NULL AND deleted_at < \(before)
                LIMIT \(batch) FOR UPDATE SKIP LOCKED))
            RETURNING app_id, change_seq)
        SELECT app_id, max(change_seq)::int8, count(*)::int FROM gone GROUP BY app_id
        """
    }

    /// One batch of tombstones older than the window purged, moving each app's horizon past them
    /// in the caller's transaction, skipping rows a request holds. Answers the rows and the apps.
    func purgeTombstones(before: Date, batch: Int = 1000, on conn: PostgresConnection) async throws -> (rows: Int, apps: [UUID]) {
        var rows = 0
        var touched: [UUID] = []
        for try await (app, seq, count) in try await conn.run(Self.tombstonesQuery(before: before, batch: batch), logger: logger)
            .decode((UUID, Int64, Int).self)
        {
            rows += count
            touched.append(app)
            try await conn.run(
                """
                INSERT INTO content_horizon (app_id, purged_through_seq) VALUES (\(app), \(seq))
                ON CONFLICT (app_id) DO UPDATE SET purged_through_seq = GREATEST(content_horizon.purged_through_seq, EXCLUDED.purged_through_seq)
                """,
                logger: logger
            )
        }
        return (rows, touched)
    }
}

/// The user's offline copy (`offline_categories`, `offline_items`).
struct CopyStore: Sendable {
    let logger: Logger

    /// Which copies the upkeep removes: past their expiry, or unopened since the cutoff.
    enum Due: String, Sendable {
        case expired = "expires_at"
        case unopened = "COALESCE(last_accessed_at, downloaded_at)"
    }

    /// One batch of due copies (a periodic query).
    static func dueQuery(_ due: Due, before cutoff: Date, batch: Int) -> PostgresQuery {
        """
        DELETE FROM offline_categories WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM offline_categories WHERE \(unescaped: due.rawValue) < \(cutoff) LIMIT \(batch) FOR UPDATE SKIP LOCKED))
        RETURNING app_id, user_id, category_id
        """
    }

    /// Removes up to `batch` due copies with their items in the caller's transaction, skipping a
    /// copy a request holds (the next run takes it). Returns how many went.
    func deleteDue(_ due: Due, before cutoff: Date, batch: Int, on conn: PostgresConnection) async throws -> Int {
        var n = 0
        for try await (app, user, category) in try await conn.run(Self.dueQuery(due, before: cutoff, batch: batch), logger: logger)
            .decode((UUID, UUID, String).self)
        {
            n += 1
            try await conn.run(
                """
                DELETE FROM offline_items WHERE app_id = \(app) AND user_id = \(user) AND category_id = \(category)
                """,
                logger: logger
            )
        }
        return n
    }

    struct Downloaded: Encodable, Sendable {
        var categoryID: String
        var itemCount: Int
        var sizeBytes: Int64
        var cursor: Int64
        var complete: Bool
        var downloadedAt: Date
        var lastUpdatedAt: Date
        var lastAccessedAt: Date?
        var expiresAt: Date
        enum CodingKeys: String, CodingKey {
            case categoryID = "category_id"
            case itemCount = "item_count"
            case sizeBytes = "size_bytes"
            case cursor, complete
            case downloadedAt = "downloaded_at"
            case lastUpdatedAt = "last_updated_at"
            case lastAccessedAt = "last_accessed_at"
            case expiresAt = "expires_at"
        }
    }

    func downloaded(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> [Downloaded] {
        let rows = try await conn.run(
            """
            SELECT category_id, item_count, size_bytes, cursor, complete, downloaded_at, last_updated_at, last_accessed_at, expires_at
            FROM offline_categories WHERE app_id = \(app) AND user_id = \(user) ORDER BY category_id
            """,
            logger: logger
        )
        var out: [Downloaded] = []
        for try await r in rows.decode((String, Int, Int64, Int64, Bool, Date, Date, Date?, Date).self) {
            out.append(
                Downloaded(
                    categoryID: r.0,
                    itemCount: r.1,
                    sizeBytes: r.2,
                    cursor: r.3,
                    complete: r.4,
                    downloadedAt: r.5,
                    lastUpdatedAt: r.6,
                    lastAccessedAt: r.7,
                    expiresAt: r.8
                )
            )
        }
        return out
    }

    func storageUsed(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Int64 {
        for try await n in try await conn.run(
            """
            SELECT COALESCE(sum(size_bytes), 0)::int8 FROM offline_items WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        ).decode(Int64.self) { return n }
        return 0
    }

    func storeItem(
        app: UUID,
        user: UUID,
        category: String,
        item: String,
        packed: PackedItem,
        version: Int,
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        let expires = now.addingTimeInterval(OfflineRules.copyLifetime)
        try await conn.run(
            """
            INSERT INTO offline_items (app_id, user_id, category_id, item_id, data, compressed, checksum, size_bytes, version, downloaded_at, expires_at)
            VALUES (\(app), \(user), \(category), \(item), \(ByteBuffer(data: packed.data)), \(packed.compressed), \(packed.checksum),
                    \(packed.sizeBytes), \(version), \(now), \(expires))
            ON CONFLICT (app_id, user_id, item_id) DO UPDATE SET category_id = EXCLUDED.category_id, data = EXCLUDED.data,
                compressed = EXCLUDED.compressed, checksum = EXCLUDED.checksum, size_bytes = EXCLUDED.size_bytes, version = EXCLUDED.version,
                downloaded_at = EXCLUDED.downloaded_at, expires_at = EXCLUDED.expires_at
            """,
            logger: logger
        )
    }

    /// The sizes of the items a category of the copy holds, by item id.
    func itemSizes(app: UUID, user: UUID, category: String, on conn: PostgresConnection) async throws -> [String: Int64] {
        var out: [String: Int64] = [:]
        for try await (id, size) in try await conn.run(
            """
            SELECT item_id, size_bytes::int8 FROM offline_items WHERE app_id = \(app) AND user_id = \(user) AND category_id = \(category)
            """,
            logger: logger
        ).decode((String, Int64).self) { out[id] = size }
        return out
    }

    func deleteItems(app: UUID, user: UUID, ids: [String], on conn: PostgresConnection) async throws {
        try await conn.run("DELETE FROM offline_items WHERE app_id = \(app) AND user_id = \(user) AND item_id = ANY(\(ids))", logger: logger)
    }

    /// Recounts a category of the copy from its items and records the cursor it is at.
    func upsertCategory(app: UUID, user: UUID, category: String, cursor: Int64, complete: Bool, now: Date, on conn: PostgresConnection) async throws {
        let expires = now.addingTimeInterval(OfflineRules.copyLifetime)
        try await conn.run(
            """
            INSERT INTO offline_categories (app_id, user_id, category_id, item_count, size_bytes, cursor, complete, downloaded_at, last_updated_at, expires_at)
            SELECT \(app), \(user), \(category), count(*)::int, COALESCE(sum(size_bytes), 0)::int8, \(cursor), \(complete), \(now), \(now), \(expires)
            FROM offline_items WHERE app_id = \(app) AND user_id = \(user) AND category_id = \(category)
            ON CONFLICT (app_id, user_id, category_id) DO UPDATE SET item_count = EXCLUDED.item_count, size_bytes = EXCLUDED.size_bytes,
                cursor = EXCLUDED.cursor, complete = EXCLUDED.complete, last_updated_at = EXCLUDED.last_updated_at, expires_at = EXCLUDED.expires_at
            """,
            logger: logger
        )
    }

    /// Deletes categories of the copy (all when `categories` is nil); returns the bytes freed.
    func delete(app: UUID, user: UUID, categories: [String]?, on conn: PostgresConnection) async throws -> (count: Int, bytes: Int64) {
        var bytes: Int64 = 0
        for try await b in try await conn.run(
            """
            WITH gone AS (DELETE FROM offline_items WHERE app_id = \(app) AND user_id = \(user)
                          AND (\(categories)::text[] IS NULL OR category_id = ANY(\(categories))) RETURNING size_bytes)
            SELECT COALESCE(sum(size_bytes), 0)::int8 FROM gone
            """,
            logger: logger
        ).decode(Int64.self) { bytes = b }
        let count = try await conn.run(
            """
            DELETE FROM offline_categories WHERE app_id = \(app) AND user_id = \(user)
              AND (\(categories)::text[] IS NULL OR category_id = ANY(\(categories))) RETURNING 1
            """,
            logger: logger
        ).count()
        return (count, bytes)
    }

    struct PackedRow: Sendable {
        var id: String
        var data: Data
        var compressed: Bool
        var checksum: String
        var sizeBytes: Int
        var version: Int
    }

    func items(app: UUID, user: UUID, category: String, after: String?, limit: Int, on conn: PostgresConnection) async throws -> [PackedRow] {
        let rows = try await conn.run(
            """
            SELECT item_id, data, compressed, checksum, size_bytes, version FROM offline_items
            WHERE app_id = \(app) AND user_id = \(user) AND category_id = \(category) AND (\(after)::text IS NULL OR item_id > \(after))
            ORDER BY item_id LIMIT \(limit)
            """,
            logger: logger
        )
        var out: [PackedRow] = []
        for try await r in rows.decode((String, ByteBuffer, Bool, String, Int, Int).self) {
            out.append(PackedRow(id: r.0, data: Data(buffer: r.1), compressed: r.2, checksum: r.3, sizeBytes: r.4, version: r.5))
        }
        return out
    }
}
