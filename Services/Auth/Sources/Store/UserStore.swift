import AuthDomain
import AuthMessaging
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// Users, their privacy settings and their provider links, in the `auth` schema.
/// Every method that belongs to a larger change takes the caller's connection (transaction).
public struct UserStore: Sendable {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    static let columns = """
        id, app_id, email, email_verified, password_hash, google_id, apple_id, auth_provider, display_name,
        status, suspension_reason, is_guest, guest_expires_at, login_attempts, locked_until, last_login,
        deletion_scheduled_at, created_at, session_epoch
        """

    static func decode(_ row: PostgresRow) throws -> User {
        let r = row.makeRandomAccess()
        return User(
            id: try r["id"].decode(UUID.self),
            appID: try r["app_id"].decode(UUID.self),
            email: try r["email"].decode(String?.self),
            emailVerified: try r["email_verified"].decode(Bool.self),
            passwordHash: try r["password_hash"].decode(String?.self),
            googleID: try r["google_id"].decode(String?.self),
            appleID: try r["apple_id"].decode(String?.self),
            provider: AuthProvider(rawValue: try r["auth_provider"].decode(String.self)) ?? .email,
            displayName: try r["display_name"].decode(String?.self),
            status: UserStatus(rawValue: try r["status"].decode(String.self)) ?? .free,
            suspensionReason: try r["suspension_reason"].decode(String?.self),
            isGuest: try r["is_guest"].decode(Bool.self),
            guestExpiresAt: try r["guest_expires_at"].decode(Date?.self),
            loginAttempts: try r["login_attempts"].decode(Int.self),
            lockedUntil: try r["locked_until"].decode(Date?.self),
            lastLogin: try r["last_login"].decode(Date?.self),
            deletionScheduledAt: try r["deletion_scheduled_at"].decode(Date?.self),
            createdAt: try r["created_at"].decode(Date.self),
            sessionEpoch: try r["session_epoch"].decode(Int.self)
        )
    }

    private func one(_ rows: PostgresRows) async throws -> User? {
        for try await row in rows { return try Self.decode(row) }
        return nil
    }

    public enum Lookup: Sendable {
        case id(UUID)
        case email(String)
        case google(String)
        case apple(String)
        case guestDevice(String)
    }

    public func find(_ lookup: Lookup, appID: UUID, on conn: PostgresConnection, forUpdate: Bool = false) async throws -> User? {
        let lock: PostgresQuery = forUpdate ? " FOR UPDATE" : ""
        let cols = Self.columns
        let query: PostgresQuery
        switch lookup {
        case .id(let id):
            query = "SELECT \(unescaped: cols) FROM users WHERE app_id = \(appID) AND id = \(id) AND anonymized_at IS NULL"
        case .email(let email):
            query = "SELECT \(unescaped: cols) FROM users WHERE app_id = \(appID) AND email = \(email) AND anonymized_at IS NULL"
        case .google(let sub):
            query = "SELECT \(unescaped: cols) FROM users WHERE app_id = \(appID) AND google_id = \(sub) AND anonymized_at IS NULL"
        case .apple(let sub):
            query = "SELECT \(unescaped: cols) FROM users WHERE app_id = \(appID) AND apple_id = \(sub) AND anonymized_at IS NULL"
        case .guestDevice(let device):
            query =
                "SELECT \(unescaped: cols) FROM users WHERE app_id = \(appID) AND is_guest AND guest_device_id = \(device) AND anonymized_at IS NULL"
        }
        var q = query
        q.sql += lock.sql
        return try await one(try await conn.run(q, logger: logger))
    }

    public struct NewUser: Sendable {
        var appID: UUID
        var email: String? = nil
        var emailVerified: Bool = false
        var passwordHash: String? = nil
        var googleID: String? = nil
        var appleID: String? = nil
        var provider: AuthProvider
        var displayName: String? = nil
        var guestDeviceID: String? = nil
        var guestExpiresAt: Date? = nil
        var guestSecretHash: String? = nil
        var now: Date
    }

