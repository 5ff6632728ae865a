import AuthDomain
import AuthMessaging
import Crypto
import Foundation
import Hummingbird
import Logging
import ServiceKit
import WireTypes

/// The auth service: accounts, sign-in and the tenants (applications) every service checks.
public enum AuthService: ServiceDefinition {
    public static let service = ServiceName.auth

    public static func migrations() throws -> [Migration] {
        try Migration.bundled(in: .module, service: service)
    }

    public static func buildApplication(runtime: ServiceRuntime) async throws -> any ApplicationProtocol {
        try buildApplication(
            runtime: runtime,
            signingKey: SigningKeyLoader.load(config: runtime.config),
            publishedKeys: PublishedKeys.load(config: runtime.config)
        )
    }

    /// `audit_logs` kept `AUDIT_LOG_RETENTION_DAYS`.
    static func auditLogRetention(_ env: EnvironmentVariables) -> RetentionRule {
        RetentionRule(name: "audit_logs", table: "audit_logs", due: "timestamp < $1", keep: RetentionRule.auditKeep(env))
    }

    public static func periodicQueries(_ env: EnvironmentVariables) -> [PeriodicQuery] {
        PeriodicQuery.platform(env, retention: [auditLogRetention(env)] + AuthMessaging.retention(env))
            + [PeriodicQuery("guest expiry", AccountStore.expiredGuestsQuery(now: Date(), batch: AccountLifecycle.guestExpiryBatch))]
    }

    /// What a test may replace: the outbound providers.
    public struct Providers: Sendable {
        public var google: (any GoogleSignIn)?
        public var apple: (any AppleSignIn)?
        public var mailer: (any Mailer)?
        public var gameCenter: (any GameCenterVerifying)?
        public init(
            google: (any GoogleSignIn)? = nil,
            apple: (any AppleSignIn)? = nil,
            mailer: (any Mailer)? = nil,
            gameCenter: (any GameCenterVerifying)? = nil
        ) {
            self.google = google
            self.apple = apple
            self.mailer = mailer
            self.gameCenter = gameCenter
        }
    }

