import Foundation
import Hummingbird
import OfflineDomain
import ServiceKit
import WireTypes

/// `/admin/sync-upstream`: where this app's queued actions go and the secret that signs them,
/// set by its operators at run time (every replica within about a second). The app is the one of
/// the tenant headers, so an operator key reaches its own app only.
struct UpstreamAdminController {
    let store: UpstreamStore
    let upstream: SyncUpstream
    let tenants: TenantSettings<UpstreamSettings>

    struct Body: Decodable { var routes: [String: String] }
    struct Shown: Encodable {
        var routes: [String: String]
        /// True when the deployment's SYNC_UPSTREAMS applies (the app set none).
        var isDefault: Bool
        var secretVersion: Int
        var version: Int64
        enum CodingKeys: String, CodingKey {
            case routes
            case isDefault = "is_default"
            case secretVersion = "secret_version"
            case version
        }
    }
    struct Rotated: Encodable {
        var secret: String, secretVersion: Int
        enum CodingKeys: String, CodingKey {
            case secret
            case secretVersion = "secret_version"
        }
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/sync-upstream") { _, context in
            let own = try await store.find(app: try context.requireApp()) ?? .none
            return try context.json(
                Shown(
                    routes: own.routes ?? upstream.routes,
                    isDefault: own.routes == nil,
                    secretVersion: own.secretVersion,
                    version: own.version
                )
            )
        }
        admin.put("admin/sync-upstream") { request, context in
            let app = try context.requireApp()
            let body = try await request.decodeJSON(as: Body.self, context: context)
            try SyncUpstream.validate(body.routes)
            let version = try await store.set(app: app, routes: body.routes)
            tenants.invalidate()
            return try context.json(["version": version])
        }
        // The game server must accept the new secret from now on: give it the answer at once.
        admin.post("admin/sync-upstream/rotate-secret") { _, context in
            let app = try context.requireApp()
            let version = try await store.rotateSecret(app: app, defaultRoutes: upstream.routes)
            tenants.invalidate()
            return try context.json(Rotated(secret: upstream.signer.secret(app: app, version: version), secretVersion: version))
        }
    }
}
