import Foundation
import Logging
import ServiceKit
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
            case productID = "product_id", transactionID = "transaction_id", originalTransactionID = "original_transaction_id"
            case purchaseDateMS = "purchase_date_ms", expiresDateMS = "expires_date_ms", isTrialPeriod = "is_trial_period"
            case cancellationDateMS = "cancellation_date_ms"
        }
    }

    struct Response: Decodable {
        var status: Int
        var environment: String?
        var isRetryable: Bool?
        var latestReceiptInfo: [ReceiptTransaction]?
        var receipt: Inner?
        struct Inner: Decodable { var inApp: [ReceiptTransaction]?; enum CodingKeys: String, CodingKey { case inApp = "in_app" } }
        enum CodingKeys: String, CodingKey {
            case status, environment, isRetryable = "is-retryable", latestReceiptInfo = "latest_receipt_info", receipt
        }
    }

    public enum Failure: Error, Equatable { case status(Int), unreachable }

    static let temporary: Set<Int> = [21002, 21005, 21009]

    /// Returns the receipt's transactions (latest first as Apple sends them) and its environment.
    public func verify(receiptData: String, sharedSecret: String?) async throws -> ([ReceiptTransaction], String?) {
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
                if attempts <= 2 { try await Task.sleep(for: .milliseconds(200 * attempts)); continue }
                throw Failure.unreachable
            }
            guard response.isSuccess, let r = try? JSONDecoder().decode(Response.self, from: response.body) else {
                attempts += 1
                if attempts <= 2 { try await Task.sleep(for: .milliseconds(200 * attempts)); continue }
                throw Failure.unreachable
            }
            switch r.status {
            case 0:
                return (r.latestReceiptInfo ?? r.receipt?.inApp ?? [], r.environment)
            case 21007 where hops < 2:
                url = sandboxURL; hops += 1
            case 21008 where hops < 2:
                url = productionURL; hops += 1
            case let s where (Self.temporary.contains(s) || r.isRetryable == true) && attempts < 2:
                attempts += 1
                logger.info("verifyReceipt temporary status, retrying", metadata: ["status": "\(s)"])
                try await Task.sleep(for: .milliseconds(200 * attempts))
            default:
                throw Failure.status(r.status)
            }
        }
    }
}
