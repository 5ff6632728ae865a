import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import ServiceLifecycle
import SubscriptionDomain
import Synchronization
import TestSupport
import XCTest

@testable import SubscriptionService

/// A local verifyReceipt that answers as Apple's does (production + sandbox endpoints).
final class FakeVerifyReceipt: Sendable {
    let port: Int
    final class Calls: Sendable { let log = Mutex([String]()) }
    let calls = Calls()
    init() throws { port = try TestEnvironment.freePort() }
    var production: String { "http://127.0.0.1:\(port)/verifyReceipt" }
    var sandbox: String { "http://127.0.0.1:\(port)/sandbox/verifyReceipt" }

    func application() -> some ApplicationProtocol {
        let router = Router()
        let calls = self.calls
        for (path, env) in [("verifyReceipt", "Production"), ("sandbox/verifyReceipt", "Sandbox")] {
            router.post(RouterPath(path)) { request, _ -> Response in
                struct B: Decodable {
                    var receiptData: String
                    var password: String?
                    enum CodingKeys: String, CodingKey {
                        case receiptData = "receipt-data"
                        case password
                    }
                }
                let b = try JSONDecoder().decode(B.self, from: Data(try await request.body.collect(upTo: 1 << 20).readableBytesView))
                let n = calls.log.withLock {
                    $0.append("\(env):\(b.receiptData)")
                    return $0.filter { $0.hasSuffix(b.receiptData) }.count
                }
                func answer(
                    _ status: Int,
                    product: String = "com.quiz.premium.monthly",
                    retryable: Bool? = nil,
                    bundle: String = "com.quiz.app"
                ) -> Response {
                    let ms = Int(Date().timeIntervalSince1970 * 1000)
                    let info =
                        status == 0
                        ? #","receipt":{"bundle_id":"\#(bundle)"},"latest_receipt_info":[{"product_id":"\#(product)","transaction_id":"\#(b.receiptData)-1","original_transaction_id":"\#(b.receiptData)","purchase_date_ms":"\#(ms - 60000)","expires_date_ms":"\#(ms + 30 * 86_400_000)","is_trial_period":"false"}]"#
                        : ""
                    let r = retryable.map { #","is-retryable":\#($0)"# } ?? ""
                    return Response(
                        status: .ok,
                        headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(string: #"{"status":\#(status),"environment":"\#(env)"\#(info)\#(r)}"#))
                    )
                }
                if b.password != "s3cret" { return answer(21004) }
                switch b.receiptData {
                case let r where r.hasPrefix("sandbox-"): return env == "Production" ? answer(21007) : answer(0)
                case let r where r.hasPrefix("flaky-"): return n == 1 ? answer(21005) : answer(0)
                case let r where r.hasPrefix("bad-"): return answer(21003)
                case let r where r.hasPrefix("gold-"): return answer(0, product: "com.quiz.gold")
                case let r where r.hasPrefix("otherapp-"): return answer(0, bundle: "com.someone.else")
                case let r where r.hasPrefix("down-"): return answer(21005)
                case let r where r.hasPrefix("internal-"): return answer(21150)
                default: return env == "Production" ? answer(0) : answer(21008)
                }
            }
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
    }
}

final class LegacyReceiptTests: XCTestCase {
    static func post(_ h: PurchaseTests.H, _ user: UUID, receipt: String) async throws -> TestResponse {
        try await h.client.execute(
            uri: "/subscription/v1/subscriptions/purchase",
            method: .post,
            headers: try h.headers(user),
            body: ByteBuffer(string: #"{"store":"apple","receipt_data":"\#(receipt)"}"#)
        ) { $0 }
    }

    func testVerifyReceiptRoutingRetriesAndStatuses() async throws {
        let apple = try FakeVerifyReceipt()
        try await withThrowingTaskGroup(of: Void.self) { group in
            let server = ServiceGroup(configuration: .init(services: [apple.application()], logger: TestEnvironment.logger))
            group.addTask { try await server.run() }
            try await PurchaseTests.run(overrides: ["APPLE_VERIFY_RECEIPT_URL": apple.production, "APPLE_VERIFY_RECEIPT_SANDBOX_URL": apple.sandbox])
            { h in
                let user = UUID()
                let tag = UUID().uuidString.prefix(8)
                // Production first, the sandbox on 21007.
                let sandbox = try await Self.post(h, user, receipt: "sandbox-\(tag)")
                XCTAssertEqual(sandbox.status, .created, String(buffer: sandbox.body))
                XCTAssertEqual(
                    apple.calls.log.withLock { $0.filter { $0.hasSuffix("sandbox-\(tag)") } },
                    ["Production:sandbox-\(tag)", "Sandbox:sandbox-\(tag)"]
                )
                // A temporary status is retried.
                let flaky = try await Self.post(h, UUID(), receipt: "flaky-\(tag)")
                XCTAssertEqual(flaky.status, .created)
                // A refused receipt answers 400 with Apple's status.
                let bad = try await Self.post(h, UUID(), receipt: "bad-\(tag)")
                XCTAssertEqual(bad.status, .badRequest)
                XCTAssertEqual(try bad.envelope().error, "invalid_receipt")
                XCTAssertEqual(try bad.envelope().extra["apple_status"], .int(21003))
                // A receipt of something the app does not sell.
                let gold = try await Self.post(h, UUID(), receipt: "gold-\(tag)")
                XCTAssertEqual(gold.status, .badRequest)
                XCTAssertEqual(try gold.envelope().error, "product_mismatch")
                // Another app's receipt (its bundle) buys nothing here, and writes nothing.
                let otherApp = try await Self.post(h, UUID(), receipt: "otherapp-\(tag)")
                XCTAssertEqual(otherApp.status, .badRequest)
                XCTAssertEqual(try otherApp.envelope().extra["reason"], .string("bundle_mismatch"))
                // Apple unable to answer (21005 the receipt server, 21100–21199 internal errors,
                // after retries) is not a verdict on the receipt: 503, retryable, nothing written.
                for prefix in ["down", "internal"] {
                    let busy = try await Self.post(h, UUID(), receipt: "\(prefix)-\(tag)")
                    XCTAssertEqual(busy.status, .serviceUnavailable, prefix)
                    XCTAssertEqual(try busy.envelope().error, "store_unavailable", prefix)
                    XCTAssertEqual(try busy.envelope().extra["retryable"], .bool(true), prefix)
                }
                for prefix in ["otherapp", "down", "internal"] {
                    do {
                        let v = try await h.scalar(
                            "SELECT count(*)::int FROM subscription.iap_receipts WHERE original_transaction_id = '\(prefix)-\(tag)'"
                        )
                        XCTAssertEqual(v, 0, prefix)
                    }
                    do {
                        let v = try await h.scalar(
                            "SELECT count(*)::int FROM subscription.subscriptions WHERE store_original_transaction_id = '\(prefix)-\(tag)'"
                        )
                        XCTAssertEqual(v, 0, prefix)
                    }
                }
                XCTAssertEqual(apple.calls.log.withLock { $0.filter { $0.hasSuffix("down-\(tag)") }.count }, 3, "tried, then retried twice")
                // The same receipt again: the existing subscription (seed 16a).
                let again = try await Self.post(h, user, receipt: "sandbox-\(tag)")
                XCTAssertEqual(again.status, .ok)
                let receipts = try await h.scalar(
                    "SELECT count(*)::int FROM subscription.iap_receipts WHERE original_transaction_id = 'sandbox-\(tag)'"
                )
                XCTAssertEqual(receipts, 1)
            }
            try await stopLocalServer(server, in: &group)
        }
    }
}
