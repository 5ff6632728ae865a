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
        // No personal data is stored here yet: the export says so and deletion has nothing to
        // remove. Each table keyed by user adds its section here.
        buildServiceApplication(runtime: runtime, appVerifier: appVerifier, tokenVerifier: tokenVerifier, userData: []) { _ in }
    }
}