    /// The composition root: tests call it with their own runtime, key and providers.
    public static func buildApplication(
        runtime: ServiceRuntime,
        signingKey: Curve25519.Signing.PrivateKey,
        publishedKeys: [Curve25519.Signing.PublicKey] = [],
        providers: Providers = Providers()
    ) throws -> ServiceApplication {
        let env = runtime.config.environment
        let signer = AccessTokenSigner(privateKey: signingKey, issuer: runtime.config.authIssuer)
        // The signing key first, then the next or previous ones of a rotation (once each).
        let jwks = JWKSDocument(keys: [signer.jwk] + publishedKeys.map(AccessTokenSigner.jwk(of:)).filter { $0.kid != signer.kid })
        let applications = PostgresApplicationRepository(db: runtime.db, logger: runtime.logger)
        let appVerifier = CachedAppVerifier(LocalAppVerifier(repository: applications), ttl: .seconds(runtime.config.tenantCacheSeconds))
        // Auth verifies its own tokens with its own key: no HTTP round trip to itself.
        let tokenVerifier = AccessTokenVerifier(source: StaticJWKSSource(jwks), issuers: runtime.config.acceptedIssuers, clock: runtime.clock)
        let refreshTokens = RefreshTokenStore(logger: runtime.logger)
        let google =
            providers.google
            ?? GoogleIdentityVerifier(
                keySet: RemoteKeySet(
                    url: env.string("GOOGLE_JWKS_URL", default: "https://www.googleapis.com/oauth2/v3/certs"),
                    http: runtime.http
                )
            )
        let apple =
            providers.apple
            ?? AppleIdentityVerifier(
                keySet: RemoteKeySet(url: env.string("APPLE_JWKS_URL", default: "https://appleid.apple.com/auth/keys"), http: runtime.http),
                http: runtime.http,
                tokenURL: env.string("APPLE_TOKEN_URL", default: "https://appleid.apple.com/auth/token"),
                revokeURL: env.string("APPLE_REVOKE_URL", default: "https://appleid.apple.com/auth/revoke")
            )
        let gameCenter =
            try providers.gameCenter
            ?? GameCenterVerifier(
                http: runtime.http,
                roots: GameCenterVerifier.roots(pemPath: env.optional("GAMECENTER_TRUST_ROOTS")),
                allowedHostSuffix: env.string("GAMECENTER_KEY_HOST_SUFFIX", default: "apple.com"),
                caBundlePath: env.optional("GAMECENTER_CA_BUNDLE"),
                resolve: env.optional("GAMECENTER_RESOLVE").map { $0.split(separator: ",").map(String.init) } ?? []
            )
        let mailer: any Mailer =
            providers.mailer
            ?? {
                if let url = env.optional("SMTP_URL") {
                    return SMTPMailer(
                        http: runtime.http,
                        server: SMTPServer(
                            url: url,
                            username: env.optional("SMTP_USERNAME"),
                            password: env.optional("SMTP_PASSWORD"),
                            requireTLS: env.bool("SMTP_REQUIRE_TLS", default: false)
                        )
                    )
                }
                return MailFolder(directory: URL(fileURLWithPath: runtime.config.dataDirectory).appendingPathComponent("mail"))
            }()
        let dataKey = try dataKey(env: env, signingKey: signingKey)
        let box = SecretBox(key: dataKey, previous: try previousDataKey(env: env))
        let signIn = SignInSettingsStore(db: runtime.db, box: box, logger: runtime.logger)
        let appleConfigs = TenantSettings(
            topic: "apple_signin",
            bootstrap: try AppleClientConfig.parse(env.optional("APPLE_SIGNIN_APPS")),
            feed: runtime.changes,
            load: signIn.loadApple
        )
        let settings = AuthSettings(environment: env)
        let emailSettings = EmailSettingsStore(db: runtime.db, logger: runtime.logger)
        let emails = EmailComposer(
            settings: TenantSettings(topic: "email_settings", bootstrap: [:], feed: runtime.changes, load: emailSettings.loadAll),
            defaults: settings,
            applications: applications
        )
        let ctx = AuthContext(
            db: runtime.db,
            logger: runtime.logger,
            clock: runtime.clock,
            users: UserStore(logger: runtime.logger),
            refreshTokens: refreshTokens,
            emailTokens: EmailTokenStore(logger: runtime.logger),
            issuer: TokenIssuer(signer: signer, refreshTokens: refreshTokens),
            audit: AuditLog(logger: runtime.logger),
            limiter: RateLimiter(client: runtime.db, clock: runtime.clock, logger: runtime.logger),
            applications: applications,
            google: google,
            apple: apple,
            appleConfigs: appleConfigs,
            mailer: mailer,
            passwords: PasswordPolicy(estimator: Zxcvbn.shared),
            box: box,
            settings: settings,
            emails: emails,
            facts: FactPublisher(logger: runtime.logger),
            sessions: runtime.sessions
        )
        let lifecycle = AccountLifecycle(
            logger: runtime.logger,
            clock: runtime.clock,
            sessions: runtime.sessions,
            appleRevoker: AppleRevoker(apple: apple, configs: appleConfigs, box: box)
        )
        let jobs = JobQueue(client: runtime.db, queue: AccountLifecycle.queue, logger: runtime.logger, clock: runtime.clock)
        let linkSigner = LinkSigner(key: HKDF<SHA256>.deriveKey(inputKeyMaterial: dataKey, info: Data("export links v1".utf8), outputByteCount: 32))
        // #50 push, webhooks and live: a module auth's core calls, never the other way round.
        let messaging = AuthMessaging(
            runtime: runtime,
            box: box,
            apps: appVerifier,
            tokens: tokenVerifier,
            notice: DisabledEndpointMail(mailer: mailer, emails: emails, logger: runtime.logger)
        )
        let userData = AuthUserData.sections(logger: runtime.logger) + messaging.userData
        let exporter = PrivacyExporter(
            db: runtime.db,
            http: runtime.http,
            serviceURLs: runtime.config.serviceURLs,
            credential: runtime.internalCredential,
            sections: userData,
            signer: linkSigner,
            mailer: mailer,
            emails: emails,
            publicURL: env.string("AUTH_PUBLIC_URL", default: "http://127.0.0.1:8080"),
            clock: runtime.clock,
            logger: runtime.logger
        )
        let worker = JobWorker(
            queue: jobs,
            handlers: [
                AccountLifecycle.executeDeletionJob: { job in try await lifecycle.executeDeletion(job, db: runtime.db) },
                PrivacyExporter.job: { job in try await exporter.build(job) },
            ],
            pollInterval: .milliseconds(runtime.config.jobPollMilliseconds)
        )
        let sweeper = GuestExpirySweeper(
            lifecycle: lifecycle,
            db: runtime.db,
            interval: .seconds(env.int("GUEST_SWEEP_SECONDS", default: 600))
        )
        let operatorKeys = OperatorKeyStore(db: runtime.db, logger: runtime.logger)
        // #47 the console's team: members sign in; services ask auth who a token stands for.
        let console = ConsoleAccess(
            db: runtime.db,
            logger: runtime.logger,
            clock: runtime.clock,
            store: OperatorMemberStore(logger: runtime.logger),
            audit: AuditLog(logger: runtime.logger),
            signer: signer,
            tokens: tokenVerifier,
            box: box,
            mailer: mailer,
            mailFrom: settings.mailFrom,
            consoleURL: env.string("CONSOLE_BASE_URL", default: "http://127.0.0.1:8080"),
            passwords: ctx.passwords,
            hashPassword: { try await ctx.hashPassword($0) },
            checkPassword: { try await ctx.checkPassword($0, hash: $1) }
        )
        let operators = AuthOperators(keys: operatorKeys, console: console)
        return try buildServiceApplication(
            runtime: runtime,
            appVerifier: appVerifier,
            tokenVerifier: tokenVerifier,
            operatorVerifier: operators,
            services: [worker, sweeper] + messaging.services,
            everyReplica: messaging.everyReplica,
            userData: userData,
            timeline: SupportStore.timeline,
            retention: [Self.auditLogRetention(env)] + AuthMessaging.retention(env),
            server: messaging.server
        ) { routes in
            try OpenAPIDocument.serve(.module, on: routes.open)
            JWKSController(document: jwks, issuer: runtime.config.authIssuer).addRoutes(to: routes.open)
            let sessions = AuthController(ctx: ctx)
            sessions.addRoutes(tenant: routes.tenant, user: routes.user)
            EmailFlowsController(ctx: ctx, otps: OTPStore(logger: runtime.logger, key: dataKey), sessions: sessions)
                .addRoutes(tenant: routes.tenant, user: routes.user)
            LinkController(ctx: ctx, sessions: sessions).addRoutes(to: routes.user)
            GameCenterController(ctx: ctx, verifier: gameCenter).addRoutes(to: routes.user)
            let privacy = PrivacyController(ctx: ctx)
            privacy.addRoutes(to: routes.user)
            privacy.addInternalRoutes(to: routes.internal)
            DeletionController(ctx: ctx).addRoutes(tenant: routes.tenant, user: routes.user)
            ExportController(ctx: ctx, signer: linkSigner).addRoutes(open: routes.open, user: routes.user)
            InternalApplicationsController(applications: applications).addRoutes(to: routes.internal)
            InternalOperatorsController(operators: operators).addRoutes(to: routes.internal)
            ConsoleController(
                access: console,
                secureCookie: !runtime.config.isLocal,
                signInLimit: { try await ctx.enforceSignInLimit($0, scope: "operator.sign_in", console: true) }
            ).addRoutes(open: routes.open, admin: routes.admin)
            EmailSettingsController(store: emailSettings, emails: emails).addRoutes(to: routes.admin)
            SignInSettingsController(store: signIn, applications: applications, apple: appleConfigs).addRoutes(to: routes.admin)
            AppAdminController(applications: applications, operatorKeys: operatorKeys, verifier: appVerifier).addRoutes(to: routes.admin)
            SupportController(
                store: SupportStore(db: runtime.db, logger: runtime.logger),
                actions: SupportActions(ctx: ctx),
                db: runtime.db,
                http: runtime.http,
                serviceURLs: runtime.config.serviceURLs,
                credential: runtime.internalCredential,
                logger: runtime.logger
            )
            .addRoutes(to: routes.admin)
            InternalUsersController(ctx: ctx).addRoutes(to: routes.internal)
            messaging.addRoutes(routes)
        }
    }

