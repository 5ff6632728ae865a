import AppBackendClient
import Crypto
import Foundation
import OpenAPIAsyncHTTPClient
import PostgresNIO
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// The app's journey through the gateway, against the four binaries `make test` started:
/// guest → email upgrade (the verification mail opened from the mail folder) → second device →
/// plans → a StoreKit 2 purchase (signed with the stack's local chain, Apple's "Xcode"
/// environment) → premium everywhere → offline play and sync, a conflict merged → a place nearby → ad consent →
/// back to free when the period ends → a rewarded ad, a campaign, an unlock with credits → the
/// revenue report → a privacy export from all four services → deletion scheduled, cancelled,
/// scheduled again and executed when due → every service has forgotten the user.
final class JourneyTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    func demo() throws -> [String: String] { try DemoApp.values() }

    /// A free-form JSON value of a generated type (a conflict's data), for assertions.
    func json(_ value: some Encodable) throws -> [String: JSONValue] {
        guard case .object(let o) = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value)) else { return [:] }
        return o
    }

    func eventually(_ what: String, seconds: Double, _ check: () async throws -> Bool) async throws {
        let deadline = Date() + seconds
        while Date() < deadline {
            if try await check() { return }
            try await Task.sleep(for: .milliseconds(seconds <= 2 ? 50 : 500))
        }
        XCTFail("not within \(seconds) s: \(what)")
    }

    /// A StoreKit 2 signed transaction from the local chain, for a new original transaction.
    func signedTransaction(product: String, expires: Date) throws -> String {
        let id = "2000\(Int.random(in: 100_000_000...999_999_999))"
        return try LocalStoreKit().transaction(id: id, original: id, product: product, expires: expires)
    }

    /// The app's side of the journey: the Swift client generated from the four documents
    /// (AppBackendClient) on the server-side transport, every answer also held to its document.
    func backend(token: String? = nil) async throws -> AppBackend {
        let demo = try demo()
        let backend = AppBackend(
            serverURL: URL(string: gateway)!,
            appID: demo["APP_ID"]!,
            apiKey: demo["API_KEY"]!,
            transport: AsyncHTTPClientTransport(),
            middlewares: [ContractCheckMiddleware()]
        )
        if let token { await backend.credentials.set(accessToken: token, refreshToken: nil) }
        return backend
    }

    func testTheWholeJourney() async throws {
        let demo = try demo()
        let tenant = [("X-App-ID", demo["APP_ID"]!), ("X-API-Key", demo["API_KEY"]!), ("Content-Type", "application/json")]
        let app = try await backend()
        // The operator's calls go through the same client with the admin token.
        let admin = try await backend(token: "local-admin-token")

        // Guest, then upgraded by email: the guest keeps its id.
        let guest = try await app.auth.postAuthRegister(body: .json(.init(provider: .guest, credentials: .init(deviceId: "journey-\(UUID())"))))
            .created.body
            .json
        let userID = try XCTUnwrap(guest.user?.id)
        await app.signedIn(guest.tokens)
        let email = "journey-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "Tr1cky-Geography-42!"
        let linked = try await app.auth.postAuthLink(body: .json(.init(provider: .email, credentials: .init(email: email, password: password)))).ok
            .body.json
        XCTAssertEqual(linked.user?.id, userID)
        var verifyToken: String?
        try await eventually("the verification email", seconds: 15) {
            let mails = (try? FileManager.default.contentsOfDirectory(atPath: ".data/mail")) ?? []
            for m in mails where m.hasSuffix(".eml") {
                let text = try String(contentsOfFile: ".data/mail/" + m, encoding: .utf8).replacingOccurrences(of: "=\r\n", with: "")
                    .replacingOccurrences(
                        of: "=\n",
                        with: ""
                    ).replacingOccurrences(of: "=3D", with: "=")
                guard text.contains(email), let r = text.range(of: "token=") else { continue }
                verifyToken = String(text[r.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
                return true
            }
            return false
        }
        let verified = try await app.auth.postAuthVerifyEmail(body: .json(.init(token: verifyToken ?? ""))).ok.body.json
        XCTAssertTrue(verified.emailVerified)

        // The first device listens (#46): what the tablet buys arrives on its stream.
        let listener = try await backend(token: await app.credentials.accessToken)
        let (opened, openedNow) = AsyncStream.makeStream(of: Void.self)
        let heard = Task { () -> [String] in
            defer { openedNow.finish() }
            var types: [String] = []
            for try await update in listener.live() {
                types.append(update.type.rawValue)
                if update.type == .state_snapshot { openedNow.yield() }
                if update.type == .subscription_updated, update.event.data.additionalProperties["premium"]?.value as? Bool == true { break }
            }
            return types
        }
        var isOpen = opened.makeAsyncIterator()
        _ = await isOpen.next()

        // A second device signs in with the email.
        let second = try await app.auth.postAuthLogin(
            body: .json(
                .init(
                    provider: .email,
                    credentials: .init(email: email, password: password),
                    deviceInfo: .init(deviceId: "journey-tablet", platform: "android")
                )
            )
        ).ok.body.json
        await app.signedIn(second.tokens)
        let user = tenant + [("Authorization", "Bearer \(second.tokens.accessToken)")]

        // Plans, then a StoreKit 2 purchase that ends in two minutes.
        let plans = try await app.subscription.getPlans().ok.body.json.plans
        XCTAssertEqual(plans.count, 2)
        let periodEnd = Date() + 120
        let purchase = try await app.subscription.postSubscriptionsPurchase(
            body: .json(
                .init(
                    store: .apple,
                    signedTransaction: try signedTransaction(product: "com.quiz.premium.monthly", expires: periodEnd)
                )
            )
        ).created.body.json
        XCTAssertTrue(purchase.activated)
        XCTAssertEqual(purchase.subscription.status, .active)
        let me = try await app.subscription.getSubscriptionsMe().ok.body.json
        XCTAssertTrue(me.isPremium)
        // The first device heard it within 5 s, after its snapshot.
        let deadline = Task {
            try await Task.sleep(for: .seconds(5))
            heard.cancel()
        }
        let types = try await heard.value
        deadline.cancel()
        XCTAssertEqual(types.first, "state.snapshot")
        XCTAssertEqual(types.last, "subscription.updated", "the purchase on the tablet, live on the first device: \(types)")
        // Premium everywhere within a second (subscription's outbox tells ads and offline at
        // commit): no ads, offline limits lifted, auth knows.
        let told = Date()
        try await eventually("ads and offline see the premium entitlement", seconds: 1) {
            let ads = try await app.ads.getAdsAvailable(query: .init(adType: .rewarded, placement: "earn_credits")).ok.body.json
            let profile = try await app.offline.getSyncProfile().ok.body.json
            return ads.reason == "premium_user" && profile.limits.tier == .premium
        }
        print("journey: premium seen by ads and offline \(Int(Date().timeIntervalSince(told) * 1000)) ms after the purchase answered")
        try await eventually("auth sees the premium status", seconds: 15) {
            try await app.auth.getAuthMe().ok.body.json.user.status == .premium
        }

        // Offline: three categories, answers queued and synced.
        let job = try await app.offline.postCategoriesDownload(body: .json(.init(categoryIds: ["capitals-europe", "flags-europe", "flags-asia"])))
            .accepted.body
            .json
        try await eventually("the download", seconds: 30) {
            try await app.offline.getCategoriesDownloadByJob(path: .init(job: job.jobId)).ok.body.json.status == .completed
        }
        for i in 1...3 {
            let queued = try await app.offline.postSyncQueue(
                body: .json(
                    .init(
                        clientActionId: "journey-\(userID)-\(i)",
                        actionType: "answer_submit",
                        entityType: "quiz_completion",
                        entityId: "quiz_\(i)",
                        categoryId: "capitals-europe",
                        payload: .init(additionalProperties: [
                            "quiz_id": try .init(unvalidatedValue: "quiz_\(i)"), "score": try .init(unvalidatedValue: 5 + i),
                        ])
                    )
                )
            ).created.body.json
            XCTAssertEqual(queued.queueItem.clientActionId, "journey-\(userID)-\(i)")
        }
        let sync = try await app.offline.postSyncExecute().accepted.body.json
        try await eventually("the sync", seconds: 30) {
            let s = try await app.offline.getSyncExecuteByJob(path: .init(job: sync.jobId)).ok.body.json
            return s.status == .completed && s.succeeded == 3
        }
        // Both devices saved progress offline on the same version: the game server takes the
        // first and refuses the second (409): a conflict, which the player resolves by merging.
        _ = try await app.offline.patchSyncProfile(body: .json(.init(conflictStrategy: .manual))).ok
        for (i, save) in [(level: 3, stars: 9), (level: 5, stars: 2)].enumerated() {
            _ = try await app.offline.postSyncQueue(
                body: .json(
                    .init(
                        clientActionId: "journey-\(userID)-progress-\(i)",
                        actionType: "progress_save",
                        entityType: "progress",
                        entityId: "capitals-europe",
                        payload: .init(
                            additionalProperties: [
                                "based_on_version": try .init(unvalidatedValue: 0), "level": try .init(unvalidatedValue: save.level),
                                "stars": try .init(unvalidatedValue: save.stars),
                            ])
                    )
                )
            ).created
        }
        let conflictSync = try await app.offline.postSyncExecute().accepted.body.json
        try await eventually("the sync with a conflict", seconds: 30) {
            let s = try await app.offline.getSyncExecuteByJob(path: .init(job: conflictSync.jobId)).ok.body.json
            return s.status == .completed && s.succeeded == 1 && s.conflicts == 1
        }
        let open = try await app.offline.getSyncConflicts().ok.body.json.conflicts
        guard open.count == 1, let conflict = open.first else { return XCTFail("one conflict expected: \(open)") }
        XCTAssertEqual(try json(conflict.serverData)["level"], .int(3))
        XCTAssertEqual(try json(conflict.localData)["level"], .int(5))
        let merged = try await app.offline.postSyncConflictsByIdResolve(
            path: .init(id: conflict.id),
            body: .json(
                .init(
                    resolution: .merge,
                    mergeData: .init(additionalProperties: ["level": .local, "stars": .server])
                )
            )
        ).ok.body.json
        XCTAssertTrue(merged.resolved)
        let final = try json(try XCTUnwrap(merged.finalData))
        XCTAssertEqual(final["level"], .int(5))
        XCTAssertEqual(final["stars"], .int(9))

        // A place nearby, once geolocation is allowed.
        _ = try await app.auth.patchAuthPrivacy(body: .json(.init(consentGeolocation: true, consentPersonalizedAds: true))).ok
        _ = try await app.offline.postLocationUpdate(body: .json(.init(latitude: 41.9028, longitude: 12.4964, accuracy: 12, consentGiven: true)))
            .created
        let nearby = try await app.offline.getLocationNearbyContent(query: .init(radiusKm: 20)).ok.body.json.content
        XCTAssertEqual(nearby.first?.id, "around-it", "something near Rome")

        // Ad consent; the campaign the operator starts; the period ends: back to free.
        let consent = try await app.ads.postAdsConsent(
            body: .json(
                .init(
                    consentPersonalizedAds: true,
                    consentDataSharing: true,
                    ageGatePassed: true,
                    isUnderAge: false,
                    country: "IT"
                )
            )
        ).ok.body.json
        XCTAssertEqual(consent.consent?.consentPersonalizedAds, true)
        let campaign = try await admin.ads.postAdminCampaigns(
            body: .json(
                .init(
                    name: "Journey week",
                    description: "Watch 1 ad, get 5 credits",
                    campaignType: .watchAds,
                    reward: .init(_type: "credits", amount: 5),
                    conditions: .init(minAdsWatched: 1),
                    endsAt: Date() + 86400
                )
            )
        ).created.body.json
        try await eventually("the subscription period to end and ads to come back", seconds: 240) {
            guard Date() > periodEnd else { return false }
            let m = try await app.subscription.getSubscriptionsMe().ok.body.json
            let a = try await app.ads.getAdsAvailable(query: .init(adType: .rewarded, placement: "earn_credits")).ok.body.json
            return !m.isPremium && a.available
        }

        // A rewarded ad earns a credit; the campaign pays 5; 3 unlock the freemium flags.
        let offer = try await app.ads.postAdsRequest(body: .json(.init(adType: .rewarded, placement: "earn_credits"))).created.body.json
        try await Task.sleep(for: .seconds(20))
        _ = try await app.ads.postAdsByIdImpression(
            path: .init(id: offer.adRequestId),
            body: .json(.init(loaded: true, shown: true, loadTimeMs: 900))
        ).ok
        let done = try await app.ads.postAdsByIdComplete(
            path: .init(id: offer.adRequestId),
            body: .json(
                .init(
                    completed: true,
                    clicked: true,
                    displayDurationMs: 24500,
                    revenueUsd: 0.021
                )
            )
        ).ok.body.json
        XCTAssertEqual(done.newBalance, 1)
        let claim = try await app.ads.postCampaignsByIdClaimReward(path: .init(id: campaign.id)).ok.body.json
        XCTAssertEqual(claim.newBalance, 6)
        let unlock = try await app.subscription.postContentByIdUnlock(path: .init(id: "flags-asia")).ok.body.json
        XCTAssertEqual(unlock.balance, 3)
        let balance = try await app.subscription.getCreditsBalance().ok.body.json.balance
        XCTAssertEqual(balance, 3)

        // The operator's revenue report and its CSV.
        _ = try await admin.ads.postAnalyticsRefresh().ok
        let report = try await admin.ads.getAnalyticsRevenue().ok.body.json
        XCTAssertGreaterThanOrEqual(report.totalImpressions, 1)
        let csv = try await admin.ads.getAnalyticsRevenue(query: .init(format: .csv)).ok.body.csv
        let csvText = try await String(collecting: csv, upTo: 1 << 20)
        XCTAssertTrue(csvText.hasPrefix("date,ad_type,provider,placement"))

        // The privacy export holds data from all four services.
        let export = try await app.auth.postAuthPrivacyExport().accepted.body.json
        var url: String?
        try await eventually("the export", seconds: 30) {
            url = try await app.auth.getAuthPrivacyExportById(path: .init(id: export.exportId)).ok.body.json.downloadUrl
            return url != nil
        }
        // The link is relative to the API's public base (the gateway here).
        let link = try XCTUnwrap(url)
        let document = try await http.send(HTTPRequest(url: link.hasPrefix("http") ? link : gateway + link))
        let text = String(decoding: document.body, as: UTF8.self)
        for needle in ["\"subscription\"", "\"offline\"", "\"ads\"", "capitals-europe", "41.9028", "earn_credits", "com.quiz.premium.monthly"] {
            XCTAssertTrue(text.contains(needle), "the export mentions \(needle)")
        }

        // Deletion: scheduled, cancelled, scheduled again, executed when due.
        let scheduled = try await app.auth.deleteAuthMe().accepted.body.json
        let cancelled = try await app.auth.postAuthDeletionCancel(body: .json(.init(token: scheduled.cancellationToken))).ok.body.json
        XCTAssertTrue(cancelled.deletionCancelled)
        _ = try await app.auth.deleteAuthMe().accepted
        // Thirty days pass: the deletion and its job fall due.
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase)) { db in
            try await db.query(
                """
                UPDATE auth.deletions SET scheduled_for = now() - interval '1 second' WHERE user_id = \(UUID(uuidString: userID)!) AND status = 'scheduled'
                """,
                logger: TestEnvironment.logger
            )
            try await db.query(
                "UPDATE auth.jobs SET run_at = now() WHERE kind = 'execute_deletion' AND status = 'pending'",
                logger: TestEnvironment.logger
            )
        }
        let internalHeaders = [("Authorization", "Bearer local-internal-auth"), ("X-Service-Name", "auth")]
        let appID = demo["APP_ID"]!.lowercased()
        try await eventually("every service to forget the user", seconds: 60) {
            for port in [3002, 3003, 3004] {
                let r = try await http.send(
                    HTTPRequest(url: "http://127.0.0.1:\(port)/internal/users/\(userID)/export?app_id=\(appID)", headers: internalHeaders)
                )
                guard let doc = try? r.decode(UserDataExport.self) else { return false }
                for (_, section) in doc.sections { if case .array(let rows) = section, !rows.isEmpty { return false } }
            }
            return true
        }
        let gone = try await http.send(HTTPRequest(url: gateway + "/auth/v1/auth/me", headers: user))
        XCTAssertTrue((400..<500).contains(gone.status), "auth forgot the user: \(gone.status)")
    }
}
