import AuthDomain
import Crypto
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// The live events' rows (#46): each user's numbered events, the tickets, and the NOTIFY that
/// tells every auth replica of an event at its commit.
struct LiveStore: Sendable {
    let db: DatabasePool
    let logger: Logger

    /// The channel every replica's hub listens on.
    static let channel = "auth_live"
    /// A NOTIFY payload is at most 8,000 bytes: a larger event goes without its body, and the
    /// hub reads it from the table.
    static let inlineLimit = 7000

    /// One event of `user`, numbered next in the user's sequence and announced at commit, in
    /// the caller's transaction. Nothing when the event (by its id) is already there, or the
    /// user is not one of `app`'s (erased, another app's). Returns its cursor.
    @discardableResult
    static func record(
        app: UUID,
        user: UUID,
        type: LiveEventType,
        id: UUID = UUID(),
        version: Int64,
        data: [String: JSONValue],
        createdAt: Date = Date(),
        on conn: PostgresConnection,
        logger: Logger
    ) async throws -> LiveCursor? {
        let body = String(
            decoding: try JSON.encoder.encode(
                WebhookEvent(type: type.rawValue, id: id, appID: app, createdAt: createdAt, version: version, data: data)
            ),
            as: UTF8.self
        )
        let rows = try await conn.run(
            """
            WITH fresh AS (
                SELECT 1 AS one WHERE NOT EXISTS (SELECT 1 FROM live_events WHERE user_id = \(user) AND id = \(id))
                  AND EXISTS (SELECT 1 FROM users WHERE id = \(user) AND app_id = \(app) AND anonymized_at IS NULL)
            ), bumped AS (
                INSERT INTO live_counters (user_id, app_id, last_seq, last_id) SELECT \(user), \(app), 1, \(id) FROM fresh
                ON CONFLICT (user_id) DO UPDATE SET last_seq = live_counters.last_seq + 1, last_id = EXCLUDED.last_id
                RETURNING last_seq
            ), written AS (
                INSERT INTO live_events (user_id, seq, app_id, id, type, body)
                SELECT \(user), last_seq, \(app), \(id), \(type.rawValue), \(body)::jsonb FROM bumped RETURNING seq
            )
            SELECT w.seq FROM written w CROSS JOIN LATERAL (
                SELECT pg_notify(\(channel), \(user.lowercasedString) || ' ' || w.seq || ' ' || \(LiveCursor.tag(of: id) + " " + type.rawValue)
                       || CASE WHEN octet_length(\(body)) <= \(inlineLimit) THEN ' ' || \(body) ELSE '' END)
            ) n
            """,
            logger: logger
        )
        for try await seq in rows.decode(Int64.self) { return LiveCursor(seq: seq, id: id) }
        return nil
    }

    /// An event that ends streams (a revoked session, an erasure): announced at commit, not
    /// kept, numbered 0 (no cursor: a stream it ends is not resumed).
    static func announce(
        app: UUID,
        user: UUID,
        type: LiveEventType,
        version: Int64,
        data: [String: JSONValue],
        on conn: PostgresConnection,
        logger: Logger
    ) async throws {
        let body = String(
            decoding: try JSON.encoder.encode(
                WebhookEvent(type: type.rawValue, id: UUID(), appID: app, createdAt: Date(), version: version, data: data)
            ),
            as: UTF8.self
        )
        try await conn.run(
            "SELECT pg_notify(\(channel), \(user.lowercasedString + " 0 00000000 " + type.rawValue + " " + body))",
            logger: logger
        )
    }

    /// The listening connection's liveness check.
    static func ping(_ conn: PostgresConnection, logger: Logger) async throws {
        try await conn.run("SELECT 1", logger: logger)
    }

    /// Whether `cursor` names an event of this user as it is now: the event itself, the last
    /// one (aged out but still the head), or the start while nothing has aged out. After a
    /// restore or a failover that lost it, the number names another id: not valid.
    func isValid(_ cursor: LiveCursor, app: UUID, user: UUID) async throws -> Bool {
        for try await ok in try await db.query(
            """
            SELECT EXISTS (SELECT 1 FROM live_events WHERE user_id = \(user) AND seq = \(cursor.seq) AND app_id = \(app)
                             AND left(replace(id::text, '-', ''), 8) = \(cursor.tag))
                OR EXISTS (SELECT 1 FROM live_counters WHERE user_id = \(user) AND app_id = \(app) AND last_seq = \(cursor.seq)
                             AND left(replace(last_id::text, '-', ''), 8) = \(cursor.tag))
                OR (\(cursor.seq) = 0 AND \(cursor.tag) = '00000000'
                    AND (NOT EXISTS (SELECT 1 FROM live_counters WHERE user_id = \(user))
                         OR EXISTS (SELECT 1 FROM live_events WHERE user_id = \(user) AND seq = 1)))
            """,
            logger: logger
        ).decode(Bool.self) { return ok }
        return false
    }

    /// An event as a stream sends it: its number, its id's tag, its type, its body (nil: not
    /// carried by the notification, read from the table).
    struct Stored: Sendable {
        var seq: Int64
        var tag: String
        var type: String
        var body: String?
        var cursor: LiveCursor { LiveCursor(seq: seq, tag: tag) }
    }

    /// The user's events after `seq`, in order, `limit` at a time.
    static let pageSize = 200

