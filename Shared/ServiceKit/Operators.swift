import Crypto
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import Synchronization
import WireTypes

/// Who is acting on an app's admin routes: the platform owner (`ADMIN_API_TOKEN`, every app),
/// the holder of one of that app's operator keys (issued by auth, that app only), or a member of
/// the app's team signed in to the console (#47).
public enum Operator: Sendable, Equatable {
    case platform
    case key(id: UUID, name: String)
    case member(id: UUID, email: String, role: OperatorRole)

    /// As the audit logs name it: never the secret.
    public var auditName: String {
        switch self {
        case .platform: "platform"
        case .key(let id, let name): "operator_key:\(id.lowercasedString):\(name)"
        case .member(let id, let email, _): "member:\(id.lowercasedString):\(email)"
        }
    }

    /// As a person reads it (an invite mail's "who invited you"): never the secret.
    public var displayName: String {
        switch self {
        case .platform: "The platform owner"
        case .key(_, let name): "Operator key \"\(name)\""
        case .member(_, let email, _): email
        }
    }

    /// What it may do. Keys are for automation and keep what they could do before roles
    /// existed (an on-call script disables a leaked app); a member has the role the team gave.
    public var role: OperatorRole {
        switch self {
        case .platform, .key: .owner
        case .member(_, _, let role): role
        }
    }
}

/// Why an operator acted on a player's or an app's behalf (the ticket), kept with what they did:
/// said, and short enough for the audit. One rule for every service's support action.
public enum OperatorReason {
    public static func checked(_ raw: String) throws -> String {
        let reason = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...500).contains(reason.count) else { throw AppError.validation("reason", "reason must say why, in 1-500 characters") }
        return reason
    }
}

/// Checks an operator credential for one app: an operator key, or a console member's access
/// token (#47). Auth answers from its own tables; the other services ask auth, and keep the
/// answer `OPERATOR_CACHE_SECONDS`: a removed member, an ended console session or a changed
/// role holds everywhere within that time.
public protocol OperatorVerifier: Sendable {
    /// The operator when `key` is a live operator key or a live member session of `appID`; nil
    /// otherwise (another app's, a revoked, expired or unknown one).
    func verify(appID: UUID, key: String) async throws -> Operator?
}

public struct RemoteOperatorVerifier: OperatorVerifier {
    let authURL: String
    let http: CurlHTTPClient
    let credential: InternalCredential

    public init(authURL: String, http: CurlHTTPClient, credential: InternalCredential) {
        self.authURL = authURL
        self.http = http
        self.credential = credential
    }

    public func verify(appID: UUID, key: String) async throws -> Operator? {
        let request = try HTTPRequest.json(
            InternalRoutes.verifyOperator.method.rawValue,
            authURL + InternalRoutes.verifyOperator.path(),
            body: OperatorVerificationRequest(appID: appID, key: key),
            headers: credential.headers
        )
        let response: HTTPResponseData
        do { response = try await http.send(request) } catch {
            throw AppError(.serviceUnavailable, "service_unavailable", "Cannot verify the operator key right now")
        }
        guard response.isSuccess else { throw AppError(.serviceUnavailable, "service_unavailable", "Cannot verify the operator key right now") }
        let answer = try response.decode(OperatorVerificationResponse.self)
        guard answer.valid else { return nil }
        if let member = answer.memberID, let role = answer.role.flatMap(OperatorRole.init(rawValue:)) {
            return .member(id: member, email: answer.email ?? "", role: role)
        }
        guard let id = answer.keyID else { return nil }
        return .key(id: id, name: answer.name ?? "")
    }
}

/// Keeps verdicts for a few seconds (`OPERATOR_CACHE_SECONDS`, 5 by default): a revoked key is
/// refused by every replica within that time, and an operator's burst of calls asks auth once.
public final class CachedOperatorVerifier: OperatorVerifier {
    private let inner: any OperatorVerifier
    private let ttl: Duration
    private let cache = Mutex([Key: (Operator?, ContinuousClock.Instant)]())
    struct Key: Hashable {
        let app: UUID
        let digest: SHA256.Digest
    }

