import Foundation
import Hummingbird
import ServiceKit
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
        enum CodingKeys: String, CodingKey { case events, nextBefore = "next_before" }
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/plans") { _, context in
            let app = try context.requireApp()
            return try context.json(Plans(plans: try await db.withConnection { try await plans.active(app: app, on: $0) }))
        }
        admin.get("admin/store-events") { request, context in
            let app = try context.requireApp()
            let query = request.uri.queryParameters
            let limit =
                try query.get("limit").map { raw -> Int in
                    guard let n = Int(raw), (1...100).contains(n) else { throw AppError.validation("limit", "limit is 1 to 100") }
                    return n
                } ?? 50
            let before = try query.get("before").map { raw -> StoreEventStore.Cursor in
                guard let cursor = StoreEventStore.Cursor(raw) else {
                    throw AppError.validation("before", "before is the next_before of a previous page")
                }
                return cursor
            }
            let page = try await db.withConnection { try await events.recent(app: app, before: before, limit: limit, on: $0) }
            let next = page.count == limit ? page.last.map { StoreEventStore.Cursor(receivedAt: $0.receivedAt, id: $0.id).description } : nil
            return try context.json(Events(events: page, nextBefore: next))
        }
    }
}
