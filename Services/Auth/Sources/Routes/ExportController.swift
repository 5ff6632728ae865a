import AuthDomain
import Foundation
import Hummingbird
import NIOCore
import PostgresNIO
import ServiceKit
import WireTypes

/// Seed 6a: `POST /auth/privacy/export` starts the export job; `GET /auth/privacy/export/{id}`
/// tells its status; the emailed link downloads it.
struct ExportController {
    let ctx: AuthContext
    let signer: LinkSigner

    func addRoutes(open: RouterGroup<ServiceRequestContext>, user: RouterGroup<ServiceRequestContext>) {
        user.post("auth/privacy/export") { request, context in try await start(request, context) }
        user.get("auth/privacy/export/:id") { _, context in try await status(context) }
        open.get("privacy/export/:id/download") { request, context in try await download(request, context) }
    }

    struct Started: Codable {
        var exportID: UUID
        var status: String
        var estimatedTime: String
        enum CodingKeys: String, CodingKey {
            case exportID = "export_id"
            case status
            case estimatedTime = "estimated_time"
        }
    }

    struct Status: Codable {
        var exportID: UUID
        var status: String
        var requestedAt: Date
        var completedAt: Date?
        var expiresAt: Date?
        var downloadURL: String?
        enum CodingKeys: String, CodingKey {
            case exportID = "export_id"
            case status
            case requestedAt = "requested_at"
            case completedAt = "completed_at"
            case expiresAt = "expires_at"
            case downloadURL = "download_url"
        }
    }

    func start(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        // Building an export reads every service: a few per day is plenty.
        try await ctx.limiter.enforce(scope: "privacy-export", key: userID.uuidString, limit: 3, window: 24 * 3600)
        let now = ctx.clock.now()
        let id = try await PrivacyChoices(ctx: ctx).requestExport(appID: appID, userID: userID, now: now, origin: ctx.origin(request, context))
        return try context.json(Started(exportID: id, status: "pending", estimatedTime: "24-48 hours"), status: .accepted)
    }

    func status(_ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("Export id must be a UUID", field: "id") }
        let export = try await ctx.db.withConnection { try await ExportStore(logger: ctx.logger).find(id, userID: userID, appID: appID, on: $0) }
        guard let export else { throw AppError.notFound("Export") }
        let (status, requested, completed, expires) = (export.status, export.requestedAt, export.completedAt, export.expiresAt)
        let url =
            (status == "ready" && (expires ?? .distantPast) > ctx.clock.now())
            ? "/auth/v1/privacy/export/\(id.lowercasedString)/download?\(signer.query(for: id, expires: expires!))" : nil
        return try context.json(
            Status(exportID: id, status: status, requestedAt: requested, completedAt: completed, expiresAt: expires, downloadURL: url)
        )
    }

    func download(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        guard let id = context.parameters.get("id", as: UUID.self),
            let expires = request.uri.queryParameters.get("expires").flatMap({ Int($0) }),
            let signature = request.uri.queryParameters.get("signature"),
            signer.isValid(id: id, expires: expires, signature: String(signature), now: ctx.clock.now())
        else {
            throw AppError(AuthErrorCode.invalidLink, "This download link is invalid or has expired")
        }
        let data = try await ctx.db.withConnection { try await ExportStore(logger: ctx.logger).readyData(id, on: $0) }
        guard let data else { throw AppError.notFound("Export") }
        return Response(
            status: .ok,
            headers: [
                .contentType: "application/json; charset=utf-8",
                .contentDisposition: "attachment; filename=\"export-\(id.lowercasedString).json\"",
            ],
            body: .init(byteBuffer: ByteBuffer(string: data))
        )
    }
}
