import AuthDomain
import Hummingbird
import ServiceKit
import WireTypes

/// `GET /auth/v1/.well-known/jwks.json`: the public half of the access-token signing key, and
/// during a rotation the next or previous key (`AUTH_JWKS_EXTRA_KEYS`).
struct JWKSController {
    let document: JWKSDocument
    /// `AUTH_ISSUER`: the tokens' `iss`, where this document and the key set are published.
    let issuer: String

    /// OpenID Connect discovery's fields a JWT verifier reads (an API gateway, a cloud JWT
    /// authorizer, a JOSE library): the issuer, where its keys are, the algorithms it signs with.
    struct Discovery: Encodable {
        var issuer: String
        var jwksURI: String
        var idTokenSigningAlgValuesSupported: [String]
        var tokenEndpointAuthMethodsSupported: [String]
        var responseTypesSupported: [String]
        var subjectTypesSupported: [String]
        var claimsSupported: [String]
        enum CodingKeys: String, CodingKey {
            case issuer
            case jwksURI = "jwks_uri"
            case idTokenSigningAlgValuesSupported = "id_token_signing_alg_values_supported"
            case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
            case responseTypesSupported = "response_types_supported"
            case subjectTypesSupported = "subject_types_supported"
            case claimsSupported = "claims_supported"
        }
    }

    func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.get(".well-known/jwks.json") { _, context in
            try context.json(document, headers: [.cacheControl: "public, max-age=300"])
        }
        let discovery = Discovery(
            issuer: issuer,
            jwksURI: issuer + "/.well-known/jwks.json",
            idTokenSigningAlgValuesSupported: ["EdDSA", "Ed25519"],
            tokenEndpointAuthMethodsSupported: ["none"],
            responseTypesSupported: ["token"],
            subjectTypesSupported: ["public"],
            claimsSupported: ["iss", "aud", "sub", "iat", "exp", "jti", "app_id", "user_id", "status", "is_guest", "sid"]
        )
        group.get(".well-known/openid-configuration") { _, context in
            try context.json(discovery, headers: [.cacheControl: "public, max-age=300"])
        }
    }
}
