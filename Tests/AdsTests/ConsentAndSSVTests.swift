import AdsDomain
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// UC-ADS-4.3 consent (GDPR, COPPA, ATT, TCF; audit history; auth's withdrawal) and AdMob
/// server-side verification.
final class ConsentAndSSVTests: XCTestCase {
    func testConsentFlowHistoryUnderAgeAndATT() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            let first = try await h.call(.get, "/ads/consent?country=FR", user: user).json([String: JSONValue].self)
            XCTAssertTrue(first.isNull("consent"))
            XCTAssertEqual(first.bool("required"), true)
            XCTAssertEqual(first.bool("gdpr_applies"), true)
            let us = try await h.call(.get, "/ads/consent?country=US", user: user).json([String: JSONValue].self)
            XCTAssertEqual(us.bool("required"), false)
            XCTAssertEqual(us.bool("gdpr_applies"), false)

            let posted = try await h.call(
                .post,
                "/ads/consent",
                user: user,
                json: """
                    {"consent_personalized_ads":true,"consent_data_sharing":true,"age_gate_passed":true,"is_under_age":false,
                     "country":"DE","tcf_string":"CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA.YAAAAAAAAAAA","consent_form_status":"obtained"}
                    """
            ).json([String: JSONValue].self)
            XCTAssertEqual(posted.bool("ads_enabled"), true)
            XCTAssertEqual(posted.bool("personalized_ads"), true)
            XCTAssertEqual(posted.object("consent")?.bool("consent_personalized_ads"), true)
            XCTAssertEqual(posted.object("consent")?.string("tcf_string")?.hasPrefix("CPX"), true)

