import AuthDomain
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit
import WireTypes

/// All of the messenger's SQL: device tokens, the apps' credentials and options, the
/// notifications asked for and every send.
struct PushStore: Sendable {
    let db: DatabasePool
    let box: SecretBox
    let logger: Logger

    // MARK: device tokens

    enum RegisterOutcome: Sendable {
        case registered(moved: Bool)
        case tooManyDevices
    }

    /// Registers or moves a token: one token belongs to one user of one app, so a row holding it
    /// under another user (or another device) goes first; a user has at most 20 devices.
    func register(app: UUID, user: UUID, _ d: PushDevice, on conn: PostgresConnection) async throws -> RegisterOutcome {
        // The user's rows first, in a fixed order: two registrations of one user queue here.
        var devices = 0
        var hasThis = false
        for try await device in try await conn.run(
            """
            SELECT device_id FROM push_tokens WHERE app_id = \(app) AND user_id = \(user) ORDER BY device_id FOR UPDATE
            """,
            logger: logger
        ).decode(String.self) {
            devices += 1
            if device == d.deviceID { hasThis = true }
        }
        guard hasThis || devices < PushTokenRegistration.maxDevices else { return .tooManyDevices }
        var moved = false
        for try await _ in try await conn.run(
            """
            DELETE FROM push_tokens WHERE app_id = \(app) AND token = \(d.token) AND NOT (user_id = \(user) AND device_id = \(d.deviceID))
            RETURNING 1
            """,
            logger: logger
        ) { moved = true }
        try await conn.run(
            """
            INSERT INTO push_tokens (app_id, user_id, device_id, platform, token, environment, locale)
            VALUES (\(app), \(user), \(d.deviceID), \(d.platform.rawValue), \(d.token), \(d.environment.rawValue), \(d.locale?.rawValue))
            ON CONFLICT (app_id, user_id, device_id) DO UPDATE SET platform = EXCLUDED.platform, token = EXCLUDED.token,
                environment = EXCLUDED.environment, locale = COALESCE(EXCLUDED.locale, push_tokens.locale), updated_at = now()
            """,
            logger: logger
        )
        return .registered(moved: moved)
    }

    struct ListedDevice: Codable, Sendable {
        var deviceID: String
        var platform: String
        var environment: String
        var locale: String?
        var tokenSuffix: String
        var createdAt: Date
        var updatedAt: Date
        enum CodingKeys: String, CodingKey {
            case deviceID = "device_id"
            case platform, environment, locale
            case tokenSuffix = "token_suffix"
            case createdAt = "created_at"
            case updatedAt = "updated_at"
        }
    }

    /// The user's devices; a token is shown by its last 8 characters only.
    func devices(app: UUID, user: UUID) async throws -> [ListedDevice] {
        var out: [ListedDevice] = []
        for try await r in try await db.query(
            """
            SELECT device_id, platform, environment, locale, right(token, 8), created_at, updated_at FROM push_tokens
            WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at, device_id
            """,
            logger: logger
        ).decode((String, String, String, String?, String, Date, Date).self) {
            out.append(ListedDevice(deviceID: r.0, platform: r.1, environment: r.2, locale: r.3, tokenSuffix: r.4, createdAt: r.5, updatedAt: r.6))
        }
        return out
    }

    func remove(app: UUID, user: UUID, device: String) async throws -> Bool {
        try await db.withConnection { try await Self.remove(app: app, user: user, device: device, on: $0, logger: logger) }
    }

    /// Also in the caller's transaction: the logout of a device removes its token.
    @discardableResult
    static func remove(app: UUID, user: UUID, device: String, on conn: PostgresConnection, logger: Logger) async throws -> Bool {
        for try await _ in try await conn.run(
            """
            DELETE FROM push_tokens WHERE app_id = \(app) AND user_id = \(user) AND device_id = \(device) RETURNING 1
            """,
            logger: logger
        ) { return true }
        return false
    }

