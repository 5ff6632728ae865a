import Foundation

/// base64url without padding (RFC 7515 §2). Byte by byte: it is on every request's token
/// (Foundation's `replacingOccurrences` showed in the refresh path's profile).
public enum Base64URL {
    public static func encode(_ data: some DataProtocol) -> String {
        var bytes = Array(Data(data).base64EncodedData())
        var end = bytes.count
        while end > 0, bytes[end - 1] == UInt8(ascii: "=") { end -= 1 }
        for i in 0..<end {
            switch bytes[i] {
            case UInt8(ascii: "+"): bytes[i] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): bytes[i] = UInt8(ascii: "_")
            default: break
            }
        }
        return String(decoding: bytes[0..<end], as: UTF8.self)
    }

    public static func decode(_ s: some StringProtocol) -> Data? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count + 3)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "-"): bytes.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): bytes.append(UInt8(ascii: "/"))
            default: bytes.append(b)
            }
        }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(bytes))
    }
}
