import Foundation
import Hummingbird
import ServiceKit

/// The subscription service. Plans, store purchases, access rules, credits and store notifications (port 3002).
public enum SubscriptionService: ServiceDefinition {
    public static let service = ServiceName.subscription

    public static func migrations() throws -> [Migration] {
        try Migration.bundled(in: .module, service: service)
    }

    public static func buildApplication(runtime: ServiceRuntime) async throws -> any ApplicationProtocol {
        buildApplication(runtime: runtime, appVerifier: runtime.remoteAppVerifier(), tokenVerifier: runtime.remoteTokenVerifier())
    }

    /// The composition root: tenant headers and access tokens are checked by asking auth.
    public static func buildApplication(runtime: ServiceRuntime, appVerifier: any AppVerifier,
                                        tokenVerifier: AccessTokenVerifier) -> Application<RouterResponder<ServiceRequestContext>> {
        let ledger = CreditLedger(logger: runtime.logger)
        let credits = CreditsController(db: runtime.db, ledger: ledger, idempotency: IdempotencyStore(client: runtime.db, logger: runtime.logger),
                                        clock: runtime.clock, logger: runtime.logger)
        return buildServiceApplication(runtime: runtime, appVerifier: appVerifier, tokenVerifier: tokenVerifier,
                                       userData: SubscriptionUserData.sections(logger: runtime.logger)) { routes in
            credits.addRoutes(user: routes.user, internalGroup: routes.internal)
            PlansController(db: runtime.db, plans: PlanStore(logger: runtime.logger)).addRoutes(to: routes.user)
        }
    }
}