    /// Inserts the user and their default privacy settings (all consents off, seed step 15).
    /// A unique violation (same email / provider id / guest device in the app) is thrown as is.
    public func create(_ u: NewUser, on conn: PostgresConnection) async throws -> User {
        let rows = try await conn.run(
            """
            INSERT INTO users (app_id, email, email_verified, password_hash, google_id, apple_id, auth_provider,
                               display_name, is_guest, guest_device_id, guest_expires_at, guest_secret_hash, created_at, updated_at, last_login)
            VALUES (\(u.appID), \(u.email), \(u.emailVerified), \(u.passwordHash), \(u.googleID), \(u.appleID),
                    \(u.provider.rawValue), \(u.displayName), \(u.provider == .guest), \(u.guestDeviceID), \(u.guestExpiresAt),
                    \(u.guestSecretHash), \(u.now), \(u.now), \(u.now))
            RETURNING \(unescaped: Self.columns)
            """,
            logger: logger
        )
        guard let user = try await one(rows) else { throw AppError.unavailable }
        try await conn.run("INSERT INTO privacy_settings (user_id, updated_at) VALUES (\(user.id), \(u.now))", logger: logger)
        // #33: the app's servers hear of it (once the account's transaction commits).
        try await MessagingOutbox.webhook(
            .userCreated,
            app: u.appID,
            version: 1,
            data: [
                "user_id": .string(user.id.lowercasedString), "is_guest": .bool(u.provider == .guest),
                "provider": .string(u.provider.rawValue),
            ],
            createdAt: u.now,
            on: conn,
            logger: logger
        )
        return user
    }

    /// A guest who links a way to sign in becomes a full account (same id): no device, no
    /// expiry, no guest secret any more.
    public func upgradeGuest(_ id: UUID, provider: AuthProvider, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE users SET is_guest = false, guest_device_id = NULL, guest_expires_at = NULL, guest_secret_hash = NULL,
                   auth_provider = \(provider.rawValue), updated_at = \(now)
            WHERE id = \(id)
            """,
            logger: logger
        )
    }

    /// The hash of a guest's secret (nil for a guest created before secrets).
    public func guestSecretHash(_ id: UUID, on conn: PostgresConnection) async throws -> String? {
        for try await h in try await conn.run("SELECT guest_secret_hash FROM users WHERE id = \(id)", logger: logger).decode(String?.self) {
            return h
        }
        return nil
    }

    /// Sets a guest's secret once (a legacy guest claiming one); false when another sign-in set it first.
    public func claimGuestSecret(_ id: UUID, hash: String, on conn: PostgresConnection) async throws -> Bool {
        for try await _ in try await conn.run(
            """
            UPDATE users SET guest_secret_hash = \(hash) WHERE id = \(id) AND guest_secret_hash IS NULL RETURNING 1
            """,
            logger: logger
        ) { return true }
        return false
    }

    /// A successful sign-in: counter reset, last login, guest expiry pushed back.
    public func recordLogin(_ id: UUID, now: Date, on conn: PostgresConnection) async throws -> User? {
        let guestExpiry = now.addingTimeInterval(TokenLifetimes.guestInactivity)
        return try await one(
            try await conn.run(
                """
                UPDATE users SET login_attempts = 0, locked_until = NULL, last_login = \(now), updated_at = \(now),
                       guest_expires_at = CASE WHEN is_guest THEN \(guestExpiry) ELSE guest_expires_at END
                WHERE id = \(id) RETURNING \(unescaped: Self.columns)
                """,
                logger: logger
            )
        )
    }

    /// One more wrong password; locks the account on the 5th (seed 13b).
    public func recordFailedLogin(_ id: UUID, now: Date, on conn: PostgresConnection) async throws -> (attempts: Int, lockedUntil: Date?) {
        let lockUntil = now.addingTimeInterval(LockoutPolicy.lockDuration)
        let rows = try await conn.run(
            """
            UPDATE users SET login_attempts = login_attempts + 1, updated_at = \(now),
                   locked_until = CASE WHEN login_attempts + 1 >= \(LockoutPolicy.maxAttempts) THEN \(lockUntil) ELSE NULL END
            WHERE id = \(id) RETURNING login_attempts, locked_until
            """,
            logger: logger
        )
        for try await (n, until) in rows.decode((Int, Date?).self) { return (n, until) }
        return (0, nil)
    }

    public func setStatus(_ id: UUID, appID: UUID, status: UserStatus, reason: String?, on conn: PostgresConnection) async throws -> User? {
        try await one(
            try await conn.run(
                """
                UPDATE users SET status = \(status.rawValue), suspension_reason = \(reason), updated_at = now()
                WHERE id = \(id) AND app_id = \(appID) AND anonymized_at IS NULL RETURNING \(unescaped: Self.columns)
                """,
                logger: logger
            )
        )
    }

    public func markEmailVerified(_ id: UUID, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE users SET email_verified = true, updated_at = now() WHERE id = \(id)", logger: logger)
    }

    public func setPassword(_ id: UUID, hash: String, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE users SET password_hash = \(hash), login_attempts = 0, locked_until = NULL, updated_at = now() WHERE id = \(id)
            """,
            logger: logger
        )
    }

    // MARK: privacy

    static let privacyColumns = """
        consent_analytics, consent_third_party, consent_geolocation, consent_personalized_ads,
        consent_notifications, consent_game_center, updated_at
        """

    public func privacy(of userID: UUID, on conn: PostgresConnection, forUpdate: Bool = false) async throws -> PrivacySettings? {
        let rows = try await conn.run(
            """
            SELECT \(unescaped: Self.privacyColumns) FROM privacy_settings WHERE user_id = \(userID) \(unescaped: forUpdate ? "FOR UPDATE" : "")
            """,
            logger: logger
        )
        for try await r in rows.decode((Bool, Bool, Bool, Bool, Bool, Bool, Date).self) {
            return PrivacySettings(
                consentAnalytics: r.0,
                consentThirdParty: r.1,
                consentGeolocation: r.2,
                consentPersonalizedAds: r.3,
                consentNotifications: r.4,
                consentGameCenter: r.5,
                updatedAt: r.6
            )
        }
        return nil
    }

    /// Writes the new settings and returns the previous ones (locked), so the caller can tell
    /// which consents were withdrawn in the same transaction.
    public func updatePrivacy(
        of userID: UUID,
        to s: PrivacySettings,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> (
        old: PrivacySettings, new: PrivacySettings
    )? {
        let oldRows = try await conn.run(
            "SELECT \(unescaped: Self.privacyColumns) FROM privacy_settings WHERE user_id = \(userID) FOR UPDATE",
            logger: logger
        )
        var old: PrivacySettings?
        for try await r in oldRows.decode((Bool, Bool, Bool, Bool, Bool, Bool, Date).self) {
            old = PrivacySettings(
                consentAnalytics: r.0,
                consentThirdParty: r.1,
                consentGeolocation: r.2,
                consentPersonalizedAds: r.3,
                consentNotifications: r.4,
                consentGameCenter: r.5,
                updatedAt: r.6
            )
        }
        guard let old else { return nil }
        try await conn.run(
            """
            UPDATE privacy_settings SET consent_analytics = \(s.consentAnalytics), consent_third_party = \(s.consentThirdParty),
                   consent_geolocation = \(s.consentGeolocation), consent_personalized_ads = \(s.consentPersonalizedAds),
                   consent_notifications = \(s.consentNotifications), consent_game_center = \(s.consentGameCenter),
                   updated_at = \(now)
            WHERE user_id = \(userID)
            """,
            logger: logger
        )
        var new = s
        new.updatedAt = now
        return (old, new)
    }
}

