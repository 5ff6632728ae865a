import AuthDomain
import Foundation
import Hummingbird
import Logging
import ServiceKit
import WireTypes

/// Support's reads about one user of the operator's app (#16): lookup by id or email, and the
/// customer timeline assembled from the four services (each answers for its own data; a service
/// that cannot answer is named in `incomplete`, the others still shown).
struct SupportController {
    let store: SupportStore
    let actions: SupportActions
    let db: DatabasePool
    let http: CurlHTTPClient
    let serviceURLs: [ServiceName: String]
    let credential: InternalCredential
    let logger: Logger

    struct Timeline: Encodable {
        var userID: UUID
        var events: [TimelineEvent]
        var incomplete: [String]
        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case events, incomplete
        }
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/users") { request, context in
            let app = try context.requireApp()
            guard let raw = request.uri.queryParameters.get("email"), let email = EmailAddress.normalize(raw) else {
                throw AppError.validation("email", "email= must be an address")
            }
            guard let user = try await store.user(.email(email), app: app) else { throw AppError.notFound("User") }
            return try context.json(user)
        }
        admin.get("admin/users/:id") { _, context in
            let app = try context.requireApp()
            guard let user = try await store.user(.id(try Self.userID(context)), app: app) else { throw AppError.notFound("User") }
            return try context.json(user)
        }
        admin.get("admin/users/:id/timeline") { request, context in
            let app = try context.requireApp()
            let user = try Self.userID(context)
            let limit = request.uri.queryParameters.get("limit").map { Int($0) }
            guard let limit = limit ?? 100, (1...UserTimeline.maxEvents).contains(limit) else {
                throw AppError.validation("limit", "limit must be 1 to \(UserTimeline.maxEvents)")
            }
            guard try await store.user(.id(user), app: app) != nil else { throw AppError.notFound("User") }
            return try context.json(try await timeline(user: user, app: app, limit: limit))
        }
        admin.post("admin/users/:id/sessions/revoke") { request, context in
            let app = try context.requireApp()
            let user = try Self.userID(context)
            let reason = try await Self.reason(request, context)
            let n = try await actions.revokeSessions(app: app, user: user, reason: reason, by: try context.requireOperator())
            return try context.json(["revoked_sessions": n])
        }
        admin.post("admin/users/:id/deletion/cancel") { request, context in
            let app = try context.requireApp()
            let user = try Self.userID(context)
            let reason = try await Self.reason(request, context)
            try await actions.cancelDeletion(app: app, user: user, reason: reason, by: try context.requireOperator())
            return try context.json(["deletion_cancelled": true])
        }
    }

    struct ReasonBody: Decodable { var reason: String }

    static func reason(_ request: Request, _ context: ServiceRequestContext) async throws -> String {
        try OperatorReason.checked(try await request.decodeJSON(as: ReasonBody.self, context: context).reason)
    }

    static func userID(_ context: ServiceRequestContext) throws -> UUID {
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.validation("id", "the user id must be a UUID") }
        return id
    }

    func timeline(user: UUID, app: UUID, limit: Int) async throws -> Timeline {
        let own = try await SupportStore.timeline.events(service: .auth, user: user, app: app, limit: limit, db: db, logger: logger)
        let others: [(String, [TimelineEvent]?)] = await withTaskGroup(of: (String, [TimelineEvent]?).self) { group in
            for service in [ServiceName.subscription, .offline, .ads] {
                guard let base = serviceURLs[service] else { continue }
                let url = base + InternalRoutes.timeline.path(user: user, app: app, query: [("limit", String(limit))])
                group.addTask {
                    let answer = try? await http.send(
                        ServiceKit.HTTPRequest(method: "GET", url: url, headers: credential.headers, timeout: .seconds(3))
                    )
                    guard let answer, answer.isSuccess, let decoded = try? answer.decode(TimelineAnswer.self) else { return (service.rawValue, nil) }
                    return (service.rawValue, decoded.events)
                }
            }
            var out: [(String, [TimelineEvent]?)] = []
            for await r in group { out.append(r) }
            return out
        }
        let events = (own + others.flatMap { $0.1 ?? [] }).sorted { $0.at > $1.at }.prefix(limit)
        return Timeline(userID: user, events: Array(events), incomplete: others.filter { $0.1 == nil }.map(\.0).sorted())
    }
}
