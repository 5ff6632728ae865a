import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
@_exported import ServiceCore
// ServiceName and the internal routes are WireTypes' values; every service names them.
@_exported import WireTypes

/// The envelope an `AppError` renders through Hummingbird.
extension AppError: HTTPResponseError {
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        ErrorResponder.envelope(status: status, body: ErrorEnvelope(error: code, message: message, extra: extra), headers: headers)
    }
}

enum ErrorResponder {
    static let encoder = JSONWriter()

    /// The envelope, with the request's id (`request_id`) so a user's report finds the logs.
    static func envelope(status: HTTPResponse.Status, body: ErrorEnvelope, headers: HTTPFields = [:]) -> Response {
        var body = body
        if body.extra["request_id"] == nil, let id = RequestTrace.requestID { body.extra["request_id"] = .string(id) }
        let data = (try? encoder.encode(body)) ?? Data(#"{"error":"internal_error","message":"Internal server error"}"#.utf8)
        var h = headers
        h[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: h, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func code(for status: HTTPResponse.Status) -> String {
        switch status.code {
        case 400: "invalid_request"
        case 401: "unauthorized"
        case 403: "forbidden"
        case 404: "not_found"
        case 405: "method_not_allowed"
        case 408: "request_timeout"
        case 409: "conflict"
        case 413: "payload_too_large"
        case 415: "unsupported_media_type"
        case 422: "validation_error"
        case 429: "rate_limit_exceeded"
        case 503: "service_unavailable"
        default: status.code >= 500 ? "internal_error" : "http_error"
        }
    }
}

/// Inside the request id and the metrics: every error leaves as the envelope. Unknown errors are logged with
/// the request id and answered with a bare 500 that tells nothing about internals; a database
/// that cannot be reached is a 503 the client may retry.
public struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// An outage answers every request 503: one log line per interval says so.
    let unavailable = LogThrottle()

    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            do {
                return try await respond(request, context: context, next: next)
            } catch let error as PostgresTransactionError {
                // An error thrown inside a transaction arrives wrapped: answer for what was thrown.
                if let inner = error.closureError { throw inner }
                throw error
            }
        } catch let error as AppError {
            return try error.response(from: request, context: context)
        } catch let error as HTTPError {
            return ErrorResponder.envelope(
                status: error.status,
                body: ErrorEnvelope(error: ErrorResponder.code(for: error.status), message: error.body ?? error.status.reasonPhrase),
                headers: error.headers
            )
        } catch let error as any HTTPResponseError where error.status.code < 500 {
            return ErrorResponder.envelope(
                status: error.status,
                body: ErrorEnvelope(error: ErrorResponder.code(for: error.status), message: error.status.reasonPhrase)
            )
        } catch {
            if DatabaseErrors.isUnavailable(error) {
                unavailable.warning(context.logger, "database unavailable", metadata: ["error": "\(String(reflecting: error))"])
                return try AppError.unavailable.response(from: request, context: context)
            }
            if ErasureFence.isRefusal(error) {
                // A write for a user whose erasure committed meanwhile: to the app, its token's
                // refusal a moment early; to another service's outbox, final (410, as for any
                // erased user's fact).
                context.logger.notice("write refused: the user is erased")
                let refusal =
                    request.uri.path.hasPrefix(InternalRoutes.pathPrefix)
                    ? AppError(.gone, "user_erased", "This user's data has been erased") : AppError.accountErased
                return try refusal.response(from: request, context: context)
            }
            // Input that passed validation but that Postgres cannot store (a NUL character in
            // text, a number out of range): the client's mistake, said without internals.
            if let state = DatabaseErrors.sqlState(error) {
                context.logger.notice("refused by the database", metadata: ["sqlstate": "\(state)"])
                if state.hasPrefix("22") {
                    return try AppError.badRequest("A value in the request cannot be stored (text with NUL characters, a number out of range...)")
                        .response(from: request, context: context)
                }
                if state == "23514" {
                    return try AppError(.unprocessableContent, "validation_error", "A value in the request is outside what is allowed")
                        .response(from: request, context: context)
                }
            }
            context.logger.error("unhandled error", metadata: ["error": "\(String(reflecting: error))"])
            return ErrorResponder.envelope(
                status: .internalServerError,
                body: ErrorEnvelope(error: "internal_error", message: "Internal server error")
            )
        }
    }

    private func respond(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        // Hummingbird answers some failures itself with an empty body (e.g. 404 for no route).
        if response.status.code >= 400, response.headers[.contentType] == nil, response.body.contentLength == 0 {
            response = ErrorResponder.envelope(
                status: response.status,
                body: ErrorEnvelope(error: ErrorResponder.code(for: response.status), message: response.status.reasonPhrase),
                headers: response.headers
            )
        }
        return response
    }
}
