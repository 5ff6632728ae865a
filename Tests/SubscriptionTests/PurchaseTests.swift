import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import SwiftASN1
import TestSupport
import WireTypes
import X509
import XCTest

@testable import SubscriptionService

/// A private Apple-like PKI: root, WWDR-like intermediate (OID 1.2.840.113635.100.6.2.1) and
/// a signing leaf (OID 1.2.840.113635.100.6.11.1), signing StoreKit 2 transactions.
struct FakeAppStore: Sendable {
    let rootDER: [UInt8]
    let chainB64: [String]
    let leafKey: P256.Signing.PrivateKey

    init(leafOID: Bool = true) throws {
        let now = Date()
        let rootKey = P256.Signing.PrivateKey()
        let interKey = P256.Signing.PrivateKey()
        leafKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName("Test Apple Root CA - G3") }
        let interName = try DistinguishedName { CommonName("Test WWDR") }
        let root = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(rootKey.publicKey),
            notValidBefore: now - 86400 * 30,
            notValidAfter: now + 86400 * 3650,
            issuer: rootName,
            subject: rootName,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(rootKey)
        )
        let inter = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(interKey.publicKey),
            notValidBefore: now - 86400 * 30,
            notValidAfter: now + 86400 * 3650,
            issuer: rootName,
            subject: interName,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
                Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 2, 1], critical: false, value: [0x05, 0x00])
            },
            issuerPrivateKey: .init(rootKey)
        )
        let leaf = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(leafKey.publicKey),
            notValidBefore: now - 86400 * 30,
            notValidAfter: now + 86400 * 3650,
            issuer: interName,
            subject: try DistinguishedName { CommonName("Test Prod ECC Mac App Store and iTunes Store Receipt Signing") },
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                if leafOID { Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 11, 1], critical: false, value: [0x05, 0x00]) }
            },
            issuerPrivateKey: .init(interKey)
        )
        func der(_ c: Certificate) throws -> [UInt8] {
            var s = DER.Serializer()
            try s.serialize(c)
            return s.serializedBytes
        }
        rootDER = try der(root)
        chainB64 = [try der(leaf), try der(inter), rootDER].map { Data($0).base64EncodedString() }
    }

    func config(app: UUID, bundle: String = "com.quiz.app", env: String = "Sandbox", roots: [[UInt8]]? = nil, allowLocal: Bool = false) -> String {
        let r = (roots ?? [rootDER]).map { "\"\(Data($0).base64EncodedString())\"" }.joined(separator: ",")
        return
            #"{"\#(app.uuidString)":{"bundle_id":"\#(bundle)","environment":"\#(env)","root_certificates_der_base64":[\#(r)],"allow_local_environments":\#(allowLocal),"shared_secret":"s3cret"}}"#
    }

    func transaction(
        id: String,
        original: String,
        product: String = "com.quiz.premium.annual",
        trial: Bool = true,
        expires: Date = Date() + 7 * 86400,
        bundle: String = "com.quiz.app",
        env: String = "Sandbox",
        revoked: Bool = false,
        accountToken: UUID? = nil
    ) throws -> String {
        let ms = { (d: Date) in Int(d.timeIntervalSince1970 * 1000) }
        var payload =
            #"{"transactionId":"\#(id)","originalTransactionId":"\#(original)","bundleId":"\#(bundle)","productId":"\#(product)","purchaseDate":\#(ms(Date() - 60)),"expiresDate":\#(ms(expires)),"type":"Auto-Renewable Subscription","environment":"\#(env)","signedDate":\#(ms(Date()))"#
        if trial { payload += #","offerType":1,"offerDiscountType":"FREE_TRIAL""# }
        if revoked { payload += #","revocationDate":\#(ms(Date()))"# }
        if let accountToken { payload += #","appAccountToken":"\#(accountToken.uuidString.lowercased())""# }
        payload += "}"
        let header = #"{"alg":"ES256","x5c":[\#(chainB64.map { "\"\($0)\"" }.joined(separator: ","))]}"#
        let input = Base64URLTest.encode(header) + "." + Base64URLTest.encode(payload)
        let sig = try leafKey.signature(for: Data(input.utf8))
        return input + "."
            + Data(sig.rawRepresentation).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

final class PurchaseTests: XCTestCase {
    struct AllowAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { true } }

    struct H: Sendable {
        let client: any TestClientProtocol
        let signer: AccessTokenSigner
        let app: UUID
        let clock: MovableClock
        let store: FakeAppStore

        func headers(_ user: UUID) throws -> HTTPFields {
            let now = Int(clock.now().timeIntervalSince1970)
            let token = try signer.sign(
                AccessTokenClaims(
                    userID: user,
                    appID: app,
                    email: nil,
                    status: .free,
                    isGuest: false,
                    issuer: "auth",
                    issuedAt: now,
                    expiresAt: now + 3600,
                    jti: UUID().uuidString
                )
            )
            return [.xAppID: app.uuidString, .xAPIKey: "k", .authorization: "Bearer \(token)", .contentType: "application/json"]
        }

        func post(_ path: String, _ user: UUID, jws: String, store: String = "apple") async throws -> TestResponse {
            try await client.execute(
                uri: "/subscription/v1/\(path)",
                method: .post,
                headers: try headers(user),
                body: ByteBuffer(string: #"{"store":"\#(store)","signed_transaction":"\#(jws)"}"#)
            ) { $0 }
        }

        func scalar(_ sql: String) async throws -> Int {
            try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
                for try await n in try await db.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) { return n }
                return -1
            }
        }
    }

    static func run(
        config: ((FakeAppStore, UUID) -> String)? = nil,
        overrides: [String: String] = [:],
        perApp: ((UUID) -> [String: String])? = nil,
        _ body: @Sendable (H) async throws -> Void
    ) async throws {
        let store = try FakeAppStore()
        let app = UUID()
        let clock = MovableClock()
        let signer = AccessTokenSigner(privateKey: .init())
        let runtime = TestEnvironment.runtime(
            .subscription,
            migrations: try SubscriptionService.migrations(),
            overrides: ["APPLE_IAP_APPS": config?(store, app) ?? store.config(app: app)]
                .merging(overrides) { $1 }.merging(perApp?(app) ?? [:]) { $1 },
            clock: clock
        )
        let application = try SubscriptionService.buildApplication(
            runtime: runtime,
            appVerifier: AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk])), clock: clock)
        )
        try await application.test(.router) { client in
            await runtime.readiness.waitUntilMigrated()
            _ = try await runtime.db.withConnection { try await PlanStore(logger: runtime.logger).seedDefaults(app: app, on: $0) }
            try await body(H(client: client, signer: signer, app: app, clock: clock, store: store))
        }
    }

    func testPurchaseTrialThenMeThenExpiry() async throws {
        try await Self.run { h in
            let user = UUID()
            let original = "1000000\(Int.random(in: 100000...999999))"
            let r = try await h.post("subscriptions/purchase", user, jws: try h.store.transaction(id: original, original: original))
            XCTAssertEqual(r.status, .created, String(buffer: r.body))
            struct P: Decodable {
                struct S: Decodable {
                    var status: String
                    var plan_type: String
                    var trial_end_date: Date?
                }
                var subscription: S
                var activated: Bool
            }
            let p = try r.json(P.self)
            XCTAssertEqual(p.subscription.status, "trial")
            XCTAssertEqual(p.subscription.plan_type, "annual")
            XCTAssertNotNil(p.subscription.trial_end_date)
            XCTAssertTrue(p.activated)
            let told = try await h.scalar(
                "SELECT count(*)::int FROM subscription.outbox WHERE target_service = 'auth' AND path LIKE '/internal/users/\(user.uuidString.lowercased())/status%' AND body->>'status' = 'premium'"
            )
            XCTAssertEqual(told, 1)
            // Ads and offline are told the entitlement with the version auth was told, and when it ends.
            let entitlementFacts = """
                SELECT count(*)::int FROM subscription.outbox o WHERE o.target_service = ANY($1) AND o.method = 'PUT'
                  AND o.path = '/internal/users/\(user.lowercasedString)/entitlement?app_id=\(h.app.lowercasedString)'
                  AND (o.body->>'is_premium')::boolean = $2
                  AND (o.body->>'version') = (SELECT body->>'version' FROM subscription.outbox WHERE target_service = 'auth'
                                              AND path LIKE '/internal/users/\(user.lowercasedString)/status%' AND body->>'status' = $3)
                """
            func entitlementTold(premium: Bool) async throws -> Int {
                try await h.scalar(
                    entitlementFacts.replacingOccurrences(of: "$1", with: "ARRAY['ads', 'offline']")
                        .replacingOccurrences(of: "$2", with: "\(premium)").replacingOccurrences(of: "$3", with: premium ? "'premium'" : "'free'")
                )
            }
            let toldPremium = try await entitlementTold(premium: true)
            XCTAssertEqual(toldPremium, 2)
            let until = try await h.scalar(
                """
                SELECT count(*)::int FROM subscription.outbox o JOIN subscription.subscriptions s ON s.user_id = '\(user.lowercasedString)'
                WHERE o.target_service = 'ads' AND o.path LIKE '/internal/users/\(user.lowercasedString)/entitlement%'
                  AND (o.body->>'valid_until')::timestamptz = date_trunc('second', s.end_date)
                """
            )
            XCTAssertEqual(until, 1, "premium until the period's end")
            let me = try await h.client.execute(uri: "/subscription/v1/subscriptions/me", method: .get, headers: try h.headers(user)) { $0 }
            struct Me: Decodable {
                var is_premium: Bool
                var features: [String: JSONValue]
                var warning: String?
            }
            let m = try me.json(Me.self)
            XCTAssertTrue(m.is_premium)
            XCTAssertEqual(m.features["no_ads"], true)
            let ent = try await h.client.execute(
                uri: "/internal/users/\(user)/entitlement?app_id=\(h.app)",
                method: .get,
                headers: [.authorization: "Bearer local-internal-ads", .xServiceName: "ads"]
            ) { $0 }
            XCTAssertTrue(String(buffer: ent.body).contains(#""is_premium":true"#))
            // Seed 7a: past the end date the subscription expires, with an event, and auth is told.
            h.clock.advance(by: 8 * 86400)
            let later = try await h.client.execute(uri: "/subscription/v1/subscriptions/me", method: .get, headers: try h.headers(user)) { $0 }
            let l = try later.json(Me.self)
            XCTAssertFalse(l.is_premium)
            XCTAssertEqual(l.warning, "subscription_expired")
            let events = try await h.scalar(
                "SELECT count(*)::int FROM subscription.subscription_events WHERE user_id = '\(user)' AND event_type IN ('trial_started', 'expired')"
            )
            XCTAssertEqual(events, 2)
            let free = try await h.scalar(
                "SELECT count(*)::int FROM subscription.outbox WHERE path LIKE '/internal/users/\(user.uuidString.lowercased())/status%' AND body->>'status' = 'free'"
            )
            XCTAssertEqual(free, 1)
            let toldFree = try await entitlementTold(premium: false)
            XCTAssertEqual(toldFree, 2, "the expiry reaches ads and offline too")
            let nobody = try await h.client.execute(uri: "/subscription/v1/subscriptions/me", method: .get, headers: try h.headers(UUID())) { $0 }
            XCTAssertEqual(try nobody.json(Me.self).is_premium, false)
            XCTAssertTrue(
                String(buffer: nobody.body).contains(#""subscription":null"#),
                "a free user's answer says null: \(String(buffer: nobody.body))"
            )
        }
    }

    func testSamePurchaseTenTimesInParallelMakesOneSubscription() async throws {
        try await Self.run { h in
            let user = UUID()
            let original = "2000000\(Int.random(in: 100000...999999))"
            let jws = try h.store.transaction(id: original, original: original, trial: false)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 { group.addTask { Int(try await h.post("subscriptions/purchase", user, jws: jws).status.code) } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            XCTAssertEqual(statuses.filter { $0 == 201 }.count, 1)
            XCTAssertEqual(statuses.filter { $0 == 200 }.count, 9, "seed 16a: the duplicate answers 200 with the subscription")
            let subs = try await h.scalar("SELECT count(*)::int FROM subscription.subscriptions WHERE store_original_transaction_id = '\(original)'")
            let receipts = try await h.scalar("SELECT count(*)::int FROM subscription.iap_receipts WHERE original_transaction_id = '\(original)'")
            XCTAssertEqual(subs, 1)
            XCTAssertEqual(receipts, 1)
            // Seed 2.1: one confirmation email asked of auth, not ten.
            let emails = try await h.scalar(
                """
                SELECT count(*)::int FROM subscription.outbox WHERE target_service = 'auth' AND method = 'POST'
                AND path = '/internal/users/\(user.uuidString.lowercased())/emails/purchase-confirmation?app_id=\(h.app.uuidString.lowercased())'
                AND lower(body->>'subscription_id') = (SELECT id::text FROM subscription.subscriptions WHERE store_original_transaction_id = '\(original)')
                AND body->>'plan_type' = 'annual' AND body->>'store' = 'apple'
                """
            )
            XCTAssertEqual(emails, 1)
        }
    }

    func testAnotherUsersPurchaseIsNotMovedSilently() async throws {
        try await Self.run { h in
            let owner = UUID()
            let other = UUID()
            let original = "3000000\(Int.random(in: 100000...999999))"
            let jws = try h.store.transaction(id: original, original: original, trial: false)
            let first = try await h.post("subscriptions/purchase", owner, jws: jws)
            XCTAssertEqual(first.status, .created)
            let taken = try await h.post("subscriptions/purchase", other, jws: jws)
            XCTAssertEqual(taken.status, .conflict)
            XCTAssertEqual(try taken.envelope().error, "purchase_owned_by_another_user")
            let restored = try await h.post("subscriptions/restore", other, jws: jws)
            XCTAssertEqual(restored.status, .ok)
            let transferred = try await h.scalar(
                "SELECT count(*)::int FROM subscription.subscription_events WHERE event_type = 'transferred' AND user_id = '\(other)'"
            )
            XCTAssertEqual(transferred, 1)
            let ownerFree = try await h.scalar(
                "SELECT count(*)::int FROM subscription.outbox WHERE path LIKE '/internal/users/\(owner.uuidString.lowercased())/status%' AND body->>'status' = 'free'"
            )
            XCTAssertEqual(ownerFree, 1)
        }
    }

    func testRejectedTransactions() async throws {
        let foreign = try FakeAppStore()
        let noOID = try FakeAppStore(leafOID: false)
        try await Self.run { h in
            let user = UUID()
            let n = { "9\(Int.random(in: 1_000_000...9_999_999))" }
            let xcode = try String(
                contentsOf: AppStoreSignedDataTests.vectors.appendingPathComponent("xcode/xcode-signed-transaction"),
                encoding: .utf8
            )
            .trimmingCharacters(in: .whitespacesAndNewlines)
            let valid = try h.store.transaction(id: "t", original: "o")
            let parts = valid.split(separator: ".")
            let tampered =
                parts[0] + "."
                + Base64URLTest.encode(
                    #"{"transactionId":"t","originalTransactionId":"o","bundleId":"com.quiz.app","productId":"com.quiz.premium.annual","purchaseDate":1,"expiresDate":99999999999999,"environment":"Sandbox"}"#
                ) + "." + parts[2]
            let cases: [(String, String, String)] = [
                ("chain to another root", try foreign.transaction(id: n(), original: n()), "invalid_receipt"),
                ("leaf without OID", try noOID.transaction(id: n(), original: n()), "invalid_receipt"),
                ("wrong bundle", try h.store.transaction(id: n(), original: n(), bundle: "com.other"), "invalid_receipt"),
                ("production data in sandbox config", try h.store.transaction(id: n(), original: n(), env: "Production"), "invalid_receipt"),
                ("Xcode-signed when Xcode is not allowed", xcode, "invalid_receipt"),
                ("tampered payload", String(tampered), "invalid_receipt"),
                ("unknown product", try h.store.transaction(id: n(), original: n(), product: "com.quiz.gold"), "unknown_product"),
                ("expired", try h.store.transaction(id: n(), original: n(), expires: Date() - 60), "subscription_expired"),
                ("revoked", try h.store.transaction(id: n(), original: n(), revoked: true), "transaction_revoked"),
            ]
            for (name, jws, code) in cases {
                let r = try await h.post("subscriptions/purchase", user, jws: jws)
                XCTAssertEqual(r.status, .badRequest, name)
                XCTAssertEqual(try r.envelope().error, code, name)
            }
            let google = try await h.post("subscriptions/purchase", user, jws: valid, store: "google")
            XCTAssertEqual(google.status, .unprocessableContent, "Google Play is not configured for this app")
            let missing = try await h.client.execute(
                uri: "/subscription/v1/subscriptions/purchase",
                method: .post,
                headers: try h.headers(user),
                body: ByteBuffer(string: #"{"store":"apple"}"#)
            ) { $0 }
            XCTAssertEqual(missing.status, .badRequest)
            let subs = try await h.scalar("SELECT count(*)::int FROM subscription.subscriptions WHERE user_id = '\(user)'")
            XCTAssertEqual(subs, 0, "nothing was granted")
            let mails = try await h.scalar(
                "SELECT count(*)::int FROM subscription.outbox WHERE path LIKE '/internal/users/\(user.uuidString.lowercased())/emails/%'"
            )
            XCTAssertEqual(mails, 0, "no purchase, no confirmation")
        }
    }

    /// #13: after a refund, the pre-refund transaction replayed (purchase or restore, many times,
    /// with expiry dates whose milliseconds do not survive a rounding) never makes the
    /// subscription active again; only a transaction the store issued after the refund does.
    func testARefundSticksAgainstReplaysOfThePreRefundTransaction() async throws {
        try await Self.run { h in
            let user = UUID()
            let original = "4100000\(Int.random(in: 100000...999999))"
            let base = (Date().timeIntervalSince1970 + 20 * 86400).rounded(.down)
            var jwsByOffset: [String] = []
            // Expiry dates with every few milliseconds: a rounded copy would look "newer" for some.
            for k in 0..<12 {
                jwsByOffset.append(
                    try h.store.transaction(
                        id: original,
                        original: original,
                        trial: false,
                        expires: Date(timeIntervalSince1970: base + Double(k * 83 + 1) / 1000)
                    )
                )
            }
            let bought = try await h.post("subscriptions/purchase", user, jws: jwsByOffset[11])
            XCTAssertEqual(bought.status, .created, String(buffer: bought.body))
            // Apple refunds the transaction.
            let refunded = try h.store.transaction(
                id: original,
                original: original,
                trial: false,
                expires: Date(timeIntervalSince1970: base + Double(11 * 83 + 1) / 1000),
                revoked: true
            )
            let n = try await StoreNotificationTests.post(h, try h.store.notification("REFUND", transaction: refunded))
            XCTAssertEqual(n.status, .ok)
            let before = try await h.scalar(
                "SELECT count(*)::int FROM subscription.outbox WHERE path LIKE '/internal/users/\(user.uuidString.lowercased())/status%'"
            )
            for jws in jwsByOffset + jwsByOffset {
                for path in ["subscriptions/restore", "subscriptions/purchase"] {
                    let r = try await h.post(path, user, jws: jws)
                    XCTAssertEqual(r.status, .badRequest, path)
                    XCTAssertEqual(try r.envelope().error, "transaction_revoked", path)
                }
            }
            var me = try await StoreNotificationTests.me(h, user)
            XCTAssertFalse(me.is_premium)
            XCTAssertEqual(me.subscription?.status, "revoked")
            let after = try await h.scalar(
                "SELECT count(*)::int FROM subscription.outbox WHERE path LIKE '/internal/users/\(user.uuidString.lowercased())/status%'"
            )
            XCTAssertEqual(after, before, "nothing told to auth: nothing changed")
            // A transaction the store issued afterwards (a new id, a later period) is a new purchase.
            let renewed = try h.store.transaction(id: original + "-2", original: original, trial: false, expires: Date() + 40 * 86400)
            let again = try await h.post("subscriptions/purchase", user, jws: renewed)
            XCTAssertEqual(again.status, .ok, String(buffer: again.body))
            me = try await StoreNotificationTests.me(h, user)
            XCTAssertTrue(me.is_premium)
            XCTAssertEqual(me.subscription?.status, "active")
        }
    }

    /// #13: a new transaction id with an earlier period does not revive a refunded subscription,
    /// and Apple's own REFUND_REVERSED does.
    func testOnlyTheStoreRevivesARefundedSubscription() async throws {
        try await Self.run { h in
            let user = UUID()
            let original = "4200000\(Int.random(in: 100000...999999))"
            let tx = try h.store.transaction(id: original, original: original, trial: false, expires: Date() + 30 * 86400)
            _ = try await h.post("subscriptions/purchase", user, jws: tx)
            _ = try await StoreNotificationTests.post(h, try h.store.notification("REFUND", transaction: tx))
            let older = try h.store.transaction(id: original + "-0", original: original, trial: false, expires: Date() + 10 * 86400)
            let r = try await h.post("subscriptions/restore", user, jws: older)
            XCTAssertEqual(try r.envelope().error, "transaction_revoked")
            var me = try await StoreNotificationTests.me(h, user)
            XCTAssertFalse(me.is_premium)
            _ = try await StoreNotificationTests.post(h, try h.store.notification("REFUND_REVERSED", transaction: tx))
            me = try await StoreNotificationTests.me(h, user)
            XCTAssertTrue(me.is_premium)
            let replay = try await h.post("subscriptions/restore", user, jws: tx)
            XCTAssertEqual(replay.status, .ok, "the reversal made the transaction good again")
        }
    }

    /// #13: StoreKit 2 appAccountToken: a transaction the app tied to one account is refused
    /// to another (purchase and restore alike), and nothing is written.
    func testAppAccountTokenBindsATransactionToItsBuyer() async throws {
        try await Self.run { h in
            let buyer = UUID()
            let thief = UUID()
            let original = "4300000\(Int.random(in: 100000...999999))"
            let tx = try h.store.transaction(id: original, original: original, trial: false, accountToken: buyer)
            for path in ["subscriptions/purchase", "subscriptions/restore"] {
                let r = try await h.post(path, thief, jws: tx)
                XCTAssertEqual(r.status, .conflict, path)
                XCTAssertEqual(try r.envelope().error, "purchase_owned_by_another_user", path)
            }
            let none = try await h.scalar("SELECT count(*)::int FROM subscription.subscriptions WHERE store_original_transaction_id = '\(original)'")
            XCTAssertEqual(none, 0)
            let mine = try await h.post("subscriptions/purchase", buyer, jws: tx)
            XCTAssertEqual(mine.status, .created)
            let moved = try await h.post("subscriptions/restore", thief, jws: tx)
            XCTAssertEqual(moved.status, .conflict, "restore cannot move it either")
            let owner = try await h.scalar(
                "SELECT count(*)::int FROM subscription.subscriptions WHERE store_original_transaction_id = '\(original)' AND user_id = '\(buyer)'"
            )
            XCTAssertEqual(owner, 1)
            let token = try await h.scalar(
                "SELECT count(*)::int FROM subscription.iap_receipts WHERE transaction_id = '\(original)' AND app_account_token = '\(buyer)'"
            )
            XCTAssertEqual(token, 1)
        }
    }

    func testPurchaseRules() {
        XCTAssertEqual(
            PurchaseRules.effect(transaction: .revoked, incomingExpiresMS: 9, subscriptionStatus: .active, storedExpiresMS: 1),
            .refuseRevoked
        )
        XCTAssertEqual(
            PurchaseRules.effect(transaction: .active, incomingExpiresMS: 9, subscriptionStatus: .revoked, storedExpiresMS: 1),
            .refuseRevoked
        )
        XCTAssertEqual(
            PurchaseRules.effect(transaction: .unknown, incomingExpiresMS: 1, subscriptionStatus: .revoked, storedExpiresMS: 1),
            .refuseRevoked
        )
        XCTAssertEqual(PurchaseRules.effect(transaction: .unknown, incomingExpiresMS: 2, subscriptionStatus: .revoked, storedExpiresMS: 1), .extend)
        XCTAssertEqual(
            PurchaseRules.effect(
                transaction: .active,
                incomingExpiresMS: 1_700_000_000_001,
                subscriptionStatus: .active,
                storedExpiresMS: 1_700_000_000_001
            ),
            .keep
        )
        XCTAssertEqual(PurchaseRules.effect(transaction: .active, incomingExpiresMS: 5, subscriptionStatus: .expired, storedExpiresMS: 1), .extend)
        let u = UUID()
        XCTAssertTrue(PurchaseRules.accountTokenAllows(nil, user: u))
        XCTAssertTrue(PurchaseRules.accountTokenAllows(u.uuidString.lowercased(), user: u))
        XCTAssertFalse(PurchaseRules.accountTokenAllows(UUID().uuidString, user: u))
        XCTAssertFalse(PurchaseRules.accountTokenAllows("not-a-uuid", user: u))
        XCTAssertEqual(PurchaseRules.milliseconds(Date(timeIntervalSince1970: 1_700_000_000.987)), 1_700_000_000_987)
    }
}
