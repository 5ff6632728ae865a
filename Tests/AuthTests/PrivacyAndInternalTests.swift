import AuthDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// UC-AUTH-1.4 privacy settings, and the internal user endpoints other services call.
final class PrivacyAndInternalTests: XCTestCase {
    struct PrivacyBody: Decodable { var privacy: PrivacySettings }
    struct Update: Decodable {
        struct W: Decodable {
            var setting: String
            var impact: String
        }
        var privacy: PrivacySettings
        var appliedImmediately: Bool
        var warnings: [W]
        enum CodingKeys: String, CodingKey {
            case privacy
            case appliedImmediately = "applied_immediately"
            case warnings
        }
    }

    func testUpdateConsentsWarnsAndTellsOfflineAndAdsThroughTheOutbox() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            let token = r.tokens.accessToken
            let all =
                #"{"consent_analytics":true,"consent_third_party":false,"consent_geolocation":true,"consent_personalized_ads":true,"consent_notifications":true,"consent_game_center":true}"#
            let on = try await h.send(.patch, "auth/privacy", all, token: token)
            XCTAssertEqual(on.status, .ok, String(buffer: on.body))
            XCTAssertEqual(try on.json(Update.self).warnings.count, 0)

            let outboxBefore = try await h.scalar("SELECT count(*)::int FROM auth.outbox WHERE path LIKE '%\(r.user.id.uuidString.lowercased())%'")
            let off = try await h.send(.patch, "auth/privacy", #"{"consent_geolocation":false,"consent_personalized_ads":false}"#, token: token)
            XCTAssertEqual(off.status, .ok)
            let update = try off.json(Update.self)
            XCTAssertTrue(update.appliedImmediately)
            XCTAssertFalse(update.privacy.consentGeolocation)
            XCTAssertTrue(update.privacy.consentAnalytics, "fields not sent keep their value")
            XCTAssertEqual(update.warnings.map(\.impact), ["local_questions_unavailable", "non_personalized_ads"])
            // Each changed consent goes, versioned, to the service that acts on it: geolocation to
            // offline (which deletes the locations when it applies the withdrawal), personalised
            // ads to ads. Scoped by tenant, as the receivers' internal routes require.
            let uid = r.user.id.uuidString.lowercased()
            let scope = "?app_id=\(h.app.appID.uuidString.lowercased())"
            let geo = try await h.scalar(
                "SELECT max((body->>'version')::int) FROM auth.outbox WHERE target_service = 'offline' AND method = 'PUT' AND path = '/internal/users/\(uid)/consents/geolocation\(scope)' AND body->>'value' = 'false'"
            )
            let ads = try await h.scalar(
                "SELECT max((body->>'version')::int) FROM auth.outbox WHERE target_service = 'ads' AND path = '/internal/users/\(uid)/consents/personalized_ads\(scope)' AND body->>'value' = 'false'"
            )
            let earlier = try await h.scalar(
                "SELECT max((body->>'version')::int) FROM auth.outbox WHERE path LIKE '/internal/users/\(uid)/consents/%' AND body->>'value' = 'true'"
            )
            XCTAssertGreaterThan(earlier, 0)
            XCTAssertGreaterThan(geo, earlier, "the withdrawal carries a newer version than the grant")
            XCTAssertGreaterThan(ads, earlier)
            XCTAssertNotEqual(geo, ads, "one counter per user: every change has its own version")
            let outboxAfter = try await h.scalar("SELECT count(*)::int FROM auth.outbox WHERE path LIKE '%\(uid)%'")
            XCTAssertEqual(outboxAfter - outboxBefore, 2)
            // Nothing to tell when nothing another service acts on changed.
            _ = try await h.send(.patch, "auth/privacy", #"{"consent_notifications":false}"#, token: token)
            do {
                let v = try await h.scalar("SELECT count(*)::int FROM auth.outbox WHERE path LIKE '%\(uid)%'")
                XCTAssertEqual(v, outboxAfter)
            }

            let get = try await h.send(.get, "auth/privacy", token: token)
            XCTAssertEqual(try get.json(PrivacyBody.self).privacy.consentGeolocation, false)
            let audits = try await h.scalar("SELECT count(*)::int FROM auth.audit_logs WHERE user_id = '\(r.user.id)' AND action = 'privacy_update'")
            XCTAssertEqual(audits, 3, "every change is in the audit history")
        }
    }

