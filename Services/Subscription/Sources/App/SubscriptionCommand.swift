import ArgumentParser
import Foundation
import ServiceKit
import SubscriptionDomain
import WireTypes

/// `subscription-service [serve | migrate | admin ...]`.
public struct SubscriptionCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "subscription-service",
        abstract: "Plans, store purchases, access rules, credits and store notifications (port 3002)",
        subcommands: [ServeCommand<SubscriptionService>.self, MigrateCommand<SubscriptionService>.self, Admin.self],
        defaultSubcommand: ServeCommand<SubscriptionService>.self
    )
    public init() {}

    struct Admin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Operator commands",
            subcommands: [PeriodicQueriesCommand<SubscriptionService>.self, Plans.self, Content.self, Stores.self]
        )
    }

    struct Plans: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Manage plans",
            subcommands: [SeedDefaults.self, Create.self, Update.self, Deactivate.self]
        )
    }

    /// The seed's monthly and annual plans for an app (idempotent): what `make run` uses.
    struct SeedDefaults: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "seed-defaults", abstract: "Create the seed's two plans for an app")
        @Option(name: .customLong("app-id")) var appID: String
        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try SubscriptionService.makeRuntime()
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let n = try await db.withConnection { try await PlanStore(logger: runtime.logger).seedDefaults(app: app, on: $0) }
                print("created \(n) plan(s)")
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a plan")
        @Option(name: .customLong("app-id")) var appID: String
        @Option var name: String
        @Option(name: .customLong("plan-type"), help: "weekly, monthly or annual") var planType: String
        @Option(name: .customLong("apple-product-id")) var appleProductID: String?
        @Option(name: .customLong("google-product-id")) var googleProductID: String?
        @Option var price: Double
        @Option var currency: String = "EUR"
        @Option(name: .customLong("trial-days")) var trialDays: Int = 0
        @Option(help: "JSON object") var features: String = "{}"
        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            guard ["weekly", "monthly", "annual"].contains(planType) else { throw ValidationError("--plan-type must be weekly, monthly or annual") }
            guard price >= 0, trialDays >= 0, (try? JSONSerialization.jsonObject(with: Data(features.utf8))) is [String: Any] else {
                throw ValidationError("--price and --trial-days must be positive, --features a JSON object")
            }
            let runtime = try SubscriptionService.makeRuntime()
            let (name, type, apple, google, price, currency, trial, features) = (
                name, planType, appleProductID, googleProductID, price, currency, trialDays, features
            )
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let id = try await db.withConnection {
                    try await PlanStore(logger: runtime.logger).create(
                        app: app,
                        name: name,
                        type: type,
                        appleProductID: apple,
                        googleProductID: google,
                        price: price,
                        currency: currency,
                        trialDays: trial,
                        features: features,
                        on: $0
                    )
                }
                print("plan \(id.lowercasedString) created")
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change a plan's name, price, trial or features")
        @Option(name: .customLong("plan-id")) var planID: String
        @Option var name: String?
        @Option var price: Double?
        @Option(name: .customLong("trial-days")) var trialDays: Int?
        @Option(help: "JSON object") var features: String?
        func run() async throws {
            guard let plan = UUID(uuidString: planID) else { throw ValidationError("--plan-id must be a UUID") }
            if let features, !((try? JSONSerialization.jsonObject(with: Data(features.utf8))) is [String: Any]) {
                throw ValidationError("--features must be a JSON object")
            }
            let runtime = try SubscriptionService.makeRuntime()
            let (name, price, trial, features) = (name, price, trialDays, features)
            try await runtime.withDatabase { db in
                let updated = try await db.withConnection {
                    try await PlanStore(logger: runtime.logger).update(
                        plan: plan,
                        name: name,
                        price: price,
                        trialDays: trial,
                        features: features,
                        on: $0
                    )
                }
                guard updated else { throw ValidationError("no plan \(plan)") }
                print("plan \(plan.lowercasedString) updated")
            }
        }
    }

    struct Deactivate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop offering a plan")
        @Option(name: .customLong("plan-id")) var planID: String
        func run() async throws {
            guard let plan = UUID(uuidString: planID) else { throw ValidationError("--plan-id must be a UUID") }
            let runtime = try SubscriptionService.makeRuntime()
            try await runtime.withDatabase { db in
                guard try await db.withConnection({ try await PlanStore(logger: runtime.logger).deactivate(plan: plan, on: $0) }) else {
                    throw ValidationError("no plan \(plan)")
                }
                print("plan \(plan.lowercasedString) deactivated")
            }
        }
    }

    struct Content: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Content access rules", subcommands: [SetRule.self, DeactivateRule.self])
    }

    /// Removes a content rule from use (unknown content is then refused, as any unknown id).
    struct DeactivateRule: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "deactivate", abstract: "Deactivate a content rule")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(name: .customLong("content-id")) var contentID: String
        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try SubscriptionService.makeRuntime()
            let content = contentID
            try await runtime.withDatabase { db in
                let deactivated = try await db.withConnection {
                    try await PlanStore(logger: runtime.logger).deactivateContentRule(app: app, content: content, on: $0)
                }
                guard deactivated else { throw ValidationError("no content \(content) in app \(app)") }
                print("content \(content) deactivated")
            }
        }
    }

    /// Sets a content's access level and, for freemium content, its credit price.
    struct SetRule: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Create or update a content rule")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(name: .customLong("content-id")) var contentID: String
        @Option var level: String
        @Option var cost: Int = 3
        @Option var hours: Int = 24
        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            guard ["free", "premium", "freemium"].contains(level) else { throw ValidationError("--level must be free, premium or freemium") }
            guard cost > 0, hours > 0 else { throw ValidationError("--cost and --hours must be positive") }
            let runtime = try SubscriptionService.makeRuntime()
            let (content, level, cost, hours) = (contentID, level, cost, hours)
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                try await db.withConnection {
                    try await PlanStore(logger: runtime.logger).setContentRule(
                        app: app,
                        content: content,
                        level: level,
                        cost: cost,
                        hours: hours,
                        on: $0
                    )
                }
                print("content \(content): \(level)")
            }
        }
    }

    /// The same as `PUT/GET/DELETE /admin/stores`: the replicas use a change within a second.
    struct Stores: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "An app's App Store / Google Play credentials",
            subcommands: [SetStore.self, ShowStores.self, RemoveStore.self]
        )
    }

    struct SetStore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set one store's settings from a JSON file (the body of PUT /admin/stores/{store})"
        )
        @Option(name: .customLong("app-id")) var appID: String
        @Option(help: "apple or google") var store: String
        @Option(help: "The settings' JSON file (secrets included: sealed when stored)") var file: String

        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            guard let data = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
            let runtime = try SubscriptionService.makeRuntime()
            let settings = try StoreSettingsStore(
                db: runtime.db,
                box: SecretBox(key: SecretBox.dataKey(named: "SUBSCRIPTION_DATA_KEY", environment: runtime.config.environment)),
                logger: runtime.logger
            )
            let store = self.store
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let version: Int64
                do {
                    switch store {
                    case "apple":
                        let s = try JSONDecoder().decode(AppleIAPConfig.Settings.self, from: data)
                        _ = try AppleIAPConfig(s)
                        version = try await settings.setApple(app: app, s)
                    case "google":
                        let s = try JSONDecoder().decode(GooglePlayConfig.Settings.self, from: data)
                        _ = try GooglePlayConfig(s)
                        version = try await settings.setGoogle(app: app, s)
                    default: throw ValidationError("--store must be apple or google")
                    }
                } catch let e as AppError { throw ValidationError(e.message) } catch let e as DecodingError {
                    throw ValidationError("\(file) is not valid \(store) settings: \(e)")
                }
                print("\(store) settings of \(app.lowercasedString) stored (version \(version))")
            }
        }
    }

    struct ShowStores: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "An app's stored store settings (secrets are never shown)")
        @Option(name: .customLong("app-id")) var appID: String

        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try SubscriptionService.makeRuntime()
            let settings = try StoreSettingsStore(
                db: runtime.db,
                box: SecretBox(key: SecretBox.dataKey(named: "SUBSCRIPTION_DATA_KEY", environment: runtime.config.environment)),
                logger: runtime.logger
            )
            try await runtime.withDatabase { _ in
                for s in try await settings.shown(app: app) {
                    print(
                        "\(s.store) version=\(s.version) secret=\(s.hasSecret ? "set" : "none") \(String(decoding: try JSON.encoder.encode(s.settings), as: UTF8.self))"
                    )
                }
            }
        }
    }

    struct RemoveStore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract: "Remove one store's settings (its purchases are refused as not configured)"
        )
        @Option(name: .customLong("app-id")) var appID: String
        @Option(help: "apple or google") var store: String

        func run() async throws {
            guard let app = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            guard store == "apple" || store == "google" else { throw ValidationError("--store must be apple or google") }
            let runtime = try SubscriptionService.makeRuntime()
            let settings = try StoreSettingsStore(
                db: runtime.db,
                box: SecretBox(key: SecretBox.dataKey(named: "SUBSCRIPTION_DATA_KEY", environment: runtime.config.environment)),
                logger: runtime.logger
            )
            let store = self.store
            try await runtime.withDatabase { _ in
                guard try await settings.remove(app: app, store: store) else { throw ValidationError("\(app) has no stored \(store) settings") }
                print("\(store) settings of \(app.lowercasedString) removed")
            }
        }
    }
}
