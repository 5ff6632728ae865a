import AuthDomain
import Foundation
import XCTest

@testable import AuthService

final class TOTPTests: XCTestCase {
    /// RFC 6238 Appendix B, SHA-1, 8 digits.
    func testTheRFCVectors() {
        let secret = Data("12345678901234567890".utf8)
        let vectors: [(Int64, String)] = [
            (59, "94287082"), (1_111_111_109, "07081804"), (1_111_111_111, "14050471"),
            (1_234_567_890, "89005924"), (2_000_000_000, "69279037"), (20_000_000_000, "65353130"),
        ]
        for (time, expected) in vectors {
            XCTAssertEqual(TOTP.code(secret: secret, step: time / 30, digits: 8), expected, "T=\(time)")
            XCTAssertEqual(TOTP.code(secret: secret, step: time / 30), String(expected.suffix(6)), "T=\(time), 6 digits")
        }
    }

    func testACodeIsAcceptedOnceWithinOneStepEitherSide() {
        let secret = Data("12345678901234567890".utf8)
        let now = Date(timeIntervalSince1970: 1_234_567_890)
        let step = TOTP.step(at: now)
        let current = TOTP.code(secret: secret, step: step)
        XCTAssertEqual(TOTP.accept(current, secret: secret, at: now, lastUsed: nil), step)
        XCTAssertEqual(TOTP.accept(current, secret: secret, at: now, lastUsed: step - 1), step)
        XCTAssertNil(TOTP.accept(current, secret: secret, at: now, lastUsed: step), "a code works once")
        XCTAssertEqual(TOTP.accept(TOTP.code(secret: secret, step: step - 1), secret: secret, at: now, lastUsed: nil), step - 1)
        XCTAssertEqual(TOTP.accept(TOTP.code(secret: secret, step: step + 1), secret: secret, at: now, lastUsed: nil), step + 1)
        XCTAssertNil(TOTP.accept(TOTP.code(secret: secret, step: step - 2), secret: secret, at: now, lastUsed: nil), "a minute old")
        XCTAssertNil(TOTP.accept(current, secret: Data("another secret 12345".utf8), at: now, lastUsed: nil))
        for bad in ["", "12345", "1234567", "abcdef", "１２３４５６", String(repeating: "9", count: 600)] {
            XCTAssertNil(TOTP.accept(bad, secret: secret, at: now, lastUsed: nil), bad)
        }
        XCTAssertEqual(TOTP.accept(String(current.prefix(3)) + " " + current.suffix(3), secret: secret, at: now, lastUsed: nil), step)
    }

    func testTheProvisioningLinkAnAuthenticatorReads() {
        XCTAssertEqual(TOTP.base32(Data("12345678901234567890".utf8)), "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ")
        XCTAssertEqual(TOTP.base32(Data([0xff])), "74")
        let secret = TOTP.newSecret()
        XCTAssertEqual(TOTP.base32Decode(TOTP.base32(secret)), secret)
        XCTAssertEqual(TOTP.base32Decode("gezdgnbvgy3tqojq===="), Data("1234567890".utf8))
        XCTAssertNil(TOTP.base32Decode("GEZ1"), "1 is not in the alphabet")
        XCTAssertNil(TOTP.base32Decode(String(repeating: "A", count: 65)))
        let uri = TOTP.provisioningURI(secret: Data("12345678901234567890".utf8), account: "ana@example.com", issuer: "Quiz Geo")
        XCTAssertEqual(
            uri,
            "otpauth://totp/Quiz%20Geo%3Aana%40example.com?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Quiz%20Geo&algorithm=SHA1&digits=6&period=30"
        )
        XCTAssertEqual(TOTP.newSecret().count, 20)
        XCTAssertNotEqual(TOTP.newSecret(), TOTP.newSecret())
    }
}
