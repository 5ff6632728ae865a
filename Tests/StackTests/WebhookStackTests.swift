import Foundation
import PostgresNIO
import ServiceKit
import TestSupport
import WireTypes
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// #33 through the running stack: the app's server is `deploy/local/webhook_receiver.py`, which
/// verifies every call with the `standardwebhooks` package from PyPI (the reference
/// implementation) and answers 503 to the first three attempts of each event (a receiver down,
/// then back). A refund reaches it once as `subscription.refunded` (from subscription's outbox),
/// on the 4th attempt, signed; during a rotation both secrets verify; the erasure sends
/// `user.deleted`; a subscription killed right after committing a refund still has it delivered.
final class WebhookStackTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    var client: StackClient { StackClient(http: http, gateway: gateway) }

    func db<T: Sendable>(_ body: @Sendable (DatabasePool) async throws -> T) async throws -> T {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase), body)
    }

    struct Received: Decodable {
        var webhook_id: String
        var attempt: Int
        var status: Int
        var verified_by: [Int]
        var signatures: Int
        var event: JSONValue
    }

    func received(_ out: String) -> [Received] {
        guard let text = try? String(contentsOfFile: out, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Received.self, from: Data($0.utf8)) }
    }

    func type(_ r: Received) -> String? { if case .object(let o) = r.event, case .string(let t)? = o["type"] { t } else { nil } }
    func data(_ r: Received) -> [String: JSONValue] { if case .object(let o) = r.event, case .object(let d)? = o["data"] { d } else { [:] } }

    /// Waits until `done` holds over what the receiver got, moving due retries to now (time
    /// passing: 5 s, 5 min, 30 min).
    func waitFor(_ what: String, _ out: String, seconds: Double = 60, _ done: ([Received]) -> Bool) async throws {
        let deadline = Date() + seconds
        while Date() < deadline {
            if done(received(out)) { return }
            try await db { db in
                try await db.query("UPDATE auth.webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending' AND next_attempt_at > now()")
            }
            try await Task.sleep(for: .milliseconds(300))
        }
        XCTFail("not within \(seconds) s: \(what); received \(received(out).map { "\(type($0) ?? "?") #\($0.attempt) \($0.status)" })")
    }

    func testTheAppsServerGetsSignedEventsOnceThroughRetriesRotationAndAKill() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hooks-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let secrets = dir + "/secrets"
        let out = dir + "/received.jsonl"
        let port = try TestEnvironment.freePort()
        let receiver = try ChildProcess(
            TestEnvironment.python,
            ["deploy/local/webhook_receiver.py", "--port", "\(port)", "--secrets", secrets, "--out", out, "--fail-first", "3"]
        )
        defer { receiver.stop() }
        try await Task.sleep(for: .milliseconds(500))

        let demo = try DemoApp.values()
        let admin = try DemoApp.tenantHeaders() + [("Authorization", "Bearer local-admin-token")]
        let (created, endpoint) = try await client.call(
            "POST",
            "/auth/v1/admin/webhooks",
            admin,
            """
            {"url":"http://127.0.0.1:\(port)/hook","events":["subscription.refunded","user.deleted"],"description":"the quiz's game server"}
            """
        )
        XCTAssertEqual(created, 201, "\(endpoint)")
        guard case .string(let secret)? = endpoint["secret"], case .object(let e)? = endpoint["endpoint"], case .string(let endpointID)? = e["id"]
        else {
            return XCTFail("no endpoint: \(endpoint)")
        }
        try secret.write(toFile: secrets, atomically: true, encoding: .utf8)

        // A purchase then its refund: subscription.refunded, once, after 3 refused attempts.
        let store = try LocalStoreKit()
        let user = try await client.guest()
        let original = "5000\(Int.random(in: 100_000_000...999_999_999))"
        let tx = try store.transaction(id: original, original: original, product: "com.quiz.premium.monthly", expires: Date() + 600)
        let (bought, body) = try await client.call(
            "POST",
            "/subscription/v1/subscriptions/purchase",
            user.headers,
            #"{"store":"apple","signed_transaction":"\#(tx)"}"#
        )
        XCTAssertEqual(bought, 201, "\(body)")
        let refund = try store.notification("REFUND", transaction: tx)
        let refunded = try await http.send(
            HTTPRequest(
                method: "POST",
                url: gateway + "/subscription/v1/webhooks/apple",
                headers: [("Content-Type", "application/json")],
                body: Data(#"{"signedPayload":"\#(refund)"}"#.utf8)
            )
        )
        XCTAssertEqual(refunded.status, 200)
        let uid = user.userID.uuidString.lowercased()
        try await waitFor("subscription.refunded", out) { r in
            r.contains { type($0) == "subscription.refunded" && $0.status == 200 && data($0)["user_id"] == .string(uid) }
        }
        let refunds = received(out).filter { type($0) == "subscription.refunded" && data($0)["user_id"] == .string(uid) }
        XCTAssertEqual(refunds.map(\.status), [503, 503, 503, 200], "3 refused attempts, then the 4th")
        XCTAssertEqual(Set(refunds.map(\.webhook_id)).count, 1, "one event")
        XCTAssertTrue(refunds.allSatisfy { $0.verified_by == [0] }, "standardwebhooks verifies every call")
        if case .object(let event) = refunds.last?.event {
            XCTAssertEqual(event["app_id"]?.stringValue?.lowercased(), demo["APP_ID"]?.lowercased())
            XCTAssertNotNil(event["version"])
            XCTAssertNil(data(refunds.last!)["email"])
        }

        // Rotation: during the overlap the old and the new secret both verify.
        let (rotatedStatus, rotated) = try await client.call("POST", "/auth/v1/admin/webhooks/\(endpointID)/rotate-secret", admin)
        XCTAssertEqual(rotatedStatus, 200)
        guard case .string(let newSecret)? = rotated["secret"] else { return XCTFail("no new secret") }
        try (secret + "\n" + newSecret).write(toFile: secrets, atomically: true, encoding: .utf8)

        // Subscription killed (SIGKILL) right after it committed a refund: the event is in its
        // outbox, and goes out once it is back.
        let second = try await client.guest()
        let original2 = "5000\(Int.random(in: 100_000_000...999_999_999))"
        let tx2 = try store.transaction(id: original2, original: original2, product: "com.quiz.premium.monthly", expires: Date() + 600)
        let (bought2, _) = try await client.call(
            "POST",
            "/subscription/v1/subscriptions/purchase",
            second.headers,
            #"{"store":"apple","signed_transaction":"\#(tx2)"}"#
        )
        XCTAssertEqual(bought2, 201)
        let pid = try String(contentsOfFile: ".data/run/subscription.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let refund2 = try store.notification("REFUND", transaction: tx2)
        let answered = try await http.send(
            HTTPRequest(
                method: "POST",
                url: gateway + "/subscription/v1/webhooks/apple",
                headers: [("Content-Type", "application/json")],
                body: Data(#"{"signedPayload":"\#(refund2)"}"#.utf8)
            )
        )
        XCTAssertEqual(answered.status, 200)
        kill(pid_t(pid) ?? 0, SIGKILL)
        // Not Foundation's Process: its waitUntilExit can miss the exit while another child (the
        // receiver) runs.
        XCTAssertEqual(system("bash deploy/local/stack.sh start-services > /dev/null 2>&1"), 0, "subscription did not come back")
        let uid2 = second.userID.uuidString.lowercased()
        try await waitFor("the refund committed before the kill", out, seconds: 90) { r in
            r.contains { type($0) == "subscription.refunded" && $0.status == 200 && data($0)["user_id"] == .string(uid2) }
        }
        let second2 = received(out).filter { type($0) == "subscription.refunded" && data($0)["user_id"] == .string(uid2) }
        XCTAssertEqual(second2.filter { $0.status == 200 }.count, 1, "delivered once")
        XCTAssertTrue(second2.allSatisfy { $0.signatures == 2 && $0.verified_by == [0, 1] }, "both secrets sign during the rotation")

        // The erasure: user.deleted, with the id only.
        let (scheduled, _) = try await client.call("DELETE", "/auth/v1/auth/me", user.headers)
        XCTAssertEqual(scheduled, 202)
        let userID = user.userID
        try await db { db in
            try await db.query(
                "UPDATE auth.deletions SET scheduled_for = now() - interval '1 second' WHERE user_id = \(userID) AND status = 'scheduled'"
            )
            try await db.query("UPDATE auth.jobs SET run_at = now() WHERE kind = 'execute_deletion' AND status = 'pending'")
        }
        try await waitFor("user.deleted", out, seconds: 90) { r in
            r.contains { type($0) == "user.deleted" && $0.status == 200 && data($0)["user_id"] == .string(uid) }
        }
        let deleted = received(out).first { type($0) == "user.deleted" && data($0)["user_id"] == .string(uid) }
        XCTAssertEqual(deleted.map { Set(data($0).keys) }, ["user_id"], "only the id")
        let (removed, _) = try await client.call("DELETE", "/auth/v1/admin/webhooks/\(endpointID)", admin)
        XCTAssertEqual(removed, 200)
    }

    /// SSRF through the stack (ENVIRONMENT=local, where only loopback is let through): a URL whose
    /// host is a private, link-local (the cloud's metadata endpoint) or unique-local address is
    /// refused at creation and at a change of URL, and nothing is written.
    func testAPrivateAddressURLIsRefused() async throws {
        let admin = try DemoApp.tenantHeaders() + [("Authorization", "Bearer local-admin-token")]
        let (_, before) = try await client.call("GET", "/auth/v1/admin/webhooks", admin)
        for url in [
            "https://10.1.2.3/hook", "http://169.254.169.254/latest/meta-data", "http://192.168.1.10:8080/hook",
            "http://[::ffff:172.16.0.5]/hook", "http://[fd00::1]/hook",
        ] {
            let (status, body) = try await client.call("POST", "/auth/v1/admin/webhooks", admin, #"{"url":"\#(url)","events":["*"]}"#)
            XCTAssertEqual(status, 422, "\(url): \(body)")
            XCTAssertEqual(body["error"]?.stringValue, "validation_error", url)
            XCTAssertTrue(body["message"]?.stringValue?.contains("SSRF") == true, "\(url): \(body)")
        }
        let (_, after) = try await client.call("GET", "/auth/v1/admin/webhooks", admin)
        XCTAssertEqual(after, before, "nothing created")

        // An endpoint on loopback (allowed here) cannot be pointed at a private address later.
        let (created, endpoint) = try await client.call(
            "POST",
            "/auth/v1/admin/webhooks",
            admin,
            #"{"url":"http://127.0.0.1:9/hook","events":["user.created"]}"#
        )
        XCTAssertEqual(created, 201, "\(endpoint)")
        guard case .object(let e)? = endpoint["endpoint"], case .string(let id)? = e["id"] else { return XCTFail("no endpoint: \(endpoint)") }
        let (patched, refusal) = try await client.call(
            "PATCH",
            "/auth/v1/admin/webhooks/\(id)",
            admin,
            #"{"url":"http://169.254.169.254/latest/meta-data"}"#
        )
        XCTAssertEqual(patched, 422, "\(refusal)")
        let (_, unchanged) = try await client.call("GET", "/auth/v1/admin/webhooks/\(id)", admin)
        XCTAssertEqual(unchanged["url"]?.stringValue, "http://127.0.0.1:9/hook")
        let (removed, _) = try await client.call("DELETE", "/auth/v1/admin/webhooks/\(id)", admin)
        XCTAssertEqual(removed, 200)
    }
}
