import AuthDomain
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit

/// An app's console team (#47): members, invites and console sessions. Every method takes the
/// flow's connection; the flow owns the transaction.
struct OperatorMemberStore: Sendable {
    let logger: Logger

    struct Member: Sendable, Equatable {
        var id: UUID
        var appID: UUID
        var email: String
        var passwordHash: String
        var role: OperatorRole
        var totpSecret: ByteBuffer?
        var totpLastStep: Int64?
        var failedAttempts: Int
        var lockedUntil: Date?
        var createdAt: Date
    }

    struct Invite: Sendable, Equatable {
        var appID: UUID
        var email: String
        var role: OperatorRole
        var expiresAt: Date
    }

    private static let columns = "id, app_id, email, password_hash, role, totp_secret, totp_last_step, failed_attempts, locked_until, created_at"
    private typealias Row = (UUID, UUID, String, String, String, ByteBuffer?, Int64?, Int, Date?, Date)

    private func members(_ rows: PostgresRows) async throws -> [Member] {
        var out: [Member] = []
        for try await r in rows.decode(Row.self) {
            out.append(
                Member(
                    id: r.0,
                    appID: r.1,
                    email: r.2,
                    passwordHash: r.3,
                    role: OperatorRole(rawValue: r.4) ?? .viewer,
                    totpSecret: r.5,
                    totpLastStep: r.6,
                    failedAttempts: r.7,
                    lockedUntil: r.8,
                    createdAt: r.9
                )
            )
        }
        return out
    }

    // MARK: invites

    func createInvite(
        digest: String,
        app: UUID,
        email: String,
        role: OperatorRole,
        invitedBy: String,
        expiresAt: Date,
        on conn: PostgresConnection
    )
        async throws
    {
        try await conn.run(
            """
            INSERT INTO operator_invites (digest, app_id, email, role, invited_by, expires_at)
            VALUES (\(digest), \(app), \(email), \(role.rawValue), \(invitedBy), \(expiresAt))
            """,
            logger: logger
        )
    }

    func invite(digest: String, now: Date, on conn: PostgresConnection) async throws -> Invite? {
        let rows = try await conn.run(
            """
            SELECT app_id, email, role, expires_at FROM operator_invites WHERE digest = \(digest) AND used_at IS NULL AND expires_at > \(now)
            """,
            logger: logger
        )
        for try await r in rows.decode((UUID, String, String, Date).self) {
            return Invite(appID: r.0, email: r.1, role: OperatorRole(rawValue: r.2) ?? .viewer, expiresAt: r.3)
        }
        return nil
    }

    /// Marks the invite used; nil when it is unknown, used or expired (a second accept of one
    /// link finds nothing).
    func consumeInvite(digest: String, now: Date, on conn: PostgresConnection) async throws -> Invite? {
        let rows = try await conn.run(
            """
            UPDATE operator_invites SET used_at = \(now)
            WHERE digest = \(digest) AND used_at IS NULL AND expires_at > \(now)
            RETURNING app_id, email, role, expires_at
            """,
            logger: logger
        )
        for try await r in rows.decode((UUID, String, String, Date).self) {
            return Invite(appID: r.0, email: r.1, role: OperatorRole(rawValue: r.2) ?? .viewer, expiresAt: r.3)
        }
        return nil
    }

    func pendingInvites(app: UUID, now: Date, on conn: PostgresConnection) async throws -> [Invite] {
        var out: [Invite] = []
        for try await r in try await conn.run(
            """
            SELECT app_id, email, role, expires_at FROM operator_invites
            WHERE app_id = \(app) AND used_at IS NULL AND expires_at > \(now) ORDER BY expires_at
            """,
            logger: logger
        ).decode((UUID, String, String, Date).self) {
            out.append(Invite(appID: r.0, email: r.1, role: OperatorRole(rawValue: r.2) ?? .viewer, expiresAt: r.3))
        }
        return out
    }

    // MARK: members

    /// A new member, or a removed one back with a new password; nil when the email is already
    /// an active member of the app.
    func add(
        app: UUID,
        email: String,
        passwordHash: String,
        role: OperatorRole,
        totpSecret: ByteBuffer?,
        totpStep: Int64?,
        on conn: PostgresConnection
    )
        async throws -> Member?
    {
        try await members(
            conn.run(
                """
                INSERT INTO operator_members (app_id, email, password_hash, role, totp_secret, totp_last_step)
                VALUES (\(app), \(email), \(passwordHash), \(role.rawValue), \(totpSecret), \(totpStep))
                ON CONFLICT (app_id, email) DO UPDATE SET
                    password_hash = EXCLUDED.password_hash, role = EXCLUDED.role, totp_secret = EXCLUDED.totp_secret,
                    totp_last_step = EXCLUDED.totp_last_step, failed_attempts = 0, locked_until = NULL, removed_at = NULL
                WHERE operator_members.removed_at IS NOT NULL
                RETURNING \(unescaped: Self.columns)
                """,
                logger: logger
            )
        ).first
    }