/// Every outcome of a sign-in path leaves a row (seed: `audit_logs`).
public struct AuditLog: Sendable {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    public struct Entry: Sendable {
        var userID: UUID?
        var appID: UUID
        var action: String
        var result: String
        var ip: String?
        var userAgent: String?
        var details: [String: JSONValue] = [:]
    }

    /// Who asked, as an entry records it (the client's address and user agent): read from the
    /// request by the route, so that a flow writes its entries without holding the request.
    public struct Origin: Sendable {
        var ip: String?
        var userAgent: String?

        func entry(_ action: String, _ result: String, app: UUID, user: UUID?, details: [String: JSONValue] = [:]) -> Entry {
            Entry(userID: user, appID: app, action: action, result: result, ip: ip, userAgent: userAgent, details: details)
        }
    }

    public func record(_ e: Entry, on conn: PostgresConnection) async throws {
        let details = String(decoding: try JSON.encoder.encode(e.details), as: UTF8.self)
        try await conn.run(
            """
            INSERT INTO audit_logs (user_id, app_id, action, ip_address, user_agent, result, details)
            VALUES (\(e.userID), \(e.appID), \(e.action), \(e.ip), \(e.userAgent), \(e.result), \(details)::jsonb)
            """,
            logger: logger
        )
    }

    /// Records outside any transaction (a failure whose transaction was rolled back).
    public func record(_ e: Entry, db: DatabasePool) async {
        do { try await db.withConnection { try await record(e, on: $0) } } catch {
            logger.warning("audit log write failed", metadata: ["action": "\(e.action)", "error": "\(error)"])
        }
    }
}
