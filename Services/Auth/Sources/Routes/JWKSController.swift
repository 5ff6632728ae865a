import Hummingbird
import ServiceKit
import WireTypes

/// `GET /auth/v1/.well-known/jwks.json`: the public half of the access-token signing key, and
/// during a rotation the next or previous key (`AUTH_JWKS_EXTRA_KEYS`).
struct JWKSController {
    let document: JWKSDocument

    func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.get(".well-known/jwks.json") { _, context in
            try context.json(document, headers: [.cacheControl: "public, max-age=300"])
        }
    }
}
