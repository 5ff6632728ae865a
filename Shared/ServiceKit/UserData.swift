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

    public init(
        name: String,
        export: @escaping @Sendable (UUID, UUID, PostgresConnection) async throws -> JSONValue,
        delete: @escaping @Sendable (UUID, UUID, PostgresConnection) async throws -> Int
    ) {
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
    let db: DatabasePool
    let idempotency: IdempotencyStore
    let sessions: SessionRegistry
    let facts: UserFactStore
    let changes: ChangeFeed
    let logger: Logger

    public init(service: ServiceName, sections: [UserDataSection], db: DatabasePool, sessions: SessionRegistry, changes: ChangeFeed, logger: Logger) {
        self.service = service
        self.changes = changes
        self.sections = sections
        self.db = db
        self.sessions = sessions
        self.facts = UserFactStore(logger: logger)
        self.idempotency = IdempotencyStore(client: db, logger: logger)
        self.logger = logger
    }

    public func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.export) { request, context in
            let (userID, appID) = try Self.ids(request, context)
            let export = try await db.withConnection { conn in
                var parts: [String: JSONValue] = [:]
                for section in sections { parts[section.name] = try await section.export(userID, appID, conn) }
                return UserDataExport(service: service.rawValue, userID: userID, appID: appID, sections: parts)
            }
            return try context.json(export)
        }
        group.on(InternalRoutes.erase) { request, context in
            let (userID, appID) = try Self.ids(request, context)
            // Erasure is final: its version only documents the order at auth.
            var version = Int64.max
            if let raw = request.uri.queryParameters.get("version") {
                guard let v = Int64(raw), v > 0 else {
                    throw AppError.badRequest("Query parameter 'version' must be a positive integer", field: "version")
                }
                version = v
            }
            let erased = SessionFact(appID: appID, userID: userID, version: version, sessionEpoch: Int(Int32.max), state: .erased)
            let key = request.headers[.idempotencyKey] ?? "delete:\(appID):\(userID)"
            let stored = try await idempotency.run(key: key, scope: "user-deletion") { conn in
                // Writes of this user's data under way finish first; later ones meet the marker.
                try await ErasureFence.lockForErasure(user: userID, on: conn, logger: logger)
                var counts: [String: JSONValue] = [:]
                for section in sections { counts[section.name] = .int(try await section.delete(userID, appID, conn)) }
                // Nothing is recreated for this user afterwards: tokens are refused, late facts ignored.
                try await facts.forget(app: appID, user: userID, on: conn)
                try await facts.record(erased, on: conn)
                // Every replica's caches drop what they hold of this user.
                try await changes.publish(DataChange(DataChange.userTopic, app: appID, user: userID), on: conn)
                let body = try JSON.encoder.encode(UserDataDeletion(service: service.rawValue, userID: userID, deleted: counts))
                return (200, body)
            }
            sessions.apply([erased])
            return Response(
                status: .init(code: stored.status),
                headers: [.contentType: "application/json; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: stored.body))
            )
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

/// The two queries every service's sections are made of, with the service's logger.
public struct UserDataQueries: Sendable {
    public let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    /// Rows as a JSON array (the query's single column is `row_to_json(...)::text`).
    public func rows(_ query: PostgresQuery, _ conn: PostgresConnection) async throws -> JSONValue {
        try await UserDataSection.jsonRows(query, on: conn, logger: logger)
    }

    /// How many rows a `... RETURNING 1` statement touched.
    public func count(_ query: PostgresQuery, _ conn: PostgresConnection) async throws -> Int {
        try await conn.run(query, logger: logger).count()
    }
}

extension UserDataSection {
    /// Runs a query whose single column is `row_to_json(...)::text` and returns the rows as a
    /// JSON array: how sections export their tables.
    public static func jsonRows(_ query: PostgresQuery, on conn: PostgresConnection, logger: Logger) async throws -> JSONValue {
        var out: [JSONValue] = []
        for try await text in try await conn.run(query, logger: logger).decode(String.self) {
            out.append(try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)))
        }
        return .array(out)
    }
}

/// `GET /<prefix>/v1/openapi.json`: the service's OpenAPI 3.1 document, shipped as a resource
/// of its module, and `GET /<prefix>/v1/docs`: the same document as a readable page (rendered
/// here from the JSON, no script, no external asset). No authentication: the contract is public.
public enum OpenAPIDocument {
    public static func serve(_ bundle: Bundle, on open: RouterGroup<ServiceRequestContext>) throws {
        guard let url = bundle.url(forResource: "openapi", withExtension: "json", subdirectory: "OpenAPI") else {
            throw ConfigurationError("OpenAPI/openapi.json is missing from the service's resources")
        }
        let document = try Data(contentsOf: url)
        let page = try render(document)
        open.get("openapi.json") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/json", .cacheControl: "public, max-age=300"],
                body: .init(byteBuffer: ByteBuffer(bytes: document))
            )
        }
        open.get("docs") { _, _ in
            Response(
                status: .ok,
                headers: [
                    .contentType: "text/html; charset=utf-8", .cacheControl: "public, max-age=300",
                    .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'",
                ],
                body: .init(byteBuffer: ByteBuffer(string: page))
            )
        }
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }

    /// One section per operation: method, path, summary, parameters, body fields, statuses.
    static func render(_ document: Data) throws -> String {
        guard let doc = try JSONSerialization.jsonObject(with: document) as? [String: Any],
            let paths = doc["paths"] as? [String: [String: Any]]
        else { throw ConfigurationError("openapi.json has no paths") }
        let title = ((doc["info"] as? [String: Any])?["title"] as? String) ?? "API"
        var html = """
            <!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title><style>
            body{font-family:system-ui,sans-serif;margin:24px;max-width:1000px}h2{font-size:16px;margin:22px 0 4px}
            code{background:#f3f3f3;padding:1px 4px}.m{font-weight:bold;display:inline-block;min-width:60px}.s{color:#555}
            </style></head><body><h1>\(escape(title))</h1><p>OpenAPI 3.1 document: <a href="openapi.json">openapi.json</a>.
            Every route needs <code>X-App-ID</code> and <code>X-API-Key</code>; user routes a bearer access token; admin routes
            the admin token.</p>
            """
        for path in paths.keys.sorted() {
            for (method, raw) in paths[path]!.sorted(by: { $0.key < $1.key }) {
                guard let op = raw as? [String: Any] else { continue }
                html += "<h2><span class=\"m\">\(method.uppercased())</span> <code>\(escape(path))</code></h2>"
                html += "<div class=\"s\">\(escape(op["summary"] as? String ?? ""))</div>"
                let params = (op["parameters"] as? [[String: Any]] ?? []).map {
                    "\($0["name"] ?? "")" + (($0["in"] as? String).map { " (\($0))" } ?? "")
                }
                if !params.isEmpty { html += "<div>Parameters: \(escape(params.joined(separator: ", ")))</div>" }
                if let body = op["requestBody"] as? [String: Any], let content = body["content"] as? [String: Any],
                    let json = content["application/json"] as? [String: Any], let schema = json["schema"] as? [String: Any],
                    let props = schema["properties"] as? [String: Any]
                {
                    let required = Set(schema["required"] as? [String] ?? [])
                    html += "<div>Body: \(escape(props.keys.sorted().map { required.contains($0) ? "\($0)*" : $0 }.joined(separator: ", ")))</div>"
                }
                let statuses = (op["responses"] as? [String: Any] ?? [:]).keys.sorted()
                html += "<div>Responses: \(escape(statuses.joined(separator: " ")))</div>"
            }
        }
        return html + "</body></html>"
    }
}
