import Crypto
import Foundation
import Hummingbird
import Synchronization
import WireTypes

/// Checks an (`X-App-ID`, `X-API-Key`) pair. Auth answers from its own table; every other
/// service asks auth over HTTP.
public protocol AppVerifier: Sendable {
    func verify(appID: UUID, apiKey: String) async throws -> Bool
    /// The same check, telling a disabled app (right key) from a wrong key.
    func verdict(appID: UUID, apiKey: String) async throws -> AppVerdict
}

public enum AppVerdict: Sendable, Equatable {
    case valid, invalid
    /// The key is right, but an operator disabled the app: 403 `app_disabled`, not 401.
    case disabled
}

extension AppVerifier {
    public func verdict(appID: UUID, apiKey: String) async throws -> AppVerdict {
        try await verify(appID: appID, apiKey: apiKey) ? .valid : .invalid
    }
}

/// Asks auth's internal endpoint, with this service's credential.
public struct RemoteAppVerifier: AppVerifier {
    public let authURL: String
    public let http: CurlHTTPClient
    public let credential: InternalCredential

    public init(authURL: String, http: CurlHTTPClient, credential: InternalCredential) {
        self.authURL = authURL
        self.http = http
        self.credential = credential
    }

    public func verify(appID: UUID, apiKey: String) async throws -> Bool {
        try await verdict(appID: appID, apiKey: apiKey) == .valid
    }

    public func verdict(appID: UUID, apiKey: String) async throws -> AppVerdict {
        let request = try HTTPRequest.json(
            InternalRoutes.verifyApp.method.rawValue,
            authURL + InternalRoutes.verifyApp.path(),
            body: AppVerificationRequest(appID: appID, apiKey: apiKey),
            headers: credential.headers
        )
        let response: HTTPResponseData
        do {
            response = try await http.send(request)
        } catch {
            throw AppError(.serviceUnavailable, "service_unavailable", "Cannot verify the application right now")
        }
        guard response.isSuccess else {
            throw AppError(.serviceUnavailable, "service_unavailable", "Cannot verify the application right now")
        }
        let answer = try response.decode(AppVerificationResponse.self)
        return answer.valid ? .valid : answer.disabled == true ? .disabled : .invalid
    }
}

/// Remembers verdicts briefly so a hot path does not ask auth on every request: valid pairs
/// for `ttl`, invalid ones for a few seconds (a flood of wrong keys still reaches auth rarely).
public final class CachedAppVerifier: AppVerifier {
    private let inner: any AppVerifier
    private let ttl: Duration
    private let negativeTTL: Duration
    private let cache = Mutex([Key: (AppVerdict, ContinuousClock.Instant)]())
    /// The key is kept by its digest; the app id and digest as bytes, not formatted text.
    struct Key: Hashable {
        let app: UUID
        let digest: SHA256.Digest
    }

    public init(_ inner: any AppVerifier, ttl: Duration, negativeTTL: Duration = .seconds(2)) {
        self.inner = inner
        self.ttl = ttl
        self.negativeTTL = negativeTTL
    }

    public func verify(appID: UUID, apiKey: String) async throws -> Bool {
        try await verdict(appID: appID, apiKey: apiKey) == .valid
    }

    /// A valid verdict is kept for `ttl`; a refusal (wrong key, disabled app) for a few seconds.
    public func verdict(appID: UUID, apiKey: String) async throws -> AppVerdict {
        let key = Key(app: appID, digest: apiKey.sha256)
        let now = ContinuousClock.now
        if let (verdict, at) = cache.withLock({ $0[key] }), now - at < (verdict == .valid ? ttl : negativeTTL) {
            return verdict
        }
        let verdict = try await inner.verdict(appID: appID, apiKey: apiKey)
        cache.withLock { c in
            if c.count > 10_000 { c.removeAll() }
            c[key] = (verdict, now)
        }
        return verdict
    }

    /// Forget every verdict (after an API key rotation in the same process).
    public func invalidateAll() { cache.withLock { $0.removeAll() } }
}

