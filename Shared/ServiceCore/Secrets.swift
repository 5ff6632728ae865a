import Foundation

public enum OperatorKeys {
    static let prefix = "opk_"

    /// `opk_` + 256 random bits, base64url: distinct at a glance from an app's `ak_` key, and
    /// enough entropy that a SHA-256 of it is a safe stored form.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        return prefix + Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) })
    }

    public static func hash(_ key: String) -> String { key.sha256.hexEncoded }

    public static func looksLikeKey(_ text: String) -> Bool { text.hasPrefix(prefix) && text.utf8.count <= 128 }

    /// The audience of a console member's token (a player's names their app).
    public static let consoleAudience = "console"

    /// Whether a verified token's claims are a console member's.
    public static func isConsoleToken(_ payload: Data) -> Bool {
        struct Audience: Decodable { var aud: String? }
        return (try? JSONDecoder().decode(Audience.self, from: payload))?.aud == consoleAudience
    }

    /// A console member's access token (a JWS): three base64url parts, bounded.
    public static func looksLikeMemberToken(_ text: String) -> Bool {
        text.hasPrefix("eyJ") && text.utf8.count <= 2_048 && text.utf8.lazy.filter({ $0 == UInt8(ascii: ".") }).count == 2
    }
}

public enum ConstantTime {
    /// Compares two secrets without leaking where they differ: both are hashed first so the
    /// loop length does not depend on the secret either.
    public static func equals(_ a: String, _ b: String) -> Bool {
        let ha = Array(a.sha256)
        let hb = Array(b.sha256)
        var diff: UInt8 = 0
        for i in 0..<ha.count { diff |= ha[i] ^ hb[i] }
        return diff == 0
    }
}
