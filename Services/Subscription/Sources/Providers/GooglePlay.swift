import Crypto
import Foundation
import Logging
import ServiceKit
import SubscriptionDomain
import Synchronization
import WireTypes
import _CryptoExtras

/// An app's Google Play settings (`GOOGLE_PLAY_APPS`, JSON keyed by app id).
public struct GooglePlayConfig: Sendable {
    public var packageName: String
    public var serviceAccountEmail: String
    public var privateKey: _RSA.Signing.PrivateKey

    /// An app's Google Play settings as the operator gives them (a `GOOGLE_PLAY_APPS` entry, or
    /// the body of `PUT /admin/stores/google`).
    public struct Settings: Codable, Sendable, Equatable {
        public var packageName: String
        public var serviceAccountEmail: String
        public var privateKeyPEM: String
        enum CodingKeys: String, CodingKey {
            case packageName = "package_name"
            case serviceAccountEmail = "service_account_email"
            case privateKeyPEM = "private_key_pem"
        }
    }

    public static func parse(_ json: String?) throws -> [UUID: GooglePlayConfig] {
        guard let json, !json.isEmpty else { return [:] }
        var out: [UUID: GooglePlayConfig] = [:]
        for (app, r) in try JSONDecoder().decode([String: Settings].self, from: Data(json.utf8)) {
            guard let id = UUID(uuidString: app) else { throw ConfigurationError("GOOGLE_PLAY_APPS: \(app) is not an app id") }
            do { out[id] = try GooglePlayConfig(r) } catch let e as AppError {
                throw ConfigurationError("GOOGLE_PLAY_APPS: bad entry for \(app): \(e.message)")
            }
        }
        return out
    }

    /// Checked as a request body is: each bad field named.
    public init(_ r: Settings) throws {
        guard !r.packageName.isEmpty, r.packageName.count <= 255 else {
            throw AppError.validation("package_name", "package_name is required (at most 255 characters)")
        }
        guard r.serviceAccountEmail.contains("@"), r.serviceAccountEmail.count <= 320 else {
            throw AppError.validation("service_account_email", "service_account_email must be the service account's email")
        }
        guard let key = try? _RSA.Signing.PrivateKey(pemRepresentation: r.privateKeyPEM) else {
            throw AppError.validation("private_key_pem", "private_key_pem must be the service account's RSA private key (PEM)")
        }
        self.init(packageName: r.packageName, serviceAccountEmail: r.serviceAccountEmail, privateKey: key)
    }

    public init(packageName: String, serviceAccountEmail: String, privateKey: _RSA.Signing.PrivateKey) {
        self.packageName = packageName
        self.serviceAccountEmail = serviceAccountEmail
        self.privateKey = privateKey
    }
}

/// `purchases.subscriptionsv2` as Google returns it (the fields used here).
public struct GoogleSubscriptionPurchase: Decodable, Sendable {
    public var subscriptionState: String
    public var acknowledgementState: String?
    public var latestOrderId: String?
    public var startTime: String?
    public var lineItems: [LineItem]?
    public struct LineItem: Decodable, Sendable {
        public var productId: String
        public var expiryTime: String?
    }

    static func date(_ s: String?) -> Date? {
        guard let s else { return nil }
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.date(from: s) ?? ISO8601DateFormatter().date(from: s)
    }
    var expiry: Date? { lineItems?.compactMap { Self.date($0.expiryTime) }.max() }
    var productID: String? { lineItems?.first?.productId }
}

public struct GooglePlayError: Error, CustomStringConvertible {
    public var status: Int
    public var description: String
}

/// The Android Publisher API with a service account: an OAuth access token from a signed JWT
/// (RS256, androidpublisher scope), cached until shortly before it expires.
public final class GooglePlayClient: Sendable {
    let http: CurlHTTPClient
    let apiBase: String
    let tokenURL: String
    private let tokens = Mutex([String: (String, Date)]())

    public init(http: CurlHTTPClient, apiBase: String, tokenURL: String) {
        self.http = http
        self.apiBase = apiBase
        self.tokenURL = tokenURL
    }

    func accessToken(_ config: GooglePlayConfig, now: Date) async throws -> String {
        if let (token, expires) = tokens.withLock({ $0[config.serviceAccountEmail] }), expires > now.addingTimeInterval(60) { return token }
        let t: (token: String, expires: Date)
        do {
            t = try await GoogleServiceAccount.grant(
                http: http,
                tokenURL: tokenURL,
                clientEmail: config.serviceAccountEmail,
                scope: "https://www.googleapis.com/auth/androidpublisher",
                privateKey: config.privateKey,
                now: now
            )
        } catch let e as GoogleServiceAccount.TokenError {
            throw GooglePlayError(status: e.status, description: e.description)
        }
        tokens.withLock { $0[config.serviceAccountEmail] = (t.token, t.expires) }
        return t.token
    }

    static func escape(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    public func subscription(token purchaseToken: String, config: GooglePlayConfig, now: Date) async throws -> GoogleSubscriptionPurchase {
        let url =
            "\(apiBase)/androidpublisher/v3/applications/\(Self.escape(config.packageName))/purchases/subscriptionsv2/tokens/\(Self.escape(purchaseToken))"
        let response = try await http.send(
            HTTPRequest(url: url, headers: [("Authorization", "Bearer \(try await accessToken(config, now: now))")]),
            retries: 2
        )
        guard response.isSuccess else {
            throw GooglePlayError(status: response.status, description: "subscriptionsv2.get answered \(response.status)")
        }
        return try JSONDecoder().decode(GoogleSubscriptionPurchase.self, from: response.body)
    }

    public func acknowledge(token purchaseToken: String, productID: String, config: GooglePlayConfig, now: Date) async throws {
        let url =
            "\(apiBase)/androidpublisher/v3/applications/\(Self.escape(config.packageName))/purchases/subscriptions/\(Self.escape(productID))/tokens/\(Self.escape(purchaseToken)):acknowledge"
        let response = try await http.send(
            HTTPRequest(
                method: "POST",
                url: url,
                headers: [
                    ("Authorization", "Bearer \(try await accessToken(config, now: now))"),
                    ("Content-Type", "application/json"),
                ],
                body: Data("{}".utf8)
            )
        )
        guard response.isSuccess else { throw GooglePlayError(status: response.status, description: "acknowledge answered \(response.status)") }
    }
}

/// How a Google subscription state maps onto ours: a CANCELED subscription keeps access until
/// its expiry (it only stops renewing); ON_HOLD, PAUSED and EXPIRED give none.
public enum GoogleStateMapping {
    public static func status(_ state: String, expiry: Date?, now: Date) -> (status: SubscriptionStatus, autoRenew: Bool)? {
        let live = (expiry ?? .distantPast) > now
        switch state {
        case "SUBSCRIPTION_STATE_ACTIVE": return (live ? .active : .expired, true)
        case "SUBSCRIPTION_STATE_CANCELED": return (live ? .active : .expired, false)
        case "SUBSCRIPTION_STATE_IN_GRACE_PERIOD": return (.gracePeriod, true)
        case "SUBSCRIPTION_STATE_ON_HOLD", "SUBSCRIPTION_STATE_PAUSED", "SUBSCRIPTION_STATE_EXPIRED": return (.expired, false)
        default: return nil  // PENDING and unknown states grant nothing yet
        }
    }
    /// Google's grace period when the API gives no later expiry (seed: 3 days).
    public static let fallbackGraceDays = 3
}
