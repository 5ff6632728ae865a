import AuthDomain
import Foundation
import ServiceKit
import XCTest

@testable import AuthService

/// Auth's decisions as functions of values (#36): each row is one flow of its use case. No
/// database, no network: `swift test --filter AuthDecisionTests` runs in well under a second.
final class AuthDecisionTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// UC-AUTH-1.4: the five outcomes of presenting a refresh token.
    func testRefreshRotation() {
        typealias P = RefreshRotation.Presented
        let live = P(revoked: false, expiresAt: now + 86400, rotatedAt: nil, hasSuccessor: false)
        let rotated = { (ago: TimeInterval, successor: Bool) in
            P(revoked: false, expiresAt: self.now + 86400, rotatedAt: self.now - ago, hasSuccessor: successor)
        }
        let rows: [(String, P?, RefreshRotation.Owner, RefreshRotation.Decision)] = [
            ("main flow: a live token of an active user is rotated", live, .active, .rotate),
            ("unknown token, or another app's", nil, .active, .refuse),
            ("unknown token even if the user is suspended", nil, .suspended, .refuse),
            (
                "revoked (logout, new login on the device)", P(revoked: true, expiresAt: now + 60, rotatedAt: nil, hasSuccessor: false), .active,
                .refuse
            ),
            ("expired at this very second", P(revoked: false, expiresAt: now, rotatedAt: nil, hasSuccessor: false), .active, .refuse),
            ("its user is gone (erased)", live, .missing, .refuse),
            (
                "its user is suspended: told why, even for an expired token",
                P(revoked: false, expiresAt: now - 1, rotatedAt: nil, hasSuccessor: false), .suspended, .ownerSuspended
            ),
            ("a concurrent refresh 3 s later gets the winner's pair", rotated(3, true), .active, .returnSuccessor),
            ("exactly at the 10 s grace", rotated(10, true), .active, .returnSuccessor),
            ("reuse after the grace ends the family", rotated(10.5, true), .active, .endFamily),
            ("reuse within the grace but no successor kept", rotated(1, false), .active, .endFamily),
            ("reuse of a rotated token whose user is gone", rotated(1, true), .missing, .endFamily),
            (
                "a rotated token that is also revoked is just refused", P(revoked: true, expiresAt: now + 60, rotatedAt: now - 1, hasSuccessor: true),
                .active,
                .refuse
            ),
        ]
        for (flow, token, owner, expected) in rows {
            XCTAssertEqual(RefreshRotation.decide(token, owner: owner, now: now), expected, flow)
        }
        XCTAssertEqual(RefreshRotation.successor(isLive: true), .returnSuccessor)
        XCTAssertEqual(RefreshRotation.successor(isLive: false), .endFamily, "a revoked successor: the race story does not hold")
    }

    /// UC-AUTH-1.2 13b/14b: the fifth consecutive wrong password locks for 15 minutes.
    func testLockout() {
        let rows: [(Int, Int, Date?)] = [
            (0, 1, nil), (3, 4, nil), (4, 5, now + 15 * 60), (9, 10, now + 15 * 60),
        ]
        for (before, after, locked) in rows {
            let state = LockoutPolicy.afterFailure(attempts: before, now: now)
            XCTAssertEqual(state.attempts, after, "after \(before) failures")
            XCTAssertEqual(state.lockedUntil, locked, "after \(before) failures")
        }
        XCTAssertEqual(LockoutPolicy.attemptsRemaining(after: 3), 2)
        XCTAssertEqual(LockoutPolicy.attemptsRemaining(after: 7), 0)
        XCTAssertEqual(LockoutPolicy.retryAfter(lockedUntil: now + 0.2, now: now), 1, "never tells a client to retry in 0 s")
        XCTAssertEqual(LockoutPolicy.retryAfter(lockedUntil: now + 899.1, now: now), 900)
    }

    /// Seed 14a: the existing account's owner can link the refused method exactly when the link would be accepted.
    func testLinkRules() {
        let rows: [(AuthProvider, Bool, String?, String?, Bool)] = [
            (.email, false, "g", nil, true), (.email, true, nil, nil, false),
            (.google, true, nil, "a", true), (.google, false, "g", nil, false),
            (.apple, true, "g", nil, true), (.apple, false, nil, "a", false),
            (.guest, false, nil, nil, false),
        ]
        for (attempted, hasPassword, google, apple, expected) in rows {
            XCTAssertEqual(
                LinkRules.canLink(attempted: attempted, existingHasPassword: hasPassword, existingGoogleID: google, existingAppleID: apple),
                expected,
                "\(attempted) onto password=\(hasPassword) google=\(google ?? "-") apple=\(apple ?? "-")"
            )
        }
    }

    /// A guest signs in with its device id and the secret only that device holds.
    func testGuestSecret() {
        let secret = "s3cret-of-the-device"
        let stored = OpaqueToken.hash(secret)
        let rows: [(String, String?, String?, GuestSecret.Decision)] = [
            ("main flow", stored, secret, .signIn),
            ("a guest from before secrets claims one", nil, nil, .claim),
            ("no secret given", stored, nil, .missing),
            ("an empty secret", stored, "", .missing),
            ("someone else's device id", stored, "guessed", .wrong),
        ]
        for (flow, hash, given, expected) in rows {
            XCTAssertEqual(GuestSecret.decide(storedHash: hash, given: given), expected, flow)
        }
    }

    func testEmailNormalization() {
        let rows: [(String, String?)] = [
            ("  Ana@Example.COM ", "ana@example.com"), ("a.b+quiz@sub.example.org", "a.b+quiz@sub.example.org"),
            ("no-at-sign", nil), ("two@@example.com", nil), ("a@localhost", nil), (".a@example.com", nil),
            ("a..b@example.com", nil), ("a@-example.com", nil), ("a@example.c", nil),
            (String(repeating: "x", count: 65) + "@example.com", nil), ("é@example.com", nil),
        ]
        for (raw, expected) in rows { XCTAssertEqual(EmailAddress.normalize(raw), expected, raw) }
        XCTAssertEqual(EmailAddress.mask("julie@example.com"), "j***@example.com")
    }

    /// The catalogue: snake_case codes, each once, each a client or server error.
    func testErrorCatalogue() {
        let codes = AuthErrorCode.allCases.map(\.rawValue)
        XCTAssertEqual(Set(codes).count, codes.count)
        for code in AuthErrorCode.allCases {
            XCTAssertNotNil(code.rawValue.range(of: "^[a-z]+(_[a-z]+)*$", options: .regularExpression), code.rawValue)
            XCTAssertTrue((400..<600).contains(code.status.code), code.rawValue)
        }
        XCTAssertEqual(AppError(AuthErrorCode.tokenReused, "m").status, .unauthorized)
        XCTAssertEqual(AppError(AuthErrorCode.tokenReused, "m").code, "token_reused")
    }
}
