import Foundation

/// The methods internal routes use.
public enum InternalMethod: String, Sendable {
    case get = "GET"
    case post = "POST"
    case put = "PUT"
    case delete = "DELETE"
}

/// The four services, their ports, prefixes and schemas (ARCHITECTURE.md, "The shape").
public enum ServiceName: String, Sendable, CaseIterable, Codable {
    case auth, subscription, offline, ads

    public var defaultPort: Int {
        switch self {
        case .auth: 3001
        case .subscription: 3002
        case .offline: 3003
        case .ads: 3004
        }
    }

    /// Public path prefix, identical at the gateway and in the service.
    public var prefix: String { "/\(rawValue)/v1" }
    /// The Postgres schema the service owns.
    public var schema: String { rawValue }
    /// The Postgres login role of the service (granted its own schema only).
    public var databaseRole: String { "\(rawValue)_svc" }
    public var envPrefix: String { rawValue.uppercased() }
}

/// One route of the internal API (`/internal/...`, service credentials only): who answers it,
/// who calls it, its method and path, and what it takes and answers. The caller builds its path
/// from here (`path(...)`) and the callee registers it from here (`RouterGroup.on(_:use:)`), so
/// the two cannot drift apart; `InternalRoutes.all` is the table of who calls whom that
/// docs/DESIGN.md shows (a test keeps the two equal).
///
/// It is a value of WireTypes (no HTTP library): ServiceKit registers it on a Hummingbird
/// router and writes it to the outbox.
public struct InternalRoute<Body: Sendable, Answer: Sendable>: Sendable {
    public let method: InternalMethod
    /// Under `/internal/`, with `{id}` (a user) and `{consent}` the only parameters.
    public let template: String
    public let callees: [ServiceName]
    public let callers: [ServiceName]
    public let purpose: String

    init(_ method: InternalMethod, _ template: String, callees: [ServiceName], callers: [ServiceName], _ purpose: String) {
        self.method = method
        self.template = template
        self.callees = callees
        self.callers = callers
        self.purpose = purpose
    }

    /// The single callee, for routes only one service answers.
    public var callee: ServiceName { callees[0] }

    /// The path to call: parameters filled in, then `app_id` and any other query items.
    public func path(user: UUID? = nil, consent: String? = nil, app: UUID? = nil, query: [(String, String)] = []) -> String {
        var p = InternalRoutes.pathPrefix + template
        if let user { p = p.replacingOccurrences(of: "{id}", with: user.uuidString.lowercased()) }
        if let consent { p = p.replacingOccurrences(of: "{consent}", with: consent) }
        precondition(!p.contains("{"), "\(template): a parameter is missing")
        var items: [(String, String)] = app.map { [("app_id", $0.uuidString.lowercased())] } ?? []
        items += query
        guard !items.isEmpty else { return p }
        return p + "?" + items.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// The path as a router matches it (`users/:id/...`), under the service's internal group.
    public var routerTemplate: String { template.replacingOccurrences(of: "{", with: ":").replacingOccurrences(of: "}", with: "") }

    public var row: InternalRoutes.Row {
        InternalRoutes.Row(
            method: method.rawValue,
            path: InternalRoutes.pathPrefix + template,
            callees: callees,
            callers: callers,
            body: Self.name(Body.self),
            answer: Self.name(Answer.self),
            purpose: purpose
        )
    }

    static func name(_ type: Any.Type) -> String { type == NoBody.self ? "—" : String(describing: type) }
}

/// A route that takes no body.
public struct NoBody: Codable, Sendable {}

/// Every internal route. A new one is declared here first.
public enum InternalRoutes {
    /// Where every internal route lives (the gateway never forwards it).
    public static let pathPrefix = "/internal/"

    static let all4: [ServiceName] = ServiceName.allCases
    static let others: [ServiceName] = [.subscription, .offline, .ads]

    // MARK: answered by auth

