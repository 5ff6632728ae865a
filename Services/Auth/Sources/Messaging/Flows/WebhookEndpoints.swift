import AuthDomain
import Foundation
import Logging
import ServiceKit
import WireTypes

/// The webhooks' writes of more than one statement that a request makes (#33): an endpoint
/// created under the app's limit of 20, and another service's event with the live event it is
/// for (#46), each in one transaction.
struct WebhookEndpoints: Sendable {
    let db: DatabasePool
    let store: WebhookStore
    let logger: Logger

    /// Nil when the app has its 20 endpoints already.
    func create(app: UUID, url: String, events: [String], description: String, secret: String) async throws -> WebhookStore.Endpoint? {
        try await db.withTransaction(logger: logger) { conn in
            try await store.create(app: app, url: url, events: events, description: description, secret: secret, on: conn)
        }
    }

    /// An event from another service's outbox: alone, one statement (its own transaction); with
    /// the live event it is for its user, both in one. False when both were there already.
    func record(_ event: WebhookEvent, live: (LiveEventType, [String: JSONValue])?) async throws -> Bool {
        guard let (type, data) = live, case .string(let raw)? = event.data["user_id"], let user = UUID(uuidString: raw) else {
            return try await db.withConnection { try await WebhookStore.record(event, on: $0, logger: logger) }
        }
        return try await db.withTransaction(logger: logger) { conn in
            let inserted = try await WebhookStore.record(event, on: conn, logger: logger)
            var data = data
            data["version"] = .int(Int(event.version))
            let live = try await LiveStore.record(
                app: event.appID,
                user: user,
                type: type,
                id: event.id,
                version: event.version,
                data: data,
                createdAt: event.createdAt,
                on: conn,
                logger: logger
            )
            return inserted || live != nil
        }
    }
}
