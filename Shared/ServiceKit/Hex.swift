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
