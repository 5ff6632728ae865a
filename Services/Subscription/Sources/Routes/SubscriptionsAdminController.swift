import Foundation
import Hummingbird
import ServiceKit
import SubscriptionDomain
import WireTypes

/// What the console's Subscriptions page reads (#47): the app's plans as the app sells them, and
/// the store notifications it received, newest first. Read-only: a viewer may read them.
struct SubscriptionsAdminController {
    let db: DatabasePool
    let plans: PlanStore
    let events: StoreEventStore

    struct Plans: Encodable { var plans: [Plan] }
    struct Events: Encodable {
        var events: [StoreEventStore.Event]
        var nextBefore: String?
        enum CodingKeys: String, CodingKey {
            case events
            case nextBefore = "next_before"
        }
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/plans") { _, context in
            let app = try context.requireApp()
            return try context.json(Plans(plans: try await db.withConnection { try await plans.active(app: app, on: $0) }))
        }
        admin.get("admin/store-events") { request, context in
            let app = try context.requireApp()
            let query = PageQuery(request)
            let limit = try query.limit(max: 100)
            let before = try query.cursor("before", StoreEventStore.Cursor.init)
            let page = try await db.withConnection { try await events.recent(app: app, before: before, limit: limit, on: $0) }
            let next = page.count == limit ? page.last.map { StoreEventStore.Cursor(receivedAt: $0.receivedAt, id: $0.id).description } : nil
            return try context.json(Events(events: page, nextBefore: next))
        }
    }
}
