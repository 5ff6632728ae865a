import Foundation
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import WireTypes

/// The user's data held here, for the privacy export and account deletion. Everything tied
/// to the person goes: the copy, the queue, conflicts, the profile, locations and consents.
enum OfflineUserData {
    static func sections(logger: Logger) -> [UserDataSection] {
        let q = UserDataQueries(logger: logger)
        return [
            UserDataSection(
                name: "locations",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(l)::text FROM (SELECT id, ST_Y(location::geometry) AS latitude, ST_X(location::geometry) AS longitude,
                               accuracy, altitude, source, country_code, country, city, created_at
                        FROM user_locations WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at) l
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await q.count("DELETE FROM user_locations WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "offline_copy",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(c)::text FROM (SELECT category_id, item_count, size_bytes, downloaded_at, last_accessed_at, expires_at
                        FROM offline_categories WHERE app_id = \(app) AND user_id = \(user) ORDER BY category_id) c
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await conn.run("DELETE FROM offline_items WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    try await conn.run("DELETE FROM download_jobs WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return try await q.count("DELETE FROM offline_categories WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "sync_queue",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(q)::text FROM (SELECT client_action_id, action_type, entity_type, entity_id, payload, status, created_at
                        FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at) q
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await conn.run("DELETE FROM sync_applied_actions WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    try await conn.run("DELETE FROM sync_jobs WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return try await q.count("DELETE FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "sync_profile",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(p)::text FROM (SELECT auto_sync_enabled, sync_on_wifi_only, sync_frequency_hours, conflict_strategy, last_sync_at
                        FROM sync_profiles WHERE app_id = \(app) AND user_id = \(user)) p
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await conn.run("DELETE FROM user_consents WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return try await q.count("DELETE FROM sync_profiles WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
        ]
    }
}

/// Periodic upkeep: anonymise locations after 90 days (coarsened to 0.1°, unlinked), expire
/// offline copies after 30 days, drop copies not opened for 90 days, auto-resolve conflicts
/// older than 7 days, purge tombstones past the 30-day window.
struct OfflineMaintenance: Service {
    let db: DatabasePool
    let catalog: CatalogStore
    let sync: SyncStore
    let locations: LocationStore
    var copies: CopyStore { CopyStore(logger: logger) }
    let clock: any WallClock
    let interval: Duration
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { _ = try await runOnce() } catch { logger.warning("offline maintenance failed", metadata: ["error": "\(error)"]) }
                try? await Task.sleep(for: interval)
            }
        }
    }

    struct Report: Sendable, Equatable { var anonymized = 0, expired = 0, stale = 0, conflicts = 0, tombstoneApps = 0 }

    static let copyBatch = 500

    /// What `runOnce` runs, batch by batch (periodic queries).
    static func periodicQueries(now: Date) -> [PeriodicQuery] {
        [
            PeriodicQuery(
                "location anonymisation",
                LocationStore.anonymizeQuery(olderThan: now.addingTimeInterval(-OfflineRules.staleAfter), batch: 1000)
            ),
            PeriodicQuery("copies expired", CopyStore.dueQuery(.expired, before: now, batch: copyBatch)),
            PeriodicQuery(
                "copies unopened",
                CopyStore.dueQuery(.unopened, before: now.addingTimeInterval(-OfflineRules.staleAfter), batch: copyBatch)
            ),
            PeriodicQuery(
                "conflict auto-resolution",
                SyncStore.autoResolveQuery(
                    before: now.addingTimeInterval(-OfflineRules.conflictAutoResolveAfter),
                    now: now,
                    batch: 1000
                )
            ),
            PeriodicQuery(
                "tombstone purge",
                CatalogStore.tombstonesQuery(before: now.addingTimeInterval(-OfflineRules.tombstoneWindow), batch: 1000)
            ),
        ]
    }

    func runOnce() async throws -> Report {
        let now = clock.now()
        var r = Report()
        r.anonymized = try await db.withConnection {
            try await locations.anonymize(olderThan: now.addingTimeInterval(-OfflineRules.staleAfter), on: $0)
        }
        // In batches (no long lock on a user's copies while a big backlog drains).
        for (due, cutoff) in [(CopyStore.Due.expired, now), (.unopened, now.addingTimeInterval(-OfflineRules.staleAfter))] {
            var n = 0
            while true {
                let removed = try await copies.deleteDue(due, before: cutoff, batch: Self.copyBatch, db: db)
                n += removed
                if removed < Self.copyBatch { break }
            }
            if due == .expired { r.expired = n } else { r.stale = n }
        }
        r.conflicts = try await sync.autoResolveOld(before: now.addingTimeInterval(-OfflineRules.conflictAutoResolveAfter), now: now, db: db)
        r.tombstoneApps = try await catalog.purgeTombstones(before: now.addingTimeInterval(-OfflineRules.tombstoneWindow), db: db)
        return r
    }
}
