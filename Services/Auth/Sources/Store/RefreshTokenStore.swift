import AuthDomain
import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit

/// A refresh token row as the rotation rules need it.
public struct RefreshTokenRecord: Sendable {
    public var id: UUID
    public var userID: UUID
    public var appID: UUID
    public var familyID: UUID
    public var deviceID: String
    public var expiresAt: Date
    public var revoked: Bool
    public var rotatedAt: Date?
    public var successorSealed: ByteBuffer?
}

public struct RefreshTokenStore: Sendable {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    /// Stores a new token (its hash) for a device, in a family (a new family on sign-in).
    public func insert(
        token: String,
        userID: UUID,
        appID: UUID,
        familyID: UUID,
        deviceID: String,
        deviceInfo: String,
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        let expires = now.addingTimeInterval(TokenLifetimes.refreshToken)
        try await conn.run(
            """
            INSERT INTO refresh_tokens (user_id, app_id, family_id, device_id, token_hash, device_info, expires_at, created_at)
            VALUES (\(userID), \(appID), \(familyID), \(deviceID), \(OpaqueToken.hash(token)), \(deviceInfo)::jsonb, \(expires), \(now))
            """,
            logger: logger
        )
    }

    /// Seed UC-AUTH-1.2 14d: one active token per device — signing in again revokes the old one.
    public func revokeDevice(userID: UUID, deviceID: String, reason: String, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE refresh_tokens SET revoked = true, revoked_reason = \(reason)
            WHERE user_id = \(userID) AND device_id = \(deviceID) AND NOT revoked
            """,
            logger: logger
        )
    }

    @discardableResult
    public func revokeAll(userID: UUID, reason: String, on conn: PostgresConnection) async throws -> Int {
        let rows = try await conn.run(
            """
            UPDATE refresh_tokens SET revoked = true, revoked_reason = \(reason)
            WHERE user_id = \(userID) AND NOT revoked RETURNING id
            """,
            logger: logger
        )
        let n = try await rows.count()
        return n
    }

    @discardableResult
    public func revokeFamily(_ familyID: UUID, reason: String, on conn: PostgresConnection) async throws -> Int {
        let rows = try await conn.run(
            """
            UPDATE refresh_tokens SET revoked = true, revoked_reason = \(reason)
            WHERE family_id = \(familyID) AND NOT revoked RETURNING id
            """,
            logger: logger
        )
        let n = try await rows.count()
        return n
    }

    /// Finds a token by its plain value and locks its row: concurrent refreshes of one token
    /// queue here, so exactly one rotates it.
    public func lock(token: String, on conn: PostgresConnection) async throws -> RefreshTokenRecord? {
        let rows = try await conn.run(
            """
            SELECT id, user_id, app_id, family_id, device_id, expires_at, revoked, rotated_at, successor_sealed
            FROM refresh_tokens WHERE token_hash = \(OpaqueToken.hash(token)) FOR UPDATE
            """,
            logger: logger
        )
        for try await r in rows.decode((UUID, UUID, UUID, UUID, String, Date, Bool, Date?, ByteBuffer?).self) {
            return RefreshTokenRecord(
                id: r.0,
                userID: r.1,
                appID: r.2,
                familyID: r.3,
                deviceID: r.4,
                expiresAt: r.5,
                revoked: r.6,
                rotatedAt: r.7,
                successorSealed: r.8
            )
        }
        return nil
    }

    /// Rotates `id`: marks it rotated, keeping its successor sealed for the grace window, and
    /// stores the successor in its family, for its device, in one statement (one round trip of
    /// the refresh's). The insert reads the update's row, so the old token has left the
    /// one-active-token-per-device index before the new one enters it.
    public func rotate(_ id: UUID, successor: String, successorSealed: ByteBuffer, now: Date, on conn: PostgresConnection) async throws {
        let expires = now.addingTimeInterval(TokenLifetimes.refreshToken)
        try await conn.run(
            """
            WITH rotated AS (
                UPDATE refresh_tokens SET rotated_at = \(now), successor_sealed = \(successorSealed) WHERE id = \(id)
                RETURNING user_id, app_id, family_id, device_id, device_info
            )
            INSERT INTO refresh_tokens (user_id, app_id, family_id, device_id, token_hash, device_info, expires_at, created_at)
            SELECT user_id, app_id, family_id, device_id, \(OpaqueToken.hash(successor)), device_info, \(expires), \(now) FROM rotated
            """,
            logger: logger
        )
    }
}
