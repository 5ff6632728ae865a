import AuthDomain
import Foundation
import NIOCore
import PostgresNIO
import ServiceKit

/// The ways a user signs in (UC-AUTH-1.7): the user's own column (`google_id`, `apple_id`,
/// `password_hash`) and, for Google and Apple, the `oauth_connections` row that keeps the
/// provider's profile and Apple's sealed refresh token (needed to revoke the grant later).
extension UserStore {
    /// The providers whose identity is a column of `users` and a row of `oauth_connections`.
    enum OAuthProvider: String, Sendable {
        case google, apple
        var userColumn: String { rawValue + "_id" }
    }

    /// A linked identity as the store keeps it.
    struct LinkedIdentity: Sendable {
        var subject: String
        var email: String?
        var name: String?
        var isPrivateEmail: Bool
    }

    /// Attaches a Google or Apple identity to an existing user. `adoptEmail` is the provider's
    /// verified email when the account had none and nobody else uses it; a sealed refresh token
    /// replaces the kept one only when the provider gave a new one.
    func attach(
        _ provider: OAuthProvider,
        _ identity: LinkedIdentity,
        adoptEmail: String?,
        sealedRefreshToken: ByteBuffer?,
        to userID: UUID,
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        try await conn.run(
            """
            UPDATE users SET \(unescaped: provider.userColumn) = \(identity.subject),
                   email = COALESCE(email, \(adoptEmail)),
                   email_verified = email_verified OR \(adoptEmail != nil),
                   display_name = COALESCE(display_name, \(identity.name)), updated_at = \(now)
            WHERE id = \(userID)
            """,
            logger: logger
        )
        try await conn.run(
            """
            INSERT INTO oauth_connections (user_id, provider, provider_user_id, refresh_token_sealed, profile_data)
            VALUES (\(userID), \(provider.rawValue), \(identity.subject), \(sealedRefreshToken),
                    jsonb_build_object('email', \(identity.email)::text))
            ON CONFLICT (user_id, provider) DO UPDATE SET provider_user_id = EXCLUDED.provider_user_id,
                   refresh_token_sealed = COALESCE(EXCLUDED.refresh_token_sealed, oauth_connections.refresh_token_sealed)
            """,
            logger: logger
        )
    }

    /// The connection row of a user just registered with a provider.
    func recordConnection(
        _ provider: AuthProvider,
        _ identity: LinkedIdentity,
        sealedRefreshToken: ByteBuffer?,
        userID: UUID,
        on conn: PostgresConnection
    ) async throws {
        try await conn.run(
            """
            INSERT INTO oauth_connections (user_id, provider, provider_user_id, refresh_token_sealed, profile_data)
            VALUES (\(userID), \(provider.rawValue), \(identity.subject), \(sealedRefreshToken),
                    jsonb_build_object('email', \(identity.email)::text, 'name', \(identity.name)::text,
                                       'is_private_email', \(identity.isPrivateEmail)))
            """,
            logger: logger
        )
    }

    /// A new refresh token from the provider at sign-in replaces the kept one.
    func replaceProviderRefreshToken(_ sealed: ByteBuffer, provider: AuthProvider, userID: UUID, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE oauth_connections SET refresh_token_sealed = \(sealed)
            WHERE user_id = \(userID) AND provider = \(provider.rawValue)
            """,
            logger: logger
        )
    }

    /// A guest or provider account gains an email and a password.
    func attachPassword(email: String, hash: String, to userID: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE users SET email = \(email), password_hash = \(hash), updated_at = \(now) WHERE id = \(userID)
            """,
            logger: logger
        )
    }

    /// Removes one way to sign in; returns Apple's sealed refresh token when one was kept, so the
    /// caller can revoke the grant at Apple.
    func detach(_ provider: AuthProvider, from userID: UUID, now: Date, on conn: PostgresConnection) async throws -> ByteBuffer? {
        switch provider {
        case .google:
            try await conn.run("UPDATE users SET google_id = NULL, updated_at = \(now) WHERE id = \(userID)", logger: logger)
        case .apple:
            try await conn.run("UPDATE users SET apple_id = NULL, updated_at = \(now) WHERE id = \(userID)", logger: logger)
        case .email:
            try await conn.run("UPDATE users SET password_hash = NULL, updated_at = \(now) WHERE id = \(userID)", logger: logger)
            return nil
        case .guest:
            return nil
        }
        var sealedToken: ByteBuffer?
        let removed = try await conn.run(
            """
            DELETE FROM oauth_connections WHERE user_id = \(userID) AND provider = \(provider.rawValue) RETURNING refresh_token_sealed
            """,
            logger: logger
        )
        for try await sealed in removed.decode(ByteBuffer?.self) { sealedToken = sealed }
        return sealedToken
    }
}