    public static let verifyApp = InternalRoute<AppVerificationRequest, AppVerificationResponse>(
        .post,
        "apps/verify",
        callees: [.auth],
        callers: others,
        "Is this API key the app's (cached by the caller)"
    )
    public static let verifyOperator = InternalRoute<OperatorVerificationRequest, OperatorVerificationResponse>(
        .post,
        "operators/verify",
        callees: [.auth],
        callers: others,
        "Who an operator key or console token stands for now, and its role"
    )
    public static let user = InternalRoute<NoBody, UserSummary>(
        .get,
        "users/{id}",
        callees: [.auth],
        callers: [],
        "A user's summary (for support scripts)"
    )
    public static let consents = InternalRoute<NoBody, JSONValue>(
        .get,
        "users/{id}/consents",
        callees: [.auth],
        callers: [.offline],
        "A user's consents with their versions, when none was pushed yet"
    )
    public static let userStatus = InternalRoute<UserStatusUpdate, FactOutcome>(
        .put,
        "users/{id}/status",
        callees: [.auth],
        callers: [.subscription],
        "Premium or free, versioned (the token's status claim)"
    )
    public static let purchaseConfirmation = InternalRoute<PurchaseConfirmation, JSONValue>(
        .post,
        "users/{id}/emails/purchase-confirmation",
        callees: [.auth],
        callers: [.subscription],
        "Mail the purchase confirmation"
    )
    public static let consentAnswer = InternalRoute<ConsentAnswer, JSONValue>(
        .post,
        "users/{id}/consent-answers/{consent}",
        callees: [.auth],
        callers: [.ads],
        "A consent answered on another screen, based on a version"
    )
    public static let notifyUser = InternalRoute<NotificationRequest, JSONValue>(
        .post,
        "users/{id}/notifications",
        callees: [.auth],
        callers: [.subscription, .ads],
        "Push a notification to one user (once per key)"
    )
    public static let notifyUsers = InternalRoute<NotificationRequest, JSONValue>(
        .post,
        "notifications",
        callees: [.auth],
        callers: [.offline],
        "Push a notification to many users (a content update)"
    )
    public static let events = InternalRoute<WebhookEventMessage, JSONValue>(
        .post,
        "events",
        callees: [.auth],
        callers: others,
        "A fact for the app's webhooks and the user's live stream"
    )

    // MARK: answered by subscription

    public static let earnCredits = InternalRoute<CreditEarnRequest, JSONValue>(
        .post,
        "credits/earn",
        callees: [.subscription],
        callers: [.ads],
        "Credit a reward (once per source and reference)"
    )
    public static let entitlement = InternalRoute<NoBody, Entitlement>(
        .get,
        "users/{id}/entitlement",
        callees: [.subscription],
        callers: [],
        "A user's entitlement as subscription decides it (for support scripts)"
    )

    // MARK: answered by the others, told by an owner

    public static let pushEntitlement = InternalRoute<EntitlementFact, FactOutcome>(
        .put,
        "users/{id}/entitlement",
        callees: [.offline, .ads],
        callers: [.subscription],
        "Subscription's entitlement fact, versioned"
    )
    public static let consentFact = InternalRoute<ConsentFact, FactOutcome>(
        .put,
        "users/{id}/consents/{consent}",
        callees: [.offline, .ads],
        callers: [.auth],
        "Auth's consent fact, versioned (geolocation, personalized_ads)"
    )
    public static let sessions = InternalRoute<SessionFact, FactOutcome>(
        .put,
        "users/{id}/sessions",
        callees: others,
        callers: [.auth],
        "A session ended, or the user suspended, reinstated or erased"
    )

    // MARK: answered by every service, asked by auth (GDPR, support; auth reads its own in-process)

    public static let export = InternalRoute<NoBody, UserDataExport>(
        .get,
        "users/{id}/export",
        callees: all4,
        callers: [.auth],
        "The user's data this service holds (GDPR export)"
    )
    public static let erase = InternalRoute<NoBody, UserDataDeletion>(
        .delete,
        "users/{id}",
        callees: all4,
        callers: [.auth],
        "Erase the user's data this service holds (GDPR erasure)"
    )
    public static let timeline = InternalRoute<NoBody, TimelineAnswer>(
        .get,
        "users/{id}/timeline",
        callees: all4,
        callers: [.auth],
        "The user's events this service holds (support's timeline)"
    )

    public struct Row: Equatable, Sendable {
        public var method: String, path: String, callees: [ServiceName], callers: [ServiceName], body: String, answer: String, purpose: String
    }

    /// The table, in declaration order.
    public static var rows: [Row] {
        [
            verifyApp.row, verifyOperator.row, user.row, consents.row, userStatus.row, purchaseConfirmation.row, consentAnswer.row,
            notifyUser.row, notifyUsers.row, events.row, earnCredits.row, entitlement.row, pushEntitlement.row, consentFact.row,
            sessions.row, export.row, erase.row, timeline.row,
        ]
    }

    /// The Markdown table docs/DESIGN.md holds between its markers.
    public static var markdown: String {
        let names = { (s: [ServiceName]) in s.isEmpty ? "—" : s.map(\.rawValue).joined(separator: ", ") }
        var out = "| method | path | answered by | called by | body → answer | what |\n|---|---|---|---|---|---|\n"
        for r in rows {
            out += "| \(r.method) | `\(r.path)` | \(names(r.callees)) | \(names(r.callers)) | `\(r.body)` → `\(r.answer)` | \(r.purpose) |\n"
        }
        return out
    }
}
