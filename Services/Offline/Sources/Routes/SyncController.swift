import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.3 (the queue and its execution) and 3.5 (conflicts).
struct SyncController: Sendable {
    let db: DatabasePool
    let sync: SyncStore
    let upstream: SyncUpstream
    let clock: any WallClock
    let logger: Logger

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.post("sync/queue") { request, context in try await enqueue(request, context) }
        user.get("sync/queue") { _, context in
            let (app, userID) = try context.requireUser()
            return try context.json(["actions": try await db.withConnection { try await sync.list(app: app, user: userID, on: $0) }])
        }
        user.post("sync/execute") { _, context in try await execute(context) }
        user.get("sync/execute/:job") { _, context in try await executeStatus(context) }
        user.get("sync/conflicts") { _, context in
            let (app, userID) = try context.requireUser()
            return try context.json(["conflicts": try await db.withConnection { try await sync.openConflicts(app: app, user: userID, on: $0) }])
        }
        user.post("sync/conflicts/:id/resolve") { request, context in try await resolve(request, context) }
    }

    struct QueueBody: Decodable {
        var clientActionID: String, actionType: String, entityType: String, entityID: String
        var payload: JSONValue
        var priority: Int?
        var categoryID: String?
        enum CodingKeys: String, CodingKey {
            case clientActionID = "client_action_id", actionType = "action_type", entityType = "entity_type", entityID = "entity_id"
            case payload, priority, categoryID = "category_id"
        }
    }

    struct QueueResponse: Encodable {
        var queueItem: QueueItem, position: Int, replayed: Bool, dropped: String?
        enum CodingKeys: String, CodingKey { case queueItem = "queue_item", position, replayed, dropped = "dropped_client_action_id" }
    }

    static func token(_ s: String, _ field: String, max: Int = 100) throws {
        guard !s.isEmpty, s.utf8.count <= max, s.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw AppError.validation(field, "\(field) must be 1 to \(max) printable characters")
        }
    }

    /// Seed 004 (3c.1): a guest keeps his progress on the device; cloud save needs an account.
    /// Downloads, ads and credits stay open to guests.
    static func requireAccount(_ context: ServiceRequestContext) throws {
        guard context.identity?.isGuest != true else {
            throw AppError(
                OfflineErrorCode.guestNoCloudSave, "Guests keep their progress on this device; create an account to save it in the cloud",
                extra: ["how": "POST /auth/v1/auth/link with an email, Google or Apple", "can_link": true])
        }
    }

    func enqueue(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        try Self.requireAccount(context)
        let b = try await request.decodeJSON(as: QueueBody.self, context: context)
        try Self.token(b.clientActionID, "client_action_id")
        try Self.token(b.actionType, "action_type", max: 50)
        try Self.token(b.entityType, "entity_type", max: 50)
        try Self.token(b.entityID, "entity_id", max: 200)
        if let c = b.categoryID { try Self.token(c, "category_id") }
        guard case .object = b.payload else { throw AppError.validation("payload", "payload must be a JSON object") }
        if let p = b.priority, !(1...10).contains(p) { throw AppError.validation("priority", "priority must be 1 to 10") }
        let now = clock.now()
        let (body, status) = try await db.withTransaction(logger: logger) { conn -> (QueueResponse, HTTPResponse.Status) in
            try await sync.lockUser(app: app, user: user, on: conn)
            // The same client_action_id again (a retry after a lost answer): the first answer.
            if let existing = try await sync.find(app: app, user: user, clientActionID: b.clientActionID, on: conn) {
                return (
                    QueueResponse(
                        queueItem: existing, position: existing.status == "pending" ? try await sync.position(of: existing, app: app, user: user, on: conn) : 0,
                        replayed: true, dropped: nil), .ok
                )
            }
            var dropped: String?
            if try await sync.pendingCount(app: app, user: user, on: conn) >= OfflineRules.maxPendingActions {
                guard let d = try await sync.dropOldestExpendable(app: app, user: user, now: now, on: conn) else {
                    throw AppError(
                        OfflineErrorCode.syncQueueFull, "100 answers and progress saves are waiting: run POST /sync/execute first",
                        extra: ["limit": .int(OfflineRules.maxPendingActions)])
                }
                dropped = d
            }
            let item = QueueItem(
                id: UUID(), clientActionID: b.clientActionID, actionType: b.actionType, entityType: b.entityType, entityID: b.entityID,
                categoryID: b.categoryID, payload: b.payload, priority: b.priority ?? OfflineRules.defaultPriority(actionType: b.actionType),
                status: "pending", attempts: 0, lastError: nil, createdAt: now, processedAt: nil)
            try await sync.insert(item, app: app, user: user, on: conn)
            return (
                QueueResponse(queueItem: item, position: try await sync.position(of: item, app: app, user: user, on: conn), replayed: false, dropped: dropped),
                .created
            )
        }
        return try context.json(body, status: status)
    }

    struct ExecuteStatus: Encodable {
        var jobID: UUID, status: String, itemsToProcess: Int, succeeded: Int, duplicates: Int, failed: Int, conflicts: Int
        enum CodingKeys: String, CodingKey {
            case jobID = "job_id", status, itemsToProcess = "items_to_process", succeeded, duplicates, failed, conflicts
        }
    }

    func execute(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        try Self.requireAccount(context)
        let now = clock.now()
        let body = try await db.withTransaction(logger: logger) { conn -> ExecuteStatus in
            try await sync.lockUser(app: app, user: user, on: conn)
            let n = try await sync.pendingCount(app: app, user: user, on: conn)
            let id = UUID()
            try await sync.createExecution(id: id, app: app, user: user, itemsToProcess: n, now: now, on: conn)
            try await JobQueue.enqueue(on: conn, queue: DownloadJob.queue, kind: SyncExecuteJob.kind, payload: SyncExecuteJob(jobID: id), logger: logger)
            return ExecuteStatus(jobID: id, status: "pending", itemsToProcess: n, succeeded: 0, duplicates: 0, failed: 0, conflicts: 0)
        }
        return try context.json(body, status: .accepted)
    }

    func executeStatus(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        guard let id = context.parameters.get("job", as: UUID.self) else { throw AppError.badRequest("Job id must be a UUID", field: "job_id") }
        guard let e = try await db.withConnection({ try await sync.execution(id: id, app: app, user: user, on: $0) }) else {
            throw AppError.notFound("Sync job")
        }
        return try context.json(
            ExecuteStatus(
                jobID: id, status: e.status, itemsToProcess: e.itemsToProcess, succeeded: e.succeeded,
                duplicates: e.duplicates, failed: e.failed, conflicts: e.conflicts))
    }

    struct ResolveBody: Decodable {
        var resolution: String
        var mergeData: [String: String]?
        enum CodingKeys: String, CodingKey { case resolution, mergeData = "merge_data" }
    }

    /// UC-OFFLINE-3.5: local_wins and merge are sent to the main app (it may refuse: 11a, the
    /// conflict stays open); server_wins keeps the server's version; skip defers (3 times).
    func resolve(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("Conflict id must be a UUID", field: "id") }
        let b = try await request.decodeJSON(as: ResolveBody.self, context: context)
        guard ["local_wins", "server_wins", "merge", "skip"].contains(b.resolution) else {
            throw AppError.validation("resolution", "resolution must be local_wins, server_wins, merge or skip")
        }
        if b.resolution == "merge" && b.mergeData == nil { throw AppError.validation("merge_data", "merge needs merge_data") }
        let now = clock.now()
        struct Resolved: Encodable {
            var resolved: Bool, resolution: String, finalData: JSONValue?, skipCount: Int?
            enum CodingKeys: String, CodingKey { case resolved, resolution, finalData = "final_data", skipCount = "skip_count" }
        }
        let body = try await db.withTransaction(logger: logger) { conn -> Resolved in
            guard let c = try await sync.conflict(id: id, app: app, user: user, on: conn) else { throw AppError.notFound("Conflict") }
            guard !c.resolved else { throw AppError(OfflineErrorCode.alreadyResolved, "This conflict was resolved (\(c.resolution ?? "?"))") }
            if b.resolution == "skip" {
                guard c.skipCount < OfflineRules.maxConflictSkips else {
                    throw AppError(OfflineErrorCode.skipLimitReached, "A conflict can be skipped at most \(OfflineRules.maxConflictSkips) times")
                }
                return Resolved(resolved: false, resolution: "skip", finalData: nil, skipCount: try await sync.skipConflict(id: id, on: conn))
            }
            var final: JSONValue
            switch b.resolution {
            case "server_wins": final = c.serverData
            case "local_wins": final = c.localData
            default:
                guard let local = try JSONSerialization.jsonObject(with: JSON.encoder.encode(c.localData)) as? [String: Any],
                    let server = try JSONSerialization.jsonObject(with: JSON.encoder.encode(c.serverData)) as? [String: Any]
                else {
                    throw AppError.validation("merge_data", "only objects can be merged")
                }
                let merged: [String: Any]
                do { merged = try ConflictMerge.merge(local: local, server: server, choices: b.mergeData ?? [:]) } catch {
                    throw AppError.validation("merge_data", "each merge_data value must be \"local\" or \"server\"")
                }
                final = try JSON.decoder.decode(JSONValue.self, from: JSONSerialization.data(withJSONObject: merged))
            }
            if b.resolution != "server_wins", let item = try await sync.find(app: app, user: user, id: c.queueItemID, on: conn),
                let url = try await upstream.url(for: item.actionType, app: app)
            {
                switch await upstream.send(url, item: item, app: app, user: user, payload: final, resolution: b.resolution) {
                case .applied, .duplicate: break
                case .rejected(let why), .retryable(let why):
                    throw AppError(OfflineErrorCode.resolutionRejected, "The main app refused the resolution: \(why)")
                case .conflict:
                    throw AppError(.conflict, OfflineErrorCode.resolutionRejected, "The server's version changed again; reload the conflict")
                }
            }
            let text = String(decoding: try JSON.encoder.encode(final), as: UTF8.self)
            try await sync.resolve(id, resolution: b.resolution, by: "user", finalData: text, now: now, on: conn)
            return Resolved(resolved: true, resolution: b.resolution, finalData: final, skipCount: nil)
        }
        return try context.json(body)
    }
}
