import ArgumentParser
import HummingbirdBcrypt
import Foundation
import WireTypes
import ServiceKit

/// `auth-service [serve | migrate | admin ...]`.
public struct AuthCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "auth-service",
        abstract: "Accounts, sign-in and applications (port 3001)",
        subcommands: [ServeCommand<AuthService>.self, MigrateCommand<AuthService>.self, Admin.self],
        defaultSubcommand: ServeCommand<AuthService>.self)
    public init() {}

    struct Admin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Operator commands", subcommands: [Apps.self, Users.self, BcryptTime.self])
    }

    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Manage users", subcommands: [Suspend.self, Unsuspend.self])
    }

    /// Suspends a user (seed 14a): sign-in, refresh and /me answer 403 with the reason; every
    /// session ends at once.
    struct Suspend: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Suspend a user")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(name: .customLong("user-id")) var userID: String
        @Option var reason: String = "Terms of service violation"

        func run() async throws {
            guard let app = UUID(uuidString: appID), let user = UUID(uuidString: userID) else { throw ValidationError("ids must be UUIDs") }
            try await AuthCommand.setStatus(app: app, user: user, status: .suspended, reason: reason)
        }
    }

    struct Unsuspend: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Lift a suspension (the user becomes free; subscription restores premium on its next event)")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(name: .customLong("user-id")) var userID: String

        func run() async throws {
            guard let app = UUID(uuidString: appID), let user = UUID(uuidString: userID) else { throw ValidationError("ids must be UUIDs") }
            try await AuthCommand.setStatus(app: app, user: user, status: .free, reason: nil)
        }
    }

    static func setStatus(app: UUID, user: UUID, status: UserStatus, reason: String?) async throws {
        let runtime = try AuthService.makeRuntime()
        try await runtime.withDatabase { db in
            let updated = try await db.withTransaction(logger: runtime.logger) { conn -> Bool in
                guard try await UserStore(logger: runtime.logger).setStatus(user, appID: app, status: status, reason: reason, on: conn) != nil else {
                    return false
                }
                // Every service refuses the user's tokens within seconds (403 with the reason).
                let facts = FactPublisher(logger: runtime.logger)
                if status == .suspended {
                    try await RefreshTokenStore(logger: runtime.logger).revokeAll(userID: user, reason: "suspended", on: conn)
                    _ = try await facts.endSessions(app: app, user: user, .suspended(reason: reason ?? "Terms of service violation"), on: conn)
                } else {
                    _ = try await facts.endSessions(app: app, user: user, .reinstated, on: conn)
                }
                try await AuditLog(logger: runtime.logger).record(.init(userID: user, appID: app, action: "admin_set_status",
                                                                         result: status.rawValue, details: reason.map { ["reason": .string($0)] } ?? [:]), on: conn)
                return true
            }
            guard updated else { throw ValidationError("no user \(user) in app \(app)") }
            print("user \(user.lowercasedString) is now \(status.rawValue)")
        }
    }

    /// For capacity planning and `make bench`: the cost of one bcrypt-12 check on this machine.
    struct BcryptTime: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "bcrypt-time", abstract: "Time one bcrypt cost-12 verification")
        @Option var rounds = 8

        func run() async throws {
            let hash = Bcrypt.hash("Tr1cky-Geography-42", cost: 12)
            _ = Bcrypt.verify("Tr1cky-Geography-42", hash: hash)
            let start = ContinuousClock.now
            for _ in 0..<rounds { _ = Bcrypt.verify("Tr1cky-Geography-42", hash: hash) }
            let each = (ContinuousClock.now - start) / rounds
            let ms = Double(each.components.seconds) * 1000 + Double(each.components.attoseconds) / 1e15
            print(String(format: "bcrypt_verify_ms=%.2f", ms))
        }
    }

    struct Apps: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Manage applications (tenants)",
                                                        subcommands: [Create.self, RotateKey.self, SetProviders.self])
    }

    /// Prints the app id and the API key once; only the key's hash is stored.
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register an application")
        @Option(help: "The application's name") var name: String
        @Flag(help: "Print APP_ID=/API_KEY= lines only") var env = false

        func run() async throws {
            let runtime = try AuthService.makeRuntime()
            let name = self.name, env = self.env
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let issued = try await PostgresApplicationRepository(db: db, logger: runtime.logger).create(name: name)
                AuthCommand.printKey(issued, name: name, envOnly: env)
            }
        }
    }

    struct RotateKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rotate-key", abstract: "Issue a new API key (the old one stops working)")
        @Option(name: .customLong("app-id")) var appID: String
        @Flag var env = false

        func run() async throws {
            guard let id = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try AuthService.makeRuntime()
            let env = self.env
            try await runtime.withDatabase { db in
                guard let issued = try await PostgresApplicationRepository(db: db, logger: runtime.logger).rotateKey(appID: id) else {
                    throw ValidationError("no application \(id)")
                }
                AuthCommand.printKey(issued, name: nil, envOnly: env)
            }
        }
    }

    struct SetProviders: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set-providers", abstract: "Set Google client ids / Apple bundle ids")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(name: .customLong("google-client-id"), help: "Repeatable") var googleClientIDs: [String] = []
        @Option(name: .customLong("apple-bundle-id"), help: "Repeatable") var appleBundleIDs: [String] = []

        func run() async throws {
            guard let id = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try AuthService.makeRuntime()
            let google = googleClientIDs.isEmpty ? nil : googleClientIDs
            let apple = appleBundleIDs.isEmpty ? nil : appleBundleIDs
            try await runtime.withDatabase { db in
                guard let app = try await PostgresApplicationRepository(db: db, logger: runtime.logger)
                    .setProviderSettings(appID: id, googleClientIDs: google, appleBundleIDs: apple) else {
                    throw ValidationError("no application \(id)")
                }
                print("google_client_ids=\(app.googleClientIDs) apple_bundle_ids=\(app.appleBundleIDs)")
            }
        }
    }

    static func printKey(_ issued: IssuedAPIKey, name: String?, envOnly: Bool) {
        let id = issued.appID.lowercasedString
        if !envOnly {
            if let name { print("Application \"\(name)\" created.") }
            print("Keep the API key now: it is stored hashed and cannot be shown again.")
        }
        print("APP_ID=\(id)")
        print("API_KEY=\(issued.apiKey)")
    }
}