    public init(_ inner: any OperatorVerifier, ttl: Duration) {
        self.inner = inner
        self.ttl = ttl
    }

    public func verify(appID: UUID, key: String) async throws -> Operator? {
        let cacheKey = Key(app: appID, digest: key.sha256)
        let now = ContinuousClock.now
        if let (found, at) = cache.withLock({ $0[cacheKey] }), now - at < ttl { return found }
        let found = try await inner.verify(appID: appID, key: key)
        cache.withLock { c in
            if c.count > 1_000 { c.removeAll() }
            c[cacheKey] = (found, now)
        }
        return found
    }
}

/// Guards operator routes (campaigns, providers, catalogue, revenue reports), behind the
/// tenant headers: `Authorization: Bearer <token>` with either the platform owner's
/// `ADMIN_API_TOKEN` (compared in constant time) or an operator key of the app named by
/// `X-App-ID`, so one app's operator can neither read nor change another's. Every use by a
/// recognised operator is written to this service's `operator_audit`, refusals included.
public struct AdminAuthMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    let token: String
    let operators: any OperatorVerifier
    let audit: OperatorAuditStore?
    /// Auth's keys, for the signature of a console member's token (#47).
    let tokens: AccessTokenVerifier?

    public init(token: String, operators: any OperatorVerifier, audit: OperatorAuditStore?, tokens: AccessTokenVerifier? = nil) {
        self.token = token
        self.operators = operators
        self.audit = audit
        self.tokens = tokens
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let appID = context.identity?.appID else { throw AppError.unauthorized }
        guard let presented = request.headers.bearerCredential else { throw Self.refused }
        let who: Operator
        if ConstantTime.equals(presented, token) {
            who = .platform
        } else if OperatorKeys.looksLikeKey(presented) {
            guard let found = try await operators.verify(appID: appID, key: presented) else { throw Self.refused }
            who = found
        } else if OperatorKeys.looksLikeMemberToken(presented) {
            // Auth's signature and the console's audience are checked here first: a player's
            // token or a forged one is refused without asking auth (and while auth is away).
            guard let tokens, let payload = try? await tokens.verifiedPayload(presented), OperatorKeys.isConsoleToken(payload),
                let found = try await operators.verify(appID: appID, key: presented)
            else { throw Self.refused }
            who = found
        } else {
            throw Self.refused
        }
        var context = context
        context.operator = who
        context.logger[metadataKey: "operator"] = .string(who.auditName)
        let status: Int
        do {
            // #47 each service enforces the role on its own routes, whatever the console shows.
            let needed = AdminAccess.required(method: request.method.rawValue, route: context.endpointPath ?? request.uri.path)
            guard who.role >= needed else {
                throw AppError(
                    .forbidden,
                    "insufficient_role",
                    "This action needs the \(needed.rawValue) role; yours is \(who.role.rawValue)"
                )
            }
            let response = try await next(request, context)
            status = Int(response.status.code)
            await record(who, app: appID, request, context, status: status)
            return response
        } catch {
            let failed = (error as? any HTTPResponseError)?.status.code ?? 500
            await record(who, app: appID, request, context, status: Int(failed))
            throw error
        }
    }

    static let refused = AppError(
        .unauthorized,
        "invalid_admin_credential",
        "An operator credential for this app is required (Authorization: Bearer <operator key or console access token>)"
    )

    private func record(_ who: Operator, app: UUID, _ request: Request, _ context: Context, status: Int) async {
        guard let audit else { return }
        do {
            try await audit.record(
                OperatorAuditStore.Entry(
                    appID: app,
                    operator: who,
                    method: request.method.rawValue,
                    route: context.endpointPath ?? "unmatched",
                    path: request.uri.path,
                    status: status,
                    requestID: context.requestID
                )
            )
        } catch {
            // The action has happened; losing its audit line is logged loudly, not turned into a failure.
            context.logger.error("operator audit not written", metadata: ["error": "\(String(reflecting: type(of: error)))"])
        }
    }
}

/// `operator_audit` in each service's schema: one row per operator request.
public struct OperatorAuditStore: Sendable {
    public struct Entry: Sendable {
        public var appID: UUID, `operator`: Operator, method: String, route: String, path: String, status: Int, requestID: String
    }

