import AuthDomain
import Foundation
import Hummingbird
import ServiceKit
import WireTypes

/// `/admin/sign-in`: an app's Google client ids, Apple bundle ids and Sign in with Apple key, set
/// by its operators at run time (the key sealed, never read back; every replica within about a
/// second). The app is the one of the tenant headers.
struct SignInSettingsController {
    let store: SignInSettingsStore
    let applications: PostgresApplicationRepository
    let apple: TenantSettings<AppleClientConfig>

    struct Body: Decodable {
        var googleClientIDs: [String]?
        var appleBundleIDs: [String]?
        var apple: AppleClientConfig.Settings?
        enum CodingKeys: String, CodingKey {
            case googleClientIDs = "google_client_ids"
            case appleBundleIDs = "apple_bundle_ids"
            case apple
        }
    }

    struct Shown: Encodable {
        struct Apple: Encodable {
            var teamID: String, keyID: String, clientID: String, version: Int64
            enum CodingKeys: String, CodingKey {
                case teamID = "team_id"
                case keyID = "key_id"
                case clientID = "client_id"
                case version
            }
        }
        var googleClientIDs: [String], appleBundleIDs: [String], apple: Apple?
        enum CodingKeys: String, CodingKey {
            case googleClientIDs = "google_client_ids"
            case appleBundleIDs = "apple_bundle_ids"
            case apple
        }
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/sign-in") { _, context in try context.json(try await shown(try context.requireApp())) }
        admin.put("admin/sign-in") { request, context in
            let app = try context.requireApp()
            let body = try await request.decodeJSON(as: Body.self, context: context)
            for (field, ids) in [("google_client_ids", body.googleClientIDs), ("apple_bundle_ids", body.appleBundleIDs)] {
                guard let ids else { continue }
                guard ids.count <= 20, ids.allSatisfy({ (1...255).contains($0.count) && !$0.contains(where: \.isWhitespace) }) else {
                    throw AppError.validation(field, "\(field): at most 20 ids of 1-255 characters, no spaces")
                }
            }
            if let a = body.apple { _ = try AppleClientConfig(a) }
            guard body.googleClientIDs != nil || body.appleBundleIDs != nil || body.apple != nil else {
                throw AppError.validation("google_client_ids", "give google_client_ids, apple_bundle_ids or apple")
            }
            // One transaction would be better; each write is idempotent, and a refused one is
            // checked before any is made.
            if body.googleClientIDs != nil || body.appleBundleIDs != nil {
                guard
                    try await applications.setProviderSettings(
                        appID: app,
                        googleClientIDs: body.googleClientIDs,
                        appleBundleIDs: body.appleBundleIDs
                    ) != nil
                else { throw AppError.notFound("Application") }
            }
            if let a = body.apple {
                guard try await store.setApple(app: app, a) != nil else { throw AppError.notFound("Application") }
                apple.invalidate()
            }
            return try context.json(try await shown(app))
        }
    }

    func shown(_ app: UUID) async throws -> Shown {
        guard let a = try await applications.find(id: app) else { throw AppError.notFound("Application") }
        let key = try await store.shownApple(app: app)
        return Shown(
            googleClientIDs: a.googleClientIDs,
            appleBundleIDs: a.appleBundleIDs,
            apple: key.map { Shown.Apple(teamID: $0.teamID, keyID: $0.keyID, clientID: $0.clientID, version: $0.version) }
        )
    }
}
