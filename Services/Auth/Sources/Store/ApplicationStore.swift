import AuthDomain
import Crypto
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// A registered application (tenant) as auth stores it.
public struct TenantApplication: Sendable, Equatable {
    public var id: UUID
    public var name: String
    public var apiKeyPrefix: String
    public var googleClientIDs: [String]
    public var appleBundleIDs: [String]
    public var active: Bool
}

/// A new or rotated API key: the only moment the plain key exists.
public struct IssuedAPIKey: Sendable {
    public var appID: UUID
    public var apiKey: String
    /// After a rotation: until when the key before this one is still accepted (nil: not at all).
    public var previousValidUntil: Date? = nil
}

public protocol ApplicationRepository: Sendable {
    func create(name: String) async throws -> IssuedAPIKey
    func find(id: UUID) async throws -> TenantApplication?
    func verify(appID: UUID, apiKey: String) async throws -> Bool
    func verdict(appID: UUID, apiKey: String) async throws -> AppVerdict
    func rotateKey(appID: UUID, keepPreviousFor: Duration) async throws -> IssuedAPIKey?
    func setProviderSettings(appID: UUID, googleClientIDs: [String]?, appleBundleIDs: [String]?) async throws -> TenantApplication?
}

public enum APIKeys {
    /// `ak_` + 256 random bits, base64url.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }
        return "ak_" + Base64URL.encode(bytes)
    }

    public static func hash(_ key: String) -> String {
        key.sha256.hexEncoded
    }
}

public struct PostgresApplicationRepository: ApplicationRepository {
    let db: DatabasePool
    let logger: Logger

    public init(db: DatabasePool, logger: Logger) {
        self.db = db
        self.logger = logger
    }

    public func create(name: String) async throws -> IssuedAPIKey {
        let key = APIKeys.generate()
        let rows = try await db.query(
            """
            INSERT INTO applications (name, api_key_hash, api_key_prefix)
            VALUES (\(name), \(APIKeys.hash(key)), \(String(key.prefix(10))))
            RETURNING id
            """,
            logger: logger
        )
        for try await id in rows.decode(UUID.self) { return IssuedAPIKey(appID: id, apiKey: key) }
        throw AppError(.internalServerError, "internal_error", "application not created")
    }

    public func find(id: UUID) async throws -> TenantApplication? {
        let rows = try await db.query(
            """
            SELECT id, name, api_key_prefix, google_client_ids, apple_bundle_ids, active
            FROM applications WHERE id = \(id)
            """,
            logger: logger
        )
        for try await r in rows.decode((UUID, String, String, [String], [String], Bool).self) {
            return TenantApplication(id: r.0, name: r.1, apiKeyPrefix: r.2, googleClientIDs: r.3, appleBundleIDs: r.4, active: r.5)
        }
        return nil
    }

    public func verify(appID: UUID, apiKey: String) async throws -> Bool {
        try await verdict(appID: appID, apiKey: apiKey) == .valid
    }

    /// The current key, or the previous one until its expiry (on the database's clock). A right
    /// key of a disabled app is `disabled`: its requests are told why (403), not "wrong key".
    public func verdict(appID: UUID, apiKey: String) async throws -> AppVerdict {
        let rows = try await db.query(
            """
            SELECT api_key_hash, CASE WHEN previous_api_key_expires_at > now() THEN previous_api_key_hash END, active
            FROM applications WHERE id = \(appID)
            """,
            logger: logger
        )
        let given = APIKeys.hash(apiKey)
        for try await (current, previous, active) in rows.decode((String, String?, Bool).self) {
            // Both compared, whatever the first gave: the time taken says nothing about which matched.
            let matchesCurrent = ConstantTime.equals(current, given)
            let matchesPrevious = previous.map { ConstantTime.equals($0, given) } ?? false
            guard matchesCurrent || matchesPrevious else { return .invalid }
            return active ? .valid : .disabled
        }
        return .invalid
    }

    /// Disables or enables an app (support): its requests get 403 `app_disabled` at auth at
    /// once and at the other services within `TENANT_CACHE_SECONDS`. Audited in the same statement.
    public func setActive(appID: UUID, active: Bool, reason: String, operator who: String) async throws -> TenantApplication? {
        let rows = try await db.query(
            """
            WITH changed AS (
                UPDATE applications SET active = \(active), updated_at = now() WHERE id = \(appID) RETURNING id),
            audited AS (
                INSERT INTO audit_logs (app_id, action, result, details)
                SELECT id, \(active ? "operator.app.enable" : "operator.app.disable"), 'success',
                       jsonb_build_object('reason', \(reason)::text, 'operator', \(who)::text) FROM changed RETURNING 1)
            SELECT id FROM changed
            """,
            logger: logger
        )
        for try await id in rows.decode(UUID.self) { return try await find(id: id) }
        return nil
    }

