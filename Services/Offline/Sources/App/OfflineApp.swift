import Foundation
import Hummingbird
import NIOCore
import OfflineDomain
import ServiceKit

/// The offline service. Content packs, sync, the offline queue, conflicts and places (port 3003).
public enum OfflineService: ServiceDefinition {
    public static let service = ServiceName.offline

    public static func periodicQueries(_ env: EnvironmentVariables) -> [PeriodicQuery] {
        PeriodicQuery.platform(env) + OfflineMaintenance.periodicQueries(now: Date())
    }

    public static func migrations() throws -> [Migration] {
        try Migration.bundled(in: .module, service: service)
    }

    public static func buildApplication(runtime: ServiceRuntime) async throws -> any ApplicationProtocol {
        try buildApplication(runtime: runtime, appVerifier: runtime.remoteAppVerifier(), tokenVerifier: runtime.remoteTokenVerifier())
    }

    /// The composition root: tenant headers and tokens checked by asking auth, tiers by asking
    /// subscription; downloads and sync run as Postgres-backed jobs.
    public static func buildApplication(
        runtime: ServiceRuntime,
        appVerifier: any AppVerifier,
        tokenVerifier: AccessTokenVerifier
    ) throws -> ServiceApplication {
        let env = runtime.config.environment
        let logger = runtime.logger
        let catalog = CatalogStore(logger: logger)
        let copies = CopyStore(logger: logger)
        let downloads = DownloadStore(logger: logger)
        let profiles = ProfileStore(logger: logger)
        let sync = SyncStore(logger: logger)
        let upstreams = UpstreamStore(db: runtime.db, logger: logger)
        let tenantUpstreams = TenantSettings(topic: "sync_upstreams", bootstrap: [:], feed: runtime.changes, load: upstreams.loadAll)
        var upstream = SyncUpstream(
            routes: try SyncUpstream.parse(env.optional("SYNC_UPSTREAMS")),
            http: runtime.http,
            timeout: .seconds(env.int("SYNC_UPSTREAM_TIMEOUT_SECONDS", default: 10)),
            signer: SyncSignature(key: env.string("SYNC_SIGNING_KEY", default: "local-sync-signing-key")),
            clock: runtime.clock
        )
        upstream.tenants = tenantUpstreams
        // Subscription pushes each user's entitlement here (its outbox); no call on a request.
        let entitlements = PushedEntitlements(runtime: runtime)
        let geocoder = PlaceLookup(
            geocoder: Geocoder(
                baseURL: env.optional("GEOCODER_URL"),
                userAgent: env.string(
                    "GEOCODER_USER_AGENT",
                    default: "app-backend-offline/1.0 (+\(env.string("SUPPORT_EMAIL", default: "support@example.com")))"
                ),
                http: runtime.http
            ),
            store: GeocodeStore(db: runtime.db, logger: logger),
            clock: runtime.clock,
            logger: logger
        )
        let queue = JobQueue(client: runtime.db, queue: DownloadJob.queue, logger: logger, clock: runtime.clock)
        let worker = JobWorker(
            queue: queue,
            handlers: [
                DownloadJob.kind: DownloadJob.handler(
                    .init(db: runtime.db, downloads: downloads, copies: copies, profiles: profiles, clock: runtime.clock, logger: logger)
                ),
                SyncExecuteJob.kind: SyncExecuteJob.handler(
                    .init(db: runtime.db, sync: sync, profiles: profiles, upstream: upstream, clock: runtime.clock, logger: logger)
                ),
            ],
            pollInterval: .milliseconds(runtime.config.jobPollMilliseconds)
        )  // the 15 s lease, renewed while a job runs (#34)
        let locations = LocationStore(logger: logger)
        let nearbyCache = ReadCache<LocationController.NearbyKey, ByteBuffer>(
            name: "nearby_content",
            capacity: env.int("NEARBY_CACHE_ENTRIES", default: 2000),
            ttl: .seconds(env.int("NEARBY_CACHE_SECONDS", default: 300)),
            feed: runtime.changes,
            topics: [LocationStore.locationTopic, LocationStore.placesTopic],
            metrics: runtime.metrics,
            clock: runtime.clock
        )
        let maintenance = OfflineMaintenance(
            db: runtime.db,
            catalog: catalog,
            sync: sync,
            locations: locations,
            clock: runtime.clock,
            interval: .seconds(env.int("OFFLINE_MAINTENANCE_SECONDS", default: 3600)),
            logger: logger
        )
        return try buildServiceApplication(
            runtime: runtime,
            appVerifier: appVerifier,
            tokenVerifier: tokenVerifier,
            services: [worker, maintenance],
            userData: OfflineUserData.sections(logger: logger) + [EntitlementStore(logger: logger).userDataSection],
            timeline: OfflineTimeline.timeline
        ) { routes in
            entitlements.addRoutes(to: routes.internal)
            try OpenAPIDocument.serve(.module, on: routes.open)
            ContentController(
                db: runtime.db,
                catalog: catalog,
                copies: copies,
                downloads: downloads,
                profiles: profiles,
                copy: OfflineCopy(
                    db: runtime.db,
                    catalog: catalog,
                    copies: copies,
                    downloads: downloads,
                    profiles: profiles,
                    sync: sync,
                    logger: logger
                ),
                entitlements: entitlements,
                clock: runtime.clock,
                logger: logger
            ).addRoutes(to: routes.user)
            SyncController(
                db: runtime.db,
                sync: sync,
                flow: OfflineSync(db: runtime.db, sync: sync, upstream: upstream, logger: logger),
                clock: runtime.clock
            ).addRoutes(to: routes.user)
            LocationController(
                db: runtime.db,
                recording: LocationRecording(
                    db: runtime.db,
                    locations: locations,
                    geocoder: geocoder,
                    http: runtime.http,
                    authURL: runtime.config.url(of: .auth),
                    credential: runtime.internalCredential,
                    logger: logger
                ),
                nearbyCache: nearbyCache,
                clock: runtime.clock,
                logger: logger
            )
            .addRoutes(user: routes.user, internalGroup: routes.internal)
            CatalogAdminController(
                db: runtime.db,
                catalog: catalog,
                publishing: CatalogPublishing(db: runtime.db, catalog: catalog, logger: logger),
                locations: locations
            ).addRoutes(to: routes.admin)
            UpstreamAdminController(store: upstreams, upstream: upstream, tenants: tenantUpstreams).addRoutes(to: routes.admin)
        }
    }
}
