import Foundation
import Hummingbird
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.3 (the queue and its execution) and 3.5 (conflicts).
struct SyncController: Sendable {
    let db: DatabasePool
    let sync: SyncStore
    let flow: OfflineSync
    let clock: any WallClock

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
                OfflineErrorCode.guestNoCloudSave,
                "Guests keep their progress on this device; create an account to save it in the cloud",
                extra: ["how": "POST /auth/v1/auth/link with an email, Google or Apple", "can_link": true]
            )
        }
    }

    func enqueue(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        try Self.requireAccount(context)
        let b = try await request.decodeJSON(as: OfflineSync.QueueBody.self, context: context)
        try Self.token(b.clientActionID, "client_action_id")
        try Self.token(b.actionType, "action_type", max: 50)
        try Self.token(b.entityType, "entity_type", max: 50)
        try Self.token(b.entityID, "entity_id", max: 200)
        if let c = b.categoryID { try Self.token(c, "category_id") }
        guard case .object = b.payload else { throw AppError.validation("payload", "payload must be a JSON object") }
        if let p = b.priority, !(1...10).contains(p) { throw AppError.validation("priority", "priority must be 1 to 10") }
        let (body, created) = try await flow.enqueue(app: app, user: user, b, now: clock.now())
        let status: HTTPResponse.Status = created ? .created : .ok
        return try context.json(body, status: status)
    }

    func execute(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        try Self.requireAccount(context)
        let body = try await flow.execute(app: app, user: user, now: clock.now())
        return try context.json(body, status: .accepted)
    }

    func executeStatus(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        guard let id = context.parameters.get("job", as: UUID.self) else { throw AppError.badRequest("Job id must be a UUID", field: "job_id") }
        guard let e = try await db.withConnection({ try await sync.execution(id: id, app: app, user: user, on: $0) }) else {
            throw AppError.notFound("Sync job")
        }
        return try context.json(
            OfflineSync.ExecuteStatus(
                jobID: id,
                status: e.status,
                itemsToProcess: e.itemsToProcess,
                succeeded: e.succeeded,
                duplicates: e.duplicates,
                failed: e.failed,
                conflicts: e.conflicts
            )
        )
    }

    /// UC-OFFLINE-3.5: local_wins and merge are sent to the main app (it may refuse: 11a, the
    /// conflict stays open); server_wins keeps the server's version; skip defers (3 times).
    func resolve(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("Conflict id must be a UUID", field: "id") }
        let b = try await request.decodeJSON(as: OfflineSync.ResolveBody.self, context: context)
        guard ["local_wins", "server_wins", "merge", "skip"].contains(b.resolution) else {
            throw AppError.validation("resolution", "resolution must be local_wins, server_wins, merge or skip")
        }
        if b.resolution == "merge" && b.mergeData == nil { throw AppError.validation("merge_data", "merge needs merge_data") }
        let body = try await flow.resolve(app: app, user: user, conflict: id, b, now: clock.now())
        return try context.json(body)
    }
}
