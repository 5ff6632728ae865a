import Foundation
import ServiceKit
import WireTypes

/// Where queued actions go: the main app's API per action type (`SYNC_UPSTREAMS`, a JSON
/// object of action type → URL, `*` for the rest). Sent through libcurl with the action's
/// `client_action_id` as `Idempotency-Key`, so a retry never applies twice upstream.
struct SyncUpstream: Sendable {
    let routes: [String: String]
    let http: CurlHTTPClient
    let timeout: Duration

    static func parse(_ raw: String?) throws -> [String: String] {
        guard let raw, !raw.isEmpty else { return [:] }
        guard let obj = try? JSONSerialization.jsonObject(with: Data(raw.utf8)) as? [String: String] else {
            throw ConfigurationError("SYNC_UPSTREAMS must be a JSON object of action type to URL")
        }
        return obj
    }

    func url(for actionType: String) -> String? { routes[actionType] ?? routes["*"] }

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
            case clientActionID = "client_action_id", appID = "app_id", userID = "user_id", actionType = "action_type"
            case entityType = "entity_type", entityID = "entity_id", payload, resolution
        }
    }

    func send(_ url: String, item: QueueItem, app: UUID, user: UUID, payload: JSONValue? = nil, resolution: String? = nil) async -> Outcome {
        let body = Body(clientActionID: item.clientActionID, appID: app, userID: user, actionType: item.actionType, entityType: item.entityType,
                        entityID: item.entityID, payload: payload ?? item.payload, resolution: resolution)
        let key = resolution.map { "\(item.clientActionID):\($0)" } ?? item.clientActionID
        guard var request = try? HTTPRequest.json("POST", url, body: body, headers: [("Idempotency-Key", key), ("X-App-ID", app.uuidString.lowercased())]) else {
            return .rejected("could not encode the action")
        }
        request.timeout = timeout
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
