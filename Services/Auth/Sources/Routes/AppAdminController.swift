import AuthDomain
import Foundation
import Hummingbird
import ServiceKit
import WireTypes

/// `/admin/app`: the operator's own app (#16): its state, key prefix, the previous key's end of
/// overlap and its operator keys (never a secret); `POST /admin/app/disable` takes it down at
/// once (a leaked key, an emergency), with a reason in the audit log. Enabling it again is the
/// platform owner's (`auth-service admin apps enable`): a disabled app's requests, these
/// included, are refused.
struct AppAdminController {
    let applications: PostgresApplicationRepository
    let operatorKeys: OperatorKeyStore
    let verifier: CachedAppVerifier

    struct Shown: Encodable {
        struct Key: Encodable {
            var id: UUID, name: String, prefix: String, createdAt: Date, revokedAt: Date?
            enum CodingKeys: String, CodingKey {
                case id, name, prefix
                case createdAt = "created_at"
                case revokedAt = "revoked_at"
            }
        }
        var id: UUID, name: String, active: Bool, apiKeyPrefix: String, previousKeyValidUntil: Date?, operatorKeys: [Key]
        enum CodingKeys: String, CodingKey {
            case id, name, active
            case apiKeyPrefix = "api_key_prefix"
            case previousKeyValidUntil = "previous_key_valid_until"
            case operatorKeys = "operator_keys"
        }
    }
    struct DisableBody: Decodable { var reason: String }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/app") { _, context in
            let id = try context.requireApp()
            guard let app = try await applications.find(id: id) else { throw AppError.notFound("Application") }
            let keys = try await operatorKeys.list(appID: id).map {
                Shown.Key(id: $0.id, name: $0.name, prefix: $0.keyPrefix, createdAt: $0.createdAt, revokedAt: $0.revokedAt)
            }
            return try context.json(
                Shown(
                    id: app.id,
                    name: app.name,
                    active: app.active,
                    apiKeyPrefix: app.apiKeyPrefix,
                    previousKeyValidUntil: try await applications.previousKeyValidUntil(appID: id),
                    operatorKeys: keys
                )
            )
        }
        admin.post("admin/app/disable") { request, context in
            let id = try context.requireApp()
            let reason = try OperatorReason.checked(try await request.decodeJSON(as: DisableBody.self, context: context).reason)
            guard
                try await applications.setActive(appID: id, active: false, reason: reason, operator: context.operator?.auditName ?? "unknown") != nil
            else {
                throw AppError.notFound("Application")
            }
            // This replica refuses at once; the others within TENANT_CACHE_SECONDS.
            verifier.invalidateAll()
            return try context.json(["active": false])
        }
    }
}
