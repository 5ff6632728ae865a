import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import SubscriptionDomain
import TestSupport
import WireTypes
import XCTest
import _CryptoExtras

@testable import SubscriptionService

/// #16: an app's store credentials set at run time through `/admin/stores` (no environment,
/// no restart) are used by every replica within a second; the secret is sealed at rest and never
/// read back; bad input changes nothing.
final class StoreSettingsTests: XCTestCase {
    static func admin(_ h: PurchaseTests.H, token: String? = "local-admin-token") -> HTTPFields {
        var f: HTTPFields = [.xAppID: h.app.uuidString, .xAPIKey: "k", .contentType: "application/json"]
        if let token { f[.authorization] = "Bearer \(token)" }
        return f
    }

    /// This test's own bundle id: the other tests' apps (in the environment) use the default one.
    static let bundle = "com.quiz.settings-\(UUID().uuidString.prefix(8))"

    /// The entry `FakeAppStore.config` would put in APPLE_IAP_APPS, as a request body.
    static func appleBody(_ h: PurchaseTests.H, bundle: String = bundle) throws -> String {
        let all = try JSONDecoder().decode([String: AppleIAPConfig.Settings].self, from: Data(h.store.config(app: h.app, bundle: bundle).utf8))
        return String(decoding: try JSONEncoder().encode(all.values.first!), as: UTF8.self)
    }

    static func version(_ h: PurchaseTests.H) async throws -> Int64? {
        try await h.client.execute(uri: "/subscription/v1/admin/stores", method: .get, headers: admin(h)) { r in
            XCTAssertEqual(r.status, .ok)
            XCTAssertFalse(String(buffer: r.body).contains("s3cret"), "the secret is never read back")
            struct L: Decodable {
                struct S: Decodable {
                    var store: String
                    var version: Int64
                    var has_secret: Bool
                }
                var stores: [S]
            }
            let apple = try r.json(L.self).stores.first { $0.store == "apple" }
            if let apple { XCTAssertTrue(apple.has_secret) }
            return apple?.version
        }
    }

