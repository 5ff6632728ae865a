import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// `store_settings`: each app's App Store and Google Play credentials, the secret part sealed.
public struct StoreSettingsStore: Sendable {
    /// What an operator may read back: never the secret, only whether one is set.
    public struct Shown: Codable, Sendable, Equatable {
        public var store: String
        public var settings: JSONValue
        public var hasSecret: Bool
        public var version: Int64
        public var updatedAt: Date
        enum CodingKeys: String, CodingKey {
            case store, settings
            case hasSecret = "has_secret"
            case version
            case updatedAt = "updated_at"
        }
    }

    let db: DatabasePool
    let box: SecretBox
    let logger: Logger

    public init(db: DatabasePool, box: SecretBox, logger: Logger) {
        self.db = db
        self.box = box
        self.logger = logger
    }

    /// Stores the settings (already validated) with the secret sealed; the version counts the changes.
    public func setApple(app: UUID, _ s: AppleIAPConfig.Settings) async throws -> Int64 {
        var open = s
        open.sharedSecret = nil
        return try await upsert(app: app, store: "apple", settings: open, secret: s.sharedSecret)
    }

    public func setGoogle(app: UUID, _ s: GooglePlayConfig.Settings) async throws -> Int64 {
        struct Open: Encodable {
            var packageName: String
            var serviceAccountEmail: String
            enum CodingKeys: String, CodingKey {
                case packageName = "package_name"
                case serviceAccountEmail = "service_account_email"
            }
        }
        return try await upsert(
            app: app,
            store: "google",
            settings: Open(packageName: s.packageName, serviceAccountEmail: s.serviceAccountEmail),
            secret: s.privateKeyPEM
        )
    }

    private func upsert(app: UUID, store: String, settings: some Encodable, secret: String?) async throws -> Int64 {
        let json = String(decoding: try JSON.encoder.encode(settings), as: UTF8.self)
        let sealed = try secret.map { try box.seal($0) }
        let rows = try await db.query(
            """
            INSERT INTO store_settings (app_id, store, settings, sealed_secret) VALUES (\(app), \(store), \(json)::jsonb, \(sealed))
            ON CONFLICT (app_id, store) DO UPDATE SET settings = EXCLUDED.settings, sealed_secret = EXCLUDED.sealed_secret,
                version = store_settings.version + 1, updated_at = now()
            RETURNING version
            """,
            logger: logger
        )
        for try await v in rows.decode(Int64.self) { return v }
        return 0
    }

    /// False when the app had no such settings.
    public func remove(app: UUID, store: String) async throws -> Bool {
        let rows = try await db.query("DELETE FROM store_settings WHERE app_id = \(app) AND store = \(store) RETURNING 1", logger: logger)
        for try await _ in rows.decode(Int.self) { return true }
        return false
    }

    public func shown(app: UUID) async throws -> [Shown] {
        var out: [Shown] = []
        for try await (store, settings, hasSecret, version, at) in try await db.query(
            """
            SELECT store, settings::text, sealed_secret IS NOT NULL, version, updated_at FROM store_settings WHERE app_id = \(app) ORDER BY store
            """,
            logger: logger
        ).decode((String, String, Bool, Int64, Date).self) {
            out.append(
                Shown(
                    store: store,
                    settings: try JSON.decoder.decode(JSONValue.self, from: Data(settings.utf8)),
                    hasSecret: hasSecret,
                    version: version,
                    updatedAt: at
                )
            )
        }
        return out
    }

    /// Every app's settings for one store, opened. A row that no longer opens or validates (a
    /// data key changed without re-sealing) is left out and logged: that app's purchases are
    /// refused as unconfigured, the others' go on.
    public func loadApple() async throws -> [UUID: AppleIAPConfig] {
        try await load(store: "apple") { json, secret in
            var s = try JSONDecoder().decode(AppleIAPConfig.Settings.self, from: Data(json.utf8))
            s.sharedSecret = secret
            return try AppleIAPConfig(s)
        }
    }

    public func loadGoogle() async throws -> [UUID: GooglePlayConfig] {
        try await load(store: "google") { json, secret in
            struct Open: Decodable {
                var package_name: String
                var service_account_email: String
            }
            let o = try JSONDecoder().decode(Open.self, from: Data(json.utf8))
            return try GooglePlayConfig(.init(packageName: o.package_name, serviceAccountEmail: o.service_account_email, privateKeyPEM: secret ?? ""))
        }
    }

    private func load<T>(store: String, _ make: (String, String?) throws -> T) async throws -> [UUID: T] {
        var out: [UUID: T] = [:]
        for try await (app, json, sealed) in try await db.query(
            """
            SELECT app_id, settings::text, sealed_secret FROM store_settings WHERE store = \(store)
            """,
            logger: logger
        ).decode((UUID, String, ByteBuffer?).self) {
            do {
                out[app] = try make(json, try sealed.map { try box.open($0) })
            } catch {
                logger.error(
                    "store settings unreadable; this app's purchases are refused until they are set again",
                    metadata: ["app_id": "\(app.lowercasedString)", "store": "\(store)"]
                )
            }
        }
        return out
    }
}
