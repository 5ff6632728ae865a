import ArgumentParser
import Foundation
import OfflineDomain
import ServiceKit

/// `offline-service [serve | migrate | admin ...]`.
public struct OfflineCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "offline-service",
        abstract: "Content packs, sync, the offline queue, conflicts and places (port 3003)",
        subcommands: [ServeCommand<OfflineService>.self, MigrateCommand<OfflineService>.self, Admin.self],
        defaultSubcommand: ServeCommand<OfflineService>.self
    )
    public init() {}

    struct Admin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Operator commands",
            subcommands: [PeriodicQueriesCommand<OfflineService>.self, SeedDemo.self, BenchDownload.self, SyncSecret.self, SyncUpstreamCommand.self]
        )
    }

    /// The secret a tenant's game server checks `X-Signature` with (derived from
    /// `SYNC_SIGNING_KEY`; nothing stored).
    struct SyncSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "sync-secret", abstract: "Print the sync signing secret of an app")
        @Option(name: .customLong("app-id")) var appID: String
        @Flag(help: "Rotate first: the next secret signs every call from now on (give it to the game server)") var rotate = false
        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try OfflineService.makeRuntime()
            let env = runtime.config.environment
            let rotate = self.rotate
            let signer = SyncSignature(key: env.string("SYNC_SIGNING_KEY", default: "local-sync-signing-key"))
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let store = UpstreamStore(db: db, logger: runtime.logger)
                let version =
                    rotate
                    ? try await store.rotateSecret(app: app, defaultRoutes: try SyncUpstream.parse(env.optional("SYNC_UPSTREAMS")))
                    : try await store.find(app: app)?.secretVersion ?? 1
                print(signer.secret(app: app, version: version))
            }
        }
    }

    /// The same as `PUT /admin/sync-upstream`: the app's own action type → URL mapping.
    struct SyncUpstreamCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sync-upstream",
            abstract: "Set an app's upstream URLs (JSON object of action type to URL, * for the rest)"
        )
        @Option(name: .customLong("app-id")) var appID: String
        @Option(help: #"e.g. {"*":"https://game.example.com/sync"}"#) var routes: String
        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let parsed: [String: String]
            do {
                parsed = try SyncUpstream.parse(routes)
                try SyncUpstream.validate(parsed)
            } catch let e as AppError { throw ValidationError(e.message) } catch {
                throw ValidationError("--routes must be a JSON object of action type to URL")
            }
            let runtime = try OfflineService.makeRuntime()
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let version = try await UpstreamStore(db: db, logger: runtime.logger).set(app: app, routes: parsed)
                print("upstreams of \(app.lowercasedString) stored (version \(version))")
            }
        }
    }

    /// Publishes the geography quiz's demo catalogue and a place-based quiz at each capital
    /// (idempotent: unchanged items keep their version).
    struct SeedDemo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "seed-demo", abstract: "Publish the demo geography catalogue for an app")
        @Option(name: .customLong("app-id")) var appID: String
        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try OfflineService.makeRuntime()
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let catalog = CatalogStore(logger: runtime.logger)
                var total = 0
                for category in DemoCatalogue.categories() {
                    let items = try category.items.map {
                        ($0.0, String(decoding: try JSONSerialization.data(withJSONObject: $0.1, options: [.sortedKeys]), as: UTF8.self))
                    }
                    let (n, _) = try await db.withTransaction(logger: runtime.logger) { conn in
                        try await catalog.upsertCategory(app: app, id: category.id, name: category.name, description: "", on: conn)
                        return try await catalog.applyBatch(app: app, category: category.id, upserts: items, deletes: [], on: conn)
                    }
                    total += n
                }
                for c in DemoCatalogue.countries {
                    let metadata = #"{"country_code":"\#(c.code)","flag":"\#(c.flag)","questions":5}"#
                    let place = LocationStore.LocationContent(
                        id: "around-" + c.code.lowercased(),
                        contentType: "quiz",
                        title: "Autour de \(c.capital)",
                        metadata: metadata,
                        latitude: c.lat,
                        longitude: c.lon,
                        active: true,
                        availableUntil: nil
                    )
                    try await db.withConnection { try await LocationStore(logger: runtime.logger).insertPlaceIfAbsent(app: app, place, on: $0) }
                }
                print("demo catalogue: \(total) item(s) published, \(DemoCatalogue.countries.count) places")
            }
        }
    }

    /// For `make bench`: a download job of `--items` items run by the real worker code, timed
    /// against a plain SELECT of the same rows, in one process on the same database.
    struct BenchDownload: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "bench-download", abstract: "Time a download job against a plain SELECT")
        @Option var items: Int = 1000
        func run() async throws {
            let runtime = try OfflineService.makeRuntime()
            let n = items
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let logger = runtime.logger
                let app = UUID()
                let catalog = CatalogStore(logger: logger)
                let filler = String(repeating: "geography ", count: 150)
                let rows = (0..<n).map { i in
                    (
                        String(format: "bench-%05d", i),
                        #"{"question":"Capital #\#(i)?","answer":\#(i % 4),"notes":"\#(i % 10 == 0 ? filler + filler + filler + filler + filler + filler + filler + filler : filler)"}"#
                    )
                }
                try await db.withTransaction(logger: logger) { conn in
                    try await catalog.upsertCategory(app: app, id: "bench", name: "bench", description: "", on: conn)
                    _ = try await catalog.applyBatch(app: app, category: "bench", upserts: rows, deletes: [], on: conn)
                }
                let clock = ContinuousClock()
                let fixtures = BenchFixtures(db: db, logger: logger)
                let deps = DownloadJob.Deps(
                    db: db,
                    downloads: DownloadStore(logger: logger),
                    copies: CopyStore(logger: logger),
                    profiles: ProfileStore(logger: logger),
                    clock: SystemClock(),
                    logger: logger
                )
                // One sample of each is at the mercy of whatever else the 2 cores do that
                // moment: five of each, alternated, a new user's job each time; medians.
                var selects: [Duration] = []
                var jobs: [Duration] = []
                var bytes = 0
                for _ in 0..<5 {
                    let user = UUID()
                    let job = UUID()
                    try await db.withTransaction(logger: logger) { conn in
                        try await DownloadStore(logger: logger).create(
                            id: job,
                            app: app,
                            user: user,
                            items: rows.map { ("bench", $0.0) },
                            categories: ["bench"],
                            estimatedBytes: 0,
                            now: Date(),
                            on: conn
                        )
                    }
                    let selectStart = clock.now
                    bytes = try await fixtures.readCategory(app: app, category: "bench")
                    selects.append(clock.now - selectStart)
                    let jobStart = clock.now
                    try await DownloadJob.run(job, deps)
                    jobs.append(clock.now - jobStart)
                    try await fixtures.deleteJob(job)
                }
                let select = selects.sorted()[selects.count / 2]
                let elapsed = jobs.sorted()[jobs.count / 2]
                func secs(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
                print(
                    String(
                        format: "download_job_items=%d job_s=%.3f job_items_per_s=%.0f select_s=%.4f select_rows_per_s=%.0f bytes=%d (medians of 5)",
                        n,
                        secs(elapsed),
                        Double(n) / secs(elapsed),
                        secs(select),
                        Double(n) / secs(select),
                        bytes
                    )
                )
                try await fixtures.deleteCatalogue(app: app)
            }
        }
    }
}
