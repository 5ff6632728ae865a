import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.3 step 18: sends a user's pending actions by priority then age. Each action
/// ends applied, duplicate, rejected (a 4xx: failed with the reason, never blocking the ones
/// behind it), retried (5xx or network: after 2, 4, 8, 16, 32 s counted from the failure, then
/// failed) or in conflict (409). A retry is this job scheduled again for when it is due, never
/// a sleep holding a worker slot.
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
        guard let (app, user) = try await d.db.withConnection({ try await d.sync.startJob(id, on: $0) }) else { return }
        while !Task.isCancelled {
            let processed = try await d.db.withTransaction(logger: d.logger) { conn -> Bool in
                guard let item = try await d.sync.nextDue(app: app, user: user, on: conn) else { return false }
                try await process(item, app: app, user: user, job: id, d, on: conn)
                return true
            }
            if processed { continue }
            try Task.checkCancellation()  // the lease was lost (#34): the next worker goes on
            // Nothing due now. A retry pending: run again when it is due, as a scheduled job.
            if let wait = try await d.db.withConnection({ try await d.sync.nextRetryIn(app: app, user: user, on: $0) }) {
                try await d.db.withConnection { conn in
                    try await JobQueue.enqueue(
                        on: conn,
                        queue: DownloadJob.queue,
                        kind: kind,
                        payload: SyncExecuteJob(jobID: id),
                        runAfter: wait + 0.05,
                        logger: d.logger
                    )
                }
                return
            }
            break
        }
        try Task.checkCancellation()
        try await d.db.withConnection { conn in
            try await d.sync.completeJob(id, now: d.clock.now(), on: conn)
            try await d.profiles.touchSync(app: app, user: user, now: d.clock.now(), on: conn)
        }
    }

    static func count(_ column: SyncStore.JobCounter, job: UUID, _ d: Deps, on conn: PostgresConnection) async throws {
        try await d.sync.count(column, job: job, on: conn)
    }

    static func process(_ item: QueueItem, app: UUID, user: UUID, job: UUID, _ d: Deps, on conn: PostgresConnection) async throws {
        let now = d.clock.now()
        let outcome: SyncUpstream.Outcome
        if let url = try await d.upstream.url(for: item.actionType, app: app) {
            outcome = await d.upstream.send(url, item: item, app: app, user: user)
        } else {
            // No upstream (the local stack): the accepted action is recorded here, once.
            outcome = try await d.sync.applyLocally(item, app: app, user: user, on: conn) ? .applied : .duplicate
        }
        if let category = item.categoryID {
            try await d.sync.touchCategory(app: app, user: user, category: category, at: item.createdAt, on: conn)
        }
        switch outcome {
        case .applied:
            try await d.sync.finish(item.id, status: "success", error: nil, on: conn)
            try await count(.succeeded, job: job, d, on: conn)
        case .duplicate:
            try await d.sync.finish(item.id, status: "duplicate", error: nil, on: conn)
            try await count(.duplicates, job: job, d, on: conn)
        case .rejected(let why):
            try await d.sync.finish(item.id, status: "failed", error: why, on: conn)
            try await count(.failed, job: job, d, on: conn)
        case .retryable(let why):
            let attempts = item.attempts + 1
            if attempts >= OfflineRules.maxActionAttempts {
                try await d.sync.finish(item.id, status: "failed", error: "gave up after \(attempts) attempts: \(why)", on: conn)
                try await count(.failed, job: job, d, on: conn)
            } else {
                try await d.sync.retryLater(
                    item.id,
                    attempts: attempts,
                    delay: OfflineRules.retryDelay(afterAttempt: attempts, jitter: .random(in: 0.8...1.2)),
                    error: why,
                    on: conn
                )
            }
        case .conflict(let serverData, let version):
            try await d.sync.finish(item.id, status: "conflict", error: nil, on: conn)
            try await count(.conflicts, job: job, d, on: conn)
            let conflictID = try await d.sync.openConflict(
                app: app,
                user: user,
                item: item,
                serverData: serverData,
                serverVersion: version,
                now: now,
                on: conn
            )
            // The profile's strategy applies at once unless it is manual; past 10 open
            // conflicts the server's version is forced.
            let strategy = try await d.profiles.profile(app: app, user: user, on: conn).conflictStrategy
            let open = try await d.sync.openConflicts(app: app, user: user, on: conn).count
            if open > OfflineRules.maxOpenConflicts || strategy == "server_wins" {
                try await d.sync.resolve(conflictID, resolution: "server_wins", by: "system", finalData: serverData, now: now, on: conn)
            } else if strategy == "local_wins", let url = try await d.upstream.url(for: item.actionType, app: app),
                await d.upstream.send(url, item: item, app: app, user: user, resolution: "local_wins") == .applied
            {
                let local = String(decoding: try JSON.encoder.encode(item.payload), as: UTF8.self)
                try await d.sync.resolve(conflictID, resolution: "local_wins", by: "system", finalData: local, now: now, on: conn)
            }
        }
    }
}
