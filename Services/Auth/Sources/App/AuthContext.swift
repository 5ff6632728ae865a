import AuthDomain
import AuthMessaging
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import NIOPosix
import PostgresNIO
import ServiceKit
import WireTypes

/// Settings of the sign-in flows that come from configuration.
public struct AuthSettings: Sendable {
    public var mailFrom: String
    public var supportContact: String
    /// Base of the links in emails (the app's deep-link or web page).
    public var linkBaseURL: String
    public var bcryptCost: UInt8 = 12
    /// Register/login/OTP/reset per client IP (seed: 5 per 15 minutes).
    public var signInLimit = 5
    public var signInWindow = 15 * 60
    /// Console sign-ins and invite acceptances per client address (#47), a budget of their own:
    /// a team behind one office address is not the players' 5, and each member locks anyway.
    public var consoleSignInLimit = 30
    /// Refresh has its own, generous limit.
    public var refreshLimit = 600
    public var refreshWindow = 60

    public init(environment env: EnvironmentVariables) {
        mailFrom = env.string("MAIL_FROM", default: "Quiz Geography <no-reply@quiz.example>")
        supportContact = env.string("SUPPORT_EMAIL", default: "support@example.com")
        linkBaseURL = env.string("APP_LINK_BASE_URL", default: "https://app.example.com")
        refreshLimit = env.int("AUTH_REFRESH_LIMIT_PER_MINUTE", default: 600)
        signInLimit = env.int("AUTH_SIGNIN_LIMIT_PER_15_MINUTES", default: 5)
        consoleSignInLimit = env.int("CONSOLE_SIGNIN_LIMIT_PER_15_MINUTES", default: 30)
    }
}

/// Everything the auth routes use, built once in the composition root.
struct AuthContext: Sendable {
    let db: DatabasePool
    let logger: Logger
    let clock: any WallClock
    let users: UserStore
    let refreshTokens: RefreshTokenStore
    let emailTokens: EmailTokenStore
    let issuer: TokenIssuer
    let audit: AuditLog
    let limiter: RateLimiter
    let applications: any ApplicationRepository
    let google: any GoogleSignIn
    let apple: any AppleSignIn
    /// Each app's Sign in with Apple key (stored over APPLE_SIGNIN_APPS; reloaded on change).
    let appleConfigs: TenantSettings<AppleClientConfig>
    let mailer: any Mailer
    let passwords: PasswordPolicy
    let box: SecretBox
    let settings: AuthSettings
    /// Each app's emails (sender, language, wording, links).
    let emails: EmailComposer
    /// Versioned facts auth owns (sessions, consents), told to the other services.
    let facts: FactPublisher
    /// This process's view of ended sessions (auth refuses them too).
    let sessions: SessionRegistry

    func hashPassword(_ password: String) async throws -> String {
        let cost = settings.bcryptCost
        // bcrypt-12 costs ~250 ms of CPU: never on an event loop.
        return try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    func checkPassword(_ password: String, hash: String) async throws -> Bool {
        try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
    }

    /// 5 sign-in attempts per 15 minutes per client IP; a refused attempt is audited too.
    func enforceSignInLimit(_ context: ServiceRequestContext, scope: String, console: Bool = false) async throws {
        let decision = try await limiter.hit(
            scope: console ? "console-signin" : "signin",
            key: context.clientAddress,
            limit: console ? settings.consoleSignInLimit : settings.signInLimit,
            window: settings.signInWindow
        )
        guard decision.allowed else {
            if let app = context.identity?.appID {
                await audit.record(
                    AuditLog.Entry(
                        userID: nil,
                        appID: app,
                        action: scope,
                        result: "rate_limited",
                        ip: context.clientAddress,
                        details: ["retry_after": .int(decision.retryAfter)]
                    ),
                    db: db
                )
            }
            throw AppError.rateLimited(retryAfter: decision.retryAfter)
        }
    }

    /// The user signed out on every device, in the caller's transaction.
    var signOut: SignOutEverywhere { SignOutEverywhere(refreshTokens: refreshTokens, facts: facts, logger: logger) }

    func entry(
        _ action: String,
        _ result: String,
        app: UUID,
        user: UUID?,
        _ request: Request,
        _ context: ServiceRequestContext,
        details: [String: JSONValue] = [:]
    ) -> AuditLog.Entry {
        origin(request, context).entry(action, result, app: app, user: user, details: details)
    }

    /// The request's origin for the entries a flow writes.
    func origin(_ request: Request, _ context: ServiceRequestContext) -> AuditLog.Origin {
        AuditLog.Origin(ip: context.clientAddress, userAgent: request.headers[.userAgent].map { String($0.prefix(500)) })
    }

    /// Suspended accounts are refused (seed 14a), locked ones too (14b).
    var gate: AccountGate { AccountGate(supportContact: settings.supportContact) }

    func requireActive(_ user: User, now: Date) throws { try gate.requireActive(user, now: now) }

    func accountLocked(until: Date, now: Date) -> AppError { LockoutPolicy.refusal(lockedUntil: until, now: now) }
}

// #50 each flow takes the few dependencies it uses; the routes build one from the context.
extension DeletionScheduling {
    init(ctx: AuthContext) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            users: ctx.users,
            refreshTokens: ctx.refreshTokens,
            emailTokens: ctx.emailTokens,
            audit: ctx.audit
        )
    }
}

extension EmailProofs {
    init(ctx: AuthContext, otps: OTPStore) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            users: ctx.users,
            refreshTokens: ctx.refreshTokens,
            emailTokens: ctx.emailTokens,
            issuer: ctx.issuer,
            audit: ctx.audit,
            facts: ctx.facts,
            gate: ctx.gate,
            otps: otps
        )
    }
}

extension GameCenterLinking {
    init(ctx: AuthContext) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            users: ctx.users,
            audit: ctx.audit
        )
    }
}

extension IdentityLinking {
    init(ctx: AuthContext) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            users: ctx.users,
            emailTokens: ctx.emailTokens,
            issuer: ctx.issuer,
            audit: ctx.audit,
            apple: ctx.apple,
            appleConfigs: ctx.appleConfigs,
            box: ctx.box,
            gate: ctx.gate
        )
    }
}

extension PrivacyChoices {
    init(ctx: AuthContext) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            users: ctx.users,
            audit: ctx.audit,
            facts: ctx.facts
        )
    }
}

extension ServiceFacts {
    init(ctx: AuthContext) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            clock: ctx.clock,
            users: ctx.users,
            mailer: ctx.mailer,
            emails: ctx.emails,
            facts: ctx.facts
        )
    }
}

extension SignIn {
    init(ctx: AuthContext) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            users: ctx.users,
            refreshTokens: ctx.refreshTokens,
            emailTokens: ctx.emailTokens,
            issuer: ctx.issuer,
            audit: ctx.audit,
            facts: ctx.facts,
            gate: ctx.gate,
            signOut: ctx.signOut
        )
    }
}

extension SupportActions {
    init(ctx: AuthContext) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            clock: ctx.clock,
            users: ctx.users,
            audit: ctx.audit,
            sessions: ctx.sessions,
            signOut: ctx.signOut
        )
    }
}

extension TokenRefresh {
    init(ctx: AuthContext) {
        self.init(
            db: ctx.db,
            logger: ctx.logger,
            users: ctx.users,
            refreshTokens: ctx.refreshTokens,
            issuer: ctx.issuer,
            audit: ctx.audit,
            box: ctx.box
        )
    }
}
