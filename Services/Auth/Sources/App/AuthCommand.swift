import ArgumentParser
import AuthDomain
import Crypto
import Foundation
import HummingbirdBcrypt
import ServiceKit
import WireTypes

/// `auth-service [serve | migrate | admin ...]`.
public struct AuthCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "auth-service",
        abstract: "Accounts, sign-in and applications (port 3001)",
        subcommands: [ServeCommand<AuthService>.self, MigrateCommand<AuthService>.self, Admin.self],
        defaultSubcommand: ServeCommand<AuthService>.self
    )
    public init() {}

    struct Admin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Operator commands",
            subcommands: [
                PeriodicQueriesCommand<AuthService>.self, Apps.self, OperatorKeysCommand.self, Users.self, BcryptTime.self, SigningKey.self,
                DataKey.self,
                Reseal.self,
            ]
        )
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
        static let configuration = CommandConfiguration(
            abstract: "Lift a suspension (the user becomes free; subscription restores premium on its next event)"
        )
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
                try await AuditLog(logger: runtime.logger).record(
                    .init(
                        userID: user,
                        appID: app,
                        action: "admin_set_status",
                        result: status.rawValue,
                        details: reason.map { ["reason": .string($0)] } ?? [:]
                    ),
                    on: conn
                )
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
        static let configuration = CommandConfiguration(
            abstract: "Manage applications (tenants)",
            subcommands: [
                Create.self, List.self, Show.self, Disable.self, Enable.self, RotateKey.self, EndPreviousKey.self,
                SetProviders.self, SetEmail.self,
            ]
        )
    }

    /// Prints the app id and the API key once; only the key's hash is stored.
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register an application")
        @Option(help: "The application's name") var name: String
        @Flag(help: "Print APP_ID=/API_KEY= lines only") var env = false

        func run() async throws {
            let runtime = try AuthService.makeRuntime()
            let name = self.name
            let env = self.env
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let issued = try await PostgresApplicationRepository(db: db, logger: runtime.logger).create(name: name)
                AuthCommand.printKey(issued, name: name, envOnly: env)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the applications (id, state, key prefix, name)")
        func run() async throws {
            let runtime = try AuthService.makeRuntime()
            try await runtime.withDatabase { db in
                for app in try await PostgresApplicationRepository(db: db, logger: runtime.logger).list() {
                    print("\(app.id.lowercasedString)  \(app.active ? "active  " : "disabled")  \(app.apiKeyPrefix)…  \(app.name)")
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "One application's settings")
        @Option(name: .customLong("app-id")) var appID: String
        func run() async throws {
            guard let id = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try AuthService.makeRuntime()
            try await runtime.withDatabase { db in
                guard let app = try await PostgresApplicationRepository(db: db, logger: runtime.logger).find(id: id) else {
                    throw ValidationError("no application \(id)")
                }
                print(
                    """
                    app_id=\(app.id.lowercasedString)
                    name=\(app.name)
                    active=\(app.active)
                    api_key_prefix=\(app.apiKeyPrefix)
                    google_client_ids=\(app.googleClientIDs.joined(separator: ","))
                    apple_bundle_ids=\(app.appleBundleIDs.joined(separator: ","))
                    """
                )
            }
        }
    }

    /// Support: a disabled app's requests are answered 403 `app_disabled` (auth at once, the
    /// other services within TENANT_CACHE_SECONDS); its data stays. Audited with the reason.
    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an application (its requests get 403 app_disabled)")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(help: "Why (kept in the audit log)") var reason: String
        func run() async throws { try await AuthCommand.setActive(appID, false, reason) }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled application again")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(help: "Why (kept in the audit log)") var reason: String
        func run() async throws { try await AuthCommand.setActive(appID, true, reason) }
    }

    static func setActive(_ appID: String, _ active: Bool, _ reason: String) async throws {
        guard let id = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
        guard !reason.trimmingCharacters(in: .whitespaces).isEmpty, reason.count <= 500 else {
            throw ValidationError("--reason must say why, in at most 500 characters")
        }
        let runtime = try AuthService.makeRuntime()
        try await runtime.withDatabase { db in
            guard
                let app = try await PostgresApplicationRepository(db: db, logger: runtime.logger)
                    .setActive(appID: id, active: active, reason: reason, operator: "cli:\(ProcessInfo.processInfo.environment["USER"] ?? "unknown")")
            else {
                throw ValidationError("no application \(id)")
            }
            print("\(app.id.lowercasedString) \(app.active ? "enabled" : "disabled")")
        }
    }

    /// Installed copies of the app carry the key: the previous one stays valid for
    /// `--keep-previous-days` (30 by default, the time for users to update); 0 refuses it at once.
    struct RotateKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-key",
            abstract: "Issue a new API key; the previous one stays valid for --keep-previous-days"
        )
        @Option(name: .customLong("app-id")) var appID: String
        @Option(name: .customLong("keep-previous-days"), help: "Days the previous key is still accepted (0: refused now, for a leaked key)")
        var keepPreviousDays: Int = 30
        @Flag var env = false

        func validate() throws {
            guard (0...365).contains(keepPreviousDays) else { throw ValidationError("--keep-previous-days must be 0...365") }
        }

        func run() async throws {
            guard let id = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try AuthService.makeRuntime()
            let env = self.env
            let keep = Duration.seconds(keepPreviousDays * 86_400)
            try await runtime.withDatabase { db in
                guard let issued = try await PostgresApplicationRepository(db: db, logger: runtime.logger).rotateKey(appID: id, keepPreviousFor: keep)
                else {
                    throw ValidationError("no application \(id)")
                }
                AuthCommand.printKey(issued, name: nil, envOnly: env)
                if !env {
                    print(
                        issued.previousValidUntil.map { "The previous key is accepted until \($0) (admin apps end-previous-key ends it sooner)." }
                            ?? "The previous key is refused from now on."
                    )
                }
            }
        }
    }

    struct EndPreviousKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "end-previous-key", abstract: "Refuse the key before the current one now")
        @Option(name: .customLong("app-id")) var appID: String

        func run() async throws {
            guard let id = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            let runtime = try AuthService.makeRuntime()
            try await runtime.withDatabase { db in
                guard try await PostgresApplicationRepository(db: db, logger: runtime.logger).endPreviousKey(appID: id) else {
                    throw ValidationError("no application \(id)")
                }
                print("the previous API key of \(id.lowercasedString) is refused from now on (other services within TENANT_CACHE_SECONDS)")
            }
        }
    }

    /// A new access-token signing key, both halves: the seed for `AUTH_SIGNING_KEY`, the public
    /// key for `AUTH_JWKS_EXTRA_KEYS` (docs/OPERATIONS.md "Rotating keys").
    struct SigningKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "signing-key", abstract: "Signing keys", subcommands: [Generate.self])
        struct Generate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print a new Ed25519 signing key and its public key")
            func run() throws {
                let key = Curve25519.Signing.PrivateKey()
                print("AUTH_SIGNING_KEY=\(key.rawRepresentation.base64EncodedString())")
                print("PUBLIC_KEY=\(key.publicKey.rawRepresentation.base64EncodedString())")
                print("KID=\(AccessTokenSigner.kid(of: key.publicKey))")
            }
        }
    }

    /// `AUTH_DATA_KEY`: a new random one (`--generate`), or the one derived from the current
    /// `AUTH_SIGNING_KEY`, to pin before the first signing-key rotation of a deployment that
    /// ran without it (its sealed secrets stay readable).
    struct DataKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "data-key",
            abstract: "Print AUTH_DATA_KEY (derived from the signing key, or --generate)"
        )
        @Flag var generate = false
        func run() throws {
            if generate {
                print("AUTH_DATA_KEY=\(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.base64EncodedString())")
                return
            }
            let runtime = try AuthService.makeRuntime()
            guard runtime.config.environment.optional("AUTH_SIGNING_KEY") != nil else {
                throw ValidationError("AUTH_SIGNING_KEY is not set: there is no derived key to pin (use --generate)")
            }
            let key = try AuthService.dataKey(env: EnvironmentVariables([:]), signingKey: SigningKeyLoader.load(config: runtime.config))
            print("AUTH_DATA_KEY=\(key.withUnsafeBytes { Data($0) }.base64EncodedString())")
        }
    }

    /// Step 2 of a data-key change (docs/OPERATIONS.md "Rotating keys"): every secret sealed with
    /// `AUTH_DATA_KEY_PREVIOUS` sealed again with `AUTH_DATA_KEY`. Safe to run again.
    struct Reseal: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Seal auth's secrets at rest again with AUTH_DATA_KEY (the old key in AUTH_DATA_KEY_PREVIOUS)"
        )
        func run() async throws {
            let runtime = try AuthService.makeRuntime()
            let env = runtime.config.environment
            guard let previous = try AuthService.previousDataKey(env: env) else {
                throw ValidationError("AUTH_DATA_KEY_PREVIOUS is not set: nothing is sealed with another key")
            }
            let box = SecretBox(key: try AuthService.dataKey(env: env, signingKey: SigningKeyLoader.load(config: runtime.config)), previous: previous)
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                let counts = try await DataKeyResealing(db: db, box: box, logger: runtime.logger).run()
                for (table, n) in counts.sorted(by: { $0.key < $1.key }) { print("\(table): \(n) sealed again") }
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
                guard
                    let app = try await PostgresApplicationRepository(db: db, logger: runtime.logger)
                        .setProviderSettings(appID: id, googleClientIDs: google, appleBundleIDs: apple)
                else {
                    throw ValidationError("no application \(id)")
                }
                print("google_client_ids=\(app.googleClientIDs) apple_bundle_ids=\(app.appleBundleIDs)")
            }
        }
    }

    /// The same as `PUT /auth/v1/admin/email-settings`: every replica uses it within a second.
    struct SetEmail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-email",
            abstract: "Set an app's emails (name, sender, support, link base, language, wording) from a JSON file"
        )
        @Option(name: .customLong("app-id")) var appID: String
        @Option(help: "The settings' JSON file (the body of PUT /auth/v1/admin/email-settings)") var file: String

        func run() async throws {
            guard let id = UUID(uuidString: appID) else { throw ValidationError("--app-id must be a UUID") }
            guard let data = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
            let settings: AppEmailSettings
            do {
                settings = try JSONDecoder().decode(AppEmailSettings.self, from: data)
                try settings.validate()
            } catch let e as AppError { throw ValidationError(e.message) } catch { throw ValidationError("\(file): \(error)") }
            let runtime = try AuthService.makeRuntime()
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                guard let version = try await EmailSettingsStore(db: db, logger: runtime.logger).set(app: id, settings) else {
                    throw ValidationError("no application \(id)")
                }
                print("email settings of \(id.lowercasedString) stored (version \(version))")
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
