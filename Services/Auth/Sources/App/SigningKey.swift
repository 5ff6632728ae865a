import Crypto
import Foundation
import ServiceKit

/// Auth's access-token signing key: from `AUTH_SIGNING_KEY` (base64 of the 32-byte Ed25519
/// seed) in production, else generated once and kept under the data folder so the local
/// stack keeps its tokens valid across restarts.
enum SigningKeyLoader {
    static func load(config: ServiceConfig) throws -> Curve25519.Signing.PrivateKey {
        if let encoded = config.environment.optional("AUTH_SIGNING_KEY") {
            guard let raw = Data(base64Encoded: encoded) else {
                throw ConfigurationError("AUTH_SIGNING_KEY is not valid base64")
            }
            return try Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        }
        let directory = URL(fileURLWithPath: config.dataDirectory, isDirectory: true)
        let file = directory.appendingPathComponent("auth-signing-key")
        if let existing = try? Data(contentsOf: file), let raw = Data(base64Encoded: existing),
           let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw) {
            return key
        }
        let key = Curve25519.Signing.PrivateKey()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(key.rawRepresentation.base64EncodedString().utf8).write(to: file, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        return key
    }
}
