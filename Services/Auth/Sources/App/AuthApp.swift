import Crypto
import Foundation
import Hummingbird
import Logging
import ServiceKit

/// The auth service: accounts, sign-in and the tenants (applications) every service checks.
public enum AuthService: ServiceDefinition {
    public static let service = ServiceName.auth

    public static func migrations() throws -> [Migration] {
        try Migration.bundled(in: .module, service: service)
    }

    public static func buildApplication(runtime: ServiceRuntime) async throws -> any ApplicationProtocol {
        try buildApplication(runtime: runtime, signingKey: SigningKeyLoader.load(config: runtime.config))
    }

    /// The composition root: tests call it with their own runtime and key.
    public static func buildApplication(runtime: ServiceRuntime, signingKey: Curve25519.Signing.PrivateKey)
        throws -> Application<RouterResponder<ServiceRequestContext>> {
        let signer = AccessTokenSigner(privateKey: signingKey)
        let applications = PostgresApplicationRepository(db: runtime.db, logger: runtime.logger)
        let appVerifier = CachedAppVerifier(LocalAppVerifier(repository: applications), ttl: .seconds(runtime.config.tenantCacheSeconds))
        // Auth verifies its own tokens with its own key: no HTTP round trip to itself.
        let tokenVerifier = AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk])))
        return buildServiceApplication(runtime: runtime, appVerifier: appVerifier, tokenVerifier: tokenVerifier) { routes in
            JWKSController(signer: signer).addRoutes(to: routes.open)
            InternalApplicationsController(applications: applications).addRoutes(to: routes.internal)
        }
    }
}
