import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The proxies whose `X-Forwarded-For` is believed (`TRUSTED_PROXIES`, comma-separated CIDRs;
/// default loopback, where the local gateway runs). A client that reaches a service directly
/// cannot choose its address, and so cannot reset a per-address budget with a new header.
public struct TrustedProxies: Sendable, Equatable {
    struct Network: Sendable, Equatable {
        var bytes: [UInt8]
        var prefix: Int
        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var left = prefix
            for i in 0..<bytes.count where left > 0 {
                let bits = min(8, left)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if address[i] & mask != bytes[i] & mask { return false }
                left -= bits
            }
            return true
        }
    }

    let networks: [Network]

    public static let loopback = TrustedProxies(networks: [
        Network(bytes: [127, 0, 0, 0], prefix: 8), Network(bytes: Array(repeating: 0, count: 15) + [1], prefix: 128),
    ])

    init(networks: [Network]) { self.networks = networks }

    /// Parses `10.0.0.0/8, 127.0.0.1, ::1/128`; nil when one entry is not a CIDR.
    public init?(cidrs: String) {
        var out: [Network] = []
        for raw in cidrs.split(separator: ",") {
            let entry = raw.trimmingCharacters(in: .whitespaces)
            if entry.isEmpty { continue }
            let parts = entry.split(separator: "/", maxSplits: 1)
            guard let bytes = Self.parse(String(parts[0])) else { return nil }
            let prefix = parts.count == 2 ? Int(parts[1]) : bytes.count * 8
            guard let prefix, (0...(bytes.count * 8)).contains(prefix) else { return nil }
            out.append(Network(bytes: bytes, prefix: prefix))
        }
        networks = out
    }

    /// The bytes of an IPv4 or IPv6 address (an IPv4-mapped IPv6 address as IPv4).
    static func parse(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            let b = withUnsafeBytes(of: &v6) { Array($0) }
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF { return Array(b[12...]) }
            return b
        }
        return nil
    }

    public func contains(_ address: String) -> Bool {
        guard let bytes = Self.parse(address) else { return false }
        return networks.contains { $0.contains(bytes) }
    }

    /// The client's address. `peer` is the socket's IP address (nil for a Unix socket or an
    /// in-process call: local by construction, so trusted like loopback). Only a trusted peer's
    /// `X-Forwarded-For` is read, from the right, skipping the trusted proxies it lists.
    public func clientAddress(peer: String?, forwardedFor: String?, realIP: String?) -> String {
        if let peer, !contains(peer) { return peer }
        if let forwardedFor {
            let hops = forwardedFor.split(separator: ",").map { $0.trimmingWhitespace }.filter { !$0.isEmpty }
            if let client = hops.reversed().first(where: { !contains($0) }) ?? hops.first { return client }
        }
        if let realIP, !realIP.isEmpty { return realIP }
        return peer ?? "unknown"
    }
}
