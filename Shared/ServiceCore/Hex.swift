import Crypto
import Foundation

private let hexDigits = Array("0123456789abcdef".utf8)

extension Sequence where Element == UInt8 {
    /// Lower-case hex, two digits per byte. `String(format: "%02x")` per byte went through
    /// CoreFoundation's formatter and was the largest cost of a cached tenant check (perf, ads).
    public var hexEncoded: String {
        var out: [UInt8] = []
        out.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension UUID {
    /// Parses the 8-4-4-4-12 hex form (either case), as `UUID(uuidString:)` does. That one goes
    /// through `sscanf`, about 1 % of a cached read's CPU in the tenant check (perf, offline).
    public init?(hexString text: String) {
        var text = text
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let valid = text.withUTF8 { chars in
            withUnsafeMutableBytes(of: &uuid) { bytes -> Bool in
                guard chars.count == 36 else { return false }
                var index = 0
                var position = 0
                while position < 36 {
                    if position == 8 || position == 13 || position == 18 || position == 23 {
                        guard chars[position] == UInt8(ascii: "-") else { return false }
                        position += 1
                        continue
                    }
                    guard let high = Self.nibble(chars[position]), let low = Self.nibble(chars[position + 1]) else { return false }
                    bytes[index] = high << 4 | low
                    index += 1
                    position += 2
                }
                return true
            }
        }
        guard valid else { return nil }
        self.init(uuid: uuid)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension String {
    /// SHA-256 of the UTF-8 bytes, hashed where they lie: `SHA256.hash(data: Data(s.utf8))`
    /// first copies them into a `Data` (1 % of a cached read, for the token and the API key).
    /// Every string the services hash goes through this one.
    public var sha256: SHA256.Digest {
        var text = self
        return text.withUTF8 { bytes in
            var hasher = SHA256()
            hasher.update(bufferPointer: UnsafeRawBufferPointer(bytes))
            return hasher.finalize()
        }
    }
}
