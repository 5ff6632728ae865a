import Foundation
import Hummingbird
import ServiceKit
import SubscriptionDomain
import WireTypes

/// `/admin/stores`: an app's App Store and Google Play credentials, set by its operators at
/// run time (every replica uses them within about a second). The app is the one of the tenant
/// headers, so an operator key reaches its own app only. Secrets are never read back.
struct StoreSettingsController {
    let store: StoreSettingsStore
    let apple: TenantSettings<AppleIAPConfig>
    let google: TenantSettings<GooglePlayConfig>

    struct Saved: Encodable {
        var store: String
        var version: Int64
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/stores") { _, context in
            try context.json(["stores": try await store.shown(app: try context.requireApp())])
        }
        // One path pattern for both methods: the router matches a literal segment before a
        // parameter, so `/admin/stores/apple` as its own route would hide DELETE on it.
        admin.put("admin/stores/:store") { request, context in
            let app = try context.requireApp()
            switch try Self.storeName(context) {
            case "apple":
                let settings = try await request.decodeJSON(as: AppleIAPConfig.Settings.self, context: context)
                _ = try AppleIAPConfig(settings)
                try Self.unique(settings.bundleID, "bundle_id", used: try await apple.all().filter { $0.key != app }.map(\.value.bundleID))
                let version = try await Self.unique("bundle_id") { try await store.setApple(app: app, settings) }
                apple.invalidate()
                return try context.json(Saved(store: "apple", version: version))
            default:
                let settings = try await request.decodeJSON(as: GooglePlayConfig.Settings.self, context: context)
                _ = try GooglePlayConfig(settings)
                try Self.unique(settings.packageName, "package_name", used: try await google.all().filter { $0.key != app }.map(\.value.packageName))
                let version = try await Self.unique("package_name") { try await store.setGoogle(app: app, settings) }
                google.invalidate()
                return try context.json(Saved(store: "google", version: version))
            }
        }
        admin.delete("admin/stores/:store") { _, context in
            let app = try context.requireApp()
            let name = try Self.storeName(context)
            guard try await store.remove(app: app, store: name) else {
                throw AppError(.notFound, SubscriptionErrorCode.storeNotConfigured, "This app has no stored \(name) settings")
            }
            apple.invalidate()
            google.invalidate()
            return Response(status: .noContent)
        }
    }

    static func storeName(_ context: ServiceRequestContext) throws -> String {
        let name = context.parameters.get("store") ?? ""
        guard name == "apple" || name == "google" else { throw AppError.validation("store", "store must be apple or google") }
        return name
    }

    /// The store's notifications name the app by its bundle id / package name only: another
    /// app of the deployment (stored or from the environment) may not have it too.
    static func unique(_ value: String, _ field: String, used: [String]) throws {
        guard !used.contains(value) else { throw taken(field) }
    }

    static func unique<T>(_ field: String, _ write: () async throws -> T) async throws -> T {
        do { return try await write() } catch  where DatabaseErrors.isUniqueViolation(error) { throw taken(field) }
    }

    static func taken(_ field: String) -> AppError {
        AppError(.conflict, "\(field)_taken", "Another app of this deployment already has this \(field)")
    }
}
