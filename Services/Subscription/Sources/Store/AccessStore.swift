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

    /// One access decision, as `access_logs` keeps it.
    public struct Decision: Sendable {
        public var app: UUID, user: UUID, content: String, granted: Bool, userStatus: String, via: String?, device: String, at: Date
        /// The device is due to be written as seen again (`last_seen`), with the decision.
        public var renewsDevice = false
    }

    /// Run before each retention purge of the access log (#48, `$1` the seconds kept): the days
    /// of the week ahead made partitions, the days wholly past the cutoff dropped.
    static let partitionsBeforePurge = "SELECT access_log_partitions(now(), make_interval(secs => $1), 7)"

    /// The decisions of concurrent checks in one statement (group commit: `GroupCommit`),
    /// through `log_access_decisions`, whose INSERT keeps its plan for the session; with the
    /// sightings of the devices due to be written as seen again, when there are any
    /// (`log_access_decisions_and_sightings`): one commit for both.
    public func log(_ decisions: [Decision], db: DatabasePool) async throws {
        guard !decisions.isEmpty else { return }
        let (apps, users, contents) = (decisions.map(\.app), decisions.map(\.user), decisions.map(\.content))
        let (granted, statuses, vias) = (decisions.map(\.granted), decisions.map(\.userStatus), decisions.map { $0.via ?? "" })
        let (devices, ats) = (decisions.map(\.device), decisions.map(\.at))
        try await db.withConnection { conn in
            if decisions.contains(where: \.renewsDevice) {
                try await conn.run(
                    """
                    SELECT log_access_decisions_and_sightings(
                        \(apps)::uuid[], \(users)::uuid[], \(contents)::text[], \(granted)::bool[], \(statuses)::text[], \(vias)::text[],
                        \(devices)::text[], \(ats)::timestamptz[], \(decisions.map(\.renewsDevice))::bool[])
                    """,
                    logger: logger
                )
            } else {
                try await conn.run(
                    """
                    SELECT log_access_decisions(
                        \(apps)::uuid[], \(users)::uuid[], \(contents)::text[], \(granted)::bool[], \(statuses)::text[], \(vias)::text[],
                        \(devices)::text[], \(ats)::timestamptz[])
                    """,
                    logger: logger
                )
            }
        }
    }
}
