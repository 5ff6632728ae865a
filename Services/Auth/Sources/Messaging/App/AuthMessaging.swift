import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import ServiceKit
import ServiceLifecycle
import WireTypes

/// What auth's messaging needs told once it disabled an endpoint that failed for 5 days: the
/// core sends the app's operator a mail (messaging holds no mailer or templates of its own).
package protocol DisabledEndpointNotice: Sendable {
    func endpointDisabled(app: UUID, url: String) async
}

/// Auth's messaging (#50): pushes (#30), webhooks (#33) and live streams (#46), composed here
/// from the runtime. Auth's composition root builds one, mounts its routes and runs its
/// services; in a transaction the core talks to it through `MessagingOutbox` only.
package struct AuthMessaging: Sendable {
    /// The workers of the replica running jobs (the push queue and the webhooks' sender).
    package let services: [any Service]
    /// What runs on every replica (the live streams' listener).
    package let everyReplica: [any Service]
    /// Its part of a user's data (GDPR export and erasure).
    package let userData: [UserDataSection]
    /// The server with the live WebSocket's upgrade on the HTTP/1 pipeline.
    package let server: HTTPServerBuilder
    private let messenger: PushMessenger
    private let webhookStore: WebhookStore
    private let webhookSender: WebhookSender
    private let liveAuthorizer: LiveAuthorizer
    private let local: Bool
    private let clock: any WallClock

    package init(
        runtime: ServiceRuntime,
        box: SecretBox,
        apps: any AppVerifier,
        tokens: AccessTokenVerifier,
        notice: any DisabledEndpointNotice
    ) {
        let env = runtime.config.environment
        let messenger = Self.messenger(runtime: runtime, box: box)
        let pushWorker = JobWorker(
            queue: JobQueue(client: runtime.db, queue: PushMessenger.queue, logger: runtime.logger, clock: runtime.clock),
            handlers: [PushMessenger.sendJob: { job in try await messenger.run(job) }],
            pollInterval: .milliseconds(runtime.config.jobPollMilliseconds)
        )
        let webhookStore = WebhookStore(db: runtime.db, box: box, logger: runtime.logger)
        let webhookSender = WebhookSender(http: runtime.http, allowLoopback: runtime.config.isLocal)
        let webhooks = WebhookDelivery(db: runtime.db, store: webhookStore, sender: webhookSender, notice: notice, logger: runtime.logger)
        // #46: the app's live streams, on every replica (not only the one running workers).
        let liveHub = LiveHub(
            db: runtime.db,
            registry: runtime.metrics,
            logger: runtime.logger,
            heartbeat: .seconds(max(1, env.int("LIVE_HEARTBEAT_SECONDS", default: 20))),
            maxPerUser: max(1, env.int("LIVE_MAX_STREAMS_PER_USER", default: 10))
        )
        let liveAuthorizer = LiveAuthorizer(
            apps: apps,
            tokens: tokens,
            sessions: runtime.sessions,
            store: LiveStore(db: runtime.db, logger: runtime.logger)
        )
        let liveSocket = LiveSocket(
            path: "\(runtime.config.service.prefix)/live/socket",
            authorizer: liveAuthorizer,
            hub: liveHub,
            logger: runtime.logger
        )
        services = [pushWorker, webhooks]
        everyReplica = [liveHub]
        userData = [PushStore.exportSection(logger: runtime.logger), LiveStore.exportSection(logger: runtime.logger)]
        server = LiveUpgradeChannel.builder(liveSocket)
        self.messenger = messenger
        self.webhookStore = webhookStore
        self.webhookSender = webhookSender
        self.liveAuthorizer = liveAuthorizer
        local = runtime.config.isLocal
        clock = runtime.clock
    }

    /// Its routes: devices and notifications, webhook endpoints, live tickets and streams.
    package func addRoutes(_ routes: ServiceRoutes) {
        let push = PushController(messenger: messenger)
        push.addUserRoutes(to: routes.user)
        push.addAdminRoutes(to: routes.admin)
        push.addInternalRoutes(to: routes.internal)
        let hooks = WebhookController(
            store: webhookStore,
            endpoints: WebhookEndpoints(db: webhookStore.db, store: webhookStore, logger: webhookStore.logger),
            sender: webhookSender,
            local: local,
            clock: clock
        )
        hooks.addAdminRoutes(to: routes.admin)
        hooks.addInternalRoutes(to: routes.internal)
        LiveController(authorizer: liveAuthorizer).addRoutes(open: routes.open, user: routes.user)
    }

    /// The rows it keeps a limited time (delivered pushes, webhook attempts, live events).
    package static func retention(_ env: EnvironmentVariables) -> [RetentionRule] {
        PushStore.retention(env) + WebhookStore.retention(env) + LiveStore.retention(env)
    }

    /// The messenger (#30) and its providers; tests build their own on the same runtime.
    static func messenger(runtime: ServiceRuntime, box: SecretBox) -> PushMessenger {
        let env = runtime.config.environment
        let store = PushStore(db: runtime.db, box: box, logger: runtime.logger)
        return PushMessenger(
            store: store,
            apns: APNsClient(
                url: env.optional("APNS_URL"),
                caBundle: env.optional("APNS_CA_BUNDLE"),
                store: PushTokenStore(db: runtime.db, logger: runtime.logger),
                clock: runtime.clock
            ),
            fcm: FCMClient(
                http: runtime.http,
                baseURL: env.string("FCM_URL", default: "https://fcm.googleapis.com"),
                tokenURL: env.string("GOOGLE_OAUTH_TOKEN_URL", default: "https://oauth2.googleapis.com/token"),
                clock: runtime.clock
            ),
            credentials: TenantSettings(topic: "push_credentials", bootstrap: [:], feed: runtime.changes, load: store.loadCredentials),
            options: TenantSettings(topic: "push_settings", bootstrap: [:], feed: runtime.changes, load: store.loadOptions),
            registry: runtime.metrics,
            logger: runtime.logger
        )
    }
}
