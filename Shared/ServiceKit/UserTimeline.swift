import Foundation
import Hummingbird
import Logging
import PostgresNIO
import WireTypes

/// A service's part of a user's timeline (#16): one query returning `(at, kind, summary)`
/// rows, newest first, at most `limit`. Each service answers for its own data at
/// `GET /internal/users/{id}/timeline?app_id=&limit=`; auth's admin route assembles them.
public struct UserTimeline: Sendable {
    public var query: @Sendable (_ user: UUID, _ app: UUID, _ limit: Int) -> PostgresQuery
    public init(query: @escaping @Sendable (UUID, UUID, Int) -> PostgresQuery) { self.query = query }

    public static let maxEvents = 500

    public func events(service: ServiceName, user: UUID, app: UUID, limit: Int, db: DatabasePool, logger: Logger) async throws -> [TimelineEvent] {
        var out: [TimelineEvent] = []
        for try await (at, kind, summary) in try await db.query(query(user, app, min(max(limit, 1), Self.maxEvents)), logger: logger)
            .decode((Date, String, String).self)
        {
            out.append(TimelineEvent(at: at, service: service.rawValue, kind: kind, summary: summary))
        }
        return out
    }

    func addRoute(service: ServiceName, to group: RouterGroup<ServiceRequestContext>, db: DatabasePool, logger: Logger) {
        group.on(InternalRoutes.timeline) { request, context in
            guard let user = context.parameters.get("id", as: UUID.self) else { throw AppError.validation("id", "the user id must be a UUID") }
            guard let app = request.uri.queryParameters.get("app_id").flatMap(UUID.init(uuidString:)) else {
                throw AppError.validation("app_id", "app_id must be a UUID")
            }
            let limit = request.uri.queryParameters.get("limit").flatMap(Int.init) ?? 100
            return try context.json(
                TimelineAnswer(events: try await events(service: service, user: user, app: app, limit: limit, db: db, logger: logger))
            )
        }
    }
}
