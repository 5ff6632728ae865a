import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// One app's operator keys (#16): issued, listed and revoked by the platform owner through
/// the CLI; the key itself exists only in the answer to `create`.
public struct OperatorKeyStore: OperatorVerifier {
    public struct Issued: Sendable {
        public var id: UUID
        public var appID: UUID
        public var name: String
        public var key: String
    }
    public struct Listed: Sendable, Equatable {
        public var id: UUID, name: String, keyPrefix: String, createdAt: Date, revokedAt: Date?
    }

    let db: DatabasePool
    let logger: Logger

    public init(db: DatabasePool, logger: Logger) {
        self.db = db
        self.logger = logger
    }

    /// nil when the app does not exist. Audited in the same statement.
    public func create(appID: UUID, name: String, operator who: String) async throws -> Issued? {
        let key = OperatorKeys.generate()
        let rows = try await db.query(
            """
            WITH created AS (
                INSERT INTO operator_keys (app_id, name, key_hash, key_prefix)
                SELECT id, \(name), \(OperatorKeys.hash(key)), \(String(key.prefix(10))) FROM applications WHERE id = \(appID)
                RETURNING id, app_id),
            audited AS (
                INSERT INTO audit_logs (app_id, action, result, details)
                SELECT app_id, 'operator.key.create', 'success',
                       jsonb_build_object('key_id', id, 'name', \(name)::text, 'operator', \(who)::text) FROM created RETURNING 1)
            SELECT id FROM created
            """,
            logger: logger
        )
        for try await id in rows.decode(UUID.self) { return Issued(id: id, appID: appID, name: name, key: key) }
        return nil
    }

    public func list(appID: UUID) async throws -> [Listed] {
        var out: [Listed] = []
        for try await r in try await db.query(
            """
            SELECT id, name, key_prefix, created_at, revoked_at FROM operator_keys WHERE app_id = \(appID) ORDER BY created_at, id
            """,
            logger: logger
        ).decode((UUID, String, String, Date, Date?).self) {
            out.append(Listed(id: r.0, name: r.1, keyPrefix: r.2, createdAt: r.3, revokedAt: r.4))
        }
        return out
    }

    /// Refused by auth at once and by the other services within `OPERATOR_CACHE_SECONDS`.
    /// False when the app has no such live key.
    public func revoke(appID: UUID, keyID: UUID, reason: String, operator who: String) async throws -> Bool {
        let rows = try await db.query(
            """
            WITH revoked AS (
                UPDATE operator_keys SET revoked_at = now()
                WHERE id = \(keyID) AND app_id = \(appID) AND revoked_at IS NULL RETURNING id, app_id),
            audited AS (
                INSERT INTO audit_logs (app_id, action, result, details)
                SELECT app_id, 'operator.key.revoke', 'success',
                       jsonb_build_object('key_id', id, 'reason', \(reason)::text, 'operator', \(who)::text) FROM revoked RETURNING 1)
            SELECT id FROM revoked
            """,
            logger: logger
        )
        for try await _ in rows.decode(UUID.self) { return true }
        return false
    }

    /// A live key of this app (another app's key is nil, whatever it is).
    public func verify(appID: UUID, key: String) async throws -> Operator? {
        guard OperatorKeys.looksLikeKey(key) else { return nil }
        let rows = try await db.query(
            """
            SELECT id, name FROM operator_keys WHERE key_hash = \(OperatorKeys.hash(key)) AND app_id = \(appID) AND revoked_at IS NULL
            """,
            logger: logger
        )
        for try await (id, name) in rows.decode((UUID, String).self) { return .key(id: id, name: name) }
        return nil
    }
}
