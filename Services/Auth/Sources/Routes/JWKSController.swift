import Hummingbird
import ServiceKit
import WireTypes

/// `GET /auth/v1/.well-known/jwks.json`: the public half of the access-token signing key.
struct JWKSController {
    let signer: AccessTokenSigner

    func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.get(".well-known/jwks.json") { _, context in
            try context.json(JWKSDocument(keys: [signer.jwk]), headers: [.cacheControl: "public, max-age=300"])
        }
    }
}