    func testAppleSettingsSetAtRunTimeReachEveryReplicaAndBadInputChangesNothing() async throws {
        try await StatusCacheTests.runTwo(bootstrap: false) { a, b, _ in
            let user = UUID()
            let original = "9300000\(Int.random(in: 100000...999999))"
            let tx = try a.store.transaction(id: original, original: original, trial: false, bundle: Self.bundle)
            // Not configured yet: refused on both replicas, nothing stored.
            for h in [a, b] {
                let r = try await h.post("subscriptions/purchase", user, jws: tx)
                XCTAssertEqual(r.status, .unprocessableContent)
                XCTAssertEqual(try r.envelope().error, "store_not_configured")
            }
            // B reads (and holds) the empty settings before A's write.
            let none = try await Self.version(b)
            XCTAssertNil(none)

            let body = try Self.appleBody(a)
            try await a.client.execute(
                uri: "/subscription/v1/admin/stores/apple",
                method: .put,
                headers: Self.admin(a),
                body: ByteBuffer(string: body)
            ) { r in
                XCTAssertEqual(r.status, .ok, String(buffer: r.body))
                XCTAssertTrue(String(buffer: r.body).contains(#""version":1"#))
            }
            // The replica that took the write uses it at once; the other within a second.
            let bought = try await a.post("subscriptions/purchase", user, jws: tx)
            XCTAssertEqual(bought.status, .created, String(buffer: bought.body))
            let other = "9310000\(Int.random(in: 100000...999999))"
            let end = ContinuousClock.now + .seconds(1)
            var status = HTTPResponse.Status.unprocessableContent
            while status != .created, ContinuousClock.now < end {
                status = try await b.post(
                    "subscriptions/purchase",
                    UUID(),
                    jws: try b.store.transaction(id: other, original: other, trial: false, bundle: Self.bundle)
                ).status
                if status != .created { try await Task.sleep(for: .milliseconds(20)) }
            }
            XCTAssertEqual(status, .created, "the other replica uses the new settings within a second")

            // Sealed at rest: neither column holds the shared secret in the clear.
            let clear = try await a.scalar(
                """
                SELECT count(*)::int FROM subscription.store_settings WHERE app_id = '\(a.app)'
                  AND (settings::text LIKE '%s3cret%' OR position('s3cret'::bytea IN sealed_secret) > 0)
                """
            )
            XCTAssertEqual(clear, 0)
            let stored = try await a.scalar(
                "SELECT count(*)::int FROM subscription.store_settings WHERE app_id = '\(a.app)' AND sealed_secret IS NOT NULL"
            )
            XCTAssertEqual(stored, 1)

            // Bad input: a 4xx in the envelope, and the stored settings unchanged.
            let bad: [(String, HTTPResponse.Status)] = [
                (#"{"bundle_id":5,"environment":"Sandbox"}"#, .badRequest),
                (#"{"environment":"Sandbox"}"#, .badRequest),
                (#"{"bundle_id":"com.quiz.app","environment":"Staging"}"#, .unprocessableContent),
                (#"{"bundle_id":"","environment":"Sandbox"}"#, .unprocessableContent),
                (#"{"bundle_id":"com.quiz.app","environment":"Sandbox","root_certificates_der_base64":["%%%"]}"#, .unprocessableContent),
                (#"{"bundle_id":"com.quiz.app","environment":"Sandbox","root_certificates_der_base64":["AAAA"]}"#, .unprocessableContent),
                (#"{"bundle_id":"com.quiz.app","environment":"Sandbox","shared_secret":""}"#, .unprocessableContent),
                ("[]", .badRequest),
                (#"{"bundle_id":"\#(String(repeating: "x", count: 1_100_000))","environment":"Sandbox"}"#, .contentTooLarge),
            ]
            for (text, expected) in bad {
                try await a.client.execute(
                    uri: "/subscription/v1/admin/stores/apple",
                    method: .put,
                    headers: Self.admin(a),
                    body: ByteBuffer(string: text)
                ) {
                    r in
                    XCTAssertEqual(r.status, expected, "\(text.prefix(80))")
                    XCTAssertFalse(try r.envelope().error.isEmpty)
                }
            }
            // Another app's bundle id (here from another app's stored settings) is refused: the
            // store's notifications could not tell the two apps apart.
            let otherApp = PurchaseTests.H(client: a.client, signer: a.signer, app: UUID(), clock: a.clock, store: a.store)
            try await a.client.execute(
                uri: "/subscription/v1/admin/stores/apple",
                method: .put,
                headers: Self.admin(otherApp),
                body: ByteBuffer(string: body)
            ) { r in
                XCTAssertEqual(r.status, .conflict)
                XCTAssertEqual(try r.envelope().error, "bundle_id_taken")
            }
            for token in [nil, "wrong"] as [String?] {
                try await a.client.execute(
                    uri: "/subscription/v1/admin/stores/apple",
                    method: .put,
                    headers: Self.admin(a, token: token),
                    body: ByteBuffer(string: body)
                ) { r in
                    XCTAssertEqual(r.status, .unauthorized)
                }
            }
            try await a.client.execute(uri: "/subscription/v1/admin/stores/amazon", method: .delete, headers: Self.admin(a)) { r in
                XCTAssertEqual(r.status, .unprocessableContent)
            }
            try await a.client.execute(uri: "/subscription/v1/admin/stores/google", method: .delete, headers: Self.admin(a)) { r in
                XCTAssertEqual(r.status, .notFound)
            }
            let unchanged = try await Self.version(a)
            XCTAssertEqual(unchanged, 1)

            // Removed: refused again on both replicas (the other within a second).
            try await a.client.execute(uri: "/subscription/v1/admin/stores/apple", method: .delete, headers: Self.admin(a)) { r in
                XCTAssertEqual(r.status, .noContent)
            }
            let third = "9320000\(Int.random(in: 100000...999999))"
            let refused = try await a.post(
                "subscriptions/purchase",
                UUID(),
                jws: try a.store.transaction(id: third, original: third, trial: false, bundle: Self.bundle)
            )
            XCTAssertEqual(refused.status, .unprocessableContent)
            let until = ContinuousClock.now + .seconds(1)
            var bStatus = HTTPResponse.Status.created
            while bStatus != .unprocessableContent, ContinuousClock.now < until {
                let n = "9330000\(Int.random(in: 100000...999999))"
                bStatus = try await b.post(
                    "subscriptions/purchase",
                    UUID(),
                    jws: try b.store.transaction(id: n, original: n, trial: false, bundle: Self.bundle)
                ).status
                if bStatus != .unprocessableContent { try await Task.sleep(for: .milliseconds(20)) }
            }
            XCTAssertEqual(bStatus, .unprocessableContent, "the other replica stops within a second")
        }
    }

    /// The CLI does the same as the routes: Google Play settings from a file, the key sealed and
    /// never shown, bad files refused with a reason.
    func testGoogleSettingsThroughTheCommand() async throws {
        func run(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
            try runServiceCommand("subscription-service", ["admin", "stores"] + args)
        }
        let app = UUID().uuidString
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("stores-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let good = dir.appendingPathComponent("google.json")
        let bad = dir.appendingPathComponent("bad.json")
        try JSONEncoder().encode(
            GooglePlayConfig.Settings(
                packageName: "com.quiz.android",
                serviceAccountEmail: "play@quiz.iam.gserviceaccount.com",
                privateKeyPEM: key.pemRepresentation
            )
        ).write(to: good)
        try Data(
            #"{"package_name":"com.quiz.android","service_account_email":"play@quiz.iam.gserviceaccount.com","private_key_pem":"not a key"}"#.utf8
        ).write(
            to: bad
        )

        let set = try run(["set", "--app-id", app, "--store", "google", "--file", good.path])
        XCTAssertEqual(set.status, 0, set.err)
        let shown = try run(["show", "--app-id", app])
        XCTAssertEqual(shown.status, 0, shown.err)
        XCTAssertTrue(shown.out.contains("google version=1 secret=set"), shown.out)
        XCTAssertTrue(shown.out.contains("com.quiz.android"), shown.out)
        XCTAssertFalse(shown.out.contains("PRIVATE KEY"), "the key is never shown")
        for args in [
            ["set", "--app-id", app, "--store", "google", "--file", bad.path], ["set", "--app-id", app, "--store", "amazon", "--file", good.path],
            ["set", "--app-id", "nope", "--store", "google", "--file", good.path], ["remove", "--app-id", app, "--store", "apple"],
        ] {
            let r = try run(args)
            XCTAssertNotEqual(r.status, 0, "\(args)")
            XCTAssertFalse(r.err.isEmpty, "\(args) says why")
        }
        XCTAssertTrue(try run(["show", "--app-id", app]).out.contains("google version=1"), "a refused change changed nothing")
        XCTAssertEqual(try run(["remove", "--app-id", app, "--store", "google"]).status, 0)
        XCTAssertEqual(try run(["show", "--app-id", app]).out, "")
    }
}
