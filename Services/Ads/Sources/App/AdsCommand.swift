import AdsDomain
import ArgumentParser
import Foundation
import ServiceKit

/// `ads-service [serve | migrate | admin ...]`.
public struct AdsCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "ads-service",
        abstract: "Ads eligibility, rewarded credits, consent, campaigns and revenue (port 3004)",
        subcommands: [ServeCommand<AdsService>.self, MigrateCommand<AdsService>.self, Admin.self],
        defaultSubcommand: ServeCommand<AdsService>.self
    )
    public init() {}

    struct Admin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Operator commands (the same as the admin HTTP routes)",
            subcommands: [PeriodicQueriesCommand<AdsService>.self, SetProvider.self]
        )
    }

    /// Creates or updates an ad network of an app: what `make run` uses for the demo app.
    struct SetProvider: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set-provider", abstract: "Create or update an ad provider")
        @Option(name: .customLong("app-id")) var appID: String
        @Option var name: String
        @Option var priority: Int = 100
        @Option(name: .customLong("rewarded-unit")) var rewardedUnit: String?
        @Option(name: .customLong("interstitial-unit")) var interstitialUnit: String?
        @Option(name: .customLong("ad-duration-seconds")) var duration: Int = 30
        @Option(help: "client or ssv") var verification: String = "client"
        @Flag(name: .customLong("test-mode")) var testMode = false
        @Option(name: .customLong("ecpm-estimate-usd")) var ecpm: Double = 0
        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            guard ["client", "ssv"].contains(verification), (1...600).contains(duration) else {
                throw ValidationError("--verification must be client or ssv, --ad-duration-seconds 1 to 600")
            }
            let provider = AdProvider(
                name: name,
                priority: priority,
                active: true,
                rewardedUnitID: rewardedUnit,
                interstitialUnitID: interstitialUnit,
                bannerUnitID: nil,
                adDurationSeconds: duration,
                verification: verification,
                testMode: testMode,
                ecpmEstimateUSD: ecpm
            )
            let runtime = try AdsService.makeRuntime()
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let saved = try await db.withConnection { try await AdStore(logger: runtime.logger).upsertProvider(app: app, provider, on: $0) }
                print("provider \(saved.name) saved (priority \(saved.priority))")
            }
        }
    }
}
