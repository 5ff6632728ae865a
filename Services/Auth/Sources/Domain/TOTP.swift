import Crypto
import Foundation

/// RFC 6238 time-based one-time passwords (HMAC-SHA1, 30 s steps, 6 digits: what every
/// authenticator app reads from an `otpauth://` link), the console's second factor (#47).
public enum TOTP {
    public static let period: Int64 = 30

    public static func step(at date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) / period }

    /// The code of `step` (RFC 4226 §5.3 dynamic truncation).
    public static func code(secret: Data, step: Int64, digits: Int = 6) -> String {
        var counter = UInt64(bitPattern: step).bigEndian
        let message = withUnsafeBytes(of: &counter) { Data($0) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: message, using: SymmetricKey(data: secret)))
        let offset = Int(mac[mac.count - 1] & 0x0f)
        let binary =
            (UInt32(mac[offset] & 0x7f) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8) | UInt32(mac[offset + 3])
        var modulo: UInt32 = 1
        for _ in 0..<digits { modulo *= 10 }
        let value = String(binary % modulo)
        return String(repeating: "0", count: digits - value.count) + value
    }

    /// The step `code` belongs to when it is the code of now, the step before or the one after
    /// (a phone's clock a little off) and newer than `lastUsed` (a code works once); nil
    /// otherwise.
    public static func accept(_ code: String, secret: Data, at date: Date, lastUsed: Int64?) -> Int64? {
        let trimmed = code.filter { !$0.isWhitespace }
        guard trimmed.count == 6, trimmed.allSatisfy(\.isASCII), trimmed.allSatisfy(\.isNumber) else { return nil }
        let now = step(at: date)
        for s in [now, now - 1, now + 1] where s > (lastUsed ?? Int64.min) {
            if constantTimeEquals(Self.code(secret: secret, step: s), trimmed) { return s }
        }
        return nil
    }

    /// 160 random bits (RFC 4226's recommended length).
    public static func newSecret() -> Data {
        var rng = SystemRandomNumberGenerator()
        return Data((0..<20).map { _ in UInt8.random(in: 0...255, using: &rng) })
    }

    /// The link an authenticator app reads (Key Uri Format): issuer, account, secret.
    public static func provisioningURI(secret: Data, account: String, issuer: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: ":/?#[]@!$&'()*+,;=")
        let label = "\(issuer):\(account)".addingPercentEncoding(withAllowedCharacters: allowed) ?? account
        let iss = issuer.addingPercentEncoding(withAllowedCharacters: allowed) ?? issuer
        return "otpauth://totp/\(label)?secret=\(base32(secret))&issuer=\(iss)&algorithm=SHA1&digits=6&period=30"
    }

    /// RFC 4648 base32 without padding (what authenticator apps take).
    public static func base32(_ data: Data) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var out = ""
        var buffer: UInt32 = 0
        var bits = 0
        for byte in data {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return out
    }

    /// RFC 4648 base32 read back (case-insensitive, padding ignored); nil for another letter
    /// or a text longer than any secret.
    public static func base32Decode(_ text: String) -> Data? {
        guard text.utf8.count <= 64 else { return nil }
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
        var out = Data()
        var buffer: UInt32 = 0
        var bits = 0
        for c in text.uppercased().utf8 where c != UInt8(ascii: "=") {
            guard let v = alphabet.firstIndex(of: c) else { return nil }
            buffer = (buffer << 5) | UInt32(v)
            bits += 5
            if bits >= 8 {
                out.append(UInt8((buffer >> UInt32(bits - 8)) & 0xff))
                bits -= 8
            }
        }
        return out
    }

    package static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<x.count { diff |= x[i] ^ y[i] }
        return diff == 0
    }
}
