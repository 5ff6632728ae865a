import AuthMessaging
import Foundation
import Logging
import PostgresNIO
import WireTypes

/// The user signed out on every device, in the caller's transaction: refresh tokens revoked,
/// the sessions' end published to every service (their access tokens refused within seconds),
/// push devices forgotten (a device signed out hears nothing more, #30). The caller applies the
/// fact to this replica after its commit.
struct SignOutEverywhere: Sendable {
    let refreshTokens: RefreshTokenStore
    let facts: FactPublisher
    let logger: Logger

    func run(app: UUID, user: UUID, reason: String, on conn: PostgresConnection) async throws -> (revoked: Int, fact: SessionFact) {
        let n = try await refreshTokens.revokeAll(userID: user, reason: reason, on: conn)
        let fact = try await facts.endSessions(app: app, user: user, .all, on: conn)
        try await MessagingOutbox.forgetDevices(app: app, user: user, on: conn, logger: logger)
        return (n, fact)
    }
}