            // 15a: the ATT answer alone; the rest is kept, personalisation stops.
            let att = try await h.call(.post, "/ads/consent", user: user, json: #"{"att_status":"denied"}"#).json([String: JSONValue].self)
            XCTAssertEqual(att.object("consent")?.string("att_status"), "denied")
            XCTAssertEqual(att.object("consent")?.bool("consent_personalized_ads"), true)
            XCTAssertEqual(att.bool("personalized_ads"), false)
            let (id, r) = try await h.request(user)
            XCTAssertNotNil(id)
            XCTAssertEqual(try r.json([String: JSONValue].self).bool("personalized"), false)

            // 8a: under 13: nothing personalised, no rewarded ads, and (4.1: "pas de pub si age < 13
            // ans", 8a.5 "mode contenu uniquement") no interstitials either.
            let child = UUID()
            try await h.consent(child, personalized: true, underAge: true)
            let c = try await h.call(.get, "/ads/consent", user: child).json([String: JSONValue].self)
            XCTAssertEqual(c.object("consent")?.bool("consent_personalized_ads"), false)
            XCTAssertEqual(c.bool("rewarded_ads_allowed"), false)
            let a = try await h.available(child)
            XCTAssertEqual(a.string("reason"), "under_age")
            let refused = try await h.request(child).1
            XCTAssertEqual(refused.status, .forbidden)
            XCTAssertEqual(try refused.envelope().error, "under_age")
            XCTAssertEqual(c.bool("ads_enabled"), false)
            let interAvailable = try await h.available(child, "interstitial")
            XCTAssertEqual(interAvailable.bool("available"), false)
            XCTAssertEqual(interAvailable.string("reason"), "under_age")
            let (inter, ir) = try await h.request(child, "interstitial", placement: "post_quiz")
            XCTAssertNil(inter)
            XCTAssertEqual(try ir.envelope().error, "under_age")

            let history = try await h.count("SELECT count(*)::int FROM ads.user_consent_ads WHERE user_id = '\(user)'")
            XCTAssertEqual(history, 2, "every change is a new row")

            for (json, field) in [
                (#"{"att_status":"maybe"}"#, "att_status"), (#"{"tcf_string":"<bad>"}"#, "tcf_string"),
                (#"{"country":"FRA"}"#, "country"), (#"{"is_under_age":"no"}"#, "is_under_age"),
            ] {
                let bad = try await h.call(.post, "/ads/consent", user: user, json: json)
                XCTAssertTrue([400, 422].contains(bad.status.code), json)
                XCTAssertEqual(try bad.envelope().extra["field"], .string(field), json)
            }
            let empty = try await h.call(.post, "/ads/consent", user: user, json: "{}")
            XCTAssertEqual(empty.status, .badRequest)
        }
    }

    /// Auth's versioned personalised-ads consent: applied when newer, in any arrival order; an
    /// older or repeated version, another tenant, a wrong consent or a bad body change nothing.
    func testAuthConsentVersionsDecideWhateverTheArrivalOrder() async throws {
        try await AdsHarness.run { h in
            let user = UUID()
            try await h.consent(user)
            let internalHeaders: HTTPFields = [.authorization: "Bearer local-internal-auth", .xServiceName: "auth", .contentType: "application/json"]
            func send(
                _ value: Bool,
                version: Int64,
                consent: String = "personalized_ads",
                app: UUID? = nil,
                bodyUser: UUID? = nil
            ) async throws -> TestResponse {
                let body = try JSON.encoder.encode(
                    ConsentFact(appID: h.app, userID: bodyUser ?? user, consent: consent, value: value, version: version)
                )
                return try await h.client.execute(
                    uri: "/internal/users/\(user)/consents/\(consent)?app_id=\(app ?? h.app)",
                    method: .put,
                    headers: internalHeaders,
                    body: ByteBuffer(data: body)
                ) { $0 }
            }
            func personalized() async throws -> Bool? {
                try await h.call(.get, "/ads/consent", user: user).json([String: JSONValue].self).bool("personalized_ads")
            }
            let rows = { try await h.count("SELECT count(*)::int FROM ads.user_consent_ads WHERE user_id = '\(user)'") }
            // Version 3 (withdrawn) arrives before version 2 (granted): 3 stands.
            let withdrawn = try await send(false, version: 3)
            XCTAssertEqual(withdrawn.status, .ok)
            XCTAssertEqual(try withdrawn.json(FactOutcome.self).applied, true)
            do {
                let v = try await personalized()
                XCTAssertEqual(v, false)
            }
            let now = try await h.call(.get, "/ads/consent", user: user).json([String: JSONValue].self)
            XCTAssertEqual(now.object("consent")?.string("source"), "auth")
            let before = try await rows()
            for (value, version) in [(true, Int64(2)), (false, 3), (true, 1)] {
                let late = try await send(value, version: version)
                XCTAssertEqual(late.status, .ok)
                XCTAssertEqual(try late.json(FactOutcome.self), FactOutcome(applied: false, reason: "stale_version"))
            }
            do {
                let v = try await personalized()
                XCTAssertEqual(v, false, "an older version does not undo a newer one")
            }
            do {
                let v = try await rows()
                XCTAssertEqual(v, before, "nothing written")
            }
            // Bad input: version 0, a consent ads does not act on, body and path naming different
            // users or tenants, a wrong type, no credential.
            do {
                let v = try await send(true, version: 0).status
                XCTAssertEqual(v, .unprocessableContent)
            }
            do {
                let v = try await send(true, version: 9, consent: "geolocation").status
                XCTAssertEqual(v, .unprocessableContent)
            }
            do {
                let v = try await send(true, version: 9, app: UUID()).status
                XCTAssertEqual(v, .unprocessableContent)
            }
            do {
                let v = try await send(true, version: 9, bodyUser: UUID()).status
                XCTAssertEqual(v, .unprocessableContent)
            }
            let wrongType = try await h.client.execute(
                uri: "/internal/users/\(user)/consents/personalized_ads?app_id=\(h.app)",
                method: .put,
                headers: internalHeaders,
                body: ByteBuffer(string: #"{"app_id":"\#(h.app)","user_id":"\#(user)","consent":"personalized_ads","value":"yes","version":9}"#)
            ) { $0 }
            XCTAssertEqual(wrongType.status, .badRequest)
            let noCredential = try await h.client.execute(
                uri: "/internal/users/\(user)/consents/personalized_ads?app_id=\(h.app)",
                method: .put,
                headers: [.contentType: "application/json"],
                body: ByteBuffer(string: "{}")
            ) { $0 }
            XCTAssertEqual(noCredential.status, .unauthorized)
            // #50 one owner per fact: a consent told by another service's credential (here
            // subscription's, a real one) is refused, and changes nothing.
            let notTheOwner = try await h.client.execute(
                uri: "/internal/users/\(user)/consents/personalized_ads?app_id=\(h.app)",
                method: .put,
                headers: [.authorization: "Bearer local-internal-subscription", .xServiceName: "subscription", .contentType: "application/json"],
                body: ByteBuffer(
                    data: try JSON.encoder.encode(ConsentFact(appID: h.app, userID: user, consent: "personalized_ads", value: true, version: 99))
                )
            ) { $0 }
            XCTAssertEqual(notTheOwner.status, .forbidden)
            XCTAssertEqual(try notTheOwner.envelope().error, "forbidden")
            do {
                let v = try await personalized()
                XCTAssertEqual(v, false)
            }
            do {
                let v = try await rows()
                XCTAssertEqual(v, before)
            }
            // Version 4 grants again.
            do {
                let v = try await send(true, version: 4).json(FactOutcome.self).applied
                XCTAssertEqual(v, true)
            }
            do {
                let v = try await personalized()
                XCTAssertEqual(v, true)
            }
        }
    }

    /// One consent answer: an EU user who never answered stays `required` whatever else he
    /// sets (ATT, TCF); auth's personalised-ads answer answers it. An answer given here goes
    /// to auth (the owner) with the version this screen held.
    func testOnlyTheAdsQuestionAnswersItAndAnswersGoToAuth() async throws {
        try await AdsHarness.run { h in
            let user = UUID()
            let att = try await h.call(.post, "/ads/consent", user: user, json: #"{"att_status":"authorized","country":"DE"}"#)
            XCTAssertEqual(att.status, .ok)
            var c = try await h.call(.get, "/ads/consent", user: user, headers: nil).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("required"), true, "ATT is not the ads consent question")
            XCTAssertEqual(c.bool("ads_enabled"), false)
            let toAuth = {
                try await h.count(
                    "SELECT count(*)::int FROM ads.outbox WHERE target_service = 'auth' AND path LIKE '/internal/users/\(user.uuidString.lowercased())/consent-answers/personalized_ads?app_id=%'"
                )
            }
            do {
                let v = try await toAuth()
                XCTAssertEqual(v, 0, "nothing answered, nothing sent")
            }
            // Auth's answer (version 1) answers it.
            let fact = try JSON.encoder.encode(ConsentFact(appID: h.app, userID: user, consent: "personalized_ads", value: false, version: 1))
            let told = try await h.client.execute(
                uri: "/internal/users/\(user)/consents/personalized_ads?app_id=\(h.app)",
                method: .put,
                headers: [.authorization: "Bearer local-internal-auth", .xServiceName: "auth", .contentType: "application/json"],
                body: ByteBuffer(data: fact)
            ) { $0 }
            XCTAssertEqual(told.status, .ok)
            c = try await h.call(.get, "/ads/consent", user: user).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("required"), false)
            XCTAssertEqual(c.bool("personalized_ads"), false)
            // The user opts in here: kept at once, and sent to auth based on version 1.
            let optIn = try await h.call(.post, "/ads/consent", user: user, json: #"{"consent_personalized_ads":true}"#)
            XCTAssertEqual(optIn.status, .ok)
            c = try await h.call(.get, "/ads/consent", user: user).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("personalized_ads"), true)
            do {
                let v = try await toAuth()
                XCTAssertEqual(v, 1)
            }
            let based = try await h.count(
                "SELECT (body->>'based_on')::int FROM ads.outbox WHERE target_service = 'auth' AND path LIKE '/internal/users/\(user.uuidString.lowercased())/consent-answers/%'"
            )
            XCTAssertEqual(based, 1)
            // Outside GDPR regions consent is implicit (2a): ATT authorized keeps ads personalised,
            // denied makes them non-personalised.
            let american = UUID()
            _ = try await h.call(.post, "/ads/consent", user: american, json: #"{"att_status":"authorized","country":"US"}"#)
            c = try await h.call(.get, "/ads/consent", user: american).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("required"), false)
            XCTAssertEqual(c.bool("personalized_ads"), true)
            _ = try await h.call(.post, "/ads/consent", user: american, json: #"{"att_status":"denied"}"#)
            c = try await h.call(.get, "/ads/consent", user: american).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("personalized_ads"), false)
        }
    }

    func testAdMobCallbackGrantsOnceAndRefusesTamperedOrReplayed() async throws {
        try await AdsHarness.run { h in
            try await h.provider(verification: "ssv")
            let user = UUID()
            try await h.consent(user)
            let (id, r) = try await h.request(user)
            let adRequest = try XCTUnwrap(id)
            XCTAssertEqual(try r.json([String: JSONValue].self).bool("server_side_verification"), true)
            h.clock.advance(by: 31)
            // The client's word is not enough for an SSV provider.
            let c = try await h.complete(user, adRequest).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("reward_granted"), false)
            XCTAssertEqual(c.string("reward_status"), "awaiting_verification")
            XCTAssertEqual(h.upstream.earnCalls.withLock { $0 }, 0)

            func callback(_ query: String) async throws -> TestResponse {
                try await h.client.execute(uri: "/ads/v1/ads/ssv/admob?" + query, method: .get) { $0 }
            }
            let tx = UUID().uuidString.lowercased()
            let query = try h.upstream.ssvQuery(adRequest: adRequest, user: user, transaction: "tx-1-\(tx)")
            let ok = try await callback(query)
            XCTAssertEqual(ok.status, .ok, String(buffer: ok.body))
            XCTAssertEqual(try ok.json([String: String].self)["status"], "granted")
            XCTAssertEqual(h.upstream.balance(h.app, user), 1)
            // Replayed: the same transaction changes nothing.
            let replay = try await callback(query)
            XCTAssertEqual(try replay.json([String: String].self)["status"], "duplicate")
            // Another transaction id for the same ad: still one reward.
            let second = try await callback(try h.upstream.ssvQuery(adRequest: adRequest, user: user, transaction: "tx-2-\(tx)"))
            XCTAssertEqual(try second.json([String: String].self)["status"], "duplicate")
            XCTAssertEqual(h.upstream.balance(h.app, user), 1)
            let view = try await h.complete(user, adRequest).json([String: JSONValue].self)
            XCTAssertEqual(view.bool("reward_granted"), true)

            // Tampered: a changed field after signing.
            let tampered = query.replacingOccurrences(of: "reward_amount=1", with: "reward_amount=9")
            let t = try await callback(tampered)
            XCTAssertEqual(t.status, .forbidden)
            XCTAssertEqual(try t.envelope().error, "invalid_signature")
            // Signed by a key AdMob does not publish, under its key id and under an unknown one.
            let forged = try await callback(
                try h.upstream.ssvQuery(adRequest: adRequest, user: user, transaction: "tx-3-\(tx)", key: P256.Signing.PrivateKey())
            )
            XCTAssertEqual(forged.status, .forbidden)
            let fetchesBefore = h.upstream.keyFetches.withLock { $0 }
            let unknown = try await callback(try h.upstream.ssvQuery(adRequest: adRequest, user: user, transaction: "tx-4-\(tx)", keyID: 42))
            XCTAssertEqual(unknown.status, .forbidden)
            let unknownAgain = try await callback(try h.upstream.ssvQuery(adRequest: adRequest, user: user, transaction: "tx-5-\(tx)", keyID: 42))
            XCTAssertEqual(unknownAgain.status, .forbidden)
            XCTAssertEqual(h.upstream.keyFetches.withLock { $0 } - fetchesBefore, 1, "an absent key id refetches at most every 10 s")
            // #13: AdMob rotates: a key published since the last fetch is accepted at once, not
            // refused for 10 s because another id missed a moment ago.
            let rotated = P256.Signing.PrivateKey()
            h.upstream.rotatedKeys.withLock { $0[77] = rotated }
            let fresh = try await callback(
                try h.upstream.ssvQuery(adRequest: adRequest, user: user, transaction: "tx-7-\(tx)", key: rotated, keyID: 77)
            )
            XCTAssertEqual(fresh.status, .ok, String(buffer: fresh.body))
            XCTAssertEqual(h.upstream.keyFetches.withLock { $0 } - fetchesBefore, 2)
            let malformed = try await callback("transaction_id=1&custom_data=x")
            XCTAssertEqual(malformed.status, .badRequest)
            let wrongUser = try await callback(try h.upstream.ssvQuery(adRequest: adRequest, user: UUID(), transaction: "tx-6-\(tx)"))
            XCTAssertEqual(wrongUser.status, .unprocessableContent)
            XCTAssertEqual(h.upstream.balance(h.app, user), 1)
        }
    }