    /// Logout of every device.
    static func removeAll(app: UUID, user: UUID, on conn: PostgresConnection, logger: Logger) async throws {
        try await conn.run("DELETE FROM push_tokens WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
    }

    /// The provider said the token is dead: only that token (a newer one may have replaced it).
    func removeDead(app: UUID, token: String) async throws {
        try await db.query("DELETE FROM push_tokens WHERE app_id = \(app) AND token = \(token)", logger: logger)
    }

    // MARK: credentials and options

    func setCredentials(app: UUID, provider: String, settings: JSONValue, secret: String, fingerprint: String) async throws -> Int64? {
        let sealed = try box.seal(secret)
        let json = String(decoding: try JSON.encoder.encode(settings), as: UTF8.self)
        for try await v in try await db.query(
            """
            INSERT INTO push_credentials (app_id, provider, settings, sealed_secret, fingerprint)
            SELECT id, \(provider), \(json)::jsonb, \(sealed), \(fingerprint) FROM applications WHERE id = \(app)
            ON CONFLICT (app_id, provider) DO UPDATE SET settings = EXCLUDED.settings, sealed_secret = EXCLUDED.sealed_secret,
                fingerprint = EXCLUDED.fingerprint, version = push_credentials.version + 1, last_error = NULL, last_error_at = NULL,
                provider_token = NULL, provider_token_issued_at = NULL, updated_at = now()
            RETURNING version
            """,
            logger: logger
        ).decode(Int64.self) { return v }
        return nil
    }

    func deleteCredentials(app: UUID, provider: String) async throws -> Bool {
        for try await _ in try await db.query(
            "DELETE FROM push_credentials WHERE app_id = \(app) AND provider = \(provider) RETURNING 1",
            logger: logger
        ) { return true }
        return false
    }

    struct ShownCredentials: Codable, Sendable {
        var provider: String
        var settings: JSONValue
        var fingerprint: String
        var version: Int64
        var lastError: String?
        var lastErrorAt: Date?
        var updatedAt: Date
        enum CodingKeys: String, CodingKey {
            case provider, settings, fingerprint, version
            case lastError = "last_error"
            case lastErrorAt = "last_error_at"
            case updatedAt = "updated_at"
        }
    }

    /// Never the secret: the settings beside it, its fingerprint and the last refusal.
    func shownCredentials(app: UUID) async throws -> [ShownCredentials] {
        var out: [ShownCredentials] = []
        for try await r in try await db.query(
            """
            SELECT provider, settings::text, fingerprint, version, last_error, last_error_at, updated_at FROM push_credentials
            WHERE app_id = \(app) ORDER BY provider
            """,
            logger: logger
        ).decode((String, String, String, Int64, String?, Date?, Date).self) {
            out.append(
                ShownCredentials(
                    provider: r.0,
                    settings: try JSON.decoder.decode(JSONValue.self, from: Data(r.1.utf8)),
                    fingerprint: r.2,
                    version: r.3,
                    lastError: r.4,
                    lastErrorAt: r.5,
                    updatedAt: r.6
                )
            )
        }
        return out
    }

    /// A provider refused our credentials: the operator sees it on the settings.
    func recordCredentialError(app: UUID, provider: String, error: String) async {
        do {
            try await db.query(
                """
                UPDATE push_credentials SET last_error = \(error), last_error_at = now() WHERE app_id = \(app) AND provider = \(provider)
                """,
                logger: logger
            )
        } catch { logger.warning("could not record a push credential error", metadata: ["error": "\(error)"]) }
    }

    /// Every app's credentials, opened; a row that no longer opens is left out and logged.
    func loadCredentials() async throws -> [UUID: PushCredentials] {
        var out: [UUID: PushCredentials] = [:]
        for try await (app, provider, settings, sealed) in try await db.query(
            """
            SELECT app_id, provider, settings::text, sealed_secret FROM push_credentials
            """,
            logger: logger
        ).decode((UUID, String, String, ByteBuffer).self) {
            do {
                let secret = try box.open(sealed)
                var c = out[app] ?? PushCredentials()
                switch provider {
                case "apns":
                    let s = try JSON.decoder.decode(APNsCredentials.Settings.self, from: Data(settings.utf8))
                    c.apns = try APNsCredentials(s, privateKeyPEM: secret)
                default:
                    c.fcm = try FCMCredentials(try JSON.decoder.decode(FCMCredentials.ServiceAccount.self, from: Data(secret.utf8)))
                }
                out[app] = c
            } catch {
                logger.error(
                    "push credentials unreadable; set them again",
                    metadata: ["app_id": "\(app.lowercasedString)", "provider": "\(provider)", "error": "\(error)"]
                )
            }
        }
        return out
    }

    func setOptions(app: UUID, _ o: PushOptions) async throws -> Int64? {
        let json = String(decoding: try JSON.encoder.encode(o), as: UTF8.self)
        for try await v in try await db.query(
            """
            INSERT INTO push_settings (app_id, settings) SELECT id, \(json)::jsonb FROM applications WHERE id = \(app)
            ON CONFLICT (app_id) DO UPDATE SET settings = EXCLUDED.settings, version = push_settings.version + 1, updated_at = now()
            RETURNING version
            """,
            logger: logger
        ).decode(Int64.self) { return v }
        return nil
    }

    func loadOptions() async throws -> [UUID: PushOptions] {
        var out: [UUID: PushOptions] = [:]
        for try await (app, json) in try await db.query("SELECT app_id, settings::text FROM push_settings", logger: logger).decode(
            (UUID, String).self
        ) {
            out[app] = (try? JSON.decoder.decode(PushOptions.self, from: Data(json.utf8))) ?? PushOptions()
        }
        return out
    }

    // MARK: notifications and sends

    /// Records what was asked, once per (app, key). Nil when the key was already used (a
    /// redelivery).
    func request(
        app: UUID,
        key: String,
        kind: PushKind,
        users: [UUID],
        data: [String: String],
        requestedBy: String,
        on conn: PostgresConnection
    ) async throws -> Int64? {
        let json = String(decoding: try JSON.encoder.encode(data), as: UTF8.self)
        var id: Int64?
        for try await n in try await conn.run(
            """
            INSERT INTO notifications (app_id, key, kind, user_ids, data, requested_by)
            VALUES (\(app), \(key), \(kind.rawValue), \(users), \(json)::jsonb, \(requestedBy))
            ON CONFLICT (app_id, key) DO NOTHING RETURNING id
            """,
            logger: logger
        ).decode(Int64.self) { id = n }
        return id
    }

    /// A live user of this app (an operator's send names one; another app's id is unknown here).
    func isUser(app: UUID, user: UUID) async throws -> Bool {
        for try await _ in try await db.query(
            """
            SELECT 1 FROM users WHERE app_id = \(app) AND id = \(user) AND anonymized_at IS NULL
            """,
            logger: logger
        ) { return true }
        return false
    }

    /// The id an earlier request with this key got.
    func existing(app: UUID, key: String) async throws -> Int64? {
        for try await n in try await db.query("SELECT id FROM notifications WHERE app_id = \(app) AND key = \(key)", logger: logger).decode(
            Int64.self
        ) {
            return n
        }
        return nil
    }

    struct Notification: Sendable {
        var id: Int64
        var appID: UUID
        var kind: PushKind
        var users: [UUID]
        var data: [String: String]
    }

    func notification(_ id: Int64) async throws -> Notification? {
        for try await r in try await db.query(
            """
            SELECT id, app_id, kind, user_ids, data::text FROM notifications WHERE id = \(id)
            """,
            logger: logger
        ).decode((Int64, UUID, String, [UUID], String).self) {
            guard let kind = PushKind(rawValue: r.2) else { return nil }
            return Notification(
                id: r.0,
                appID: r.1,
                kind: kind,
                users: r.3,
                data: (try? JSON.decoder.decode([String: String].self, from: Data(r.4.utf8))) ?? [:]
            )
        }
        return nil
    }

    /// What deciding a batch of users needs, in one round of reads: each user's consent (nil:
    /// never answered; absent: not a live user of this app), devices, alerts in the last 24 hours,
    /// and the sends of this notification already final (a retried job skips them).
    struct Audience: Sendable {
        var consent: [UUID: Bool?] = [:]
        var devices: [UUID: [PushDevice]] = [:]
        var sentToday: [UUID: Int] = [:]
        var done: Set<String> = []
        static func doneKey(_ user: UUID, _ device: String?) -> String { user.lowercasedString + "|" + (device ?? "") }
    }

    func audience(app: UUID, notification: Int64, users: [UUID]) async throws -> Audience {
        try await db.withConnection { conn in
            var a = Audience()
            for try await (user, consent) in try await conn.run(
                """
                SELECT u.id, p.consent_notifications FROM users u LEFT JOIN privacy_settings p ON p.user_id = u.id
                WHERE u.app_id = \(app) AND u.id = ANY(\(users)) AND u.anonymized_at IS NULL AND u.status <> 'suspended'
                """,
                logger: logger
            ).decode((UUID, Bool?).self) { a.consent[user] = .some(consent) }
            for try await r in try await conn.run(
                """
                SELECT user_id, device_id, platform, token, environment, locale FROM push_tokens
                WHERE app_id = \(app) AND user_id = ANY(\(users))
                """,
                logger: logger
            ).decode((UUID, String, String, String, String, String?).self) {
                guard let p = PushPlatform(rawValue: r.2), let e = PushEnvironment(rawValue: r.4) else { continue }
                a.devices[r.0, default: []].append(
                    PushDevice(
                        deviceID: r.1,
                        platform: p,
                        token: r.3,
                        environment: e,
                        locale: r.5.flatMap(PushLocale.init(rawValue:))
                    )
                )
            }
            for try await (user, n) in try await conn.run(
                """
                SELECT user_id, count(DISTINCT notification_id)::int FROM push_deliveries
                WHERE app_id = \(app) AND user_id = ANY(\(users)) AND sent_at > now() - interval '24 hours' AND outcome = 'sent'
                  AND notification_id <> \(notification) AND kind NOT IN ('test', 'operator')
                GROUP BY user_id
                """,
                logger: logger
            ).decode((UUID, Int).self) { a.sentToday[user] = n }
            for try await (user, device) in try await conn.run(
                """
                SELECT user_id, device_id FROM push_deliveries
                WHERE notification_id = \(notification) AND user_id = ANY(\(users)) AND outcome <> 'retrying'
                """,
                logger: logger
            ).decode((UUID, String?).self) { a.done.insert(Audience.doneKey(user, device)) }
            return a
        }
    }

    struct Delivery: Sendable {
        var user: UUID
        var device: String?
        var provider: String?
        var outcome: String
        var status: Int?
        var reason: String?
    }

    /// A batch's sends in one statement; a retried send replaces its earlier outcome.
    func record(notification: Int64, app: UUID, kind: PushKind, _ rows: [Delivery]) async throws {
        guard !rows.isEmpty else { return }
        try await db.query(
            """
            INSERT INTO push_deliveries (notification_id, app_id, user_id, device_id, kind, provider, outcome, status_code, reason, collapsed)
            SELECT \(notification), \(app), u, NULLIF(d, ''), \(kind.rawValue), NULLIF(p, ''), o, NULLIF(s, -1), NULLIF(r, ''), \(kind.collapseID != nil)
            FROM unnest(\(rows.map { $0.device ?? "" }), \(rows.map { $0.provider ?? "" }), \(rows.map(\.outcome)),
                        \(rows.map { $0.status ?? -1 }), \(rows.map { String(($0.reason ?? "").prefix(300)) }), \(rows.map(\.user)))
                 AS t(d, p, o, s, r, u)
            ON CONFLICT (notification_id, user_id, device_id) DO UPDATE SET outcome = EXCLUDED.outcome, status_code = EXCLUDED.status_code,
                reason = EXCLUDED.reason, sent_at = now()
            """,
            logger: logger
        )
    }

    struct SentRow: Codable, Sendable {
        var notificationID: Int64
        var kind: String
        var deviceID: String?
        var provider: String?
        var outcome: String
        var statusCode: Int?
        var reason: String?
        var sentAt: Date
        enum CodingKeys: String, CodingKey {
            case notificationID = "notification_id"
            case kind
            case deviceID = "device_id"
            case provider, outcome
            case statusCode = "status_code"
            case reason
            case sentAt = "sent_at"
        }
    }

    /// The sends of one notification (the operator's test answers each device's result).
    func deliveries(notification: Int64) async throws -> [SentRow] {
        var out: [SentRow] = []
        for try await r in try await db.query(
            """
            SELECT notification_id, kind, device_id, provider, outcome, status_code, reason, sent_at FROM push_deliveries
            WHERE notification_id = \(notification) ORDER BY id
            """,
            logger: logger
        ).decode((Int64, String, String?, String?, String, Int?, String?, Date).self) {
            out.append(SentRow(notificationID: r.0, kind: r.1, deviceID: r.2, provider: r.3, outcome: r.4, statusCode: r.5, reason: r.6, sentAt: r.7))
        }
        return out
    }

    /// One send as the console lists it (#47): to whom, on which device, what the provider said.
    struct RecentSend: Encodable, Sendable {
        var id: Int64
        var notificationID: Int64
        var userID: UUID
        var kind: String
        var deviceID: String?
        var provider: String?
        var outcome: String
        var statusCode: Int?
        var reason: String?
        var sentAt: Date
        enum CodingKeys: String, CodingKey {
            case id
            case notificationID = "notification_id"
            case userID = "user_id"
            case kind
            case deviceID = "device_id"
            case provider, outcome
            case statusCode = "status_code"
            case reason
            case sentAt = "sent_at"
        }
    }

    /// The app's sends, newest first, `limit` of them before the send `before` (ids only grow).
    func recentSends(app: UUID, before: Int64?, limit: Int, on conn: PostgresConnection) async throws -> [RecentSend] {
        var out: [RecentSend] = []
        for try await r in try await conn.query(
            """
            SELECT id, notification_id, user_id, kind, device_id, provider, outcome, status_code, reason, sent_at FROM push_deliveries
            WHERE app_id = \(app) AND id < \(before ?? Int64.max) ORDER BY id DESC LIMIT \(limit)
            """,
            logger: logger
        ).decode((Int64, Int64, UUID, String, String?, String?, String, Int?, String?, Date).self) {
            out.append(
                RecentSend(
                    id: r.0,
                    notificationID: r.1,
                    userID: r.2,
                    kind: r.3,
                    deviceID: r.4,
                    provider: r.5,
                    outcome: r.6,
                    statusCode: r.7,
                    reason: r.8,
                    sentAt: r.9
                )
            )
        }
        return out
    }

    // MARK: the user's data

    /// The export's `push` section: devices and the last 30 days of sends.
    static func exportSection(logger: Logger) -> UserDataSection {
        UserDataSection(
            name: "push_notifications",
            export: { user, app, conn in
                let devices = try await UserDataSection.jsonRows(
                    """
                    SELECT row_to_json(t)::text FROM (SELECT device_id, platform, environment, locale, token, created_at, updated_at
                    FROM push_tokens WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at) t
                    """,
                    on: conn,
                    logger: logger
                )
                let sent = try await UserDataSection.jsonRows(
                    """
                    SELECT row_to_json(d)::text FROM (SELECT d.kind, d.device_id, d.provider, d.outcome, d.sent_at, n.data
                    FROM push_deliveries d JOIN notifications n ON n.id = d.notification_id
                    WHERE d.app_id = \(app) AND d.user_id = \(user) AND d.sent_at > now() - interval '30 days' ORDER BY d.id) d
                    """,
                    on: conn,
                    logger: logger
                )
                return .object(["devices": devices, "sent_last_30_days": sent])
            },
            delete: { user, app, conn in
                try await erase(user: user, app: app, on: conn, logger: logger)
            }
        )
    }

    /// Erasure: the devices and every send go; a notification for this user alone goes too.
    @discardableResult
    static func erase(user: UUID, app: UUID, on conn: PostgresConnection, logger: Logger) async throws -> Int {
        var n = 0
        for query: PostgresQuery in [
            "DELETE FROM push_tokens WHERE app_id = \(app) AND user_id = \(user) RETURNING 1",
            "DELETE FROM push_deliveries WHERE app_id = \(app) AND user_id = \(user) RETURNING 1",
            "DELETE FROM notifications WHERE app_id = \(app) AND user_ids = ARRAY[\(user)]::uuid[] RETURNING 1",
        ] {
            n += try await conn.run(query, logger: logger).count()
        }
        return n
    }

    /// `push_deliveries` and `notifications` kept `PUSH_RETENTION_DAYS` (90 by default).
    static func retention(_ env: EnvironmentVariables) -> [RetentionRule] {
        let keep = Duration.seconds(86_400 * env.int("PUSH_RETENTION_DAYS", default: 90))
        return [
            RetentionRule(name: "push_deliveries", table: "push_deliveries", due: "sent_at < $1", keep: keep),
            RetentionRule(name: "notifications", table: "notifications", due: "created_at < $1", keep: keep),
        ]
    }
}

/// The APNs provider token every replica sends (`push_credentials`). An APNs key belongs to
/// a developer team, not to an app: apps of one team may share it, and Apple counts renewals
/// per key, so the token is shared by every row of the same key (its fingerprint), whatever
/// the app. Renewal takes the key's rows in a fixed order (one renewal at a time).
struct PushTokenStore: APNsTokenStore {
    let db: DatabasePool
    let logger: Logger

