import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

struct SyncProfile: Codable, Sendable {
    var autoSyncEnabled: Bool
    var syncOnWifiOnly: Bool
    var syncFrequencyHours: Int
    var conflictStrategy: String
    var lastSyncAt: Date?
    var lastFullSyncAt: Date?
    enum CodingKeys: String, CodingKey {
        case autoSyncEnabled = "auto_sync_enabled"
        case syncOnWifiOnly = "sync_on_wifi_only"
        case syncFrequencyHours = "sync_frequency_hours"
        case conflictStrategy = "conflict_strategy"
        case lastSyncAt = "last_sync_at"
        case lastFullSyncAt = "last_full_sync_at"
    }
}

struct ProfileStore: Sendable {
    let logger: Logger

    /// Never for an erased user: the erasure fence refuses the row (ServiceKit's `ErasureFence`).
    func ensure(app: UUID, user: UUID, on conn: PostgresConnection) async throws {
        try await conn.run(
            "INSERT INTO sync_profiles (app_id, user_id) VALUES (\(app), \(user)) ON CONFLICT DO NOTHING",
            logger: logger
        )
    }

    func touchFullSync(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            "UPDATE sync_profiles SET last_full_sync_at = \(now), last_sync_at = \(now) WHERE app_id = \(app) AND user_id = \(user)",
            logger: logger
        )
    }

    func touchSync(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE sync_profiles SET last_sync_at = \(now) WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
    }

    /// Deleting the whole copy forgets the sync settings too.
    func delete(app: UUID, user: UUID, on conn: PostgresConnection) async throws {
        try await conn.run("DELETE FROM sync_profiles WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
    }

    func profile(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> SyncProfile {
        try await ensure(app: app, user: user, on: conn)
        for try await r in try await conn.run(
            """
            SELECT auto_sync_enabled, sync_on_wifi_only, sync_frequency_hours, conflict_strategy, last_sync_at, last_full_sync_at
            FROM sync_profiles WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        ).decode((Bool, Bool, Int, String, Date?, Date?).self) {
            return SyncProfile(
                autoSyncEnabled: r.0,
                syncOnWifiOnly: r.1,
                syncFrequencyHours: r.2,
                conflictStrategy: r.3,
                lastSyncAt: r.4,
                lastFullSyncAt: r.5
            )
        }
        // No row: the erasure deleted it between the insert and this read (as the token check answers).
        throw AppError.accountErased
    }

    func save(app: UUID, user: UUID, _ p: SyncProfile, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE sync_profiles SET auto_sync_enabled = \(p.autoSyncEnabled), sync_on_wifi_only = \(p.syncOnWifiOnly),
                   sync_frequency_hours = \(p.syncFrequencyHours), conflict_strategy = \(p.conflictStrategy), updated_at = now()
            WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        )
    }
}

struct QueueItem: Encodable, Sendable {
    var id: UUID
    var clientActionID: String
    var actionType: String
    var entityType: String
    var entityID: String
    var categoryID: String?
    var payload: JSONValue
    var priority: Int
    var status: String
    var attempts: Int
    var lastError: String?
    var createdAt: Date
    var processedAt: Date?
    enum CodingKeys: String, CodingKey {
        case id
        case clientActionID = "client_action_id"
        case actionType = "action_type"
        case entityType = "entity_type"
        case entityID = "entity_id"
        case categoryID = "category_id"
        case payload, priority, status, attempts
        case lastError = "last_error"
        case createdAt = "created_at"
        case processedAt = "processed_at"
    }
}

/// `sync_queue`, `sync_jobs`, `sync_conflicts`.
struct SyncStore: Sendable {
    let logger: Logger

    static let columns = """
        id, client_action_id, action_type, entity_type, entity_id, category_id, payload::text, priority, status, attempts, last_error, created_at, processed_at
        """
    typealias Row = (UUID, String, String, String, String, String?, String, Int, String, Int, String?, Date, Date?)
    static func item(_ r: Row) throws -> QueueItem {
        QueueItem(
            id: r.0,
            clientActionID: r.1,
            actionType: r.2,
            entityType: r.3,
            entityID: r.4,
            categoryID: r.5,
            payload: try JSONDecoder().decode(JSONValue.self, from: Data(r.6.utf8)),
            priority: r.7,
            status: r.8,
            attempts: r.9,
            lastError: r.10,
            createdAt: r.11,
            processedAt: r.12
        )
    }

    func lockUser(app: UUID, user: UUID, on conn: PostgresConnection) async throws {
        try await conn.run("SELECT pg_advisory_xact_lock(hashtextextended(\("queue:\(app):\(user)"), 0))", logger: logger)
    }

    /// An execution of the user's queue (`sync_jobs`), counted when it was asked for.
    func createExecution(id: UUID, app: UUID, user: UUID, itemsToProcess: Int, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO sync_jobs (id, app_id, user_id, status, items_to_process, created_at)
            VALUES (\(id), \(app), \(user), 'pending', \(itemsToProcess), \(now))
            """,
            logger: logger
        )
    }

    struct Execution { var status: String, itemsToProcess: Int, succeeded: Int, duplicates: Int, failed: Int, conflicts: Int }

    /// One of the user's executions; nil for an unknown id or another user's.
    func execution(id: UUID, app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Execution? {
        for try await r in try await conn.run(
            """
            SELECT status, items_to_process, succeeded, duplicates, failed, conflicts FROM sync_jobs
            WHERE id = \(id) AND app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        ).decode((String, Int, Int, Int, Int, Int).self) {
            return Execution(status: r.0, itemsToProcess: r.1, succeeded: r.2, duplicates: r.3, failed: r.4, conflicts: r.5)
        }
        return nil
    }

    /// Counts one more deferral of a conflict; returns how many it has now.
    func skipConflict(id: UUID, on conn: PostgresConnection) async throws -> Int {
        for try await n in try await conn.run(
            """
            UPDATE sync_conflicts SET skip_count = skip_count + 1 WHERE id = \(id) RETURNING skip_count
            """,
            logger: logger
        ).decode(Int.self) { return n }
        throw AppError.notFound("Conflict")
    }

    func find(app: UUID, user: UUID, clientActionID: String, on conn: PostgresConnection) async throws -> QueueItem? {
        for try await r in try await conn.run(
            """
            SELECT \(unescaped: Self.columns) FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) AND client_action_id = \(clientActionID)
            """,
            logger: logger
        ).decode(Row.self) { return try Self.item(r) }
        return nil
    }

    func find(app: UUID, user: UUID, id: UUID, on conn: PostgresConnection) async throws -> QueueItem? {
        for try await r in try await conn.run(
            """
            SELECT \(unescaped: Self.columns) FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) AND id = \(id)
            """,
            logger: logger
        ).decode(Row.self) { return try Self.item(r) }
        return nil
    }

    func pendingCount(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Int {
        for try await n in try await conn.run(
            """
            SELECT count(*)::int FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) AND status = 'pending'
            """,
            logger: logger
        ).decode(Int.self) { return n }
        return 0
    }

    /// The queue is full: the oldest pending action of the lowest importance (priority 10 and
    /// above, never an answer or a progress save) makes room, marked `dropped`. Returns its
    /// client id, or nil when only answers and progress wait.
    func dropOldestExpendable(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> String? {
        for try await id in try await conn.run(
            """
            UPDATE sync_queue SET status = 'dropped', processed_at = \(now), last_error = 'dropped: the queue held 100 pending actions'
            WHERE id = (SELECT id FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) AND status = 'pending' AND priority >= 10
                          AND action_type <> ALL(\(OfflineRules.neverDropped))
                        ORDER BY created_at, id LIMIT 1)
            RETURNING client_action_id
            """,
            logger: logger
        ).decode(String.self) { return id }
        return nil
    }

    func insert(_ q: QueueItem, app: UUID, user: UUID, on conn: PostgresConnection) async throws {
        let payload = String(decoding: try JSON.encoder.encode(q.payload), as: UTF8.self)
        try await conn.run(
            """
            INSERT INTO sync_queue (id, app_id, user_id, client_action_id, action_type, entity_type, entity_id, category_id, payload, priority, status, created_at)
            VALUES (\(q.id), \(app), \(user), \(q.clientActionID), \(q.actionType), \(q.entityType), \(q.entityID), \(q.categoryID), \(payload)::jsonb,
                    \(q.priority), 'pending', \(q.createdAt))
            """,
            logger: logger
        )
    }

    /// Position in the order the worker sends (priority, then age), 1-based.
    func position(of q: QueueItem, app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Int {
        for try await n in try await conn.run(
            """
            SELECT count(*)::int FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) AND status = 'pending'
              AND (priority, created_at, id) <= (\(q.priority), \(q.createdAt), \(q.id))
            """,
            logger: logger
        ).decode(Int.self) { return n }
        return 0
    }

    func list(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> [QueueItem] {
        var out: [QueueItem] = []
        for try await r in try await conn.run(
            """
            SELECT \(unescaped: Self.columns) FROM sync_queue WHERE app_id = \(app) AND user_id = \(user)
            ORDER BY CASE WHEN status = 'pending' THEN 0 ELSE 1 END, priority, created_at LIMIT 500
            """,
            logger: logger
        ).decode(Row.self) { out.append(try Self.item(r)) }
        return out
    }

    /// The next action due for this user, locked (priority, then age).
    // MARK: sync jobs

    /// Marks a sync job processing; nil when it is already completed (or unknown).
    func startJob(_ id: UUID, on conn: PostgresConnection) async throws -> (UUID, UUID)? {
        for try await r in try await conn.run(
            """
            UPDATE sync_jobs SET status = 'processing' WHERE id = \(id) AND status <> 'completed' RETURNING app_id, user_id
            """,
            logger: logger
        ).decode((UUID, UUID).self) { return r }
        return nil
    }

    func completeJob(_ id: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE sync_jobs SET status = 'completed', completed_at = \(now) WHERE id = \(id)", logger: logger)
    }

    enum JobCounter: String, Sendable { case succeeded, duplicates, failed, conflicts }

    func count(_ counter: JobCounter, job: UUID, on conn: PostgresConnection) async throws {
        try await conn.run(
            "UPDATE sync_jobs SET \(unescaped: counter.rawValue) = \(unescaped: counter.rawValue) + 1 WHERE id = \(job)",
            logger: logger
        )
    }

    /// No upstream (the local stack): the accepted action is recorded here, once. False for a duplicate.
    func applyLocally(_ item: QueueItem, app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Bool {
        let payload = String(decoding: try JSON.encoder.encode(item.payload), as: UTF8.self)
        for try await _ in try await conn.run(
            """
            INSERT INTO sync_applied_actions (app_id, user_id, client_action_id, action_type, entity_type, entity_id, payload)
            VALUES (\(app), \(user), \(item.clientActionID), \(item.actionType), \(item.entityType), \(item.entityID), \(payload)::jsonb)
            ON CONFLICT DO NOTHING RETURNING 1
            """,
            logger: logger
        ) { return true }
        return false
    }

    /// An action about a category counts as opening it (storage suggestions).
    func touchCategory(app: UUID, user: UUID, category: String, at: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE offline_categories SET last_accessed_at = GREATEST(COALESCE(last_accessed_at, \(at)), \(at))
            WHERE app_id = \(app) AND user_id = \(user) AND category_id = \(category)
            """,
            logger: logger
        )
    }

    /// Pending actions about content of these categories (all when nil).
    func pendingActions(app: UUID, user: UUID, categories: [String]?, on conn: PostgresConnection) async throws -> Int {
        for try await n in try await conn.run(
            """
            SELECT count(*)::int FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) AND status = 'pending'
              AND category_id IS NOT NULL AND (\(categories)::text[] IS NULL OR category_id = ANY(\(categories)))
            """,
            logger: logger
        ).decode(Int.self) { return n }
        return 0
    }

    func nextDue(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> QueueItem? {
        for try await r in try await conn.run(
            """
            SELECT \(unescaped: Self.columns) FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) AND status = 'pending'
              AND next_retry_at <= now() ORDER BY priority, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
            """,
            logger: logger
        ).decode(Row.self) { return try Self.item(r) }
        return nil
    }

    /// Seconds until the next pending action is due, or nil when none is pending.
    func nextRetryIn(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Double? {
        for try await s in try await conn.run(
            """
            SELECT GREATEST(0, extract(epoch FROM min(next_retry_at) - now()))::float8 FROM sync_queue
            WHERE app_id = \(app) AND user_id = \(user) AND status = 'pending' HAVING count(*) > 0
            """,
            logger: logger
        ).decode(Double.self) { return s }
        return nil
    }

    func finish(_ id: UUID, status: String, error: String?, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE sync_queue SET status = \(status), last_error = \(error), processed_at = now(), attempts = attempts + 1 WHERE id = \(id)
            """,
            logger: logger
        )
    }

    /// The next try after `delay` counted from now, the failure (`clock_timestamp()`: a
    /// transaction's `now()` is its start, before the upstream call timed out).
    func retryLater(_ id: UUID, attempts: Int, delay: TimeInterval, error: String, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE sync_queue SET attempts = \(attempts), last_error = \(error),
                   next_retry_at = clock_timestamp() + make_interval(secs => \(delay)) WHERE id = \(id)
            """,
            logger: logger
        )
    }

    // MARK: conflicts

    struct Conflict: Encodable, Sendable {
        var id: UUID
        var queueItemID: UUID
        var entityType: String
        var entityID: String
        var localData: JSONValue
        var serverData: JSONValue
        var serverVersion: String?
        var resolved: Bool
        var resolution: String?
        var resolvedBy: String?
        var finalData: JSONValue?
        var skipCount: Int
        var createdAt: Date
        enum CodingKeys: String, CodingKey {
            case id
            case queueItemID = "queue_item_id"
            case entityType = "entity_type"
            case entityID = "entity_id"
            case localData = "local_data"
            case serverData = "server_data"
            case serverVersion = "server_version"
            case resolved, resolution
            case resolvedBy = "resolved_by"
            case finalData = "final_data"
            case skipCount = "skip_count"
            case createdAt = "created_at"
        }
    }

    static let conflictColumns = """
        id, queue_item_id, entity_type, entity_id, local_data::text, server_data::text, server_version, resolved, resolution, resolved_by,
        final_data::text, skip_count, created_at
        """
    typealias ConflictRow = (UUID, UUID, String, String, String, String, String?, Bool, String?, String?, String?, Int, Date)
    static func conflict(_ r: ConflictRow) throws -> Conflict {
        let d = JSONDecoder()
        return Conflict(
            id: r.0,
            queueItemID: r.1,
            entityType: r.2,
            entityID: r.3,
            localData: try d.decode(JSONValue.self, from: Data(r.4.utf8)),
            serverData: try d.decode(JSONValue.self, from: Data(r.5.utf8)),
            serverVersion: r.6,
            resolved: r.7,
            resolution: r.8,
            resolvedBy: r.9,
            finalData: try r.10.map { try d.decode(JSONValue.self, from: Data($0.utf8)) },
            skipCount: r.11,
            createdAt: r.12
        )
    }

    func openConflict(
        app: UUID,
        user: UUID,
        item: QueueItem,
        serverData: String,
        serverVersion: String?,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> UUID {
        let id = UUID()
        let local = String(decoding: try JSON.encoder.encode(item.payload), as: UTF8.self)
        try await conn.run(
            """
            INSERT INTO sync_conflicts (id, app_id, user_id, queue_item_id, entity_type, entity_id, local_data, server_data, server_version, created_at)
            VALUES (\(id), \(app), \(user), \(item.id), \(item.entityType), \(item.entityID), \(local)::jsonb, \(serverData)::jsonb, \(serverVersion), \(now))
            """,
            logger: logger
        )
        // #33: the app's servers hear of the conflict through auth, iff this commits. Its version
        // is the game server's version of the entity when it refused the save.
        try await Outbox.write(
            try OutboxMessage(
                InternalRoutes.events,
                path: InternalRoutes.events.path(),
                body: WebhookEventMessage(
                    type: "sync.conflict_opened",
                    appID: app,
                    createdAt: now,
                    version: Int64(serverVersion ?? "") ?? 0,
                    data: [
                        "user_id": .string(user.lowercasedString), "conflict_id": .string(id.lowercasedString),
                        "entity_type": .string(item.entityType), "entity_id": .string(item.entityID),
                    ]
                )
            ),
            on: conn,
            logger: logger
        )
        return id
    }

    func openConflicts(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> [Conflict] {
        var out: [Conflict] = []
        for try await r in try await conn.run(
            """
            SELECT \(unescaped: Self.conflictColumns) FROM sync_conflicts WHERE app_id = \(app) AND user_id = \(user) AND NOT resolved ORDER BY created_at
            """,
            logger: logger
        ).decode(ConflictRow.self) { out.append(try Self.conflict(r)) }
        return out
    }

    func conflict(id: UUID, app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Conflict? {
        for try await r in try await conn.run(
            """
            SELECT \(unescaped: Self.conflictColumns) FROM sync_conflicts WHERE id = \(id) AND app_id = \(app) AND user_id = \(user) FOR UPDATE
            """,
            logger: logger
        ).decode(ConflictRow.self) { return try Self.conflict(r) }
        return nil
    }

    func resolve(_ id: UUID, resolution: String, by: String, finalData: String, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE sync_conflicts SET resolved = true, resolution = \(resolution), resolved_by = \(by), final_data = \(finalData)::jsonb,
                   resolved_at = \(now) WHERE id = \(id)
            """,
            logger: logger
        )
    }

    /// Older than 7 days: the server's version stands.
    /// In batches of `batch` conflicts, each its own statement, skipping those a request holds.
    func autoResolveOld(before: Date, now: Date, batch: Int = 1000, db: DatabasePool) async throws -> Int {
        var total = 0
        while true {
            let n = try await db.query(Self.autoResolveQuery(before: before, now: now, batch: batch), logger: logger).count()
            total += n
            if n < batch { return total }
        }
    }

    /// One batch of the auto-resolution (a periodic query).
    static func autoResolveQuery(before: Date, now: Date, batch: Int) -> PostgresQuery {
        """
        UPDATE sync_conflicts SET resolved = true, resolution = 'server_wins', resolved_by = 'system', final_data = server_data, resolved_at = \(now)
        WHERE ctid = ANY(ARRAY(SELECT ctid FROM sync_conflicts WHERE NOT resolved AND created_at < \(before)
                               LIMIT \(batch) FOR UPDATE SKIP LOCKED))
        RETURNING 1
        """
    }
}
