import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import WireTypes

/// One part of a service's data about a user (a table or a group of tables), as the user's
/// rights need it: exported for the privacy export, deleted when the account is deleted.
public struct UserDataSection: Sendable {
    public var name: String
    public var export: @Sendable (_ userID: UUID, _ appID: UUID, _ conn: PostgresConnection) async throws -> JSONValue
    /// Deletes or anonymises; returns how many rows it touched.
    public var delete: @Sendable (_ userID: UUID, _ appID: UUID, _ conn: PostgresConnection) async throws -> Int

    public init(name: String,
                export: @escaping @Sendable (UUID, UUID, PostgresConnection) async throws -> JSONValue,
                delete: @escaping @Sendable (UUID, UUID, PostgresConnection) async throws -> Int) {
        self.name = name
        self.export = export
        self.delete = delete
    }
}

/// `GET /internal/users/{id}/export?app_id=` and `DELETE /internal/users/{id}?app_id=`, the
/// same in every service. A service lists its sections; one with none holds no personal data
/// and says so. Deletion runs once per `Idempotency-Key` (the outbox redelivers).
public struct UserDataController: Sendable {
    let service: ServiceName
    let sections: [UserDataSection]
    let db: PostgresClient
    let idempotency: IdempotencyStore
    let logger: Logger

    public init(service: ServiceName, sections: [UserDataSection], db: PostgresClient, logger: Logger) {
        self.service = service
        self.sections = sections
        self.db = db
        self.idempotency = IdempotencyStore(client: db, logger: logger)
        self.logger = logger
    }

    public func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.get("users/:id/export") { request, context in
            let (userID, appID) = try Self.ids(request, context)
            let export = try await db.withConnection { conn in
                var parts: [String: JSONValue] = [:]
                for section in sections { parts[section.name] = try await section.export(userID, appID, conn) }
                return UserDataExport(service: service.rawValue, userID: userID, appID: appID, sections: parts)
            }
            return try context.json(export)
        }
        group.delete("users/:id") { request, context in
            let (userID, appID) = try Self.ids(request, context)
            let key = request.headers[.idempotencyKey] ?? "delete:\(appID):\(userID)"
            let stored = try await idempotency.run(key: key, scope: "user-deletion") { conn in
                var counts: [String: JSONValue] = [:]
                for section in sections { counts[section.name] = .int(try await section.delete(userID, appID, conn)) }
                let body = try JSON.encoder.encode(UserDataDeletion(service: service.rawValue, userID: userID, deleted: counts))
                return (200, body)
            }
            return Response(status: .init(code: stored.status), headers: [.contentType: "application/json; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(bytes: stored.body)))
        }
    }

    static func ids(_ request: Request, _ context: ServiceRequestContext) throws -> (UUID, UUID) {
        try request.internalUserAndApp(context)
    }
}

extension Request {
    /// `/internal/users/{id}...?app_id=`: internal calls name the tenant too, so a user id of
    /// one app never reaches another's rows.
    public func internalUserAndApp(_ context: ServiceRequestContext) throws -> (user: UUID, app: UUID) {
        guard let userID = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("User id must be a UUID", field: "id") }
        guard let raw = uri.queryParameters.get("app_id"), let appID = UUID(uuidString: raw) else {
            throw AppError.badRequest("Query parameter 'app_id' (UUID) is required", field: "app_id")
        }
        return (userID, appID)
    }
}

extension UserDataSection {
    /// Runs a query whose single column is `row_to_json(...)::text` and returns the rows as a
    /// JSON array: how sections export their tables.
    public static func jsonRows(_ query: PostgresQuery, on conn: PostgresConnection, logger: Logger) async throws -> JSONValue {
        var out: [JSONValue] = []
        for try await text in try await conn.query(query, logger: logger).decode(String.self) {
            out.append(try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)))
        }
        return .array(out)
    }
}

/// `GET /<prefix>/v1/openapi.json`: the service's OpenAPI 3.1 document, shipped as a resource
/// of its module (no authentication: the contract is public).
public enum OpenAPIDocument {
    public static func serve(_ bundle: Bundle, on open: RouterGroup<ServiceRequestContext>) throws {
        guard let url = bundle.url(forResource: "openapi", withExtension: "json", subdirectory: "OpenAPI") else {
            throw ConfigurationError("OpenAPI/openapi.json is missing from the service's resources")
        }
        let document = try Data(contentsOf: url)
        open.get("openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "public, max-age=300"],
                     body: .init(byteBuffer: ByteBuffer(bytes: document)))
        }
    }
}
