import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.3 step 18: sends a user's pending actions by priority then age. Each action
/// ends applied, duplicate, rejected (a 4xx: failed with the reason, never blocking the ones
/// behind it), retried (5xx or network: 2, 4, 8, 16, 32 s, then failed) or in conflict (409).
struct SyncExecuteJob: Codable, Sendable {
    static let kind = "sync_execute"
    var jobID: UUID
    enum CodingKeys: String, CodingKey { case jobID = "job_id" }

    struct Deps: Sendable {
        let db: DatabasePool
        let sync: SyncStore
        let profiles: ProfileStore
        let upstream: SyncUpstream
        let clock: any WallClock
        let logger: Logger
    }

    static func handler(_ d: Deps) -> JobHandler {
        { job in try await run(job.decode(SyncExecuteJob.self).jobID, d) }
    }

    static func run(_ id: UUID, _ d: Deps) async throws {
        var owner: (UUID, UUID)?
        for try await r in try await d.db.query("""
            UPDATE sync_jobs SET status = 'processing' WHERE id = \(id) AND status <> 'completed' RETURNING app_id, user_id
            """, logger: d.logger).decode((UUID, UUID).self) { owner = r }
        guard let (app, user) = owner else { return }
        while !Task.isCancelled {
            let processed = try await d.db.withTransaction(logger: d.logger) { conn -> Bool in
                guard let item = try await d.sync.nextDue(app: app, user: user, on: conn) else { return false }
                try await process(item, app: app, user: user, job: id, d, on: conn)
                return true
            }
            if processed { continue }
            // Nothing due: wait for the next retry if one is pending (at most the 32 s step).
            guard let wait = try await d.db.withConnection({ try await d.sync.nextRetryIn(app: app, user: user, on: $0) }) else { break }
            try await Task.sleep(for: .milliseconds(Int(min(wait, 33) * 1000) + 50))
        }
        try await d.db.query("UPDATE sync_jobs SET status = 'completed', completed_at = \(d.clock.now()) WHERE id = \(id)", logger: d.logger)
        try await d.db.query("UPDATE sync_profiles SET last_sync_at = \(d.clock.now()) WHERE app_id = \(app) AND user_id = \(user)", logger: d.logger)
    }

    static func count(_ column: String, job: UUID, _ d: Deps, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE sync_jobs SET \(unescaped: column) = \(unescaped: column) + 1 WHERE id = \(job)", logger: d.logger)
    }

    static func process(_ item: QueueItem, app: UUID, user: UUID, job: UUID, _ d: Deps, on conn: PostgresConnection) async throws {
        let now = d.clock.now()
        let outcome: SyncUpstream.Outcome
        if let url = d.upstream.url(for: item.actionType) {
            outcome = await d.upstream.send(url, item: item, app: app, user: user)
        } else {
            // No upstream (the local stack): the accepted action is recorded here, once.
            var inserted = false
            let payload = String(decoding: try JSON.encoder.encode(item.payload), as: UTF8.self)
            for try await _ in try await conn.run("""
                INSERT INTO sync_applied_actions (app_id, user_id, client_action_id, action_type, entity_type, entity_id, payload)
                VALUES (\(app), \(user), \(item.clientActionID), \(item.actionType), \(item.entityType), \(item.entityID), \(payload)::jsonb)
                ON CONFLICT DO NOTHING RETURNING 1
                """, logger: d.logger) { inserted = true }
            outcome = inserted ? .applied : .duplicate
        }
        if let category = item.categoryID {
            try await conn.run("""
                UPDATE offline_categories SET last_accessed_at = GREATEST(COALESCE(last_accessed_at, \(item.createdAt)), \(item.createdAt))
                WHERE app_id = \(app) AND user_id = \(user) AND category_id = \(category)
                """, logger: d.logger)
        }
        switch outcome {
        case .applied:
            try await d.sync.finish(item.id, status: "success", error: nil, on: conn)
            try await count("succeeded", job: job, d, on: conn)
        case .duplicate:
            try await d.sync.finish(item.id, status: "duplicate", error: nil, on: conn)
            try await count("duplicates", job: job, d, on: conn)
        case .rejected(let why):
            try await d.sync.finish(item.id, status: "failed", error: why, on: conn)
            try await count("failed", job: job, d, on: conn)
        case .retryable(let why):
            let attempts = item.attempts + 1
            if attempts >= OfflineRules.maxActionAttempts {
                try await d.sync.finish(item.id, status: "failed", error: "gave up after \(attempts) attempts: \(why)", on: conn)
                try await count("failed", job: job, d, on: conn)
            } else {
                try await d.sync.retryLater(item.id, attempts: attempts, error: why, on: conn)
            }
        case .conflict(let serverData, let version):
            try await d.sync.finish(item.id, status: "conflict", error: nil, on: conn)
            try await count("conflicts", job: job, d, on: conn)
            let conflictID = try await d.sync.openConflict(app: app, user: user, item: item, serverData: serverData, serverVersion: version,
                                                          now: now, on: conn)
            // The profile's strategy applies at once unless it is manual; past 10 open
            // conflicts the server's version is forced.
            let strategy = try await d.profiles.profile(app: app, user: user, on: conn).conflictStrategy
            let open = try await d.sync.openConflicts(app: app, user: user, on: conn).count
            if open > OfflineRules.maxOpenConflicts || strategy == "server_wins" {
                try await d.sync.resolve(conflictID, resolution: "server_wins", by: "system", finalData: serverData, now: now, on: conn)
            } else if strategy == "local_wins", let url = d.upstream.url(for: item.actionType),
                      await d.upstream.send(url, item: item, app: app, user: user, resolution: "local_wins") == .applied {
                let local = String(decoding: try JSON.encoder.encode(item.payload), as: UTF8.self)
                try await d.sync.resolve(conflictID, resolution: "local_wins", by: "system", finalData: local, now: now, on: conn)
            }
        }
    }
}