    /// When the key before the current one stops being accepted (nil: none is).
    public func previousKeyValidUntil(appID: UUID) async throws -> Date? {
        for try await until in try await db.query(
            """
            SELECT previous_api_key_expires_at FROM applications WHERE id = \(appID) AND previous_api_key_expires_at > now()
            """,
            logger: logger
        ).decode(Date.self) { return until }
        return nil
    }

    /// Every app, for operators (no key material: the prefix only).
    public func list() async throws -> [TenantApplication] {
        var out: [TenantApplication] = []
        for try await r in try await db.query(
            """
            SELECT id, name, api_key_prefix, google_client_ids, apple_bundle_ids, active FROM applications ORDER BY created_at, id
            """,
            logger: logger
        ).decode((UUID, String, String, [String], [String], Bool).self) {
            out.append(TenantApplication(id: r.0, name: r.1, apiKeyPrefix: r.2, googleClientIDs: r.3, appleBundleIDs: r.4, active: r.5))
        }
        return out
    }

    /// A new key; the current one becomes the previous, accepted for `keepPreviousFor` more
    /// (zero: refused at once, for a leaked key). A key from an earlier rotation is dropped.
    public func rotateKey(appID: UUID, keepPreviousFor: Duration) async throws -> IssuedAPIKey? {
        let key = APIKeys.generate()
        let seconds = Double(keepPreviousFor.components.seconds)
        let rows = try await db.query(
            """
            WITH rotated AS (
                UPDATE applications SET
                    previous_api_key_hash = CASE WHEN \(seconds) > 0 THEN api_key_hash END,
                    previous_api_key_expires_at = CASE WHEN \(seconds) > 0 THEN now() + make_interval(secs => \(seconds)) END,
                    api_key_hash = \(APIKeys.hash(key)), api_key_prefix = \(String(key.prefix(10))), updated_at = now()
                WHERE id = \(appID) RETURNING id, previous_api_key_expires_at),
            audited AS (
                INSERT INTO audit_logs (app_id, action, result, details)
                SELECT id, 'operator.app.rotate_key', 'success', jsonb_build_object('previous_valid_until', previous_api_key_expires_at)
                FROM rotated RETURNING 1)
            SELECT id, previous_api_key_expires_at FROM rotated
            """,
            logger: logger
        )
        for try await (id, until) in rows.decode((UUID, Date?).self) { return IssuedAPIKey(appID: id, apiKey: key, previousValidUntil: until) }
        return nil
    }

    /// Ends the previous key now (its users have updated, or it leaked after all).
    public func endPreviousKey(appID: UUID) async throws -> Bool {
        let rows = try await db.query(
            """
            WITH ended AS (
                UPDATE applications SET previous_api_key_hash = NULL, previous_api_key_expires_at = NULL, updated_at = now()
                WHERE id = \(appID) RETURNING id),
            audited AS (
                INSERT INTO audit_logs (app_id, action, result) SELECT id, 'operator.app.end_previous_key', 'success' FROM ended RETURNING 1)
            SELECT id FROM ended
            """,
            logger: logger
        )
        for try await _ in rows.decode(UUID.self) { return true }
        return false
    }

    public func setProviderSettings(appID: UUID, googleClientIDs: [String]?, appleBundleIDs: [String]?) async throws -> TenantApplication? {
        try await db.query(
            """
            UPDATE applications SET
                google_client_ids = COALESCE(\(googleClientIDs), google_client_ids),
                apple_bundle_ids = COALESCE(\(appleBundleIDs), apple_bundle_ids),
                updated_at = now()
            WHERE id = \(appID)
            """,
            logger: logger
        )
        return try await find(id: appID)
    }
}

/// Auth checks tenant headers against its own table.
public struct LocalAppVerifier: AppVerifier {
    let repository: any ApplicationRepository
    public init(repository: any ApplicationRepository) { self.repository = repository }
    public func verify(appID: UUID, apiKey: String) async throws -> Bool {
        try await repository.verify(appID: appID, apiKey: apiKey)
    }
    public func verdict(appID: UUID, apiKey: String) async throws -> AppVerdict {
        try await repository.verdict(appID: appID, apiKey: apiKey)
    }
}
