import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// `apple_signin_settings`: each app's Sign in with Apple key, sealed.
public struct SignInSettingsStore: Sendable {
    let db: DatabasePool
    let box: SecretBox
    let logger: Logger

    public init(db: DatabasePool, box: SecretBox, logger: Logger) {
        self.db = db
        self.box = box
        self.logger = logger
    }

    /// The new version; nil when the app does not exist. The settings are already checked.
    public func setApple(app: UUID, _ s: AppleClientConfig.Settings) async throws -> Int64? {
        let sealed = try box.seal(s.privateKeyPEM)
        let rows = try await db.query(
            """
            INSERT INTO apple_signin_settings (app_id, team_id, key_id, client_id, sealed_private_key)
            SELECT id, \(s.teamID), \(s.keyID), \(s.clientID), \(sealed) FROM applications WHERE id = \(app)
            ON CONFLICT (app_id) DO UPDATE SET team_id = EXCLUDED.team_id, key_id = EXCLUDED.key_id, client_id = EXCLUDED.client_id,
                sealed_private_key = EXCLUDED.sealed_private_key, version = apple_signin_settings.version + 1, updated_at = now()
            RETURNING version
            """,
            logger: logger
        )
        for try await v in rows.decode(Int64.self) { return v }
        return nil
    }

    /// Team, key and client ids (never the key) and the version.
    public func shownApple(app: UUID) async throws -> (teamID: String, keyID: String, clientID: String, version: Int64)? {
        for try await r in try await db.query(
            """
            SELECT team_id, key_id, client_id, version FROM apple_signin_settings WHERE app_id = \(app)
            """,
            logger: logger
        ).decode((String, String, String, Int64).self) { return r }
        return nil
    }

    /// A row that no longer opens (a data key changed without re-sealing) is left out and logged.
    public func loadApple() async throws -> [UUID: AppleClientConfig] {
        var out: [UUID: AppleClientConfig] = [:]
        for try await (app, team, key, client, sealed) in try await db.query(
            """
            SELECT app_id, team_id, key_id, client_id, sealed_private_key FROM apple_signin_settings
            """,
            logger: logger
        ).decode((UUID, String, String, String, ByteBuffer).self) {
            do {
                out[app] = try AppleClientConfig(.init(teamID: team, keyID: key, clientID: client, privateKeyPEM: try box.open(sealed)))
            } catch {
                logger.error("Sign in with Apple settings unreadable; set them again", metadata: ["app_id": "\(app.lowercasedString)"])
            }
        }
        return out
    }
}