    /// The callback may come before the client's completion.
    func testCallbackBeforeCompletion() async throws {
        try await AdsHarness.run { h in
            try await h.provider(verification: "ssv")
            let user = UUID()
            try await h.consent(user)
            let requested = try await h.request(user).0
            let adRequest = try XCTUnwrap(requested)
            let ok = try await h.client.execute(
                uri: "/ads/v1/ads/ssv/admob?" + (try h.upstream.ssvQuery(adRequest: adRequest, user: user, transaction: "t-\(UUID())")),
                method: .get
            ) { $0 }
            XCTAssertEqual(try ok.json([String: String].self)["status"], "granted")
            h.clock.advance(by: 31)
            let c = try await h.complete(user, adRequest).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("reward_granted"), true)
            XCTAssertEqual(c.int("new_balance"), 1)
            XCTAssertEqual(h.upstream.balance(h.app, user), 1)
        }
    }

    func testInterstitialIntervalAndSoftCap() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            let a = try await h.available(user, "interstitial")
            XCTAssertEqual(a.bool("available"), true)
            let (id, _) = try await h.request(user, "interstitial", placement: "post_quiz")
            h.clock.advance(by: 8)
            let c = try await h.complete(user, try XCTUnwrap(id), ms: 8000).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("reward_granted"), false)
            XCTAssertEqual(c.int("cooldown_seconds"), 180)
            h.clock.advance(by: 60)
            let b = try await h.available(user, "interstitial")
            XCTAssertEqual(b.bool("available"), false)
            XCTAssertEqual(b.string("reason"), "interval_not_elapsed")
            XCTAssertEqual(b.int("cooldown_seconds"), 120)
            let refused = try await h.request(user, "interstitial").1
            XCTAssertEqual(refused.status, .tooManyRequests)
            // Interstitials do not touch the rewarded cooldown.
            let rewarded = try await h.available(user)
            XCTAssertEqual(rewarded.bool("available"), true)
            for _ in 0..<19 {
                h.clock.advance(by: 181)
                let (next, _) = try await h.request(user, "interstitial")
                _ = try await h.complete(user, try XCTUnwrap(next), ms: 6000)
            }
            h.clock.advance(by: 181)
            let capped = try await h.available(user, "interstitial")
            XCTAssertEqual(capped.string("reason"), "daily_limit_reached")
            let shown = try await h.count("SELECT interstitial_views FROM ads.user_ad_limits WHERE user_id = '\(user)'")
            XCTAssertEqual(shown, 20)
        }
    }
}
