import AuthDomain
import Crypto
import Foundation
import ServiceKit

/// The events an app's servers can subscribe to (#33). Only ids and the facts a game server
/// needs: no e-mail, no location.
public enum WebhookEventType: String, Codable, Sendable, CaseIterable {
    case subscriptionActivated = "subscription.activated"
    case subscriptionRenewed = "subscription.renewed"
    case subscriptionGracePeriodStarted = "subscription.grace_period_started"
    case subscriptionExpired = "subscription.expired"
    case subscriptionRefunded = "subscription.refunded"
    case subscriptionCancelled = "subscription.cancelled"
    case creditsEarned = "credits.earned"
    case creditsSpent = "credits.spent"
    case campaignCompleted = "campaign.completed"
    case userCreated = "user.created"
    case userDeleted = "user.deleted"
    case consentChanged = "consent.changed"
    case syncConflictOpened = "sync.conflict_opened"
    case downloadCompleted = "download.completed"
}

/// Standard Webhooks (standardwebhooks.com): what we sign and how, so a receiver verifies us with
/// an off-the-shelf library.
enum WebhookSignature {
    static let secretPrefix = "whsec_"

    /// A new endpoint secret: `whsec_` and the base64 of 32 random bytes.
    static func newSecret() -> String {
        secretPrefix + Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64EncodedString()
    }

    /// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed with the secret's bytes.
    static func sign(secret: String, id: String, timestamp: Int64, body: Data) -> String? {
        guard secret.hasPrefix(secretPrefix), let key = Data(base64Encoded: String(secret.dropFirst(secretPrefix.count))) else { return nil }
        var message = Data("\(id).\(timestamp).".utf8)
        message.append(body)
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
        return "v1," + Data(mac).base64EncodedString()
    }

    /// The `webhook-signature` header: one signature per secret in force (during a rotation's
    /// overlap, the new one and the old one), space-separated.
    static func header(secrets: [String], id: String, timestamp: Int64, body: Data) -> String {
        secrets.compactMap { sign(secret: $0, id: id, timestamp: timestamp, body: body) }.joined(separator: " ")
    }
}

/// An endpoint's settings as the operator sends them, checked.
struct WebhookEndpointRules {
    static let maxEndpointsPerApp = 20
    static let rotationOverlap: TimeInterval = 24 * 3600

    /// `url` must be https (http only when `allowHTTP`, i.e. ENVIRONMENT=local), with a host.
    static func checkedURL(_ raw: String, allowHTTP: Bool) throws -> URL {
        guard raw.utf8.count <= 2048, let url = URL(string: raw), let scheme = url.scheme?.lowercased(),
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil
        else {
            throw AppError.validation("url", "url must be an absolute https URL of at most 2048 characters")
        }
        guard scheme == "https" || (scheme == "http" && allowHTTP) else {
            throw AppError.validation("url", allowHTTP ? "url must be http or https" : "url must be https")
        }
        return url
    }

    /// `events`: known types, or `*` for all; at least one, no repeats.
    static func checkedEvents(_ raw: [String]) throws -> [String] {
        guard !raw.isEmpty, raw.count <= WebhookEventType.allCases.count + 1 else {
            throw AppError.validation("events", "events must name 1 or more event types, or \"*\"")
        }
        for (i, name) in raw.enumerated() where name != "*" && WebhookEventType(rawValue: name) == nil {
            throw AppError.validation(
                "events[\(i)]",
                "unknown event type '\(name.prefix(60))'; known: \(WebhookEventType.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        var seen = Set<String>()
        return raw.filter { seen.insert($0).inserted }
    }

    static func checkedDescription(_ raw: String?) throws -> String {
        let text = raw ?? ""
        guard text.count <= 500 else { throw AppError.validation("description", "description must be at most 500 characters") }
        return text
    }

    static func wants(_ events: [String], _ type: String) -> Bool { events.contains("*") || events.contains(type) }
}

/// Outbound addresses (SSRF): a URL whose host resolves to a private, loopback, link-local,
/// unique-local, multicast or unspecified address is refused. ENVIRONMENT=local allows loopback
/// only (the receivers a developer runs on the machine); a private or link-local address (another
/// host's service, the cloud's metadata endpoint) is refused there too.
enum OutboundAddress {
    static func isLoopback(_ address: String) -> Bool {
        let lower = address.lowercased()
        if lower == "::1" { return true }
        if lower.hasPrefix("::ffff:") { return isLoopback(String(lower.dropFirst(7))) }
        let parts = address.split(separator: ".").compactMap { UInt8($0) }
        return parts.count == 4 && parts[0] == 127
    }

    static func isReachable(_ address: String, allowLoopback: Bool) -> Bool {
        isPublic(address) || (allowLoopback && isLoopback(address))
    }

    static func isPublic(_ address: String) -> Bool {
        if address.contains(":") { return isPublicV6(address) }
        let parts = address.split(separator: ".").compactMap { UInt8($0) }
        guard parts.count == 4 else { return false }
        let (a, b) = (parts[0], parts[1])
        switch a {
        case 0, 10, 127: return false
        case 100 where (64...127).contains(b): return false  // carrier-grade NAT
        case 169 where b == 254: return false  // link-local (cloud metadata)
        case 172 where (16...31).contains(b): return false
        case 192 where b == 168: return false
        case 192 where b == 0 && parts[2] == 0: return false  // IETF protocol assignments
        case 198 where b == 18 || b == 19: return false  // benchmarking
        case 224...255: return false  // multicast, reserved, broadcast
        default: return true
        }
    }

    private static func isPublicV6(_ address: String) -> Bool {
        let lower = address.lowercased()
        if lower == "::" || lower == "::1" { return false }
        if lower.hasPrefix("::ffff:") { return isPublic(String(lower.dropFirst(7))) }
        let first = lower.split(separator: ":", omittingEmptySubsequences: false).first.flatMap { UInt16($0, radix: 16) } ?? 0
        if first & 0xfe00 == 0xfc00 { return false }  // unique local fc00::/7
        if first & 0xffc0 == 0xfe80 { return false }  // link-local fe80::/10
        if first & 0xff00 == 0xff00 { return false }  // multicast
        return true
    }
}

/// When a failed delivery is tried again (Standard Webhooks' schedule): after 5 s, 5 min, 30 min,
/// 2 h, 5 h, 10 h and 10 h, each ±10 %; then it has failed.
enum WebhookRetry {
    static let schedule: [TimeInterval] = [5, 300, 1800, 7200, 18_000, 36_000, 36_000]
    /// An endpoint that has failed every attempt for this long is disabled and the operator told.
    static let disableAfter: TimeInterval = 5 * 86_400

    /// The wait after failed attempt number `attempt` (1-based); nil when it was the last.
    static func delay(afterAttempt attempt: Int, jitter: Double) -> TimeInterval? {
        guard attempt >= 1, attempt <= schedule.count else { return nil }
        return schedule[attempt - 1] * (1 + max(-0.1, min(0.1, jitter)))
    }

    enum Decision: Equatable {
        case delivered
        case retry(after: TimeInterval)
        case failed
        case disableEndpoint
    }

    /// What an answer means: a 2xx ends it; 410 Gone disables the endpoint (the receiver says it
    /// is gone for good); anything else, or no answer, is tried again on the schedule.
    static func decide(status: Int?, attempt: Int, jitter: Double) -> Decision {
        if let status, (200..<300).contains(status) { return .delivered }
        if status == 410 { return .disableEndpoint }
        if let wait = delay(afterAttempt: attempt, jitter: jitter) { return .retry(after: wait) }
        return .failed
    }
}