/// Requires valid tenant headers on every public route; leaves the app id on the context.
public struct TenantMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    let verifier: any AppVerifier
    /// The admin routes (#47): the operator credential behind this middleware is the app's own
    /// (a key or a member's token, each for one app), so the app key a phone ships with adds
    /// nothing and a person in the console does not have it. Checked when sent.
    let keyOptional: Bool

    public init(verifier: any AppVerifier, keyOptional: Bool = false) {
        self.verifier = verifier
        self.keyOptional = keyOptional
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let rawApp = request.headers.value(.xAppID) else {
            throw AppError(.unauthorized, "missing_api_key", "X-App-ID and X-API-Key headers are required")
        }
        guard let appID = UUID(hexString: rawApp) else {
            throw AppError(.unauthorized, "invalid_api_key", "X-App-ID must be a UUID")
        }
        guard let key = request.headers.value(.xAPIKey), !key.isEmpty else {
            guard keyOptional else { throw AppError(.unauthorized, "missing_api_key", "X-App-ID and X-API-Key headers are required") }
            var context = context
            context.identity = Identity(appID: appID)
            context.logger[metadataKey: "app_id"] = .string(appID.lowercasedString)
            return try await next(request, context)
        }
        guard key.utf8.count <= 256 else { throw AppError(.unauthorized, "invalid_api_key", "Invalid application credentials") }
        switch try await verifier.verdict(appID: appID, apiKey: key) {
        case .valid: break
        case .invalid: throw AppError(.unauthorized, "invalid_api_key", "Invalid application credentials")
        case .disabled: throw AppError(.forbidden, "app_disabled", "This application is disabled; contact its publisher")
        }
        var context = context
        context.identity = Identity(appID: appID)
        context.logger[metadataKey: "app_id"] = .string(appID.lowercasedString)
        return try await next(request, context)
    }
}

/// Requires `Authorization: Bearer <access token>` signed by auth for the tenant of the
/// request; leaves the user on the context. Must sit behind `TenantMiddleware`.
public struct AccessTokenMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    let verifier: AccessTokenVerifier
    let sessions: SessionRegistry

    public init(verifier: AccessTokenVerifier, sessions: SessionRegistry) {
        self.verifier = verifier
        self.sessions = sessions
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let appID = context.identity?.appID else { throw AppError.unauthorized }
        guard let token = request.headers.bearerCredential else {
            throw AppError(.unauthorized, "unauthorized", "Authorization: Bearer <access_token> is required")
        }
        let claims = try await verifier.verify(token, appID: appID)
        // A valid signature is not enough: the session may have ended since (from memory).
        if let refusal = AppError.refusal(sessions.verdict(for: claims)) { throw refusal }
        var context = context
        context.identity = Identity(
            appID: appID,
            userID: claims.userID,
            status: claims.status,
            isGuest: claims.isGuest,
            email: claims.email
        )
        context.logger[metadataKey: "user_id"] = .string(claims.sub)
        return try await next(request, context)
    }
}

/// The credential one service presents to another on `/internal/` routes.
public struct InternalCredential: Sendable {
    public let service: ServiceName
    public let secret: String
    public init(service: ServiceName, secret: String) {
        self.service = service
        self.secret = secret
    }

    public var headers: [(String, String)] {
        [("Authorization", "Bearer \(secret)"), ("X-Service-Name", service.rawValue)]
    }
}

/// Guards `/internal/` routes: only a calling service with its configured credential passes
/// (compared in constant time).
public struct InternalAuthMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    let accepted: [ServiceName: String]

    public init(accepted: [ServiceName: String]) { self.accepted = accepted }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let name = request.headers.value(.xServiceName).flatMap(ServiceName.init(rawValue:)),
            let expected = accepted[name],
            let presented = request.headers.bearerCredential,
            ConstantTime.equals(presented, expected)
        else {
            throw AppError(.unauthorized, "invalid_service_credential", "A valid service credential is required")
        }
        var context = context
        context.callingService = name
        return try await next(request, context)
    }
}
