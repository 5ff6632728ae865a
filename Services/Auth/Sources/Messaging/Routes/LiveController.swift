import AuthDomain
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import ServiceKit
import ServiceLifecycle
import WireTypes

/// Who may open a stream (#46): `Authorization: Bearer` with `X-App-ID` (and `X-API-Key` when
/// sent), or a ticket. Every refusal is an `AppError`: a 401 envelope before the stream starts.
struct LiveAuthorizer: Sendable {
    let apps: any AppVerifier
    let tokens: AccessTokenVerifier
    let sessions: SessionRegistry
    let store: LiveStore

    func authorize(headers: HTTPFields, ticket: String?) async throws -> LiveRules.Session {
        let session: LiveRules.Session
        if let ticket {
            guard let s = try await store.useTicket(ticket) else {
                throw AppError(AuthErrorCode.invalidTicket, "This live ticket is unknown, used or expired; ask for a new one")
            }
            session = s
        } else {
            guard let rawApp = headers.value(.xAppID) else {
                throw AppError(.unauthorized, "missing_api_key", "X-App-ID (with a bearer token) or ?ticket= is required")
            }
            guard let appID = UUID(hexString: rawApp) else { throw AppError(.unauthorized, "invalid_api_key", "X-App-ID must be a UUID") }
            if let key = headers.value(.xAPIKey) {
                guard key.utf8.count <= 256 else { throw AppError(.unauthorized, "invalid_api_key", "Invalid application credentials") }
                switch try await apps.verdict(appID: appID, apiKey: key) {
                case .valid: break
                case .invalid: throw AppError(.unauthorized, "invalid_api_key", "Invalid application credentials")
                case .disabled: throw AppError(.forbidden, "app_disabled", "This application is disabled; contact its publisher")
                }
            }
            guard let token = headers.bearerCredential else {
                throw AppError(.unauthorized, "unauthorized", "Authorization: Bearer <access_token> is required")
            }
            let claims = try await tokens.verify(token, appID: appID)
            session = LiveRules.Session(appID: appID, userID: claims.userID, sessionID: claims.sid, sessionEpoch: claims.sv)
        }
        // A session that ended (here or on another replica) opens nothing.
        let verdict = sessions.snapshot.verdict(
            app: session.appID,
            user: session.userID,
            session: session.sessionID,
            sessionEpoch: session.sessionEpoch
        )
        if let refusal = AppError.refusal(verdict) { throw refusal }
        return session
    }

    /// What a stream request asks for and who may have it: the cursor first (400 when it is not
    /// one, and then no ticket is spent), then the session. The SSE route, the upgrade and the
    /// socket's refusals all open through here.
    func open(headers: HTTPFields, query: [String: String]) async throws -> (LiveRules.Session, LiveRules.Resume) {
        let resume = LiveRules.resume(lastEventID: headers.value(HTTPField.Name("Last-Event-ID")!), after: query["after"])
        if case .malformed(let message) = resume { throw AppError.badRequest(message, field: "cursor") }
        return (try await authorize(headers: headers, ticket: query["ticket"]), resume)
    }

    /// Why `GET /live/socket` was not upgraded, as its envelope says it.
    func socketRefusal(headers: HTTPFields, query: [String: String]) async -> AppError {
        do {
            _ = try await open(headers: headers, query: query)
        } catch let refusal as AppError {
            return refusal
        } catch {
            return AppError.unavailable
        }
        guard headers.value(.upgrade)?.lowercased() == "websocket" else {
            return AppError(AuthErrorCode.upgradeRequired, "This route is a WebSocket: send Connection: Upgrade, Upgrade: websocket")
        }
        return AppError(
            AuthErrorCode.invalidWebsocketHandshake,
            "The WebSocket handshake needs Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key, as the connection's first request"
        )
    }

    /// A request's query as a dictionary (a repeated name: its first value).
    static func query(_ uri: URI) -> [String: String] {
        var out: [String: String] = [:]
        for (k, v) in uri.queryParameters where out[String(k)] == nil { out[String(k)] = String(v) }
        return out
    }
}

/// `/auth/v1/live/…`: the app's own live events.
struct LiveController: Sendable {
    let authorizer: LiveAuthorizer
    let ticketTTL: Duration = .seconds(60)

    struct TicketResponse: Encodable {
        var ticket: String
        var expiresIn: Int
        enum CodingKeys: String, CodingKey {
            case ticket
            case expiresIn = "expires_in"
        }
    }

    func addRoutes(open: RouterGroup<ServiceRequestContext>, user: RouterGroup<ServiceRequestContext>) {
        // Behind the tenant and token checks: the ticket stands for the bearer's session.
        user.post("live/tickets") { request, context in
            let session = try await authorizer.authorize(headers: request.headers, ticket: nil)
            let ticket = try await authorizer.store.issueTicket(session, ttl: ticketTTL)
            return try context.json(TicketResponse(ticket: ticket, expiresIn: Int(ticketTTL.components.seconds)), status: .created)
        }
        // `GET live/events` is answered before the router, on its connection (LiveEventsHandler).
        // Reached only when the WebSocket upgrade did not happen (LiveUpgradeChannel): the
        // refusal it stands for, in the envelope.
        open.get("live/socket") { request, _ -> Response in
            throw await authorizer.socketRefusal(headers: request.headers, query: LiveAuthorizer.query(request.uri))
        }
    }
}
