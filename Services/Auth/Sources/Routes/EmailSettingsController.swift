import AuthDomain
import Foundation
import Hummingbird
import ServiceKit
import WireTypes

/// `/admin/email-settings`: an app's emails (name, sender, support address, link base, default
/// language, wording per language), set by its operators at run time; every replica uses them
/// within about a second. The app is the one of the tenant headers.
struct EmailSettingsController {
    let store: EmailSettingsStore
    let emails: EmailComposer

    struct Shown: Encodable {
        var settings: AppEmailSettings
        /// False: the deployment's defaults apply (no row for this app).
        var isOwn: Bool
        var version: Int64
        enum CodingKeys: String, CodingKey {
            case settings
            case isOwn = "is_own"
            case version
        }
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/email-settings") { _, context in
            let app = try context.requireApp()
            if let (own, version) = try await store.find(app: app) { return try context.json(Shown(settings: own, isOwn: true, version: version)) }
            return try context.json(Shown(settings: try await emails.effective(app: app), isOwn: false, version: 0))
        }
        admin.put("admin/email-settings") { request, context in
            let app = try context.requireApp()
            let settings = try await request.decodeJSON(as: AppEmailSettings.self, context: context)
            try settings.validate()
            guard let version = try await store.set(app: app, settings) else { throw AppError.notFound("Application") }
            emails.settings.invalidate()
            return try context.json(["version": version])
        }
    }
}
