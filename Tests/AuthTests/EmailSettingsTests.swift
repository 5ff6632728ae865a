import AuthDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// #16: each app's emails come from its own sender, in its language, with its name and links,
/// set at run time through `/auth/v1/admin/email-settings`; the other app's are untouched.
final class EmailSettingsTests: XCTestCase {
    static func admin(_ h: AuthHarness, app: IssuedAPIKey, bearer: String = "local-admin-token") -> HTTPFields {
        var f = HTTPFields.tenant(app.appID, app.apiKey)
        f[.contentType] = "application/json"
        f[.authorization] = "Bearer \(bearer)"
        return f
    }

    static let capitals = """
        {"app_name":"Capitals","mail_from":"Capitals <hello@capitals.example>","support_email":"help@capitals.example",
         "link_base_url":"https://capitals.example/app","default_locale":"en",
         "templates":{"en":{"verify_email":{"subject":"Welcome to {{app_name}}","text":"Confirm your address: {{link}}"}}}}
        """

    static func register(_ h: AuthHarness, app: IssuedAPIKey, language: String? = nil) async throws -> SMTPMessage {
        let email = uniqueEmail()
        var headers = h.headers(app: app)
        if let language { headers[.acceptLanguage] = language }
        let r = try await h.client.execute(
            uri: "/auth/v1/auth/register",
            method: .post,
            headers: headers,
            body: ByteBuffer(
                string: """
                    {"provider":"email","credentials":{"email":"\(email)","password":"Tr1cky-Geography-42"},"device_info":{"device_id":"d1","platform":"ios"}}
                    """
            )
        ) { $0 }
        XCTAssertEqual(r.status, .created, String(buffer: r.body))
        return try XCTUnwrap(h.mailer.sent.withLock { $0.last { $0.to == [email] } })
    }

