import Foundation
import Synchronization
import WireTypes

/// Whether a user is premium now, as subscription says (ads and offline ask it).
public protocol EntitlementSource: Sendable {
    func entitlement(app: UUID, user: UUID) async throws -> Entitlement
}

/// Asks subscription's `GET /internal/users/{id}/entitlement`, and keeps the answer for a
/// short time (the seed allows status caching up to 5 minutes) so a hot path does not call
/// subscription on every request.
public final class RemoteEntitlements: EntitlementSource {
    let baseURL: String
    let http: CurlHTTPClient
    let credential: InternalCredential
    let ttl: Duration
    let timeout: Duration
    private let cache = Mutex([String: (Entitlement, ContinuousClock.Instant)]())

    public init(baseURL: String, http: CurlHTTPClient, credential: InternalCredential, ttl: Duration = .seconds(60),
                timeout: Duration = .seconds(2)) {
        self.baseURL = baseURL
        self.http = http
        self.credential = credential
        self.ttl = ttl
        self.timeout = timeout
    }

    public func entitlement(app: UUID, user: UUID) async throws -> Entitlement {
        let key = "\(app):\(user)"
        let now = ContinuousClock.now
        if let (value, at) = cache.withLock({ $0[key] }), now - at < ttl { return value }
        let url = "\(baseURL)/internal/users/\(user.lowercasedString)/entitlement?app_id=\(app.lowercasedString)"
        let response = try await http.send(HTTPRequest(method: "GET", url: url, headers: credential.headers, timeout: timeout))
        guard response.isSuccess else { throw HTTPClientError.transport(code: response.status, message: "entitlement: HTTP \(response.status)") }
        let value = try response.decode(Entitlement.self)
        cache.withLock { c in
            if c.count > 50_000 { c.removeAll() }
            c[key] = (value, now)
        }
        return value
    }

    /// Forget one user's answer (after a change this process caused or heard of).
    public func invalidate(app: UUID, user: UUID) { _ = cache.withLock { $0.removeValue(forKey: "\(app):\(user)") } }
}