    func events(app: UUID, user: UUID, after seq: Int64, limit: Int = pageSize) async throws -> [Stored] {
        var out: [Stored] = []
        for try await r in try await db.query(
            """
            SELECT seq, id, type, body::text FROM live_events WHERE user_id = \(user) AND app_id = \(app) AND seq > \(seq)
            ORDER BY seq LIMIT \(limit)
            """,
            logger: logger
        ).decode((Int64, UUID, String, String).self) { out.append(Stored(seq: r.0, tag: LiveCursor.tag(of: r.1), type: r.2, body: r.3)) }
        return out
    }

    /// The head of the user's sequence (the start when none yet).
    func head(app: UUID, user: UUID) async throws -> LiveCursor {
        for try await r in try await db.query(
            "SELECT last_seq, last_id FROM live_counters WHERE user_id = \(user) AND app_id = \(app)",
            logger: logger
        ).decode((Int64, UUID).self) { return LiveCursor(seq: r.0, id: r.1) }
        return .start
    }

    struct Facts: Sendable {
        var status: String
        var premiumVersion: Int64
        var consents: [String: Bool]
        var consentsVersion: Int64
    }

    /// What auth holds of the user now, with the versions (nil: no such user of the app).
    func facts(app: UUID, user: UUID) async throws -> Facts? {
        for try await r in try await db.query(
            """
            SELECT u.status, COALESCE((SELECT version FROM fact_versions WHERE app_id = \(app) AND user_id = \(user) AND fact = 'status'), 0),
                   COALESCE((SELECT max(version) FROM fact_versions WHERE app_id = \(app) AND user_id = \(user) AND fact LIKE 'consent.%'), 0),
                   p.consent_analytics, p.consent_third_party, p.consent_geolocation, p.consent_personalized_ads,
                   p.consent_notifications, p.consent_game_center
            FROM users u LEFT JOIN privacy_settings p ON p.user_id = u.id
            WHERE u.id = \(user) AND u.app_id = \(app) AND u.anonymized_at IS NULL
            """,
            logger: logger
        ).decode((String, Int64, Int64, Bool?, Bool?, Bool?, Bool?, Bool?, Bool?).self) {
            return Facts(
                status: r.0,
                premiumVersion: r.1,
                consents: [
                    "analytics": r.3 ?? false, "third_party": r.4 ?? false, "geolocation": r.5 ?? false,
                    "personalized_ads": r.6 ?? false, "notifications": r.7 ?? false, "game_center": r.8 ?? false,
                ],
                consentsVersion: r.2
            )
        }
        return nil
    }

    // MARK: tickets

    static func digest(_ ticket: String) -> String { OpaqueToken.hash(ticket) }

    /// A new ticket for the session, usable once within `ttl`.
    func issueTicket(_ session: LiveRules.Session, ttl: Duration) async throws -> String {
        let ticket = "lvt_" + OpaqueToken.generate()
        try await db.query(
            """
            INSERT INTO live_tickets (digest, app_id, user_id, session_id, session_epoch, expires_at)
            VALUES (\(Self.digest(ticket)), \(session.appID), \(session.userID), \(session.sessionID), \(session.sessionEpoch),
                    now() + make_interval(secs => \(Double(ttl.components.seconds))))
            """,
            logger: logger
        )
        return ticket
    }

    /// Uses a ticket: the session it stands for, once, before it expires (nil otherwise).
    func useTicket(_ ticket: String) async throws -> LiveRules.Session? {
        guard ticket.utf8.count <= 128 else { return nil }
        for try await r in try await db.query(
            """
            UPDATE live_tickets SET used_at = now()
            WHERE digest = \(Self.digest(ticket)) AND used_at IS NULL AND expires_at > now()
            RETURNING app_id, user_id, session_id, session_epoch
            """,
            logger: logger
        ).decode((UUID, UUID, UUID?, Int?).self) {
            return LiveRules.Session(appID: r.0, userID: r.1, sessionID: r.2, sessionEpoch: r.3)
        }
        return nil
    }

    // MARK: retention, export, erasure

    /// Events kept `LIVE_RETENTION_HOURS` (24); tickets a day after they expire.
    static func retention(_ env: EnvironmentVariables) -> [RetentionRule] {
        [
            RetentionRule(
                name: "live_events",
                table: "live_events",
                due: "created_at < $1",
                keep: .seconds(3600 * max(1, env.int("LIVE_RETENTION_HOURS", default: 24)))
            ),
            RetentionRule(name: "live_tickets", table: "live_tickets", due: "expires_at < $1", keep: .seconds(86_400)),
        ]
    }

    static func exportSection(logger: Logger) -> UserDataSection {
        UserDataSection(
            name: "live_events",
            export: { user, app, conn in
                try await UserDataSection.jsonRows(
                    """
                    SELECT body::text FROM live_events WHERE app_id = \(app) AND user_id = \(user) ORDER BY seq
                    """,
                    on: conn,
                    logger: logger
                )
            },
            delete: { user, app, conn in try await erase(user: user, app: app, on: conn, logger: logger) }
        )
    }

    @discardableResult
    static func erase(user: UUID, app: UUID, on conn: PostgresConnection, logger: Logger) async throws -> Int {
        let q = UserDataQueries(logger: logger)
        return try await q.count("DELETE FROM live_events WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
            + q.count("DELETE FROM live_counters WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
            + q.count("DELETE FROM live_tickets WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
    }
}
