import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit
import WireTypes

/// The user's data as auth holds it, in the sections of a privacy export.
enum AuthUserData {
    static func sections(logger: Logger) -> [UserDataSection] {
        @Sendable func rows(_ query: PostgresQuery, _ conn: PostgresConnection) async throws -> JSONValue {
            try await UserDataSection.jsonRows(query, on: conn, logger: logger)
        }
        let refuse: @Sendable (UUID, UUID, PostgresConnection) async throws -> Int = { _, _, _ in
            throw AppError(.forbidden, "not_allowed", "Auth deletes its data through the account deletion flow")
        }
        return [
            UserDataSection(name: "profile", export: { user, app, conn in
                try await rows("""
                    SELECT row_to_json(u)::text FROM (SELECT id, email, email_verified, auth_provider, display_name, status, is_guest,
                           created_at, last_login, deletion_scheduled_at FROM users WHERE id = \(user) AND app_id = \(app)) u
                    """, conn)
            }, delete: refuse),
            UserDataSection(name: "privacy_settings", export: { user, _, conn in
                try await rows("SELECT row_to_json(p)::text FROM (SELECT * FROM privacy_settings WHERE user_id = \(user)) p", conn)
            }, delete: refuse),
            UserDataSection(name: "linked_providers", export: { user, _, conn in
                try await rows("""
                    SELECT row_to_json(o)::text FROM (SELECT provider, provider_user_id, profile_data, connected_at
                    FROM oauth_connections WHERE user_id = \(user)) o
                    """, conn)
            }, delete: refuse),
            UserDataSection(name: "sessions", export: { user, _, conn in
                try await rows("""
                    SELECT row_to_json(t)::text FROM (SELECT device_id, device_info, created_at, expires_at, revoked
                    FROM refresh_tokens WHERE user_id = \(user) ORDER BY created_at) t
                    """, conn)
            }, delete: refuse),
            UserDataSection(name: "activity", export: { user, app, conn in
                try await rows("""
                    SELECT row_to_json(a)::text FROM (SELECT action, result, ip_address, user_agent, timestamp
                    FROM audit_logs WHERE user_id = \(user) AND app_id = \(app) ORDER BY timestamp) a
                    """, conn)
            }, delete: refuse),
            // Seed 6a.4: the Game Center player and its achievements.
            UserDataSection(name: "game_center", export: { user, app, conn in
                try await rows("""
                    SELECT row_to_json(g)::text FROM (SELECT player_id, alias, achievements, leaderboard_score, linked_at, last_sync
                    FROM game_center_connections WHERE user_id = \(user) AND app_id = \(app)) g
                    """, conn)
            }, delete: refuse),
        ]
    }
}

/// Builds exports: auth's part read locally, each other service's part fetched from its
/// `GET /internal/users/{id}/export`. A service that cannot answer makes the job retry
/// (an export missing a service's data would not be a complete answer to the user's right).
struct PrivacyExporter: Sendable {
    static let job = "build_export"
    static let validity: TimeInterval = 7 * 24 * 3600

    let db: DatabasePool
    let http: CurlHTTPClient
    let serviceURLs: [ServiceName: String]
    let credential: InternalCredential
    let sections: [UserDataSection]
    let signer: LinkSigner
    let mailer: any Mailer
    let settings: AuthSettings
    let publicURL: String
    let clock: any WallClock
    let logger: Logger

    struct Payload: Codable, Sendable { var exportID: UUID
        enum CodingKeys: String, CodingKey { case exportID = "export_id" } }

    func build(_ job: Job) async throws {
        let exportID = try job.decode(Payload.self).exportID
        let found = try await db.withConnection { conn -> (UUID, UUID, String, String?)? in
            let rows = try await conn.run("""
                SELECT e.user_id, e.app_id, e.status, u.email FROM exports e JOIN users u ON u.id = e.user_id WHERE e.id = \(exportID)
                """, logger: logger)
            for try await r in rows.decode((UUID, UUID, String, String?).self) { return r }
            return nil
        }
        guard let (userID, appID, status, email) = found, status == "pending" else { return }
        var services: [String: JSONValue] = [:]
        services["auth"] = try await db.withConnection { conn in
            var parts: [String: JSONValue] = [:]
            for s in sections { parts[s.name] = try await s.export(userID, appID, conn) }
            return .object(parts)
        }
        for service in [ServiceName.subscription, .offline, .ads] {
            let url = "\(serviceURLs[service]!)/internal/users/\(userID.uuidString.lowercased())/export?app_id=\(appID.uuidString.lowercased())"
            let response = try await http.send(HTTPRequest(url: url, headers: credential.headers, timeout: .seconds(20)), retries: 2)
            guard response.isSuccess else { throw ExportError(description: "\(service.rawValue) answered \(response.status)") }
            services[service.rawValue] = .object(try response.decode(UserDataExport.self).sections)
        }
        let now = clock.now()
        let document: JSONValue = .object([
            "export_id": .string(exportID.uuidString.lowercased()), "user_id": .string(userID.uuidString.lowercased()),
            "app_id": .string(appID.uuidString.lowercased()), "generated_at": .string(ISO8601DateFormatter().string(from: now)),
            "services": .object(services),
        ])
        let json = String(decoding: try JSON.encoder.encode(document), as: UTF8.self)
        let expires = now.addingTimeInterval(Self.validity)
        try await db.withConnection { conn in
            try await conn.run("""
                UPDATE exports SET status = 'ready', data = \(json)::jsonb, completed_at = \(now), expires_at = \(expires)
                WHERE id = \(exportID) AND status = 'pending'
                """, logger: logger)
        }
        if let email {
            let link = "\(publicURL)/auth/v1/privacy/export/\(exportID.uuidString.lowercased())/download?\(signer.query(for: exportID, expires: expires))"
            try await mailer.send(SMTPMessage(from: settings.mailFrom, to: [email], subject: "Vos données sont prêtes",
                                              text: "Votre export est prêt. Téléchargez-le ici (lien valable 7 jours) :\n\(link)"))
        }
    }

    struct ExportError: Error, CustomStringConvertible { var description: String }
}

/// Signs download links: `expires` and an HMAC of (export id, expires) with the data key, so
/// a link works without a session and stops working after 7 days.
public struct LinkSigner: Sendable {
    let key: SymmetricKey

    func signature(_ id: UUID, _ expires: Int) -> String {
        Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data("export:\(id.uuidString.lowercased()):\(expires)".utf8), using: key)))
    }

    func query(for id: UUID, expires: Date) -> String {
        let e = Int(expires.timeIntervalSince1970)
        return "expires=\(e)&signature=\(signature(id, e))"
    }

    func isValid(id: UUID, expires: Int, signature: String, now: Date) -> Bool {
        expires > Int(now.timeIntervalSince1970) && ConstantTime.equals(signature, self.signature(id, expires))
    }
}
