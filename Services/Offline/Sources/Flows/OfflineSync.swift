import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.3 the queue of actions played offline and its execution, and UC-OFFLINE-3.5
/// conflicts: an action queued once per `client_action_id` (a retry gets the first answer), the
/// oldest expendable one dropped when 100 wait, an execution queued as a job, and a conflict
/// resolved (local_wins and merge are sent to the main app, which may refuse). The flow owns the
/// transactions (#50).
struct OfflineSync: Sendable {
    let db: DatabasePool
    let sync: SyncStore
    let upstream: SyncUpstream
    let logger: Logger

    struct QueueBody: Decodable {
        var clientActionID: String, actionType: String, entityType: String, entityID: String
        var payload: JSONValue
        var priority: Int?
        var categoryID: String?
        enum CodingKeys: String, CodingKey {
            case clientActionID = "client_action_id"
            case actionType = "action_type"
            case entityType = "entity_type"
            case entityID = "entity_id"
            case payload, priority
            case categoryID = "category_id"
        }
    }

    struct QueueResponse: Encodable {
        var queueItem: QueueItem, position: Int, replayed: Bool, dropped: String?
        enum CodingKeys: String, CodingKey {
            case queueItem = "queue_item"
            case position, replayed
            case dropped = "dropped_client_action_id"
        }
    }

    struct ExecuteStatus: Encodable {
        var jobID: UUID, status: String, itemsToProcess: Int, succeeded: Int, duplicates: Int, failed: Int, conflicts: Int
        enum CodingKeys: String, CodingKey {
            case jobID = "job_id"
            case status
            case itemsToProcess = "items_to_process"
            case succeeded, duplicates, failed, conflicts
        }
    }

    struct ResolveBody: Decodable {
        var resolution: String
        var mergeData: [String: String]?
        enum CodingKeys: String, CodingKey {
            case resolution
            case mergeData = "merge_data"
        }
    }

    struct Resolved: Encodable {
        var resolved: Bool, resolution: String, finalData: JSONValue?, skipCount: Int?
        enum CodingKeys: String, CodingKey {
            case resolved, resolution
            case finalData = "final_data"
            case skipCount = "skip_count"
        }
    }

    /// Answers the queued action and whether it is new (a replay answers the first).
    func enqueue(app: UUID, user: UUID, _ b: QueueBody, now: Date) async throws -> (QueueResponse, Bool) {
        try await db.withTransaction(logger: logger) { conn -> (QueueResponse, Bool) in
            try await sync.lockUser(app: app, user: user, on: conn)
            // The same client_action_id again (a retry after a lost answer): the first answer.
            if let existing = try await sync.find(app: app, user: user, clientActionID: b.clientActionID, on: conn) {
                return (
                    QueueResponse(
                        queueItem: existing,
                        position: existing.status == "pending" ? try await sync.position(of: existing, app: app, user: user, on: conn) : 0,
                        replayed: true,
                        dropped: nil
                    ), false
                )
            }
            var dropped: String?
            if try await sync.pendingCount(app: app, user: user, on: conn) >= OfflineRules.maxPendingActions {
                guard let d = try await sync.dropOldestExpendable(app: app, user: user, now: now, on: conn) else {
                    throw AppError(
                        OfflineErrorCode.syncQueueFull,
                        "100 answers and progress saves are waiting: run POST /sync/execute first",
                        extra: ["limit": .int(OfflineRules.maxPendingActions)]
                    )
                }
                dropped = d
            }
            let item = QueueItem(
                id: UUID(),
                clientActionID: b.clientActionID,
                actionType: b.actionType,
                entityType: b.entityType,
                entityID: b.entityID,
                categoryID: b.categoryID,
                payload: b.payload,
                priority: b.priority ?? OfflineRules.defaultPriority(actionType: b.actionType),
                status: "pending",
                attempts: 0,
                lastError: nil,
                createdAt: now,
                processedAt: nil
            )
            try await sync.insert(item, app: app, user: user, on: conn)
            return (
                QueueResponse(
                    queueItem: item,
                    position: try await sync.position(of: item, app: app, user: user, on: conn),
                    replayed: false,
                    dropped: dropped
                ),
                true
            )
        }
    }

    func execute(app: UUID, user: UUID, now: Date) async throws -> ExecuteStatus {
        try await db.withTransaction(logger: logger) { conn -> ExecuteStatus in
            try await sync.lockUser(app: app, user: user, on: conn)
            let n = try await sync.pendingCount(app: app, user: user, on: conn)
            let id = UUID()
            try await sync.createExecution(id: id, app: app, user: user, itemsToProcess: n, now: now, on: conn)
            try await JobQueue.enqueue(
                on: conn,
                queue: DownloadJob.queue,
                kind: SyncExecuteJob.kind,
                payload: SyncExecuteJob(jobID: id),
                logger: logger
            )
            return ExecuteStatus(jobID: id, status: "pending", itemsToProcess: n, succeeded: 0, duplicates: 0, failed: 0, conflicts: 0)
        }
    }

    func resolve(app: UUID, user: UUID, conflict id: UUID, _ b: ResolveBody, now: Date) async throws -> Resolved {
        try await db.withTransaction(logger: logger) { conn -> Resolved in
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
    }
}
