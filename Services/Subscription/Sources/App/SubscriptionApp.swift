import Foundation
import Hummingbird
import ServiceKit
import SubscriptionDomain

/// The subscription service. Plans, store purchases, access rules, credits and store notifications (port 3002).
public enum SubscriptionService: ServiceDefinition {
    public static let service = ServiceName.subscription

    public static func migrations() throws -> [Migration] {
        try Migration.bundled(in: .module, service: service)
    }

    public static func buildApplication(runtime: ServiceRuntime) async throws -> any ApplicationProtocol {
        try buildApplication(runtime: runtime, appVerifier: runtime.remoteAppVerifier(), tokenVerifier: runtime.remoteTokenVerifier())
    }

    /// One row per content access check: kept `ACCESS_LOG_RETENTION_DAYS` (90 by default). The
    /// table is partitioned by day (#48): a week of days ahead is made and the days past the
    /// cutoff are dropped before each purge, which then deletes what is left of the oldest day.
    static func accessLogRetention(_ env: EnvironmentVariables) -> RetentionRule {
        RetentionRule(
            name: "access_logs",
            table: "access_logs",
            due: "timestamp < $1",
            keep: .seconds(86_400 * env.int("ACCESS_LOG_RETENTION_DAYS", default: 90)),
            prepare: AccessStore.partitionsBeforePurge
        )
    }

    public static func periodicQueries(_ env: EnvironmentVariables) -> [PeriodicQuery] {
        PeriodicQuery.platform(env, retention: [accessLogRetention(env)])
            + [PeriodicQuery("expiry sweep", SubscriptionStore.dueQuery(now: Date(), batch: ExpirySweeper.batch))]
    }

