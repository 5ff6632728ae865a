import AuthDomain
import Foundation
import Hummingbird
import ServiceKit
import WireTypes

/// Webhooks to the app's own servers (#33): the operator's endpoints (admin routes) and the
/// other services' events (`POST /internal/events`, from their outbox).
struct WebhookController: Sendable {
    let store: WebhookStore
    let endpoints: WebhookEndpoints
    let sender: WebhookSender
    /// ENVIRONMENT=local: http URLs are allowed, and loopback addresses (the stack's receivers).
    let local: Bool
    let clock: any WallClock

    struct CreateBody: Decodable {
        var url: String
        var events: [String]
        var description: String?
    }
    struct PatchBody: Decodable {
        var url: String?
        var events: [String]?
        var description: String?
        var disabled: Bool?
    }

    struct Created: Encodable {
        var endpoint: WebhookStore.Endpoint
        var secret: String
    }

    struct DeliveryPage: Encodable {
        var deliveries: [WebhookStore.DeliveryView]
        var nextBefore: String?
        enum CodingKeys: String, CodingKey {
            case deliveries
            case nextBefore = "next_before"
        }
    }

    func addAdminRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.post("admin/webhooks") { request, context in
            let app = try context.requireApp()
            let b = try await request.decodeJSON(as: CreateBody.self, context: context)
            let url = try await checkedURL(b.url)
            let events = try WebhookEndpointRules.checkedEvents(b.events)
            let description = try WebhookEndpointRules.checkedDescription(b.description)
            let secret = WebhookSignature.newSecret()
            guard let endpoint = try await endpoints.create(app: app, url: url, events: events, description: description, secret: secret) else {
                throw AppError(
                    AuthErrorCode.tooManyEndpoints,
                    "An app has at most \(WebhookEndpointRules.maxEndpointsPerApp) webhook endpoints",
                    extra: ["max_endpoints": .int(WebhookEndpointRules.maxEndpointsPerApp)]
                )
            }
            return try context.json(Created(endpoint: endpoint, secret: secret), status: .created)
        }
        admin.get("admin/webhooks") { _, context in
            try context.json(["endpoints": try await store.list(app: try context.requireApp())])
        }
        admin.get("admin/webhooks/:id") { _, context in
            let app = try context.requireApp()
            guard let endpoint = try await store.find(app: app, id: try endpointID(context)) else { throw AppError.notFound("Webhook endpoint") }
            return try context.json(endpoint)
        }
        admin.patch("admin/webhooks/:id") { request, context in
            let app = try context.requireApp()
            let id = try endpointID(context)
            let b = try await request.decodeJSON(as: PatchBody.self, context: context)
            let url: String? = if let raw = b.url { try await checkedURL(raw) } else { nil }
            let events = try b.events.map(WebhookEndpointRules.checkedEvents)
            let description = try b.description.map { try WebhookEndpointRules.checkedDescription($0) }
            guard let endpoint = try await store.update(app: app, id: id, url: url, events: events, description: description, disabled: b.disabled)
            else {
                throw AppError.notFound("Webhook endpoint")
            }
            return try context.json(endpoint)
        }
        admin.delete("admin/webhooks/:id") { _, context in
            let app = try context.requireApp()
            guard try await store.delete(app: app, id: try endpointID(context)) else { throw AppError.notFound("Webhook endpoint") }
            return try context.json(["deleted": true])
        }
        admin.post("admin/webhooks/:id/rotate-secret") { _, context in
            let app = try context.requireApp()
            let secret = WebhookSignature.newSecret()
            let until = clock.now().addingTimeInterval(WebhookEndpointRules.rotationOverlap)
            guard let endpoint = try await store.rotate(app: app, id: try endpointID(context), secret: secret, overlapUntil: until) else {
                throw AppError.notFound("Webhook endpoint")
            }
            return try context.json(Created(endpoint: endpoint, secret: secret))
        }
        admin.get("admin/webhooks/:id/deliveries") { request, context in
            let app = try context.requireApp()
            let raw = request.uri.queryParameters.get("limit") ?? "50"
            guard let limit = Int(raw), (1...500).contains(limit) else { throw AppError.validation("limit", "limit must be 1 to 500") }
            // Paged by `before`, the last id of the previous page (#47: every long list pages).
            let before = try PageQuery(request).id("before")
            guard let rows = try await store.deliveries(app: app, endpoint: try endpointID(context), before: before, limit: limit) else {
                throw AppError.notFound("Webhook endpoint")
            }
            return try context.json(DeliveryPage(deliveries: rows, nextBefore: rows.count == limit ? rows.last.map { String($0.id) } : nil))
        }
        admin.post("admin/webhooks/:id/deliveries/:delivery/replay") { _, context in
            let app = try context.requireApp()
            let id = try endpointID(context)
            guard let delivery = context.parameters.get("delivery", as: Int64.self) else {
                throw AppError.validation("delivery", "the delivery id must be an integer")
            }
            guard try await store.replay(app: app, endpoint: id, delivery: delivery) else { throw AppError.notFound("Delivery") }
            return try context.json(["replayed": true], status: .accepted)
        }
    }

    private func endpointID(_ context: ServiceRequestContext) throws -> UUID {
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.validation("id", "the endpoint id must be a UUID") }
        return id
    }

    /// https (http in local); a host that resolves to a private address is refused (loopback too outside local).
    private func checkedURL(_ raw: String) async throws -> String {
        let url = try WebhookEndpointRules.checkedURL(raw, allowHTTP: local)
        do { _ = try await sender.pin(url.absoluteString) } catch let failure as WebhookSender.Failure {
            throw AppError.validation("url", failure.description)
        }
        return url.absoluteString
    }

    // MARK: the other services' events

    struct EventBody: Decodable {
        var type: String
        var id: UUID
        var appID: UUID
        var createdAt: Date?
        var version: Int64
        var data: [String: JSONValue]
        enum CodingKeys: String, CodingKey {
            case type, id
            case appID = "app_id"
            case createdAt = "created_at"
            case version, data
        }
    }

    func addInternalRoutes(to group: RouterGroup<ServiceRequestContext>) {
        // Idempotent on the event's id: the outbox may deliver a row twice.
        group.on(InternalRoutes.events) { request, context in
            let b = try await request.decodeJSON(as: EventBody.self, context: context)
            guard WebhookEventType(rawValue: b.type) != nil else { throw AppError.validation("type", "unknown event type '\(b.type.prefix(60))'") }
            guard b.version >= 0 else { throw AppError.validation("version", "version must be 0 or more") }
            let event = WebhookEvent(type: b.type, id: b.id, appID: b.appID, createdAt: b.createdAt ?? clock.now(), version: b.version, data: b.data)
            let created = try await endpoints.record(event, live: LiveRules.fromWebhook(type: b.type, data: b.data))
            return try context.json(["recorded": created], status: created ? .accepted : .ok)
        }
    }
}
