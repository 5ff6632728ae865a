import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit

/// One app's game-server settings: where each action type goes, and which secret signs the calls.
public struct UpstreamSettings: Sendable, Equatable, Codable {
    /// Action type → URL (`*` for the rest); nil: the deployment's `SYNC_UPSTREAMS`.
    public var routes: [String: String]?
    public var secretVersion: Int
    public var version: Int64
    enum CodingKeys: String, CodingKey {
        case routes
        case secretVersion = "secret_version"
        case version
    }

    public static let none = UpstreamSettings(routes: nil, secretVersion: 1, version: 0)
}

/// `sync_upstreams`.
public struct UpstreamStore: Sendable {
    let db: DatabasePool
    let logger: Logger

    public init(db: DatabasePool, logger: Logger) {
        self.db = db
        self.logger = logger
    }

    public func set(app: UUID, routes: [String: String]) async throws -> Int64 {
        let json = String(decoding: try JSON.encoder.encode(routes), as: UTF8.self)
        let rows = try await db.query(
            """
            INSERT INTO sync_upstreams (app_id, routes) VALUES (\(app), \(json)::jsonb)
            ON CONFLICT (app_id) DO UPDATE SET routes = EXCLUDED.routes, version = sync_upstreams.version + 1, updated_at = now()
            RETURNING version
            """,
            logger: logger
        )
        for try await v in rows.decode(Int64.self) { return v }
        return 0
    }

    /// The next secret version (the row is made with the default routes' copy if the app has none).
    public func rotateSecret(app: UUID, defaultRoutes: [String: String]) async throws -> Int {
        let json = String(decoding: try JSON.encoder.encode(defaultRoutes), as: UTF8.self)
        let rows = try await db.query(
            """
            INSERT INTO sync_upstreams (app_id, routes, secret_version) VALUES (\(app), \(json)::jsonb, 2)
            ON CONFLICT (app_id) DO UPDATE SET secret_version = sync_upstreams.secret_version + 1,
                version = sync_upstreams.version + 1, updated_at = now()
            RETURNING secret_version
            """,
            logger: logger
        )
        for try await v in rows.decode(Int.self) { return v }
        return 1
    }

    public func find(app: UUID) async throws -> UpstreamSettings? {
        try await decode(
            try await db.query(
                """
                SELECT app_id, routes::text, secret_version, version FROM sync_upstreams WHERE app_id = \(app)
                """,
                logger: logger
            )
        )[app]
    }

    public func loadAll() async throws -> [UUID: UpstreamSettings] {
        try await decode(try await db.query("SELECT app_id, routes::text, secret_version, version FROM sync_upstreams", logger: logger))
    }

    private func decode(_ rows: PostgresRows) async throws -> [UUID: UpstreamSettings] {
        var out: [UUID: UpstreamSettings] = [:]
        for try await (id, routes, secretVersion, version) in rows.decode((UUID, String, Int, Int64).self) {
            out[id] = UpstreamSettings(
                routes: try? JSONDecoder().decode([String: String].self, from: Data(routes.utf8)),
                secretVersion: secretVersion,
                version: version
            )
        }
        return out
    }
}
