import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// `email_settings`: one row per app that set its own emails.
public struct EmailSettingsStore: Sendable {
    let db: DatabasePool
    let logger: Logger

    public init(db: DatabasePool, logger: Logger) {
        self.db = db
        self.logger = logger
    }

    /// The new version; nil when the app does not exist.
    public func set(app: UUID, _ settings: AppEmailSettings) async throws -> Int64? {
        let json = String(decoding: try JSON.encoder.encode(settings), as: UTF8.self)
        let rows = try await db.query(
            """
            INSERT INTO email_settings (app_id, settings) SELECT id, \(json)::jsonb FROM applications WHERE id = \(app)
            ON CONFLICT (app_id) DO UPDATE SET settings = EXCLUDED.settings, version = email_settings.version + 1, updated_at = now()
            RETURNING version
            """,
            logger: logger
        )
        for try await v in rows.decode(Int64.self) { return v }
        return nil
    }

    public func find(app: UUID) async throws -> (AppEmailSettings, Int64)? {
        for try await (json, version) in try await db.query(
            """
            SELECT settings::text, version FROM email_settings WHERE app_id = \(app)
            """,
            logger: logger
        ).decode((String, Int64).self) {
            return (try JSONDecoder().decode(AppEmailSettings.self, from: Data(json.utf8)), version)
        }
        return nil
    }

    public func loadAll() async throws -> [UUID: AppEmailSettings] {
        var out: [UUID: AppEmailSettings] = [:]
        for try await (app, json) in try await db.query("SELECT app_id, settings::text FROM email_settings", logger: logger).decode(
            (UUID, String).self
        ) {
            guard let s = try? JSONDecoder().decode(AppEmailSettings.self, from: Data(json.utf8)) else {
                logger.error("email settings unreadable; the deployment's apply", metadata: ["app_id": "\(app.lowercasedString)"])
                continue
            }
            out[app] = s
        }
        return out
    }
}
