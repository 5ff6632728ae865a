import AuthDomain
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// #47 the console's team through auth's routes: invites, acceptance with a second factor,
/// sign-in, roles enforced by the service, the refresh cookie, logout and removal.
final class ConsoleTeamTests: XCTestCase {
    static let password = "Atlas-of-Capitals-1987"

    struct Team {
        let h: AuthHarness
        func headers(_ bearer: String?, app: IssuedAPIKey? = nil, key: Bool = false) -> HTTPFields {
            let app = app ?? h.app
            var f: HTTPFields = [.xAppID: app.appID.lowercasedString, .contentType: "application/json"]
            if key { f[.xAPIKey] = app.apiKey }
            if let bearer { f[.authorization] = "Bearer \(bearer)" }
            return f
        }
        func call(
            _ method: HTTPRequest.Method,
            _ path: String,
            _ json: String? = nil,
            bearer: String?,
            app: IssuedAPIKey? = nil,
            extra: HTTPFields = [:]
        )
            async throws -> TestResponse
        {
            var f = headers(bearer, app: app)
            // Each call its own client address unless told: the per-address budget is tested alone.
            f[.xForwardedFor] = "10.\(Int.random(in: 0...255)).\(Int.random(in: 0...255)).\(Int.random(in: 1...254))"
            for field in extra { f[field.name] = field.value }
            return try await h.client.execute(uri: "/auth/v1/\(path)", method: method, headers: f, body: json.map { ByteBuffer(string: $0) }) { $0 }
        }
        /// The token of the last invite mailed to `email` (from the link's fragment).
        func inviteToken(_ email: String) throws -> String {
            let text = try XCTUnwrap(h.mailer.sent.withLock { $0.last { $0.to.contains(email) }?.text }, "no invite mailed to \(email)")
            let r = try XCTUnwrap(text.range(of: "#/invite/"), text)
            return String(text[r.upperBound...].prefix { !$0.isWhitespace })
        }
        /// Invites, accepts (with an authenticator when `totp`), returns the member id and the secret.
        func join(_ email: String, role: OperatorRole, by bearer: String, totp: Bool) async throws -> (UUID, Data?) {
            let invited = try await call(.post, "admin/invites", #"{"email":"\#(email)","role":"\#(role.rawValue)"}"#, bearer: bearer)
            XCTAssertEqual(invited.status, .created, String(buffer: invited.body))
            let token = try inviteToken(email)
            let preview = try await call(.post, "console/invites/preview", #"{"token":"\#(token)"}"#, bearer: nil)
            XCTAssertEqual(preview.status, .ok, String(buffer: preview.body))
            let shown = try preview.json([String: JSONValue].self)
            XCTAssertEqual(shown["email"], .string(email))
            XCTAssertEqual(shown["role"], .string(role.rawValue))
            guard case .string(let secretText)? = shown["totp_secret"] else { throw XCTSkip("no secret") }
            let secret = try XCTUnwrap(TOTP.base32Decode(secretText))
            let body =
                totp
                ? #"{"token":"\#(token)","password":"\#(ConsoleTeamTests.password)","totp_secret":"\#(secretText)","totp_code":"\#(TOTP.code(secret: secret, step: TOTP.step(at: h.clock.now())))"}"#
                : #"{"token":"\#(token)","password":"\#(ConsoleTeamTests.password)"}"#
            let accepted = try await call(.post, "console/invites/accept", body, bearer: nil)
            XCTAssertEqual(accepted.status, .created, String(buffer: accepted.body))
            guard case .string(let idText)? = try accepted.json([String: JSONValue].self)["id"] else { throw XCTSkip("no id") }
            let id = try XCTUnwrap(UUID(uuidString: idText))
            // The link works once.
            let again = try await call(.post, "console/invites/accept", body, bearer: nil)
            XCTAssertEqual(again.status, .badRequest)
            XCTAssertEqual(try again.envelope().error, "invalid_or_expired_token")
            return (id, totp ? secret : nil)
        }
        func signIn(
            _ email: String,
            password: String = ConsoleTeamTests.password,
            code: String? = nil,
            app: IssuedAPIKey? = nil
        ) async throws -> TestResponse {
            let totp = code.map { #","totp_code":"\#($0)""# } ?? ""
            return try await call(.post, "console/sign-in", #"{"email":"\#(email)","password":"\#(password)"\#(totp)}"#, bearer: nil, app: app)
        }
        func token(_ r: TestResponse) throws -> String {
            XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            guard case .string(let t)? = try r.json([String: JSONValue].self)["access_token"] else { throw XCTSkip("no token") }
            return t
        }
        func count(_ sql: String) async throws -> Int { try await h.scalar(sql) }
        /// A team address of its own for each test.
        func address(_ tag: String) -> String { "\(tag)-\(UUID().uuidString.prefix(6).lowercased())@team.example" }
    }

    func testAnOwnerBuildsTheTeamAndEachServiceHoldsTheRoles() async throws {
        try await AuthHarness.run { h in
            let t = Team(h: h)
            let ownerEmail = t.address("owner")
            // The platform's token invites the first owner; the owner enrols an authenticator.
            let (ownerID, ownerSecret) = try await t.join(ownerEmail, role: .owner, by: "local-admin-token", totp: true)
            let secret = try XCTUnwrap(ownerSecret)

            // Sign-in: the code is asked for, a wrong one refused, the right one works once.
            let noCode = try await t.signIn(ownerEmail)
            XCTAssertEqual(noCode.status, .unauthorized)
            XCTAssertEqual(try noCode.envelope().error, "totp_required")
            h.clock.advance(by: 31)
            let code = TOTP.code(secret: secret, step: TOTP.step(at: h.clock.now()))
            let wrong = try await t.signIn(ownerEmail, code: code == "000000" ? "111111" : "000000")
            XCTAssertEqual(try wrong.envelope().error, "invalid_totp")
            let signedIn = try await t.signIn(ownerEmail, code: code)
            let owner = try t.token(signedIn)
            let cookie = try XCTUnwrap(signedIn.headers[.setCookie])
            XCTAssertTrue(
                cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/auth/v1/console/refresh"),
                cookie
            )
            let replayed = try await t.signIn(ownerEmail, code: code)
            XCTAssertEqual(try replayed.envelope().error, "invalid_totp", "a code works once")

            // The owner invites a support member (no second factor: the app does not require one).
            let supportEmail = t.address("support")
            let (supportID, _) = try await t.join(supportEmail, role: .support, by: owner, totp: false)
            let support = try t.token(try await t.signIn(supportEmail))

            // Roles are the service's to enforce: support reads, but neither invites nor changes settings.
            let team = try await t.call(.get, "admin/members", bearer: support)
            XCTAssertEqual(team.status, .ok, String(buffer: team.body))
            XCTAssertTrue(String(buffer: team.body).contains(ownerEmail) && !String(buffer: team.body).contains("password"))
            let invitesBefore = try await t.count("SELECT count(*)::int FROM auth.operator_invites WHERE app_id = '\(h.app.appID)'")
            let forged = try await t.call(.post, "admin/invites", #"{"email":"x@team.example","role":"owner"}"#, bearer: support)
            XCTAssertEqual(forged.status, .forbidden)
            XCTAssertEqual(try forged.envelope().error, "insufficient_role")
            let got1 = try await t.count("SELECT count(*)::int FROM auth.operator_invites WHERE app_id = '\(h.app.appID)'")
            XCTAssertEqual(got1, invitesBefore)
            let settings = try await t.call(.put, "admin/console-settings", #"{"requires_totp":false}"#, bearer: support)
            XCTAssertEqual(settings.status, .forbidden)
            let emailSettings = try await t.call(.put, "admin/email-settings", EmailSettingsTests.capitals, bearer: support)
            XCTAssertEqual(emailSettings.status, .forbidden, "admin settings need the admin role")

            // Each request names the member in the operator audit, refusals included.
            let audited = try await t.count(
                "SELECT count(*)::int FROM auth.operator_audit WHERE operator = 'member:\(supportID.lowercasedString):\(supportEmail)' AND status = 403"
            )
            XCTAssertEqual(audited, 3)

            // Another app's console, a player's token, a forged token: refused.
            let elsewhere = try await t.call(.get, "admin/members", bearer: owner, app: h.otherApp)
            XCTAssertEqual(elsewhere.status, .unauthorized)
            let player = try await h.registerEmail(uniqueEmail())
            let asPlayer = try await t.call(.get, "admin/members", bearer: player.tokens.accessToken)
            XCTAssertEqual(asPlayer.status, .unauthorized)
            let asOperatorOnPlayerRoute = try await h.client.execute(
                uri: "/auth/v1/auth/me",
                method: .get,
                headers: h.headers(token: owner)
            ) { $0 }
            XCTAssertEqual(asOperatorOnPlayerRoute.status, .unauthorized, "a console token is not a player's")
            let forgedToken = try AccessTokenSigner(privateKey: .init()).signClaims(
                ConsoleClaims(
                    iss: "auth",
                    aud: "console",
                    sub: ownerID.lowercasedString,
                    appID: h.app.appID,
                    role: .owner,
                    email: ownerEmail,
                    sid: UUID(),
                    iat: Int(h.clock.now().timeIntervalSince1970),
                    exp: Int(h.clock.now().timeIntervalSince1970) + 600,
                    jti: "x"
                )
            )
            let got2 = try await t.call(.get, "admin/members", bearer: forgedToken).status
            XCTAssertEqual(got2, .unauthorized)

            // The last owner stays one.
            let demote = try await t.call(.patch, "admin/members/\(ownerID)", #"{"role":"admin"}"#, bearer: owner)
            XCTAssertEqual(demote.status, .conflict)
            XCTAssertEqual(try demote.envelope().error, "last_owner")
            let got3 = try await t.call(.delete, "admin/members/\(ownerID)", bearer: owner).status
            XCTAssertEqual(got3, .conflict)

            // A role change holds at once (the role is read with the session, not from the token).
            let demoted = try await t.call(.patch, "admin/members/\(supportID)", #"{"role":"viewer"}"#, bearer: owner)
            XCTAssertEqual(demoted.status, .ok, String(buffer: demoted.body))
            let asViewer = try await t.call(.put, "admin/console-settings", #"{"requires_totp":false}"#, bearer: support)
            XCTAssertTrue(String(buffer: asViewer.body).contains("yours is viewer"), String(buffer: asViewer.body))

            // Requiring a second factor waits until every member has one.
            let require = try await t.call(.put, "admin/console-settings", #"{"requires_totp":true}"#, bearer: owner)
            XCTAssertEqual(require.status, .conflict)
            XCTAssertEqual(try require.envelope().error, "totp_not_enrolled")

            // Removal: the member's token is refused at once here (the others within the cache's 5 s).
            let got4 = try await t.call(.delete, "admin/members/\(supportID)", bearer: owner).status
            XCTAssertEqual(got4, .noContent)
            let got5 = try await t.call(.get, "admin/members", bearer: support).status
            XCTAssertEqual(got5, .unauthorized)
            let got6 = try await t.signIn(supportEmail).status
            XCTAssertEqual(got6, .unauthorized, "a removed member cannot sign in")
            let got7 = try await t.call(.delete, "admin/members/\(supportID)", bearer: owner).status
            XCTAssertEqual(got7, .notFound)
            let got8 = try await t.call(.delete, "admin/members/not-a-uuid", bearer: owner).status
            XCTAssertEqual(got8, .badRequest)
        }
    }

    func testTheRefreshCookieRotatesAndLogoutEndsTheSession() async throws {
        try await AuthHarness.run { h in
            let t = Team(h: h)
            let email = t.address("ops")
            _ = try await t.join(email, role: .admin, by: "local-admin-token", totp: false)
            let signedIn = try await t.signIn(email)
            let access = try t.token(signedIn)
            let first = try XCTUnwrap(ConsoleRules.refreshToken(fromCookieHeader: signedIn.headers[.setCookie]))
            let cookie: (String) -> HTTPFields = { [.cookie: "console_refresh=\($0)", HTTPField.Name("X-Console-Request")!: "1"] }

            // Without the header a cross-site form cannot send, nothing is spent.
            let noHeader = try await t.call(.post, "console/refresh", bearer: nil, extra: [.cookie: "console_refresh=\(first)"])
            XCTAssertEqual(noHeader.status, .forbidden)
            XCTAssertEqual(try noHeader.envelope().error, "console_header_required")
            let refreshed = try await t.call(.post, "console/refresh", bearer: nil, extra: cookie(first))
            let second = try XCTUnwrap(ConsoleRules.refreshToken(fromCookieHeader: refreshed.headers[.setCookie]))
            XCTAssertNotEqual(first, second)
            let newAccess = try t.token(refreshed)
            // The spent cookie opens nothing; another app's console neither.
            let got9 = try await t.call(.post, "console/refresh", bearer: nil, extra: cookie(first)).status
            XCTAssertEqual(got9, .unauthorized)
            let got10 = try await t.call(.post, "console/refresh", bearer: nil, app: h.otherApp, extra: cookie(second)).status
            XCTAssertEqual(got10, .unauthorized)

            let got11 = try await t.call(.get, "admin/members", bearer: access).status
            XCTAssertEqual(got11, .ok)
            let out = try await t.call(.post, "console/logout", bearer: nil, extra: cookie(second))
            XCTAssertEqual(out.status, .noContent)
            XCTAssertTrue(out.headers[.setCookie]?.contains("Max-Age=0") == true)
            let got12 = try await t.call(.get, "admin/members", bearer: access).status
            XCTAssertEqual(got12, .unauthorized, "the session's tokens end with it")
            let got13 = try await t.call(.get, "admin/members", bearer: newAccess).status
            XCTAssertEqual(got13, .unauthorized)
            let got14 = try await t.call(.post, "console/refresh", bearer: nil, extra: cookie(second)).status
            XCTAssertEqual(got14, .unauthorized)

            // The page logs out with its access token (the cookie goes to the refresh route only).
            let third = try t.token(try await t.signIn(email))
            let noHeaderOut = try await t.call(.post, "console/logout", bearer: third)
            XCTAssertEqual(try noHeaderOut.envelope().error, "console_header_required")
            let got16 = try await t.call(.get, "admin/members", bearer: third).status
            XCTAssertEqual(got16, .ok, "a refused logout ends nothing")
            let header: HTTPFields = [HTTPField.Name("X-Console-Request")!: "1"]
            let otherAppOut = try await t.call(.post, "console/logout", bearer: third, app: h.otherApp, extra: header)
            XCTAssertEqual(otherAppOut.status, .unauthorized)
            let byBearer = try await t.call(.post, "console/logout", bearer: third, extra: header)
            XCTAssertEqual(byBearer.status, .noContent)
            XCTAssertTrue(byBearer.headers[.setCookie]?.contains("Max-Age=0") == true)
            let got17 = try await t.call(.get, "admin/members", bearer: third).status
            XCTAssertEqual(got17, .unauthorized)

            // Tokens run out after 10 minutes; an expired one still ends its own session (a tab
            // asleep past the ten minutes signs out, and its cookie no longer signs it back in).
            let again = try t.token(try await t.signIn(email))
            h.clock.advance(by: 11 * 60)
            let got15 = try await t.call(.get, "admin/members", bearer: again).status
            XCTAssertEqual(got15, .unauthorized)
            let sessionsLive =
                "SELECT count(*)::int FROM auth.operator_sessions s JOIN auth.operator_members m ON m.id = s.member_id WHERE m.email = '\(email)' AND s.ended_at IS NULL"
            let liveBefore = try await t.count(sessionsLive)
            XCTAssertEqual(liveBefore, 1)
            let expiredOut = try await t.call(.post, "console/logout", bearer: again, extra: header)
            XCTAssertEqual(expiredOut.status, .noContent)
            let liveAfter = try await t.count(sessionsLive)
            XCTAssertEqual(liveAfter, 0)
        }
    }

    func testWrongPasswordsLockAsForPlayersAndBadInputIsRefused() async throws {
        try await AuthHarness.run { h in
            let t = Team(h: h)
            let email = t.address("lock")
            _ = try await t.join(email, role: .viewer, by: "local-admin-token", totp: false)
            for i in 1...4 {
                let r = try await t.signIn(email, password: "wrong-\(i)")
                XCTAssertEqual(try r.envelope().error, "invalid_credentials")
            }
            let fifth = try await t.signIn(email, password: "wrong-5")
            XCTAssertEqual(fifth.status, .tooManyRequests)
            XCTAssertEqual(try fifth.envelope().error, "account_locked")
            for _ in 0..<5 {
                let got16 = try await t.signIn(email).status
                XCTAssertEqual(got16, .tooManyRequests, "locked: even the right password")
            }
            let got17 = try await t.count(
                "SELECT count(*)::int FROM auth.operator_sessions s JOIN auth.operator_members m ON m.id = s.member_id WHERE m.email = '\(email)'"
            )
            XCTAssertEqual(got17, 0)
            h.clock.advance(by: 15 * 60 + 1)
            _ = try t.token(try await t.signIn(email))

            // An unknown address is told as a wrong password.
            let unknown = try await t.signIn("nobody@team.example")
            XCTAssertEqual(try unknown.envelope().error, "invalid_credentials")

            // Bad input: an invite with a bad address, a role that is none, a weak password.
            let badEmail = try await t.call(.post, "admin/invites", #"{"email":"not an address","role":"viewer"}"#, bearer: "local-admin-token")
            XCTAssertEqual(badEmail.status, .unprocessableContent)
            let badRole = try await t.call(.post, "admin/invites", #"{"email":"a@team.example","role":"god"}"#, bearer: "local-admin-token")
            XCTAssertEqual(badRole.status, .badRequest)
            let wrongType = try await t.call(.post, "admin/invites", #"{"email":5,"role":"viewer"}"#, bearer: "local-admin-token")
            XCTAssertEqual(wrongType.status, .badRequest)
            let existing = try await t.call(.post, "admin/invites", #"{"email":"\#(email)","role":"viewer"}"#, bearer: "local-admin-token")
            XCTAssertEqual(try existing.envelope().error, "member_exists")
            let weakEmail = t.address("weak")
            _ = try await t.call(.post, "admin/invites", #"{"email":"\#(weakEmail)","role":"viewer"}"#, bearer: "local-admin-token")
            let weak = try await t.call(
                .post,
                "console/invites/accept",
                #"{"token":"\#(try t.inviteToken(weakEmail))","password":"password"}"#,
                bearer: nil
            )
            XCTAssertEqual(try weak.envelope().error, "weak_password")
            let got18 = try await t.count("SELECT count(*)::int FROM auth.operator_members WHERE email = '\(weakEmail)'")
            XCTAssertEqual(got18, 0)
            let unknownInvite = try await t.call(.post, "console/invites/preview", #"{"token":"nope"}"#, bearer: nil)
            XCTAssertEqual(unknownInvite.status, .badRequest)
            let noApp = try await h.client.execute(
                uri: "/auth/v1/console/sign-in",
                method: .post,
                headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"email":"\#(email)","password":"\#(ConsoleTeamTests.password)"}"#)
            ) { $0 }
            XCTAssertEqual(noApp.status, .unauthorized)
        }
    }
    func testAForgottenPasswordIsResetOnceByTheMailedLinkAndEndsEverySession() async throws {
        try await AuthHarness.run { h in
            let t = Team(h: h)
            let email = t.address("forgot")
            let (id, _) = try await t.join(email, role: .support, by: "local-admin-token", totp: false)
            let before = try t.token(try await t.signIn(email))
            for _ in 1...4 { _ = try await t.signIn(email, password: "wrong") }

            // An address not on the team: the same answer, no mail.
            let mailsBefore = h.mailer.sent.withLock { $0.count }
            let unknown = try await t.call(.post, "console/password/forgot", #"{"email":"nobody@team.example"}"#, bearer: nil)
            XCTAssertEqual(unknown.status, .accepted)
            XCTAssertEqual(h.mailer.sent.withLock { $0.count }, mailsBefore)
            let bad = try await t.call(.post, "console/password/forgot", #"{"email":5}"#, bearer: nil)
            XCTAssertEqual(bad.status, .badRequest)

            let asked = try await t.call(.post, "console/password/forgot", #"{"email":"\#(email.uppercased())"}"#, bearer: nil)
            XCTAssertEqual(asked.status, .accepted)
            let text = try XCTUnwrap(h.mailer.sent.withLock { $0.last { $0.to.contains(email) }?.text })
            let r = try XCTUnwrap(text.range(of: "#/reset/"), text)
            let token = String(text[r.upperBound...].prefix { !$0.isWhitespace })

            // A weak password changes nothing and leaves the link usable.
            let weak = try await t.call(.post, "console/password/reset", #"{"token":"\#(token)","password":"password"}"#, bearer: nil)
            XCTAssertEqual(try weak.envelope().error, "weak_password")
            let own = try await t.call(.post, "console/password/reset", #"{"token":"\#(token)","password":"\#(email)"}"#, bearer: nil)
            XCTAssertEqual(try own.envelope().error, "weak_password", "the member's own address is no password")
            let stillOld = try await t.signIn(email)
            XCTAssertEqual(stillOld.status, .ok, "the old password still works: nothing changed")
            let stillIn = try await t.call(.get, "admin/members", bearer: before).status
            XCTAssertEqual(stillIn, .ok)

            let newPassword = "Meridian-of-Greenwich-1884"
            let reset = try await t.call(.post, "console/password/reset", #"{"token":"\#(token)","password":"\#(newPassword)"}"#, bearer: nil)
            XCTAssertEqual(reset.status, .noContent, String(buffer: reset.body))
            let ended = try await t.call(.get, "admin/members", bearer: before).status
            XCTAssertEqual(ended, .unauthorized, "every session of the member ends")
            let old = try await t.signIn(email)
            XCTAssertEqual(try old.envelope().error, "invalid_credentials")
            _ = try t.token(try await t.signIn(email, password: newPassword))
            let again = try await t.call(
                .post,
                "console/password/reset",
                #"{"token":"\#(token)","password":"Another-Long-Passphrase-9"}"#,
                bearer: nil
            )
            XCTAssertEqual(try again.envelope().error, "invalid_or_expired_token", "the link works once")
            let audited = try await t.count(
                "SELECT count(*)::int FROM auth.audit_logs WHERE action = 'operator.password_reset' AND details->>'member_id' = '\(id.lowercasedString)'"
            )
            XCTAssertEqual(audited, 1)

            // An hour later a link is refused.
            _ = try await t.call(.post, "console/password/forgot", #"{"email":"\#(email)"}"#, bearer: nil)
            let late = try XCTUnwrap(h.mailer.sent.withLock { $0.last { $0.to.contains(email) }?.text })
            let lr = try XCTUnwrap(late.range(of: "#/reset/"))
            h.clock.advance(by: 3601)
            let expired = try await t.call(
                .post,
                "console/password/reset",
                #"{"token":"\#(String(late[lr.upperBound...].prefix { !$0.isWhitespace }))","password":"Another-Long-Passphrase-9"}"#,
                bearer: nil
            )
            XCTAssertEqual(try expired.envelope().error, "invalid_or_expired_token")
        }
    }

    func testAMemberWhoJoinedWithoutAnAuthenticatorAddsOneThenTheOwnerRequiresIt() async throws {
        try await AuthHarness.run { h in
            let t = Team(h: h)
            let ownerEmail = t.address("owner")
            let (_, ownerSecret) = try await t.join(ownerEmail, role: .owner, by: "local-admin-token", totp: true)
            let email = t.address("late")
            _ = try await t.join(email, role: .viewer, by: "local-admin-token", totp: false)
            let token = try t.token(try await t.signIn(email))

            let anonymous = try await t.call(.post, "console/me/totp/new", bearer: nil)
            XCTAssertEqual(anonymous.status, .unauthorized)
            let elsewhere = try await t.call(.post, "console/me/totp/new", bearer: token, app: h.otherApp)
            XCTAssertEqual(elsewhere.status, .unauthorized)
            let fresh = try await t.call(.post, "console/me/totp/new", bearer: token)
            XCTAssertEqual(fresh.status, .ok, String(buffer: fresh.body))
            guard case .string(let secretText)? = try fresh.json([String: JSONValue].self)["totp_secret"] else { return XCTFail("no secret") }
            let secret = try XCTUnwrap(TOTP.base32Decode(secretText))
            let code = TOTP.code(secret: secret, step: TOTP.step(at: h.clock.now()))

            // A wrong code, a bad secret, a missing field: refused, nothing stored.
            let enrolled = "SELECT count(*)::int FROM auth.operator_members WHERE email = '\(email)' AND totp_secret IS NOT NULL"
            let wrong = try await t.call(
                .put,
                "console/me/totp",
                #"{"totp_secret":"\#(secretText)","totp_code":"\#(code == "000000" ? "111111" : "000000")"}"#,
                bearer: token
            )
            XCTAssertEqual(try wrong.envelope().error, "invalid_totp")
            let badSecret = try await t.call(.put, "console/me/totp", #"{"totp_secret":"!!","totp_code":"123456"}"#, bearer: token)
            XCTAssertEqual(badSecret.status, .unprocessableContent)
            let missing = try await t.call(.put, "console/me/totp", #"{"totp_secret":"\#(secretText)"}"#, bearer: token)
            XCTAssertEqual(missing.status, .badRequest)
            let none = try await t.count(enrolled)
            XCTAssertEqual(none, 0)

            // Requiring an authenticator waits for this member; after the enrolment it holds.
            h.clock.advance(by: 31)
            let ownerCode = TOTP.code(secret: try XCTUnwrap(ownerSecret), step: TOTP.step(at: h.clock.now()))
            let owner = try t.token(try await t.signIn(ownerEmail, code: ownerCode))
            let tooEarly = try await t.call(.put, "admin/console-settings", #"{"requires_totp":true}"#, bearer: owner)
            XCTAssertEqual(try tooEarly.envelope().error, "totp_not_enrolled")
            let now = TOTP.code(secret: secret, step: TOTP.step(at: h.clock.now()))
            let ok = try await t.call(.put, "console/me/totp", #"{"totp_secret":"\#(secretText)","totp_code":"\#(now)"}"#, bearer: token)
            XCTAssertEqual(ok.status, .ok, String(buffer: ok.body))
            let one = try await t.count(enrolled)
            XCTAssertEqual(one, 1)
            let again = try await t.call(.put, "console/me/totp", #"{"totp_secret":"\#(secretText)","totp_code":"\#(now)"}"#, bearer: token)
            XCTAssertEqual(try again.envelope().error, "totp_already_enrolled", "replacing an authenticator is not this route")
            let required = try await t.call(.put, "admin/console-settings", #"{"requires_totp":true}"#, bearer: owner)
            XCTAssertEqual(required.status, .ok, String(buffer: required.body))
            let withoutCode = try await t.signIn(email)
            XCTAssertEqual(try withoutCode.envelope().error, "totp_required")
            h.clock.advance(by: 31)
            _ = try t.token(try await t.signIn(email, code: TOTP.code(secret: secret, step: TOTP.step(at: h.clock.now()))))
        }
    }

    func testTheMembersOwnRoutesRefuseBadInputAndChangeNothing() async throws {
        try await AuthHarness.run { h in
            let t = Team(h: h)
            let email = t.address("input")
            let (id, _) = try await t.join(email, role: .viewer, by: "local-admin-token", totp: false)
            let token = try t.token(try await t.signIn(email))
            let huge = String(repeating: "x", count: 1_100_000)
            let cases: [(HTTPRequest.Method, String, String?, String?, HTTPResponse.Status)] = [
                (.post, "console/password/forgot", #"{}"#, nil, .badRequest),
                (.post, "console/password/forgot", #"{"email":["a@b.example"]}"#, nil, .badRequest),
                (.post, "console/password/forgot", #"{"email":"not an address"}"#, nil, .unprocessableContent),
                (.post, "console/password/forgot", #"{"email":"\#(huge)"}"#, nil, .contentTooLarge),
                (.post, "console/password/reset", #"{"password":"Meridian-of-Greenwich-1884"}"#, nil, .badRequest),
                (.post, "console/password/reset", #"{"token":5,"password":"Meridian-of-Greenwich-1884"}"#, nil, .badRequest),
                (
                    .post, "console/password/reset", #"{"token":"\#(String(repeating: "a", count: 200))","password":"Meridian-of-Greenwich-1884"}"#,
                    nil,
                    .badRequest
                ),
                (.post, "console/password/reset", #"{"token":"unknown","password":"Meridian-of-Greenwich-1884"}"#, nil, .badRequest),
                (.post, "console/password/reset", #"{"token":"\#(huge)","password":"x"}"#, nil, .contentTooLarge),
                (.put, "console/me/totp", #"{"totp_secret":5,"totp_code":"123456"}"#, token, .badRequest),
                (.put, "console/me/totp", #"{"totp_code":"123456"}"#, token, .badRequest),
                (.put, "console/me/totp", #"{"totp_secret":"\#(huge)","totp_code":"1"}"#, token, .contentTooLarge),
                (.put, "console/me/totp", #"{"totp_secret":"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP","totp_code":"123456"}"#, nil, .unauthorized),
                (.put, "console/me/totp", #"{"totp_secret":"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP","totp_code":"123456"}"#, "eyJ.forged.x", .unauthorized),
                (.post, "console/logout", nil, "eyJ.forged.x", .forbidden),
            ]
            for (method, path, body, bearer, status) in cases {
                let r = try await t.call(method, path, body, bearer: bearer)
                XCTAssertEqual(r.status, status, "\(path) \(body?.prefix(60) ?? "")")
                XCTAssertNotNil(try? r.envelope().error, "\(path): the envelope")
            }
            // Without X-App-ID the console's app is unknown: 401, not a guess.
            let noApp = try await h.client.execute(
                uri: "/auth/v1/console/password/forgot",
                method: .post,
                headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"email":"\#(email)"}"#)
            ) { $0 }
            XCTAssertEqual(noApp.status, .unauthorized)
            let resets = try await t.count("SELECT count(*)::int FROM auth.operator_password_resets WHERE member_id = '\(id)'")
            XCTAssertEqual(resets, 0, "no refused request made a link")
            let enrolled = try await t.count("SELECT count(*)::int FROM auth.operator_members WHERE id = '\(id)' AND totp_secret IS NOT NULL")
            XCTAssertEqual(enrolled, 0)
            let signedIn = try await t.call(.get, "admin/members", bearer: token).status
            XCTAssertEqual(signedIn, .ok, "the session is untouched")
        }
    }

    func testConsoleSignInSpendsThePerAddressBudget() async throws {
        try await AuthHarness.run(overrides: ["CONSOLE_SIGNIN_LIMIT_PER_15_MINUTES": "5"]) { h in
            let t = Team(h: h)
            let ip = "198.51.100.\(Int.random(in: 1...250))"
            let xff: HTTPFields = [.xForwardedFor: ip]
            var statuses: [HTTPResponse.Status] = []
            for i in 0..<6 {
                // A different address each time: the budget is the client's, whoever it tries.
                let r = try await t.call(
                    .post,
                    "console/sign-in",
                    #"{"email":"guess-\#(i)@team.example","password":"wrong"}"#,
                    bearer: nil,
                    extra: xff
                )
                statuses.append(r.status)
            }
            XCTAssertEqual(statuses, [.unauthorized, .unauthorized, .unauthorized, .unauthorized, .unauthorized, .tooManyRequests])
            let accept = try await t.call(.post, "console/invites/accept", #"{"token":"x","password":"y"}"#, bearer: nil, extra: xff)
            XCTAssertEqual(accept.status, .tooManyRequests, "accepting an invite spends it too")
            let elsewhere = try await t.call(
                .post,
                "console/sign-in",
                #"{"email":"guess@team.example","password":"wrong"}"#,
                bearer: nil,
                extra: [.xForwardedFor: "203.0.113.9"]
            )
            XCTAssertEqual(elsewhere.status, .unauthorized, "another address has its own budget")
        }
    }

    func testMemberRoutesRefuseBadInputAnotherAppsMemberAndOversizedBodies() async throws {
        try await AuthHarness.run { h in
            let t = Team(h: h)
            let email = t.address("bad")
            let (id, _) = try await t.join(email, role: .support, by: "local-admin-token", totp: false)
            let stillSupport = "SELECT count(*)::int FROM auth.operator_members WHERE id = '\(id)' AND role = 'support'"
            let platform = "local-admin-token"

            // A role missing, of the wrong type, or none of the four: 400, the member unchanged.
            for body in [#"{}"#, #"{"role":5}"#, #"{"role":"god"}"#, #"{"role":null}"#, "not json"] {
                let r = try await t.call(.patch, "admin/members/\(id)", body, bearer: platform)
                XCTAssertEqual(r.status, .badRequest, body)
                XCTAssertFalse(try r.envelope().message.isEmpty, body)
                let got = try await t.count(stillSupport)
                XCTAssertEqual(got, 1, body)
            }
            // An unknown member, and this app's member seen from another app's console: 404, unchanged.
            let unknown = try await t.call(.patch, "admin/members/\(UUID())", #"{"role":"viewer"}"#, bearer: platform)
            XCTAssertEqual(unknown.status, .notFound)
            let elsewhere = try await t.call(.patch, "admin/members/\(id)", #"{"role":"owner"}"#, bearer: platform, app: h.otherApp)
            XCTAssertEqual(elsewhere.status, .notFound)
            let removedElsewhere = try await t.call(.delete, "admin/members/\(id)", bearer: platform, app: h.otherApp)
            XCTAssertEqual(removedElsewhere.status, .notFound)
            let got1 = try await t.count(stillSupport)
            XCTAssertEqual(got1, 1)
            _ = try t.token(try await t.signIn(email))

            // Oversized bodies on the open routes: 413 with the envelope, no session and no member.
            let sessions = "SELECT count(*)::int FROM auth.operator_sessions WHERE member_id = '\(id)'"
            let sessionsBefore = try await t.count(sessions)
            let invites = "SELECT count(*)::int FROM auth.operator_invites WHERE app_id = '\(h.app.appID)'"
            let invitesBefore = try await t.count(invites)
            let huge = String(repeating: "x", count: 1_100_000)
            let bigSignIn = try await t.call(.post, "console/sign-in", #"{"email":"\#(email)","password":"\#(huge)"}"#, bearer: nil)
            XCTAssertEqual(bigSignIn.status, .contentTooLarge)
            XCTAssertEqual(try bigSignIn.envelope().error, "payload_too_large")
            let bigAccept = try await t.call(.post, "console/invites/accept", #"{"token":"\#(huge)","password":"x"}"#, bearer: nil)
            XCTAssertEqual(bigAccept.status, .contentTooLarge)
            let bigInvite = try await t.call(.post, "admin/invites", #"{"email":"\#(huge)@team.example","role":"viewer"}"#, bearer: platform)
            XCTAssertEqual(bigInvite.status, .contentTooLarge)
            let got2 = try await t.count(sessions)
            XCTAssertEqual(got2, sessionsBefore)
            let got3 = try await t.count(invites)
            XCTAssertEqual(got3, invitesBefore)
        }
    }
}
