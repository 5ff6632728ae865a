import ArgumentParser
import AuthDomain
import Foundation
import ServiceKit

/// `admin operator-keys`: credentials for one app's admin routes, for that app's operators
/// (the platform owner keeps `ADMIN_API_TOKEN`, which acts on every app).
struct OperatorKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "operator-keys",
        abstract: "Operator keys of one application",
        subcommands: [Create.self, List.self, Revoke.self]
    )

    static func appID(_ raw: String) throws -> UUID {
        guard let id = UUID(uuidString: raw) else { throw ValidationError("--app-id must be a UUID") }
        return id
    }

    static var cliOperator: String { "cli:\(ProcessInfo.processInfo.environment["USER"] ?? "unknown")" }

    /// Prints the key once; only its hash is stored.
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Issue an operator key for one application (shown once)")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(help: "Whose key (kept in the audit logs), 1-100 characters") var name: String
        @Flag(help: "Print OPERATOR_KEY= only") var env = false

        func validate() throws {
            guard (1...100).contains(name.count) else { throw ValidationError("--name must be 1-100 characters") }
        }

        func run() async throws {
            let id = try OperatorKeysCommand.appID(appID)
            let runtime = try AuthService.makeRuntime()
            let name = self.name
            let env = self.env
            try await runtime.withDatabase { db in
                try await runtime.migrations.run(on: db, logger: runtime.logger)
                guard
                    let issued = try await OperatorKeyStore(db: db, logger: runtime.logger).create(
                        appID: id,
                        name: name,
                        operator: OperatorKeysCommand.cliOperator
                    )
                else {
                    throw ValidationError("no application \(id)")
                }
                if !env {
                    print("Keep the operator key now: it is stored hashed and cannot be shown again.")
                    print("OPERATOR_KEY_ID=\(issued.id.lowercasedString)")
                }
                print("OPERATOR_KEY=\(issued.key)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "An application's operator keys (id, state, prefix, name)")
        @Option(name: .customLong("app-id")) var appID: String

        func run() async throws {
            let id = try OperatorKeysCommand.appID(appID)
            let runtime = try AuthService.makeRuntime()
            try await runtime.withDatabase { db in
                for k in try await OperatorKeyStore(db: db, logger: runtime.logger).list(appID: id) {
                    print("\(k.id.lowercasedString)  \(k.revokedAt == nil ? "live   " : "revoked")  \(k.keyPrefix)…  \(k.name)")
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke an operator key (other services refuse it within OPERATOR_CACHE_SECONDS)")
        @Option(name: .customLong("app-id")) var appID: String
        @Option(name: .customLong("key-id")) var keyID: String
        @Option(help: "Why (kept in the audit log)") var reason: String

        func run() async throws {
            let app = try OperatorKeysCommand.appID(appID)
            guard let key = UUID(uuidString: keyID) else { throw ValidationError("--key-id must be a UUID") }
            guard !reason.trimmingCharacters(in: .whitespaces).isEmpty, reason.count <= 500 else {
                throw ValidationError("--reason must say why, in at most 500 characters")
            }
            let runtime = try AuthService.makeRuntime()
            let reason = self.reason
            try await runtime.withDatabase { db in
                guard
                    try await OperatorKeyStore(db: db, logger: runtime.logger).revoke(
                        appID: app,
                        keyID: key,
                        reason: reason,
                        operator: OperatorKeysCommand.cliOperator
                    )
                else {
                    throw ValidationError("application \(app) has no live operator key \(key)")
                }
                print("operator key \(key.lowercasedString) revoked")
            }
        }
    }
}