    func member(app: UUID, email: String, on conn: PostgresConnection) async throws -> Member? {
        try await members(
            conn.run(
                "SELECT \(unescaped: Self.columns) FROM operator_members WHERE app_id = \(app) AND email = \(email) AND removed_at IS NULL",
                logger: logger
            )
        ).first
    }

    func list(app: UUID, on conn: PostgresConnection) async throws -> [Member] {
        try await members(
            conn.run(
                "SELECT \(unescaped: Self.columns) FROM operator_members WHERE app_id = \(app) AND removed_at IS NULL ORDER BY created_at, id",
                logger: logger
            )
        )
    }

    /// The member's first authenticator, with the step of the code that proved it; false when
    /// they already have one (replacing it is not this) or are not an active member.
    func enrolTOTP(member: UUID, app: UUID, sealed: ByteBuffer, step: Int64, on conn: PostgresConnection) async throws -> Bool {
        let rows = try await conn.run(
            """
            UPDATE operator_members SET totp_secret = \(sealed), totp_last_step = \(step)
            WHERE id = \(member) AND app_id = \(app) AND removed_at IS NULL AND totp_secret IS NULL RETURNING id
            """,
            logger: logger
        )
        for try await _ in rows.decode(UUID.self) { return true }
        return false
    }

    // MARK: password resets