    func current(app: UUID, fingerprint: String) async throws -> (jwt: String, issuedAt: Date)? {
        for try await r in try await db.query(
            """
            SELECT provider_token, provider_token_issued_at FROM push_credentials
            WHERE provider = 'apns' AND fingerprint = \(fingerprint) AND provider_token IS NOT NULL
            ORDER BY provider_token_issued_at DESC LIMIT 1
            """,
            logger: logger
        ).decode((String, Date).self) { return r }
        return nil
    }

    func replace(app: UUID, fingerprint: String, jwt: String, issuedAt: Date, before: Date) async throws -> (jwt: String, issuedAt: Date)? {
        // One statement, its own transaction: the key's rows locked, the newest token issued in
        // [before, issuedAt] kept if a replica wrote one meanwhile, else this one written. The
        // lock re-reads a row another replica changed after this statement began, so two that
        // sign at once agree on one token.
        for try await r in try await db.query(
            """
            WITH locked AS (
                SELECT provider_token, provider_token_issued_at FROM push_credentials
                WHERE provider = 'apns' AND fingerprint = \(fingerprint) ORDER BY app_id FOR UPDATE
            ), in_force AS (
                SELECT provider_token, provider_token_issued_at FROM locked
                WHERE provider_token IS NOT NULL AND provider_token_issued_at >= \(before) AND provider_token_issued_at <= \(issuedAt)
                ORDER BY provider_token_issued_at DESC LIMIT 1
            ), written AS (
                UPDATE push_credentials SET provider_token = \(jwt), provider_token_issued_at = \(issuedAt)
                WHERE provider = 'apns' AND fingerprint = \(fingerprint) AND NOT EXISTS (SELECT 1 FROM in_force)
                RETURNING 1
            )
            SELECT provider_token, provider_token_issued_at FROM in_force
            """,
            logger: logger
        ).decode((String, Date).self) { return r }
        return (jwt, issuedAt)
    }
}

/// An app's push credentials, opened.
struct PushCredentials: Sendable {
    var apns: APNsCredentials?
    var fcm: FCMCredentials?
}
