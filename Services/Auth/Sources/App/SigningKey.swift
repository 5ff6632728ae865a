import AuthDomain
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
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        {
            return key
        }
        let key = Curve25519.Signing.PrivateKey()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(key.rawRepresentation.base64EncodedString().utf8).write(to: file, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        return key
    }
}

/// Public keys published in the JWKS beside the signing key (`AUTH_JWKS_EXTRA_KEYS`: base64 of
/// raw Ed25519 public keys, comma-separated). Rotation without logging anyone out:
/// 1. publish the next key (`admin signing-key generate` prints both halves) and wait for the
///    services' JWKS caches (`JWKS_CACHE_SECONDS`, 300 s) to hold it;
/// 2. sign with it (`AUTH_SIGNING_KEY` = the new seed) and publish the old public key instead:
///    tokens signed before the switch stay valid, and auth replicas still on the old key during
///    the rolling update sign tokens every service accepts;
/// 3. after the access-token lifetime (7 days), stop publishing the old key.
enum PublishedKeys {
    static func load(config: ServiceConfig) throws -> [Curve25519.Signing.PublicKey] {
        guard let list = config.environment.optional("AUTH_JWKS_EXTRA_KEYS") else { return [] }
        return try list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.map { encoded in
            guard let raw = Data(base64Encoded: encoded), let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) else {
                throw ConfigurationError("AUTH_JWKS_EXTRA_KEYS: '\(encoded.prefix(12))…' is not base64 of a 32-byte Ed25519 public key")
            }
            return key
        }
    }
}
