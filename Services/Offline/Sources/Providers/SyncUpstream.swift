import Crypto
import Foundation
import OfflineDomain
import ServiceKit
import WireTypes

/// Where queued actions go: the main app's API per action type (a JSON object of action type
/// → URL, `*` for the rest): the app's own (`/admin/sync-upstream`, `sync_upstreams`), else the
/// deployment's `SYNC_UPSTREAMS`. Sent through libcurl, signed with the app's secret, with an
/// `Idempotency-Key` unique per tenant, user and action, so a retry never applies twice upstream.
struct SyncUpstream: Sendable {
    let routes: [String: String]
    /// Each app's own settings (read from memory; reloaded when an operator changes them).
    var tenants: TenantSettings<UpstreamSettings>? = nil
    let http: CurlHTTPClient
    let timeout: Duration
    /// Signs every call (`X-Signature`) with the tenant's secret, derived from this key.
    var signer = SyncSignature(key: "local-sync-signing-key")
    var clock: any WallClock = SystemClock()

    static func parse(_ raw: String?) throws -> [String: String] {
        guard let raw, !raw.isEmpty else { return [:] }
        guard let obj = try? JSONSerialization.jsonObject(with: Data(raw.utf8)) as? [String: String] else {
            throw ConfigurationError("SYNC_UPSTREAMS must be a JSON object of action type to URL")
        }
        return obj
    }

    func settings(app: UUID) async throws -> UpstreamSettings { try await tenants?.value(for: app) ?? .none }

    func url(for actionType: String, app: UUID) async throws -> String? {
        let own = try await settings(app: app).routes ?? routes
        return own[actionType] ?? own["*"]
    }

    /// Action types and URLs as an operator may set them: at most 50, each an http(s) URL.
    static func validate(_ routes: [String: String]) throws {
        guard !routes.isEmpty, routes.count <= 50 else { throw AppError.validation("routes", "routes must name 1 to 50 action types") }
        for (type, url) in routes {
            guard !type.isEmpty, type.count <= 64 else { throw AppError.validation("routes", "an action type is 1-64 characters") }
            guard url.count <= 2048, let u = URL(string: url), ["http", "https"].contains(u.scheme?.lowercased() ?? ""), u.host?.isEmpty == false
            else {
                throw AppError.validation("routes", "the URL for \(type.prefix(64)) must be an http(s) URL")
            }
        }
    }

    enum Outcome: Sendable, Equatable {
        case applied, duplicate
        case rejected(String)
        case retryable(String)
        case conflict(serverData: String, serverVersion: String?)
    }

    struct Body: Encodable {
        var clientActionID: String, appID: UUID, userID: UUID, actionType: String, entityType: String, entityID: String
        var payload: JSONValue
        var resolution: String?
        enum CodingKeys: String, CodingKey {
            case clientActionID = "client_action_id"
            case appID = "app_id"
            case userID = "user_id"
            case actionType = "action_type"
            case entityType = "entity_type"
            case entityID = "entity_id"
            case payload, resolution
        }
    }

    func send(_ url: String, item: QueueItem, app: UUID, user: UUID, payload: JSONValue? = nil, resolution: String? = nil) async -> Outcome {
        let body = Body(
            clientActionID: item.clientActionID,
            appID: app,
            userID: user,
            actionType: item.actionType,
            entityType: item.entityType,
            entityID: item.entityID,
            payload: payload ?? item.payload,
            resolution: resolution
        )
        let key = SyncSignature.idempotencyKey(app: app, user: user, clientActionID: item.clientActionID, resolution: resolution)
        guard let data = try? JSON.encoder.encode(body) else { return .rejected("could not encode the action") }
        let secretVersion: Int
        do { secretVersion = try await settings(app: app).secretVersion } catch { return .retryable("settings unavailable") }
        let signature = signer.header(app: app, secretVersion: secretVersion, body: data, at: clock.now())
        let request = HTTPRequest(
            method: "POST",
            url: url,
            headers: [
                ("Content-Type", "application/json"), ("Idempotency-Key", key),
                ("X-App-ID", app.lowercasedString), ("X-Signature", signature),
            ],
            body: data,
            timeout: timeout
        )
        let response: HTTPResponseData
        do { response = try await http.send(request) } catch { return .retryable(String(describing: error)) }
        let text = String(decoding: response.body.prefix(1000), as: UTF8.self)
        switch response.status {
        case 200..<300:
            let duplicate = (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any])?["duplicate"] as? Bool ?? false
            return duplicate || response.header("Idempotent-Replayed") == "true" ? .duplicate : .applied
        case 409:
            // The server's version of the entity comes back with the refusal.
            let obj = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
            let server = obj?["server_data"] ?? obj ?? [:]
            let data = (try? JSONSerialization.data(withJSONObject: server)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            let version = (obj?["server_version"]).map { "\($0)" }
            return .conflict(serverData: data, serverVersion: version)
        case 408, 425, 429, 500...: return .retryable("HTTP \(response.status): \(text)")
        default: return .rejected("HTTP \(response.status): \(text)")
        }
    }
}

/// How the game server knows a sync call is ours, and whose action it carries.
///
/// - `Idempotency-Key`: `<app_id>:<user_id>:<client_action_id>` (`:<resolution>` for a conflict
///   resolution): unique per tenant and user, so two users reusing one client id never collide.
/// - `X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`; the tenant's
///   secret is hex HMAC-SHA256(`SYNC_SIGNING_KEY`, `"sync-signing:" + app_id`) (`offline-service
///   admin sync-secret --app-id` prints it). The receiver recomputes it over the raw body, compares
///   in constant time and refuses a `t` more than `tolerance` away from its clock (a replay).
struct SyncSignature: Sendable {
    let key: String
    static let tolerance: TimeInterval = 300

    static func idempotencyKey(app: UUID, user: UUID, clientActionID: String, resolution: String?) -> String {
        let base = "\(app.lowercasedString):\(user.lowercasedString):\(clientActionID)"
        return resolution.map { base + ":" + $0 } ?? base
    }

    /// Version 1 is `"sync-signing:" + app_id`; each rotation after it appends `":<version>"`.
    func secret(app: UUID, version: Int = 1) -> String {
        let info = "sync-signing:" + app.lowercasedString + (version > 1 ? ":\(version)" : "")
        return Data(HMAC<SHA256>.authenticationCode(for: Data(info.utf8), using: SymmetricKey(data: Data(key.utf8)))).hexEncoded
    }

    func header(app: UUID, secretVersion: Int = 1, body: Data, at date: Date) -> String {
        let t = Int(date.timeIntervalSince1970)
        return "t=\(t),v1=" + Self.mac(secret: secret(app: app, version: secretVersion), timestamp: t, body: body)
    }

    static func mac(secret: String, timestamp: Int, body: Data) -> String {
        var message = Data("\(timestamp).".utf8)
        message.append(body)
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8)))).hexEncoded
    }

    /// The receiver's check (used by tests and given to the game server's authors).
    static func verify(header: String, body: Data, secret: String, now: Date) -> Bool {
        var t: Int?
        var v1: String?
        for part in header.split(separator: ",") {
            let kv = part.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { continue }
            if kv[0] == "t" { t = Int(kv[1]) } else if kv[0] == "v1" { v1 = String(kv[1]) }
        }
        guard let t, let v1, abs(now.timeIntervalSince1970 - Double(t)) <= tolerance else { return false }
        return ConstantTime.equals(mac(secret: secret, timestamp: t, body: body), v1)
    }
}
