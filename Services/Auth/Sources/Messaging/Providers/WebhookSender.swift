import Foundation
import NIOPosix
import ServiceKit

#if canImport(Glibc)
import Glibc
import AuthDomain
#endif

/// Posts one signed event to an endpoint (Standard Webhooks headers), 15 s at most. The host is
/// resolved first and every address it has must be public (or loopback, when `allowLoopback`:
/// ENVIRONMENT=local); the request is then pinned to the address checked, so a DNS answer that
/// changes between the check and the connection (rebinding) cannot reach an internal address.
struct WebhookSender: Sendable {
    let http: CurlHTTPClient
    let allowLoopback: Bool
    static let timeout: Duration = .seconds(15)

    enum Failure: Error, CustomStringConvertible {
        case privateAddress(String)
        case unresolvable(String)
        var description: String {
            switch self {
            case .privateAddress(let host): "refused: \(host) resolves to a private, loopback or link-local address (SSRF)"
            case .unresolvable(let host): "\(host) does not resolve"
            }
        }
    }

    struct Answer: Sendable {
        var status: Int
        var latencyMs: Int
    }

    func send(url: String, eventID: UUID, body: Data, secrets: [String], timestamp: Int64) async throws -> Answer {
        let pinned = try await pin(url)
        let id = eventID.lowercasedString
        let headers = [
            ("Content-Type", "application/json"), ("webhook-id", id), ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", WebhookSignature.header(secrets: secrets, id: id, timestamp: timestamp, body: body)),
            ("User-Agent", "app-backend-webhooks/1"),
        ]
        let started = ContinuousClock.now
        let response = try await http.send(
            HTTPRequest(
                method: "POST",
                url: url,
                headers: headers,
                body: body,
                timeout: Self.timeout,
                connectTimeout: .seconds(5),
                resolve: pinned
            )
        )
        let elapsed = ContinuousClock.now - started
        return Answer(
            status: response.status,
            latencyMs: Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        )
    }

    /// curl `--resolve` entries pinning the URL's host to its checked address. The lookup blocks,
    /// so it runs on NIO's blocking pool: a slow resolver never holds a cooperative thread.
    func pin(_ raw: String) async throws -> [String] {
        guard let url = URL(string: raw), let host = url.host else { throw Failure.unresolvable(raw) }
        let port = url.port ?? (url.scheme == "https" ? 443 : 80)
        let addresses = try await NIOThreadPool.singleton.runIfActive { Self.resolve(host) }
        guard let first = addresses.first else { throw Failure.unresolvable(host) }
        guard addresses.allSatisfy({ OutboundAddress.isReachable($0, allowLoopback: allowLoopback) }) else { throw Failure.privateAddress(host) }
        return ["\(host):\(port):\(first.contains(":") ? "[\(first)]" : first)"]
    }

    /// The host's addresses (a literal address is itself).
    static func resolve(_ host: String) -> [String] {
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(bare, nil, &hints, &result) == 0, let list = result else { return [] }
        defer { freeaddrinfo(list) }
        var out: [String] = []
        var node: UnsafeMutablePointer<addrinfo>? = list
        while let n = node {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(n.pointee.ai_addr, n.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 {
                let text = String(cString: buffer)
                if !out.contains(text) { out.append(text) }
            }
            node = n.pointee.ai_next
        }
        return out
    }
}
