import AuthDomain
import Foundation
import ServiceKit
import WireTypes
import XCTest

@testable import AuthService

final class ConsoleRulesTests: XCTestCase {
    func claims(
        app: UUID = UUID(),
        aud: String = ConsoleClaims.audience,
        iat: Int = 1_000,
        exp: Int = 1_600,
        sub: String = UUID().uuidString
    ) -> ConsoleClaims {
        ConsoleClaims(iss: "auth", aud: aud, sub: sub, appID: app, role: .support, email: "a@b.co", sid: UUID(), iat: iat, exp: exp, jti: "j")
    }

    func testATokenActsOnlyForItsAppAudienceAndTime() {
        let app = UUID()
        let at = Date(timeIntervalSince1970: 1_200)
        XCTAssertTrue(ConsoleRules.accepts(claims(app: app), app: app, now: at))
        XCTAssertFalse(ConsoleRules.accepts(claims(app: app), app: UUID(), now: at), "another app")
        XCTAssertFalse(ConsoleRules.accepts(claims(app: app, aud: app.uuidString.lowercased()), app: app, now: at), "a player's audience")
        XCTAssertFalse(ConsoleRules.accepts(claims(app: app), app: app, now: Date(timeIntervalSince1970: 1_631)), "expired")
        XCTAssertTrue(ConsoleRules.accepts(claims(app: app), app: app, now: Date(timeIntervalSince1970: 1_629)), "within the leeway")
        XCTAssertFalse(ConsoleRules.accepts(claims(app: app), app: app, now: Date(timeIntervalSince1970: 900)), "issued in the future")
        XCTAssertFalse(ConsoleRules.accepts(claims(app: app, sub: "not-a-uuid"), app: app, now: at))
        // A logout: an expired token still names its session, for its app and audience only.
        XCTAssertTrue(ConsoleRules.accepts(claims(app: app), app: app, now: Date(timeIntervalSince1970: 99_999), expiredToo: true))
        XCTAssertFalse(ConsoleRules.accepts(claims(app: app), app: UUID(), now: Date(timeIntervalSince1970: 99_999), expiredToo: true))
        XCTAssertFalse(
            ConsoleRules.accepts(
                claims(app: app, aud: app.uuidString.lowercased()),
                app: app,
                now: Date(timeIntervalSince1970: 99_999),
                expiredToo: true
            )
        )
    }

    func testThePlayersTokenIsNotAConsoleTokenNorTheOtherWay() throws {
        let player = AccessTokenClaims(
            userID: UUID(),
            appID: UUID(),
            email: nil,
            status: .free,
            isGuest: true,
            issuer: "auth",
            issuedAt: 1,
            expiresAt: 2,
            jti: "x"
        )
        XCTAssertThrowsError(try JSON.decoder.decode(ConsoleClaims.self, from: JSON.encoder.encode(player)))
        XCTAssertThrowsError(try JSON.decoder.decode(AccessTokenClaims.self, from: JSON.encoder.encode(claims())))
    }

    func testTheRefreshCookie() {
        XCTAssertEqual(
            ConsoleRules.cookie("abc", secure: true),
            "console_refresh=abc; Path=/auth/v1/console/refresh; Max-Age=43200; HttpOnly; SameSite=Strict; Secure"
        )
        XCTAssertFalse(ConsoleRules.cookie("abc", secure: false).contains("Secure"))
        XCTAssertEqual(ConsoleRules.refreshToken(fromCookieHeader: "a=1; console_refresh=tok; b=2"), "tok")
        XCTAssertNil(ConsoleRules.refreshToken(fromCookieHeader: "console_refreshx=tok"))
        XCTAssertNil(ConsoleRules.refreshToken(fromCookieHeader: "console_refresh="))
        XCTAssertNil(ConsoleRules.refreshToken(fromCookieHeader: "console_refresh=" + String(repeating: "a", count: 200)))
        XCTAssertNil(ConsoleRules.refreshToken(fromCookieHeader: nil))
    }

    func testTheLastOwnerStays() {
        let a = UUID()
        let b = UUID()
        XCTAssertFalse(ConsoleRules.ownerMayLeave(member: a, owners: [a]))
        XCTAssertTrue(ConsoleRules.ownerMayLeave(member: a, owners: [a, b]))
        XCTAssertTrue(ConsoleRules.ownerMayLeave(member: a, owners: [b]), "not an owner: nothing to keep")
        XCTAssertTrue(ConsoleRules.ownerMayLeave(member: a, owners: []), "a team the platform built, with no owner yet")
    }
}
