import Crypto
import Foundation
import ServiceCore

/// The opaque tokens auth hands out (refresh tokens, email links): 256 random bits, kept only
/// as their SHA-256.
public enum OpaqueToken {
    /// 256 random bits, base64url.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) })
    }

    public static func hash(_ token: String) -> String {
        token.sha256.hexEncoded
    }
}
