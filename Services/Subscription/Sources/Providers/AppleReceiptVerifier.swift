import Foundation
import Logging
import ServiceKit
import SubscriptionDomain
import WireTypes

/// The legacy App Store receipt check (`verifyReceipt`): production first, the sandbox on
/// 21007, back to production on 21008; retried on the statuses Apple marks as temporary.
public struct AppleReceiptVerifier: Sendable {
    let http: CurlHTTPClient
    let productionURL: String
    let sandboxURL: String
    let logger: Logger

    public init(http: CurlHTTPClient, productionURL: String, sandboxURL: String, logger: Logger) {
        self.http = http
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.logger = logger
    }

    public struct ReceiptTransaction: Decodable, Sendable {
        var productID: String
        var transactionID: String
        var originalTransactionID: String
        var purchaseDateMS: String
        var expiresDateMS: String?
        var isTrialPeriod: String?
        var cancellationDateMS: String?
        enum CodingKeys: String, CodingKey {
            case productID = "product_id"
            case transactionID = "transaction_id"
            case originalTransactionID = "original_transaction_id"
            case purchaseDateMS = "purchase_date_ms"
            case expiresDateMS = "expires_date_ms"
            case isTrialPeriod = "is_trial_period"
            case cancellationDateMS = "cancellation_date_ms"
        }
    }

    struct Response: Decodable {
        var status: Int
        var environment: String?
        var isRetryable: Bool?
        var latestReceiptInfo: [ReceiptTransaction]?
        var receipt: Inner?
        struct Inner: Decodable {
            var inApp: [ReceiptTransaction]?
            var bundleID: String?
            enum CodingKeys: String, CodingKey {
                case inApp = "in_app"
                case bundleID = "bundle_id"
            }
        }
        enum CodingKeys: String, CodingKey {
            case status, environment
            case isRetryable = "is-retryable"
            case latestReceiptInfo = "latest_receipt_info"
            case receipt
        }
    }

    /// `status`: Apple refused the receipt. `unavailable`: Apple could not answer (a status it
    /// documents as "try again"), which says nothing about the receipt. `unreachable`: no answer.
    public enum Failure: Error, Equatable {
        case status(Int)
        case unavailable(Int)
        case unreachable
    }

    /// What the receipt holds, as Apple answered.
    public struct Verified: Sendable {
        public var transactions: [ReceiptTransaction]
        public var environment: String?
        /// `receipt.bundle_id`: the app the receipt was issued to.
        public var bundleID: String?
    }

    /// Apple's "try again" statuses: 21002 (a temporary issue reading the data), 21005 (the
    /// receipt server is unavailable), 21009 (internal data access error) and 21100–21199
    /// (internal data access errors); `is-retryable` says so for the others.
    static func isTemporary(_ status: Int, retryable: Bool?) -> Bool {
        [21002, 21005, 21009].contains(status) || (21100...21199).contains(status) || retryable == true
    }

    /// Returns the receipt's transactions (latest first as Apple sends them), environment and bundle.
    public func verify(receiptData: String, sharedSecret: String?) async throws -> Verified {
        var url = productionURL
        var hops = 0
        var attempts = 0
        while true {
            var body: [String: JSONValue] = ["receipt-data": .string(receiptData), "exclude-old-transactions": true]
            if let sharedSecret { body["password"] = .string(sharedSecret) }
            let response: HTTPResponseData
            do {
                response = try await http.send(try HTTPRequest.json("POST", url, body: body), retries: 0)
            } catch {
                attempts += 1
                if attempts <= 2 {
                    try await Task.sleep(for: .milliseconds(200 * attempts))
                    continue
                }
                throw Failure.unreachable
            }
            guard response.isSuccess, let r = try? JSONDecoder().decode(Response.self, from: response.body) else {
                attempts += 1
                if attempts <= 2 {
                    try await Task.sleep(for: .milliseconds(200 * attempts))
                    continue
                }
                throw Failure.unreachable
            }
            switch r.status {
            case 0:
                return Verified(
                    transactions: r.latestReceiptInfo ?? r.receipt?.inApp ?? [],
                    environment: r.environment,
                    bundleID: r.receipt?.bundleID
                )
            case 21007 where hops < 2:
                url = sandboxURL
                hops += 1
            case 21008 where hops < 2:
                url = productionURL
                hops += 1
            case let s where Self.isTemporary(s, retryable: r.isRetryable):
                attempts += 1
                // 21002 also means malformed data: still a refusal once the retries are spent.
                guard attempts <= 2 else { throw s == 21002 ? Failure.status(s) : Failure.unavailable(s) }
                logger.info("verifyReceipt temporary status, retrying", metadata: ["status": "\(s)"])
                try await Task.sleep(for: .milliseconds(200 * attempts))
            default:
                throw Failure.status(r.status)
            }
        }
    }
}