    func testPrivacyBadInputChangesNothing() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            let token = r.tokens.accessToken
            for (body, field) in [
                (#"{"consent_geolocation":"yes"}"#, "consent_geolocation"),
                (#"{"consent_geolocation":true,"is_admin":true}"#, "is_admin"),
                (#"{}"#, nil), (#"[]"#, nil),
            ] {
                let resp = try await h.send(.patch, "auth/privacy", body, token: token)
                XCTAssertEqual(resp.status, .badRequest, body)
                if let field { XCTAssertEqual(try resp.envelope().extra["field"], .string(field)) }
            }
            let get = try await h.send(.get, "auth/privacy", token: token)
            XCTAssertEqual(try get.json(PrivacyBody.self).privacy.consentGeolocation, false, "nothing was half-applied")
            let noToken = try await h.send(.patch, "auth/privacy", #"{"consent_geolocation":true}"#)
            XCTAssertEqual(noToken.status, .unauthorized)
            // This app's token presented with another tenant's headers.
            let otherTenant = try await h.send(.patch, "auth/privacy", #"{"consent_geolocation":true}"#, token: token, app: h.otherApp)
            XCTAssertEqual(otherTenant.status, .unauthorized, String(buffer: otherTenant.body))
            let big = #"{"consent_geolocation":true,"pad":""# + String(repeating: "a", count: 2 << 20) + #""}"#
            let oversized = try await h.send(.patch, "auth/privacy", big, token: token)
            XCTAssertEqual(oversized.status, .contentTooLarge)
            XCTAssertEqual(try oversized.envelope().error, "payload_too_large")
            let after = try await h.send(.get, "auth/privacy", token: token)
            XCTAssertEqual(try after.json(PrivacyBody.self).privacy.consentGeolocation, false, "neither was applied")
        }
    }

    /// Seed 2.1: the purchase confirmation subscription asks for is emailed once per
    /// subscription however often the outbox delivers it; a failed send is a 503 and claims
    /// nothing (the redelivery sends it); guests get none; only subscription may ask.
    func testPurchaseConfirmationEmailOncePerSubscription() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail("buyer")
            let r = try await h.registerEmail(email)
            let uid = r.user.id.uuidString.lowercased()
            let app = h.app.appID.uuidString.lowercased()
            let service: HTTPFields = [
                .authorization: "Bearer local-internal-subscription", .xServiceName: "subscription",
                .contentType: "application/json",
            ]
            let sub = UUID().uuidString.lowercased()
            let body =
                #"{"app_id":"\#(app)","subscription_id":"\#(sub)","plan_type":"annual","product_id":"com.quiz.premium.annual","store":"apple","is_trial":true,"end_date":"2030-01-08T10:00:00Z"}"#
            @Sendable func ask(_ user: String = uid, _ json: String = body, headers: HTTPFields? = nil) async throws -> TestResponse {
                try await h.client.execute(
                    uri: "/internal/users/\(user)/emails/purchase-confirmation?app_id=\(app)",
                    method: .post,
                    headers: headers ?? service,
                    body: ByteBuffer(string: json)
                ) { $0 }
            }
            let before = h.mailer.sent.withLock { $0.count }
            h.mailer.refusing.withLock { $0 = true }
            let failed = try await ask()
            XCTAssertEqual(failed.status, .serviceUnavailable, "the outbox retries a failed send")
            let claims = try await h.scalar("SELECT count(*)::int FROM auth.sent_emails WHERE reference = '\(sub)'")
            XCTAssertEqual(claims, 0, "a failed send claims nothing")
            h.mailer.refusing.withLock { $0 = false }
            for i in 0..<3 {
                let ok = try await ask()
                XCTAssertEqual(ok.status, .ok)
                XCTAssertTrue(String(buffer: ok.body).contains(i == 0 ? #""result":"sent""# : #""result":"already_sent""#), String(buffer: ok.body))
            }
            let mails = h.mailer.sent.withLock { Array($0.dropFirst(before)) }
            XCTAssertEqual(mails.count, 1)
            XCTAssertEqual(mails.first?.to, [email])
            XCTAssertEqual(mails.first?.subject, "Confirmation de votre abonnement premium")
            XCTAssertTrue(mails.first?.text.contains("8 janvier 2030") ?? false, mails.first?.text ?? "")
            XCTAssertTrue(mails.first?.text.contains(sub) ?? false)

            // A guest has no address: nothing sent, nothing claimed.
            let guest = try await h.post("auth/register", #"{"provider":"guest","credentials":{"device_id":"guest-\#(UUID())"}}"#).json(
                AuthResponse.self
            )
            let g = try await ask(guest.user.id.uuidString.lowercased())
            XCTAssertTrue(String(buffer: g.body).contains(#""result":"no_email""#))

            // Bad input: another caller, another tenant, unknown user, wrong type, missing field, oversized body.
            let cases: [(String, String, HTTPFields?, HTTPResponse.Status)] = [
                (uid, body, [.authorization: "Bearer local-internal-ads", .xServiceName: "ads", .contentType: "application/json"], .forbidden),
                (uid, body.replacingOccurrences(of: app, with: UUID().uuidString.lowercased()), nil, .unprocessableContent),
                (UUID().uuidString.lowercased(), body, nil, .notFound),
                ("not-a-uuid", body, nil, .badRequest),
                (uid, body.replacingOccurrences(of: #""is_trial":true"#, with: #""is_trial":"yes""#), nil, .badRequest),
                (uid, #"{"app_id":"\#(app)"}"#, nil, .badRequest),
                (uid, #"{"app_id":"\#(app)","pad":""# + String(repeating: "x", count: 2 << 20) + #""}"#, nil, .contentTooLarge),
            ]
            for (user, json, headers, status) in cases {
                let v = try await ask(user, json, headers: headers)
                XCTAssertEqual(v.status, status, String(json.prefix(80)))
                XCTAssertNotNil(try? v.envelope().error)
            }
            XCTAssertEqual(h.mailer.sent.withLock { $0.count }, before + 1, "nothing more was sent")
        }
    }

    func testInternalStatusSummaryAndConsents() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            let uid = r.user.id.uuidString.lowercased()
            let app = h.app.appID.uuidString.lowercased()
            let service: HTTPFields = [
                .authorization: "Bearer local-internal-subscription", .xServiceName: "subscription",
                .contentType: "application/json",
            ]
            let put = try await h.client.execute(
                uri: "/internal/users/\(uid)/status",
                method: .put,
                headers: service,
                body: ByteBuffer(string: #"{"app_id":"\#(app)","status":"premium","version":2}"#)
            ) { $0 }
            XCTAssertEqual(put.status, .ok)
            XCTAssertEqual(try put.json(UserSummary.self).status, .premium)
            // An older answer (a purchase's "premium" after its refund's "free", or the reverse)
            // arriving late changes nothing; a replay neither.
            for stale in [1, 2] {
                let late = try await h.client.execute(
                    uri: "/internal/users/\(uid)/status",
                    method: .put,
                    headers: service,
                    body: ByteBuffer(string: #"{"app_id":"\#(app)","status":"free","version":\#(stale)}"#)
                ) { $0 }
                XCTAssertEqual(late.status, .ok)
                XCTAssertEqual(try late.json(UserSummary.self).status, .premium, "version \(stale) is not newer than 2")
            }
            let zero = try await h.client.execute(
                uri: "/internal/users/\(uid)/status",
                method: .put,
                headers: service,
                body: ByteBuffer(string: #"{"app_id":"\#(app)","status":"free","version":0}"#)
            ) { $0 }
            XCTAssertEqual(zero.status, .unprocessableContent)
            let noVersion = try await h.client.execute(
                uri: "/internal/users/\(uid)/status",
                method: .put,
                headers: service,
                body: ByteBuffer(string: #"{"app_id":"\#(app)","status":"free"}"#)
            ) { $0 }
            XCTAssertEqual(noVersion.status, .badRequest)
            // New tokens carry the new status.
            let login = try await h.loginEmail(r.user.email!)
            XCTAssertEqual(try login.json(AuthResponse.self).user.status, .premium)

            let summary = try await h.client.execute(uri: "/internal/users/\(uid)?app_id=\(app)", method: .get, headers: service) { $0 }
            XCTAssertEqual(summary.status, .ok)
            XCTAssertEqual(try summary.json(UserSummary.self).id, r.user.id)
            let consents = try await h.client.execute(uri: "/internal/users/\(uid)/consents?app_id=\(app)", method: .get, headers: service) { $0 }
            XCTAssertEqual(try consents.json(ConsentChange.self).geolocation, false)

            // Bad input and unknown ids.
            let suspended = try await h.client.execute(
                uri: "/internal/users/\(uid)/status",
                method: .put,
                headers: service,
                body: ByteBuffer(string: #"{"app_id":"\#(app)","status":"suspended","version":9}"#)
            ) { $0 }
            XCTAssertEqual(suspended.status, .unprocessableContent)
            let unknown = try await h.client.execute(
                uri: "/internal/users/\(UUID())/status",
                method: .put,
                headers: service,
                body: ByteBuffer(string: #"{"app_id":"\#(app)","status":"free","version":9}"#)
            ) { $0 }
            XCTAssertEqual(unknown.status, .notFound)
            let otherTenant = try await h.client.execute(uri: "/internal/users/\(uid)?app_id=\(h.otherApp.appID)", method: .get, headers: service) {
                $0
            }
            XCTAssertEqual(otherTenant.status, .notFound)
            let noApp = try await h.client.execute(uri: "/internal/users/\(uid)", method: .get, headers: service) { $0 }
            XCTAssertEqual(noApp.status, .badRequest)
            let badID = try await h.client.execute(uri: "/internal/users/not-a-uuid?app_id=\(app)", method: .get, headers: service) { $0 }
            XCTAssertEqual(badID.status, .badRequest)
            let badStatus = try await h.client.execute(
                uri: "/internal/users/\(uid)/status",
                method: .put,
                headers: service,
                body: ByteBuffer(string: #"{"app_id":"\#(app)","status":"gold","version":9}"#)
            ) { $0 }
            XCTAssertEqual(badStatus.status, .badRequest)
            let noCredential = try await h.client.execute(uri: "/internal/users/\(uid)?app_id=\(app)", method: .get, headers: [:]) { $0 }
            XCTAssertEqual(noCredential.status, .unauthorized)
        }
    }

    /// The ads screen's answer reaches its owner: applied when auth has not changed that consent
    /// since the version ads showed, refused as stale otherwise; bad input changes nothing.
    func testAnAnswerFromTheAdsScreenIsAppliedUnlessAuthChangedItSince() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            let uid = r.user.id.uuidString.lowercased()
            let app = h.app.appID.uuidString.lowercased()
            let ads: HTTPFields = [.authorization: "Bearer local-internal-ads", .xServiceName: "ads", .contentType: "application/json"]
            func answer(
                _ body: String,
                user: String? = nil,
                consent: String = "personalized_ads",
                headers: HTTPFields? = nil
            ) async throws -> TestResponse {
                try await h.client.execute(
                    uri: "/internal/users/\(user ?? uid)/consent-answers/\(consent)?app_id=\(app)",
                    method: .post,
                    headers: headers ?? ads,
                    body: ByteBuffer(string: body)
                ) { $0 }
            }
            func personalized() async throws -> Bool {
                try await h.send(.get, "auth/privacy", token: r.tokens.accessToken).json(PrivacyBody.self).privacy.consentPersonalizedAds
            }
            let optIn = try await answer(#"{"app_id":"\#(app)","value":true,"based_on":0,"source":"ads"}"#)
            XCTAssertEqual(optIn.status, .ok, String(buffer: optIn.body))
            XCTAssertEqual(try optIn.json(FactOutcome.self).applied, true)
            do {
                let v = try await personalized()
                XCTAssertTrue(v, "the privacy screen shows the ads screen's answer")
            }
            let v1 = try await h.scalar(
                "SELECT max((body->>'version')::int) FROM auth.outbox WHERE path LIKE '/internal/users/\(uid)/consents/personalized_ads%'"
            )
            XCTAssertGreaterThan(v1, 0, "sent back to ads, versioned")
            // Withdrawn at auth afterwards; a late answer based on the older version is stale.
            _ = try await h.send(.patch, "auth/privacy", #"{"consent_personalized_ads":false}"#, token: r.tokens.accessToken)
            let late = try await answer(#"{"app_id":"\#(app)","value":true,"based_on":\#(v1),"source":"ads"}"#)
            XCTAssertEqual(try late.json(FactOutcome.self), FactOutcome(applied: false, reason: "stale_version"))
            do {
                let v = try await personalized()
                XCTAssertFalse(v)
            }
            let outbox = try await h.scalar("SELECT count(*)::int FROM auth.outbox WHERE path LIKE '/internal/users/\(uid)/%'")
            // Bad input: a version auth never issued, another consent, another tenant in the body, a
            // wrong type, a caller other than ads, an unknown user.
            let cases: [(String, String?, String, HTTPFields?, HTTPResponse.Status)] = [
                (#"{"app_id":"\#(app)","value":true,"based_on":999,"source":"ads"}"#, nil, "personalized_ads", nil, .unprocessableContent),
                (#"{"app_id":"\#(app)","value":true,"based_on":0,"source":"ads"}"#, nil, "geolocation", nil, .unprocessableContent),
                (#"{"app_id":"\#(UUID())","value":true,"based_on":0,"source":"ads"}"#, nil, "personalized_ads", nil, .unprocessableContent),
                (#"{"app_id":"\#(app)","value":"yes","based_on":0,"source":"ads"}"#, nil, "personalized_ads", nil, .badRequest),
                (
                    #"{"app_id":"\#(app)","value":true,"based_on":0,"source":"ads"}"#, nil, "personalized_ads",
                    [.authorization: "Bearer local-internal-offline", .xServiceName: "offline", .contentType: "application/json"], .forbidden
                ),
                (
                    #"{"app_id":"\#(app)","value":true,"based_on":0,"source":"ads"}"#, UUID().uuidString.lowercased(), "personalized_ads", nil,
                    .notFound
                ),
            ]
            for (body, user, consent, headers, status) in cases {
                do {
                    let v = try await answer(body, user: user, consent: consent, headers: headers).status
                    XCTAssertEqual(v, status, body)
                }
            }
            do {
                let v = try await personalized()
                XCTAssertFalse(v, "nothing applied")
            }
            do {
                let v = try await h.scalar("SELECT count(*)::int FROM auth.outbox WHERE path LIKE '/internal/users/\(uid)/%'")
                XCTAssertEqual(v, outbox)
            }
        }
    }
}