    /// The key that seals secrets at rest: `AUTH_DATA_KEY` (base64, 32 bytes), else derived
    /// from the signing key so the local stack needs no set-up. Outside the local stack it must be
    /// set (`serve` refuses to start otherwise): a derived key would change with a signing-key
    /// rotation and leave every sealed secret unreadable. A deployment that ran on the derived
    /// key pins it first: `auth-service admin data-key` prints it for the current signing key.
    /// `AUTH_DATA_KEY_PREVIOUS`, while the data key changes (docs/OPERATIONS.md "Rotating keys"): secrets
    /// sealed with it still open until `admin data-key reseal` has sealed them again.
    static func previousDataKey(env: EnvironmentVariables) throws -> SymmetricKey? {
        guard let encoded = env.optional("AUTH_DATA_KEY_PREVIOUS"), !encoded.isEmpty else { return nil }
        guard let raw = Data(base64Encoded: encoded), raw.count == 32 else {
            throw ConfigurationError("AUTH_DATA_KEY_PREVIOUS must be base64 of 32 bytes")
        }
        return SymmetricKey(data: raw)
    }

    static func dataKey(env: EnvironmentVariables, signingKey: Curve25519.Signing.PrivateKey) throws -> SymmetricKey {
        if let encoded = env.optional("AUTH_DATA_KEY") {
            guard let raw = Data(base64Encoded: encoded), raw.count == 32 else {
                throw ConfigurationError("AUTH_DATA_KEY must be base64 of 32 bytes")
            }
            return SymmetricKey(data: raw)
        }
        return HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: signingKey.rawRepresentation),
            info: Data("auth data key v1".utf8),
            outputByteCount: 32
        )
    }
}