    public struct Row: Sendable, Equatable, Encodable {
        public var id: Int64
        public var at: Date
        public var `operator`: String, method: String, route: String, path: String, status: Int
        public var requestID: String?
        enum CodingKeys: String, CodingKey {
            case id, at, `operator`, method, route, path, status
            case requestID = "request_id"
        }
    }

    let db: DatabasePool
    let logger: Logger

    public init(db: DatabasePool, logger: Logger) {
        self.db = db
        self.logger = logger
    }

    public func record(_ e: Entry) async throws {
        try await db.query(
            """
            INSERT INTO operator_audit (app_id, operator, method, route, path, status, request_id)
            VALUES (\(e.appID), \(e.operator.auditName), \(e.method), \(e.route), \(String(e.path.prefix(500))), \(e.status), \(e.requestID))
            """,
            logger: logger
        )
    }

    /// One app's operator actions, newest first: at most `limit`, older than the row `before`
    /// (the page before), by one operator (`member:<id>:<email>`, `operator_key:…`, `platform`)
    /// or, with a trailing `:`, a kind of them (`member:`).
    public func recent(appID: UUID, limit: Int = 100, before: Int64? = nil, operator who: String? = nil) async throws -> [Row] {
        var out: [Row] = []
        let prefix = who.map { $0.hasSuffix(":") ? $0 : nil } ?? nil
        let exact = who.map { $0.hasSuffix(":") ? nil : $0 } ?? nil
        for try await r in try await db.query(
            """
            SELECT id, at, operator, method, route, path, status, request_id FROM operator_audit
            WHERE app_id = \(appID) AND (\(before)::bigint IS NULL OR id < \(before)::bigint)
              AND (\(exact)::text IS NULL OR operator = \(exact)::text)
              AND (\(prefix)::text IS NULL OR starts_with(operator, \(prefix)::text))
            ORDER BY id DESC LIMIT \(limit)
            """,
            logger: logger
        ).decode((Int64, Date, String, String, String, String, Int, String?).self) {
            out.append(Row(id: r.0, at: r.1, operator: r.2, method: r.3, route: r.4, path: r.5, status: r.6, requestID: r.7))
        }
        return out
    }

    /// The platform migration every service includes (`-- include platform: operator_audit`).
    static let migration = """
        CREATE TABLE operator_audit (
            id bigserial PRIMARY KEY,
            app_id uuid NOT NULL,
            operator text NOT NULL,
            method text NOT NULL,
            route text NOT NULL,
            path text NOT NULL,
            status integer NOT NULL,
            request_id text,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX operator_audit_app ON operator_audit (app_id, id);
        """
}

/// `GET /<prefix>/v1/admin/audit` (#47): the service's own operator audit for the console's Audit
/// page, newest first, paged by `before` (an entry's id), filtered by `operator`.
struct OperatorAuditController: Sendable {
    let store: OperatorAuditStore

    struct Page: Encodable {
        var entries: [OperatorAuditStore.Row]
        var nextBefore: Int64?
        enum CodingKeys: String, CodingKey {
            case entries
            case nextBefore = "next_before"
        }
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/audit") { request, context in
            let app = try context.requireApp()
            let q = request.uri.queryParameters
            let limit =
                try q.get("limit").map { raw -> Int in
                    guard let n = Int(raw), (1...200).contains(n) else { throw AppError.validation("limit", "limit is 1 to 200") }
                    return n
                } ?? 50
            let before = try q.get("before").map { raw -> Int64 in
                guard let n = Int64(raw), n > 0 else { throw AppError.badRequest("before must be an entry's id", field: "before") }
                return n
            }
            let who = try q.get("operator").map { raw -> String in
                guard raw.utf8.count <= 400 else { throw AppError.validation("operator", "operator is at most 400 characters") }
                return raw
            }
            let entries = try await store.recent(appID: app, limit: limit, before: before, operator: who)
            return try context.json(Page(entries: entries, nextBefore: entries.count == limit ? entries.last?.id : nil))
        }
    }
}
