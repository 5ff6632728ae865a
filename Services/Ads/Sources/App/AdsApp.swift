import Foundation
import Hummingbird
import ServiceKit

/// The ads service. Ads eligibility, rewarded credits, consent, campaigns and revenue (port 3004).
public enum AdsService: ServiceDefinition {
    public static let service = ServiceName.ads

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
