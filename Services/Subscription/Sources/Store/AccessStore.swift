import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain

/// UC-SUB-2.2: the devices a user plays on and the log of access decisions.
public struct AccessStore: Sendable {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    /// Records `device` as seen now unless the user already has `limit` other devices active
    /// since `since`; returns how many others are active when refused, nil when admitted. In the
    /// caller's transaction, which it serialises on the user's devices first so two new ones
    /// cannot both take the last place.
    public func admitDevice(
        app: UUID,
        user: UUID,
        device: String,
        limit: Int,
        since: Date,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> Int? {
        try await conn.run("SELECT pg_advisory_xact_lock(hashtext(\(app.uuidString + ":" + user.uuidString)))", logger: logger)
        // After the lock, so its snapshot holds every device a concurrent admission added:
        // the count and the conditional insert in one statement (one round trip less).
        var others = 0
        for try await n in try await conn.run(
            """
            WITH others AS (
                SELECT count(*)::int AS n FROM devices
                WHERE app_id = \(app) AND user_id = \(user) AND device_id <> \(device) AND last_seen > \(since)
            ), admitted AS (
                INSERT INTO devices (app_id, user_id, device_id, first_seen, last_seen)
                SELECT \(app), \(user), \(device), \(now), \(now) FROM others WHERE n < \(limit)
                ON CONFLICT (app_id, user_id, device_id) DO UPDATE SET last_seen = EXCLUDED.last_seen
                RETURNING 1
            )
            SELECT n FROM others, (SELECT count(*) FROM admitted) AS done
            """,
            logger: logger
        ).decode(Int.self) { others = n }
        if others >= limit { return others }
        return nil
    }

    /// Moves on (never back: another replica may have written a later one) the `last_seen` of a
    /// device seen since `activeSince` (one statement, no lock):
    /// true when it was, so it stays one of the user's active devices; false sends the caller
    /// to `admitDevice`.
    public func renewActiveDevice(app: UUID, user: UUID, device: String, activeSince: Date, now: Date, db: DatabasePool) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE devices SET last_seen = GREATEST(last_seen, \(now))
            WHERE app_id = \(app) AND user_id = \(user) AND device_id = \(device) AND last_seen > \(activeSince)
            RETURNING 1
            """,
            logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    /// A device seen again, its `last_seen` to move on to `at`.
    public struct Sighting: Sendable {
        public var app: UUID, user: UUID, device: String, at: Date
        public init(app: UUID, user: UUID, device: String, at: Date) {
            self.app = app
            self.user = user
            self.device = device
            self.at = at
        }
    }

    /// The sightings of concurrent checks in one statement (`GroupCommit`), never moving a
    /// `last_seen` back (another replica may have written a later one).
    public func renew(_ sightings: [Sighting], db: DatabasePool) async throws {
        guard !sightings.isEmpty else { return }
        try await db.query(
            """
            UPDATE devices d SET last_seen = GREATEST(d.last_seen, x.t)
            FROM unnest(\(sightings.map(\.app))::uuid[], \(sightings.map(\.user))::uuid[], \(sightings.map(\.device))::text[],
                        \(sightings.map(\.at))::timestamptz[]) AS x(a, u, dv, t)
            WHERE d.app_id = x.a AND d.user_id = x.u AND d.device_id = x.dv
            """,
            logger: logger
        )
    }

    /// One access decision, as `access_logs` keeps it.
    public struct Decision: Sendable {
        public var app: UUID, user: UUID, content: String, granted: Bool, userStatus: String, via: String?, device: String, at: Date
    }

    /// The decisions of concurrent checks in one statement (group commit: `GroupCommit`),
    /// through `log_access_decisions`, whose INSERT keeps its plan for the session.
    public func log(_ decisions: [Decision], db: DatabasePool) async throws {
        guard !decisions.isEmpty else { return }
        try await db.withConnection { conn in
            try await conn.run(
                """
                SELECT log_access_decisions(
                    \(decisions.map(\.app))::uuid[], \(decisions.map(\.user))::uuid[], \(decisions.map(\.content))::text[],
                    \(decisions.map(\.granted))::bool[], \(decisions.map(\.userStatus))::text[], \(decisions.map { $0.via ?? "" })::text[],
                    \(decisions.map(\.device))::text[], \(decisions.map(\.at))::timestamptz[])
                """,
                logger: logger
            )
        }
    }
}
