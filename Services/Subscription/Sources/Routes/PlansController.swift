import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import SubscriptionDomain

/// `GET /plans` (UC-SUB-2.1 step 3).
struct PlansController {
    let db: DatabasePool
    let plans: PlanStore

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.get("plans") { _, context in
            let (app, _) = try context.requireUser()
            let list = try await db.withConnection { try await plans.active(app: app, on: $0) }
            return try context.json(["plans": list])
        }
    }
}