    func createReset(digest: String, member: UUID, app: UUID, expiresAt: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO operator_password_resets (digest, member_id, app_id, expires_at)
            VALUES (\(digest), \(member), \(app), \(expiresAt))
            """,
            logger: logger
        )
    }

    /// Whose password a live reset link changes (the strength check weighs their address).
    func resetEmail(digest: String, now: Date, on conn: PostgresConnection) async throws -> String? {
        let rows = try await conn.run(
            """
            SELECT m.email FROM operator_password_resets r JOIN operator_members m ON m.id = r.member_id
            WHERE r.digest = \(digest) AND r.used_at IS NULL AND r.expires_at > \(now) AND m.removed_at IS NULL
            """,
            logger: logger
        )
        for try await email in rows.decode(String.self) { return email }
        return nil
    }

    /// The reset spent (once) and the member's new password set, its lockout cleared, every
    /// session of theirs ended; nil for an unknown, used or expired link or a removed member.
    func resetPassword(digest: String, passwordHash: String, now: Date, on conn: PostgresConnection) async throws -> (member: UUID, app: UUID)? {
        let rows = try await conn.run(
            """
            WITH spent AS (
                UPDATE operator_password_resets SET used_at = \(now)
                WHERE digest = \(digest) AND used_at IS NULL AND expires_at > \(now) RETURNING member_id
            ), changed AS (
                UPDATE operator_members m SET password_hash = \(passwordHash), failed_attempts = 0, locked_until = NULL
                FROM spent WHERE m.id = spent.member_id AND m.removed_at IS NULL RETURNING m.id, m.app_id
            ), ended AS (
                UPDATE operator_sessions s SET ended_at = \(now) FROM changed WHERE s.member_id = changed.id AND s.ended_at IS NULL
            )
            SELECT id, app_id FROM changed
            """,
            logger: logger
        )
        for try await r in rows.decode((UUID, UUID).self) { return (r.0, r.1) }
        return nil
    }

    /// One more wrong password: the 5th in a row locks the member for 15 minutes (as players).
    func recordFailure(_ id: UUID, now: Date, on conn: PostgresConnection) async throws -> (attempts: Int, lockedUntil: Date?) {
        let rows = try await conn.run(
            """
            UPDATE operator_members SET failed_attempts = failed_attempts + 1,
                locked_until = CASE WHEN failed_attempts + 1 >= \(LockoutPolicy.maxAttempts)
                    THEN \(now.addingTimeInterval(LockoutPolicy.lockDuration)) ELSE locked_until END
            WHERE id = \(id) RETURNING failed_attempts, locked_until
            """,
            logger: logger
        )
        for try await r in rows.decode((Int, Date?).self) { return (r.0, r.1) }
        return (0, nil)
    }

    /// A sign-in that passed: the counter is reset and the code's step spent.
    func recordSuccess(_ id: UUID, totpStep: Int64?, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE operator_members SET failed_attempts = 0, locked_until = NULL, totp_last_step = COALESCE(\(totpStep), totp_last_step)
            WHERE id = \(id)
            """,
            logger: logger
        )
    }

    /// The member's role now; nil when not an active member of the app.
    func setRole(app: UUID, member: UUID, role: OperatorRole, on conn: PostgresConnection) async throws -> Member? {
        try await members(
            conn.run(
                """
                UPDATE operator_members SET role = \(role.rawValue) WHERE id = \(member) AND app_id = \(app) AND removed_at IS NULL
                RETURNING \(unescaped: Self.columns)
                """,
                logger: logger
            )
        ).first
    }

    /// Removed and every console session of theirs ended; nil when not an active member.
    func remove(app: UUID, member: UUID, now: Date, on conn: PostgresConnection) async throws -> Member? {
        let removed = try await members(
            conn.run(
                """
                UPDATE operator_members SET removed_at = \(now) WHERE id = \(member) AND app_id = \(app) AND removed_at IS NULL
                RETURNING \(unescaped: Self.columns)
                """,
                logger: logger
            )
        ).first
        if removed != nil {
            try await conn.run("UPDATE operator_sessions SET ended_at = \(now) WHERE member_id = \(member) AND ended_at IS NULL", logger: logger)
        }
        return removed
    }

    /// The app's active owners, locked: two owners demoting each other at once cannot both pass.
    func owners(app: UUID, on conn: PostgresConnection) async throws -> [UUID] {
        var out: [UUID] = []
        for try await id in try await conn.run(
            "SELECT id FROM operator_members WHERE app_id = \(app) AND role = 'owner' AND removed_at IS NULL FOR UPDATE",
            logger: logger
        ).decode(UUID.self) { out.append(id) }
        return out
    }

    func requiresTOTP(app: UUID, on conn: PostgresConnection) async throws -> Bool? {
        for try await b in try await conn.run("SELECT console_requires_totp FROM applications WHERE id = \(app)", logger: logger).decode(Bool.self) {
            return b
        }
        return nil
    }

    func setRequiresTOTP(app: UUID, _ required: Bool, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE applications SET console_requires_totp = \(required) WHERE id = \(app)", logger: logger)
    }

    func appName(_ app: UUID, on conn: PostgresConnection) async throws -> String? {
        for try await n in try await conn.run("SELECT name FROM applications WHERE id = \(app) AND active", logger: logger).decode(String.self) {
            return n
        }
        return nil
    }

    // MARK: console sessions

    func startSession(member: UUID, app: UUID, refreshDigest: String, expiresAt: Date, on conn: PostgresConnection) async throws -> UUID {
        let rows = try await conn.run(
            """
            INSERT INTO operator_sessions (member_id, app_id, refresh_digest, expires_at)
            VALUES (\(member), \(app), \(refreshDigest), \(expiresAt)) RETURNING id
            """,
            logger: logger
        )
        for try await id in rows.decode(UUID.self) { return id }
        throw AppError.unavailable
    }

    /// The refresh cookie rotated: the session and its member when the old one was live.
    func rotate(app: UUID, from old: String, to new: String, now: Date, on conn: PostgresConnection) async throws -> (session: UUID, member: Member)?
    {
        let rows = try await conn.run(
            """
            UPDATE operator_sessions s SET refresh_digest = \(new)
            FROM operator_members m
            WHERE s.refresh_digest = \(old) AND s.app_id = \(app) AND s.ended_at IS NULL AND s.expires_at > \(now)
              AND m.id = s.member_id AND m.removed_at IS NULL
            RETURNING s.id, m.id, m.app_id, m.email, m.password_hash, m.role, m.totp_secret, m.totp_last_step, m.failed_attempts,
                      m.locked_until, m.created_at
            """,
            logger: logger
        )
        for try await r in rows.decode((UUID, UUID, UUID, String, String, String, ByteBuffer?, Int64?, Int, Date?, Date).self) {
            return (
                r.0,
                Member(
                    id: r.1,
                    appID: r.2,
                    email: r.3,
                    passwordHash: r.4,
                    role: OperatorRole(rawValue: r.5) ?? .viewer,
                    totpSecret: r.6,
                    totpLastStep: r.7,
                    failedAttempts: r.8,
                    lockedUntil: r.9,
                    createdAt: r.10
                )
            )
        }
        return nil
    }

    func endSession(app: UUID, refreshDigest: String, now: Date, on conn: PostgresConnection) async throws -> Bool {
        let rows = try await conn.run(
            """
            UPDATE operator_sessions SET ended_at = \(now)
            WHERE refresh_digest = \(refreshDigest) AND app_id = \(app) AND ended_at IS NULL RETURNING id
            """,
            logger: logger
        )
        for try await _ in rows.decode(UUID.self) { return true }
        return false
    }

    func endSession(app: UUID, session: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            "UPDATE operator_sessions SET ended_at = \(now) WHERE id = \(session) AND app_id = \(app) AND ended_at IS NULL",
            logger: logger
        )
    }

    /// The member behind a console access token, now: their session live and not expired, the
    /// member not removed, with their current role.
    func live(session: UUID, member: UUID, app: UUID, now: Date, on conn: PostgresConnection) async throws -> Member? {
        try await members(
            conn.run(
                """
                SELECT m.id, m.app_id, m.email, m.password_hash, m.role, m.totp_secret, m.totp_last_step, m.failed_attempts, m.locked_until, m.created_at
                FROM operator_sessions s JOIN operator_members m ON m.id = s.member_id
                WHERE s.id = \(session) AND s.member_id = \(member) AND s.app_id = \(app) AND s.ended_at IS NULL AND s.expires_at > \(now)
                  AND m.removed_at IS NULL
                """,
                logger: logger
            )
        ).first
    }
}