    func testEachAppsEmailsUseItsOwnSettingsSetAtRunTime() async throws {
        try await AuthHarness.run { h in
            // Before: the deployment's sender and links, in French, with the app's registered name.
            let before = try await Self.register(h, app: h.otherApp)
            XCTAssertEqual(before.subject, "Vérifiez votre email")
            XCTAssertTrue(before.text.contains("Other App"), before.text)
            XCTAssertTrue(before.text.contains("https://app.example.com/verify-email?token="), before.text)

            try await h.client.execute(
                uri: "/auth/v1/admin/email-settings",
                method: .put,
                headers: Self.admin(h, app: h.otherApp),
                body: ByteBuffer(string: Self.capitals)
            ) { r in
                XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            }
            let own = try await Self.register(h, app: h.otherApp)
            XCTAssertEqual(own.from, "Capitals <hello@capitals.example>")
            XCTAssertEqual(own.subject, "Welcome to Capitals")
            XCTAssertTrue(own.text.hasPrefix("Confirm your address: https://capitals.example/app/verify-email?token="), own.text)
            // The user's language wins over the app's default; no French wording set: the built-in one.
            let french = try await Self.register(h, app: h.otherApp, language: "fr-FR,fr;q=0.9,en;q=0.8")
            XCTAssertEqual(french.from, "Capitals <hello@capitals.example>")
            XCTAssertEqual(french.subject, "Vérifiez votre email")
            XCTAssertTrue(french.text.contains("Capitals") && french.text.contains("https://capitals.example/app/verify-email?token="), french.text)
            let english = try await Self.register(h, app: h.otherApp, language: "de-DE,en;q=0.5")
            XCTAssertEqual(english.subject, "Welcome to Capitals")
            // The first app is untouched.
            let first = try await Self.register(h, app: h.app)
            XCTAssertEqual(first.from, AuthSettings(environment: h.runtime.config.environment).mailFrom)
            XCTAssertTrue(first.text.contains("Quiz Geography") && first.text.contains("https://app.example.com/"), first.text)

            // Bad input: a 4xx in the envelope; the stored settings unchanged.
            let bad: [(String, HTTPResponse.Status)] = [
                (#"{"app_name":5}"#, .badRequest),
                (#"{"app_name":"X","mail_from":"x@y.example"}"#, .badRequest),
                (
                    Self.capitals.replacingOccurrences(
                        of: "Capitals <hello@capitals.example>",
                        with: #"Capitals <hello@capitals.example>\r\nBcc: all@victims.example"#
                    ), .unprocessableContent
                ),
                (Self.capitals.replacingOccurrences(of: "{{link}}", with: "{{password}}"), .unprocessableContent),
                (Self.capitals.replacingOccurrences(of: #""en":{"verify"#, with: #""de":{"verify"#), .badRequest),
                (Self.capitals.replacingOccurrences(of: "verify_email", with: "newsletter"), .badRequest),
                (
                    Self.capitals.replacingOccurrences(of: "https://capitals.example/app", with: "https://capitals.example/app/"),
                    .unprocessableContent
                ),
                (Self.capitals.replacingOccurrences(of: "https://capitals.example/app", with: "javascript:alert(1)"), .unprocessableContent),
                (Self.capitals.replacingOccurrences(of: #""default_locale":"en""#, with: #""default_locale":"xx""#), .badRequest),
                (Self.capitals.replacingOccurrences(of: "Welcome to {{app_name}}", with: String(repeating: "x", count: 1_100_000)), .contentTooLarge),
            ]
            for (body, status) in bad {
                try await h.client.execute(
                    uri: "/auth/v1/admin/email-settings",
                    method: .put,
                    headers: Self.admin(h, app: h.otherApp),
                    body: ByteBuffer(string: body)
                ) { r in
                    XCTAssertEqual(r.status, status, String(body.prefix(120)))
                    XCTAssertNotNil(try? r.envelope().error)
                }
            }
            // An operator key of the first app cannot change the second's; the platform token without a tenant key is refused.
            let keyA = try await OperatorKeyStore(db: h.runtime.db, logger: h.runtime.logger).create(
                appID: h.app.appID,
                name: "A ops",
                operator: "test"
            )!
            try await h.client.execute(
                uri: "/auth/v1/admin/email-settings",
                method: .put,
                headers: Self.admin(h, app: h.otherApp, bearer: keyA.key),
                body: ByteBuffer(string: Self.capitals.replacingOccurrences(of: "Capitals", with: "Hijacked"))
            ) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
            try await h.client.execute(uri: "/auth/v1/admin/email-settings", method: .get, headers: Self.admin(h, app: h.app, bearer: keyA.key)) {
                r in
                XCTAssertEqual(r.status, .ok, "its own app's settings (the defaults)")
                XCTAssertTrue(String(buffer: r.body).contains(#""is_own":false"#))
            }
            try await h.client.execute(uri: "/auth/v1/admin/email-settings", method: .get, headers: Self.admin(h, app: h.otherApp)) { r in
                XCTAssertEqual(r.status, .ok)
                let text = String(buffer: r.body)
                XCTAssertTrue(
                    text.contains(#""version":1"#) && text.contains("Capitals <hello@capitals.example>") && !text.contains("Hijacked"),
                    text
                )
            }
        }
    }

    func testLanguageChoiceRenderingAndValidationRules() throws {
        XCTAssertEqual(EmailLocale.preferred("en-GB,en;q=0.9"), .en)
        XCTAssertEqual(EmailLocale.preferred("de-DE, fr;q=0.8"), .fr)
        XCTAssertNil(EmailLocale.preferred("de-DE"))
        XCTAssertNil(EmailLocale.preferred(nil))
        let r = EmailTemplates.render(
            EmailTemplate(subject: "Hi {{app_name}}", text: "{{link}} {{unknown}}"),
            ["app_name": "A\r\nBcc: x@y", "link": "https://l"]
        )
        XCTAssertEqual(r.subject, "Hi A  Bcc: x@y", "a value never opens a new header line")
        XCTAssertEqual(r.text, "https://l {{unknown}}")
        for kind in EmailKind.allCases {
            for locale in EmailLocale.allCases {
                let t = EmailTemplates.builtIn(kind, locale)
                let allowed = Set(EmailTemplates.placeholders(kind))
                XCTAssertTrue(EmailTemplates.placeholdersUsed(in: t.subject + t.text).allSatisfy(allowed.contains), "\(kind) \(locale)")
                XCTAssertTrue(t.text.contains("{{app_name}}"), "\(kind) \(locale) names the app")
            }
        }
        var s = AppEmailSettings(
            appName: "Capitals",
            mailFrom: "hello@capitals.example",
            supportEmail: "help@capitals.example",
            linkBaseURL: "https://capitals.example",
            defaultLocale: .en
        )
        XCTAssertNoThrow(try s.validate())
        s.templates = [.fr: [.otp: EmailTemplate(subject: "Code", text: "{{link}}")]]
        XCTAssertThrowsError(try s.validate(), "a one-time code mail has no link")
    }
}

/// #16: an app's sign-in settings (Google client ids, Apple bundle ids, the Sign in with Apple
/// key) set at run time through `/auth/v1/admin/sign-in`; the key sealed and never read back.
final class SignInSettingsTests: XCTestCase {
    func testAppleSignInConfiguredAtRunTimeForASecondApp() async throws {
        try await AuthHarness.run { h in
            let sub = "apple-\(UUID())"
            let body = { (token: String) in AppleSignInTests.body(token, code: "valid-code", name: false) }
            // The second app has no Apple settings: refused.
            let before = try await h.post("auth/register", body(try await h.apple.identityToken(sub: sub, email: nil)), app: h.otherApp)
            XCTAssertEqual(before.status, .unauthorized)
            let exchangedBefore = h.apple.log.exchanged.withLock { $0.count }

            let pem = h.apple.teamKey.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
            let settings =
                #"{"apple_bundle_ids":["\#(h.apple.clientID)"],"apple":{"team_id":"\#(h.apple.teamID)","key_id":"\#(h.apple.keyID)","client_id":"\#(h.apple.clientID)","private_key_pem":"\#(pem)"}}"#
            try await h.client.execute(
                uri: "/auth/v1/admin/sign-in",
                method: .put,
                headers: EmailSettingsTests.admin(h, app: h.otherApp),
                body: ByteBuffer(string: settings)
            ) { r in
                XCTAssertEqual(r.status, .ok, String(buffer: r.body))
                XCTAssertFalse(String(buffer: r.body).contains("PRIVATE KEY"), "the key is never read back")
                XCTAssertTrue(String(buffer: r.body).contains(#""team_id":"\#(h.apple.teamID)""#))
            }
            let after = try await h.post("auth/register", body(try await h.apple.identityToken(sub: sub, email: nil)), app: h.otherApp)
            XCTAssertEqual(after.status, .created, String(buffer: after.body))
            XCTAssertEqual(h.apple.log.exchanged.withLock { $0.count }, exchangedBefore + 1, "the code exchanged with the stored key")
            let clear = try await h.scalar(
                """
                SELECT count(*)::int FROM auth.apple_signin_settings WHERE app_id = '\(h.otherApp.appID)'
                  AND position(convert_to('PRIVATE KEY', 'UTF8') in sealed_private_key) = 0
                """
            )
            XCTAssertEqual(clear, 1, "stored, sealed")

            for (bad, status) in [
                (#"{}"#, HTTPResponse.Status.unprocessableContent),
                (#"{"google_client_ids":"one"}"#, .badRequest),
                (#"{"google_client_ids":["has space"]}"#, .unprocessableContent),
                (settings.replacingOccurrences(of: pem, with: "not a key"), .unprocessableContent),
                (settings.replacingOccurrences(of: h.apple.teamID, with: "TEAM 1"), .unprocessableContent),
            ] {
                try await h.client.execute(
                    uri: "/auth/v1/admin/sign-in",
                    method: .put,
                    headers: EmailSettingsTests.admin(h, app: h.otherApp),
                    body: ByteBuffer(string: bad)
                ) { r in
                    XCTAssertEqual(r.status, status, bad.prefix(80).description)
                    XCTAssertNotNil(try? r.envelope().error)
                }
            }
            try await h.client.execute(uri: "/auth/v1/admin/sign-in", method: .get, headers: EmailSettingsTests.admin(h, app: h.otherApp)) { r in
                XCTAssertEqual(r.status, .ok)
                XCTAssertTrue(String(buffer: r.body).contains(#""version":1"#), String(buffer: r.body))
            }
        }
    }
}

/// #16: support's lookup of a user by id or email, and the customer timeline assembled by auth
/// (here the other services are not running: they are named in `incomplete`, auth's part shows).
final class SupportLookupTests: XCTestCase {
    func testLookupByIdAndEmailWithinTheOperatorsAppAndTheTimeline() async throws {
        // The other services at a closed port (a stack may be running on their usual ones).
        let closed = ["SUBSCRIPTION_URL": "http://127.0.0.1:1", "OFFLINE_URL": "http://127.0.0.1:1", "ADS_URL": "http://127.0.0.1:1"]
        try await AuthHarness.run(overrides: closed) { h in
            let email = uniqueEmail("support")
            let registered = try await h.registerEmail(email)
            let userID = registered.user.id
            _ = try await h.loginEmail(email, device: "tablet")
            func get(_ path: String, app: IssuedAPIKey) async throws -> TestResponse {
                try await h.client.execute(uri: "/auth/v1/\(path)", method: .get, headers: EmailSettingsTests.admin(h, app: app)) { $0 }
            }
            let byEmail = try await get("admin/users?email=\(email.uppercased())", app: h.app)
            XCTAssertEqual(byEmail.status, .ok, String(buffer: byEmail.body))
            let summary = try byEmail.json(SupportStore.UserSummary.self)
            XCTAssertEqual(summary.id, userID)
            XCTAssertEqual(summary.signInMethods, ["email"])
            XCTAssertGreaterThanOrEqual(summary.liveSessions, 2)
            let byID = try await get("admin/users/\(userID)", app: h.app)
            XCTAssertEqual(try byID.json(SupportStore.UserSummary.self).email, email)
            // The other app's operator does not find this app's user, by id or email.
            let fromOther = try await get("admin/users/\(userID)", app: h.otherApp)
            XCTAssertEqual(fromOther.status, .notFound)
            let emailFromOther = try await get("admin/users?email=\(email)", app: h.otherApp)
            XCTAssertEqual(emailFromOther.status, .notFound)
            for (path, status) in [
                ("admin/users?email=not-an-email", HTTPResponse.Status.unprocessableContent), ("admin/users", .unprocessableContent),
                ("admin/users/not-a-uuid", .unprocessableContent), ("admin/users/\(UUID())", .notFound),
                ("admin/users/\(userID)/timeline?limit=0", .unprocessableContent),
                ("admin/users/\(userID)/timeline?limit=x", .unprocessableContent),
            ] {
                let r = try await get(path, app: h.app)
                XCTAssertEqual(r.status, status, path)
                XCTAssertNotNil(try? r.envelope().error, path)
            }

            let timeline = try await get("admin/users/\(userID)/timeline", app: h.app)
            XCTAssertEqual(timeline.status, .ok, String(buffer: timeline.body))
            struct T: Decodable {
                var events: [TimelineEvent]
                var incomplete: [String]
            }
            let t = try timeline.json(T.self)
            XCTAssertEqual(t.incomplete, ["ads", "offline", "subscription"], "the services that could not answer are named")
            XCTAssertEqual(t.events.last?.kind, "auth.register")
            XCTAssertTrue(t.events.contains { $0.kind == "auth.login" }, "\(t.events.map(\.kind))")
            XCTAssertEqual(t.events.map(\.at), t.events.map(\.at).sorted(by: >), "newest first")
        }
    }
}

/// #16: an app's operator sees its own app (state, key prefix, operator keys, never a secret)
/// and may take it down at once with a reason; only the platform owner brings it back.
final class AppAdminTests: XCTestCase {
    func testShowAndDisableTheOperatorsOwnApp() async throws {
        try await AuthHarness.run { h in
            let keys = OperatorKeyStore(db: h.runtime.db, logger: h.runtime.logger)
            let key = try await keys.create(appID: h.otherApp.appID, name: "On call", operator: "test")!
            let shown = try await h.client.execute(
                uri: "/auth/v1/admin/app",
                method: .get,
                headers: EmailSettingsTests.admin(h, app: h.otherApp, bearer: key.key)
            ) { $0 }
            XCTAssertEqual(shown.status, .ok)
            let text = String(buffer: shown.body)
            XCTAssertTrue(text.contains(#""name":"Other App""#) && text.contains(#""active":true"#) && text.contains("On call"), text)
            XCTAssertFalse(text.contains(key.key) || text.contains(h.otherApp.apiKey), "no secret is shown")

            let noReason = try await h.client.execute(
                uri: "/auth/v1/admin/app/disable",
                method: .post,
                headers: EmailSettingsTests.admin(h, app: h.otherApp, bearer: key.key),
                body: ByteBuffer(string: #"{"reason":" "}"#)
            ) { $0 }
            XCTAssertEqual(noReason.status, .unprocessableContent)
            let disabled = try await h.client.execute(
                uri: "/auth/v1/admin/app/disable",
                method: .post,
                headers: EmailSettingsTests.admin(h, app: h.otherApp, bearer: key.key),
                body: ByteBuffer(string: #"{"reason":"API key leaked on a forum"}"#)
            ) { $0 }
            XCTAssertEqual(disabled.status, .ok, String(buffer: disabled.body))
            let refused = try await h.post("auth/register", #"{"provider":"guest","credentials":{"device_id":"after-disable"}}"#, app: h.otherApp)
            XCTAssertEqual(refused.status, .forbidden)
            XCTAssertEqual(try refused.envelope().error, "app_disabled")
            let untouched = try await h.post("auth/register", #"{"provider":"guest","credentials":{"device_id":"other-\#(UUID())"}}"#)
            XCTAssertEqual(untouched.status, .created, "the other app goes on")
            let audited = try await h.scalar(
                """
                SELECT count(*)::int FROM auth.audit_logs WHERE app_id = '\(h.otherApp.appID)' AND action = 'operator.app.disable'
                  AND details->>'reason' = 'API key leaked on a forum' AND details->>'operator' LIKE 'operator_key:\(key.id.lowercasedString):%'
                """
            )
            XCTAssertEqual(audited, 1)
            let enabled = try await PostgresApplicationRepository(db: h.runtime.db, logger: h.runtime.logger)
                .setActive(appID: h.otherApp.appID, active: true, reason: "test over", operator: "test")
            XCTAssertEqual(enabled?.active, true)
        }
    }
}
