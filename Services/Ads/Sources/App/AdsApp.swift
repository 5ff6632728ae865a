import AdsDomain
import Foundation
import Hummingbird
import ServiceKit

/// The ads service. Ads eligibility, rewarded credits, consent, campaigns and revenue (port 3004).
public enum AdsService: ServiceDefinition {
    public static let service = ServiceName.ads

    public static func periodicQueries(_ env: EnvironmentVariables) -> [PeriodicQuery] {
        let now = Date()
        // The refresh finds what changed in the last interval (and an hour of overlap).
        return PeriodicQuery.platform(env)
            + [
                PeriodicQuery("daily stats: days touched", StatsStore.touchedDaysQuery(since: now.addingTimeInterval(-2 * 3600))),
                PeriodicQuery(
                    "ad detail purge",
                    StatsStore.purgeDetailQuery(
                        before: now.addingTimeInterval(-StatsStore.detailRetention),
                        batch: StatsStore.purgeBatch
                    )
                ),
                PeriodicQuery("campaign reminders", CampaignStore.dueRemindersQuery(now: now, batch: CampaignReminders.batch)),
            ]
    }

    public static func migrations() throws -> [Migration] {
        try Migration.bundled(in: .module, service: service)
    }

    public static func buildApplication(runtime: ServiceRuntime) async throws -> any ApplicationProtocol {
        try buildApplication(runtime: runtime, appVerifier: runtime.remoteAppVerifier(), tokenVerifier: runtime.remoteTokenVerifier())
    }

    /// The composition root: tenant headers and access tokens are checked by asking auth;
    /// premium status by asking subscription; credits go to subscription through the outbox.
    public static func buildApplication(
        runtime: ServiceRuntime,
        appVerifier: any AppVerifier,
        tokenVerifier: AccessTokenVerifier
    ) throws -> ServiceApplication {
        let env = runtime.config.environment
        let logger = runtime.logger
        let ads = AdStore(logger: logger)
        let rewards = RewardStore(logger: logger)
        let campaigns = CampaignStore(logger: logger)
        let stats = StatsStore(logger: logger)
        let rewarding = AdRewarding(ads: ads, rewards: rewards, campaigns: campaigns)
        // Seed 21c: the reward is tried at once with a short timeout, then left to the outbox.
        let delivery = RewardDelivery(
            worker: runtime.outboxWorker,
            rewards: rewards,
            db: runtime.db,
            timeout: .milliseconds(env.int("REWARD_DELIVERY_TIMEOUT_MS", default: 1500))
        )
        // Subscription pushes each user's entitlement here (its outbox); no call on a request.
        let entitlements = PushedEntitlements(runtime: runtime)
        let verifier = AdMobVerifier(
            keysURL: env.string("ADMOB_VERIFIER_KEYS_URL", default: "https://www.gstatic.com/admob/reward/verifier-keys.json"),
            http: runtime.http
        )
        let refresher = StatsRefresher(
            stats: stats,
            db: runtime.db,
            clock: runtime.clock,
            interval: .seconds(env.int("AD_STATS_REFRESH_SECONDS", default: 3600))
        )
        let reminders = CampaignReminders(
            campaigns: campaigns,
            db: runtime.db,
            clock: runtime.clock,
            interval: .seconds(env.int("CAMPAIGN_REMINDER_SECONDS", default: 30)),
            logger: logger
        )
        return try buildServiceApplication(
            runtime: runtime,
            appVerifier: appVerifier,
            tokenVerifier: tokenVerifier,
            services: [refresher, reminders],
            userData: AdsUserData.sections(logger: logger) + [EntitlementStore(logger: logger).userDataSection],
            timeline: AdsTimeline.timeline
        ) { routes in
            entitlements.addRoutes(to: routes.internal)
            try OpenAPIDocument.serve(.module, on: routes.open)
            AdsController(
                db: runtime.db,
                ads: ads,
                consents: ConsentStore(logger: logger),
                rewarding: rewarding,
                serving: AdServing(db: runtime.db, ads: ads, consents: ConsentStore(logger: logger), logger: logger),
                delivery: delivery,
                entitlements: entitlements,
                eligibility: ReadCache(
                    name: "ad_eligibility",
                    capacity: env.int("ELIGIBILITY_CACHE_ENTRIES", default: 50_000),
                    ttl: .seconds(env.int("ELIGIBILITY_CACHE_SECONDS", default: 300)),
                    feed: runtime.changes,
                    topics: ["ad_limits", "ad_consent", "entitlement"],
                    metrics: runtime.metrics,
                    clock: runtime.clock
                ),
                clock: runtime.clock,
                logger: logger
            ).addRoutes(to: routes.user)
            ConsentController(
                db: runtime.db,
                consents: ConsentStore(logger: logger),
                recording: ConsentRecording(db: runtime.db, consents: ConsentStore(logger: logger), logger: logger),
                outbox: runtime.outboxWorker,
                clock: runtime.clock
            )
            .addRoutes(user: routes.user, internalGroup: routes.internal)
            SSVController(
                verifier: verifier,
                confirming: SSVConfirmation(db: runtime.db, ads: ads, rewarding: rewarding, logger: logger),
                delivery: delivery,
                clock: runtime.clock,
                logger: logger
            ).addRoutes(to: routes.open)
            CampaignsController(
                db: runtime.db,
                campaigns: campaigns,
                delivery: delivery,
                participation: CampaignParticipation(db: runtime.db, campaigns: campaigns, rewards: rewards, logger: logger),
                clock: runtime.clock
            ).addRoutes(to: routes.user)
            AdminController(
                db: runtime.db,
                ads: ads,
                campaigns: campaigns,
                administration: AdsAdministration(db: runtime.db, ads: ads, campaigns: campaigns, logger: logger),
                clock: runtime.clock
            ).addRoutes(to: routes.admin)
            AnalyticsController(
                db: runtime.db,
                stats: stats,
                ads: ads,
                campaigns: campaigns,
                refresher: refresher,
                clock: runtime.clock,
                logger: logger
            ).addRoutes(
                to: routes.admin
            )
        }
    }
}