    /// The composition root: tenant headers and access tokens are checked by asking auth.
    public static func buildApplication(
        runtime: ServiceRuntime,
        appVerifier: any AppVerifier,
        tokenVerifier: AccessTokenVerifier
    ) throws -> ServiceApplication {
        let ledger = CreditLedger(logger: runtime.logger)
        let env = runtime.config.environment
        // Each app's store credentials: stored (admin routes and CLI, sealed with
        // SUBSCRIPTION_DATA_KEY), over APPLE_IAP_APPS / GOOGLE_PLAY_APPS, the local stack's
        // bootstrap. A bad bootstrap stops the start: purchases would otherwise be refused silently.
        let storeSettings = try StoreSettingsStore(
            db: runtime.db,
            box: SecretBox(key: SecretBox.dataKey(named: "SUBSCRIPTION_DATA_KEY", environment: env)),
            logger: runtime.logger
        )
        let apple = TenantSettings(
            topic: "store_settings",
            bootstrap: try AppleIAPConfig.parse(env.optional("APPLE_IAP_APPS")),
            feed: runtime.changes,
            load: storeSettings.loadApple
        )
        let google = TenantSettings(
            topic: "store_settings",
            bootstrap: try GooglePlayConfig.parse(env.optional("GOOGLE_PLAY_APPS")),
            feed: runtime.changes,
            load: storeSettings.loadGoogle
        )
        let googleClient = GooglePlayClient(
            http: runtime.http,
            apiBase: env.string("GOOGLE_PLAY_API_URL", default: "https://androidpublisher.googleapis.com"),
            tokenURL: env.string("GOOGLE_OAUTH_TOKEN_URL", default: "https://oauth2.googleapis.com/token")
        )
        let jobs = JobWorker(
            queue: JobQueue(client: runtime.db, queue: GoogleAcknowledgeJob.queue, logger: runtime.logger, clock: runtime.clock),
            handlers: [GoogleAcknowledgeJob.kind: GoogleAcknowledgeJob.handler(client: googleClient, configs: google, clock: runtime.clock)],
            pollInterval: .milliseconds(runtime.config.jobPollMilliseconds),
            backoff: Backoff(base: .seconds(30), cap: .seconds(3600))
        )
        let status = SubscriptionStatusCheck(
            db: runtime.db,
            subscriptions: SubscriptionStore(logger: runtime.logger),
            plans: PlanStore(logger: runtime.logger),
            states: ReadCache(
                name: "subscription_state",
                capacity: runtime.config.environment.int("STATUS_CACHE_ENTRIES", default: 50_000),
                ttl: .seconds(min(300, runtime.config.environment.int("STATUS_CACHE_SECONDS", default: 300))),
                feed: runtime.changes,
                topics: ["subscription", "plans"],
                metrics: runtime.metrics,
                clock: runtime.clock
            ),
            clock: runtime.clock,
            logger: runtime.logger
        )
        let subscriptions = SubscriptionsController(
            db: runtime.db,
            subscriptions: SubscriptionStore(logger: runtime.logger),
            plans: PlanStore(logger: runtime.logger),
            apple: apple,
            receipts: AppleReceiptVerifier(
                http: runtime.http,
                productionURL: runtime.config.environment.string("APPLE_VERIFY_RECEIPT_URL", default: "https://buy.itunes.apple.com/verifyReceipt"),
                sandboxURL: runtime.config.environment.string(
                    "APPLE_VERIFY_RECEIPT_SANDBOX_URL",
                    default: "https://sandbox.itunes.apple.com/verifyReceipt"
                ),
                logger: runtime.logger
            ),
            google: google,
            googleClient: googleClient,
            status: status,
            factsAtOnce: AccessFactsAtOnce(worker: runtime.outboxWorker),
            clock: runtime.clock,
            logger: runtime.logger
        )
        let reads = AccessReads(
            db: runtime.db,
            ledger: ledger,
            plans: PlanStore(logger: runtime.logger),
            feed: runtime.changes,
            metrics: runtime.metrics,
            clock: runtime.clock,
            capacity: runtime.config.environment.int("STATUS_CACHE_ENTRIES", default: 50_000),
            access: AccessStore(logger: runtime.logger)
        )
        let credits = CreditsController(
            db: runtime.db,
            ledger: ledger,
            reads: reads,
            idempotency: IdempotencyStore(client: runtime.db, logger: runtime.logger),
            clock: runtime.clock,
            logger: runtime.logger
        )
        let sweeper = ExpirySweeper(
            store: SubscriptionStore(logger: runtime.logger),
            db: runtime.db,
            clock: runtime.clock,
            interval: .seconds(runtime.config.environment.int("EXPIRY_SWEEP_SECONDS", default: 300))
        )
        return try buildServiceApplication(
            runtime: runtime,
            appVerifier: appVerifier,
            tokenVerifier: tokenVerifier,
            services: [sweeper, jobs],
            userData: SubscriptionUserData.sections(logger: runtime.logger),
            timeline: SubscriptionTimeline.timeline,
            retention: [Self.accessLogRetention(env)]
        ) { routes in
            try OpenAPIDocument.serve(.module, on: routes.open)
            credits.addRoutes(user: routes.user, internalGroup: routes.internal)
            StoreSettingsController(store: storeSettings, apple: apple, google: google).addRoutes(to: routes.admin)
            SubscriptionsAdminController(db: runtime.db, plans: PlanStore(logger: runtime.logger), events: StoreEventStore(logger: runtime.logger))
                .addRoutes(to: routes.admin)
            let grants = SupportGrants(
                db: runtime.db,
                ledger: ledger,
                subscriptions: SubscriptionStore(logger: runtime.logger),
                plans: PlanStore(logger: runtime.logger),
                logger: runtime.logger
            )
            SupportCreditsController(db: runtime.db, ledger: ledger, grants: grants, clock: runtime.clock).addRoutes(to: routes.admin)
            SupportPremiumController(grants: grants, clock: runtime.clock).addRoutes(to: routes.admin)
            PlansController(db: runtime.db, plans: PlanStore(logger: runtime.logger)).addRoutes(to: routes.user)
            subscriptions.addRoutes(user: routes.user, internalGroup: routes.internal)
            let notifications = StoreNotificationHandling(
                db: runtime.db,
                subscriptions: SubscriptionStore(logger: runtime.logger),
                logger: runtime.logger
            )
            AppleNotificationsController(
                notifications: notifications,
                apple: apple,
                clock: runtime.clock,
                logger: runtime.logger
            ).addRoutes(to: routes.open)
            GoogleNotificationsController(
                db: runtime.db,
                subscriptions: SubscriptionStore(logger: runtime.logger),
                notifications: notifications,
                google: google,
                client: googleClient,
                pushToken: env.optional("GOOGLE_PUBSUB_TOKEN"),
                clock: runtime.clock,
                logger: runtime.logger
            ).addRoutes(to: routes.open)
            let access = AccessStore(logger: runtime.logger)
            ContentController(
                status: status,
                access: access,
                reads: reads,
                admission: DeviceAdmission(reads: reads, store: access, db: runtime.db, logger: runtime.logger),
                // #48 several logging writes in flight (each its own transaction): one kept the
                // check bound by two commit round trips, not by the cores; a further one only for
                // enough waiting rows, as each transaction costs the database on its own.
                decisions: GroupCommit(
                    inFlight: env.int("ACCESS_LOG_WRITES_IN_FLIGHT", default: 4),
                    extraWriteAt: env.int("ACCESS_LOG_EXTRA_WRITE_AT", default: 16)
                ) { [db = runtime.db] in
                    try await access.log($0, db: db)
                },
                clock: runtime.clock,
                logger: runtime.logger
            ).addRoutes(to: routes.user, logging: routes.userLogging)
        }
    }
}
