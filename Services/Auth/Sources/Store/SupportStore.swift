import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// What support reads about one user of one app (#16): the account, how it signs in, its live
/// sessions, and auth's part of the timeline.
public struct SupportStore: Sendable {
    public struct UserSummary: Codable, Sendable, Equatable {
        public var id: UUID, email: String?, emailVerified: Bool, provider: String, displayName: String?, status: String, isGuest: Bool
        public var createdAt: Date, lastLogin: Date?, deletionScheduledAt: Date?
        public var signInMethods: [String], liveSessions: Int
        enum CodingKeys: String, CodingKey {
            case id, email
            case emailVerified = "email_verified"
            case provider
            case displayName = "display_name"
            case status
            case isGuest = "is_guest"
            case createdAt = "created_at"
            case lastLogin = "last_login"
            case deletionScheduledAt = "deletion_scheduled_at"
            case signInMethods = "sign_in_methods"
            case liveSessions = "live_sessions"
        }
    }

    let db: DatabasePool
    let logger: Logger

    public init(db: DatabasePool, logger: Logger) {
        self.db = db
        self.logger = logger
    }

    public enum Lookup: Sendable {
        case id(UUID)
        case email(String)
    }

    /// Another app's user is not found, whatever its id or email.
    public func user(_ lookup: Lookup, app: UUID) async throws -> UserSummary? {
        let id: UUID?
        let email: String?
        switch lookup {
        case .id(let v): (id, email) = (v, nil)
        case .email(let v): (id, email) = (nil, v)
        }
        let rows = try await db.query(
            """
            SELECT u.id, u.email, u.email_verified, u.auth_provider, u.display_name, u.status, u.is_guest, u.created_at, u.last_login,
                   u.deletion_scheduled_at,
                   ARRAY(SELECT provider FROM oauth_connections o WHERE o.user_id = u.id ORDER BY provider) ||
                       CASE WHEN u.password_hash IS NOT NULL THEN ARRAY['email'] ELSE ARRAY[]::text[] END,
                   (SELECT count(*)::int FROM refresh_tokens r WHERE r.user_id = u.id AND NOT r.revoked AND r.expires_at > now())
            FROM users u
            WHERE u.app_id = \(app) AND (u.id = \(id ?? UUID()) AND \(id != nil) OR u.email = \(email ?? "") AND \(email != nil))
            """,
            logger: logger
        )
        for try await r in rows.decode((UUID, String?, Bool, String, String?, String, Bool, Date, Date?, Date?, [String], Int).self) {
            return UserSummary(
                id: r.0,
                email: r.1,
                emailVerified: r.2,
                provider: r.3,
                displayName: r.4,
                status: r.5,
                isGuest: r.6,
                createdAt: r.7,
                lastLogin: r.8,
                deletionScheduledAt: r.9,
                signInMethods: r.10,
                liveSessions: r.11
            )
        }
        return nil
    }

    /// Auth's part of the timeline: every audited action on the account.
    static let timeline = UserTimeline { user, app, limit -> PostgresQuery in
        """
        SELECT timestamp, 'auth.' || action, result || COALESCE(' ' || NULLIF(details->>'provider', ''), '') || COALESCE(' from ' || ip_address, '')
        FROM audit_logs WHERE app_id = \(app) AND user_id = \(user) ORDER BY timestamp DESC LIMIT \(limit)
        """
    }
}
