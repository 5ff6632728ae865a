import Foundation
import ServiceKit
import XCTest

/// base64url (RFC 7515 §2) byte by byte: the same text as the standard alphabet with `+/`
/// swapped and the padding dropped, and back; RFC 4648's test vectors, every length.
final class Base64URLTests: XCTestCase {
    func testVectorsAndEveryLengthRoundTrip() {
        let vectors: [(String, String)] = [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"), ("\u{FB}\u{FF}", "w7vDvw"),
        ]
        for (plain, encoded) in vectors {
            XCTAssertEqual(Base64URL.encode(Data(plain.utf8)), encoded, plain)
            XCTAssertEqual(Base64URL.decode(encoded), Data(plain.utf8), encoded)
        }
        XCTAssertEqual(Base64URL.encode(Data([0xfb, 0xff, 0xbf])), "-_-_", "the two url-safe characters")
        for n in 0...70 {
            let bytes = Data((0..<n).map { _ in UInt8.random(in: 0...255) })
            let standard = bytes.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            XCTAssertEqual(Base64URL.encode(bytes), standard, "\(n) bytes")
            XCTAssertEqual(Base64URL.decode(standard), bytes, "\(n) bytes")
        }
        XCTAssertNil(Base64URL.decode("a"), "no base64 has a lone character")
        XCTAssertNil(Base64URL.decode("é!"), "not the alphabet")
    }
}
