import Crypto
import Foundation
import HTTPTypes
import XCTest

@testable import ServiceKit

final class HeaderLookupTests: XCTestCase {
    /// `value(_:)` answers what the fields' own subscript answers, for every shape of request.
    func testAValueIsWhatTheSubscriptReads() {
        let cases: [[(String, String)]] = [
            [],
            [("X-App-ID", "a")],
            [("x-app-id", "lower")],
            [("X-App-ID", "a"), ("X-API-Key", "k"), ("X-App-ID", "b")],
            [("Cookie", "a=1"), ("cookie", "b=2")],
            [("Authorization", "Bearer t"), ("X-Forwarded-For", "1.2.3.4"), ("X-Forwarded-For", "5.6.7.8")],
            [("X-App-ID", "")],
        ]
        let names: [HTTPField.Name] = [.xAppID, .xAPIKey, .cookie, .authorization, .xForwardedFor, .xRequestID]
        for pairs in cases {
            var fields = HTTPFields()
            for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
            for name in names {
                XCTAssertEqual(fields.value(name), fields[name], "\(name) in \(pairs)")
            }
        }
    }

    func testABearerCredentialIsTheTextAfterTheSchemeInAnyCase() {
        let table: [(String?, String?)] = [
            ("Bearer abc.def", "abc.def"),
            ("bearer abc", "abc"),
            ("BEARER abc", "abc"),
            ("bEaReR abc", "abc"),
            ("Bearer  abc", " abc"),
            ("Bearer ", nil),
            ("Bearer", nil),
            ("Bearerabc", nil),
            ("Basic dXNlcjpwYXNz", nil),
            ("Token abc", nil),
            ("Bearer\tabc", nil),
            ("Beare\u{0} abc", nil),
            (nil, nil),
        ]
        for (header, expected) in table {
            var fields = HTTPFields()
            if let header { fields[.authorization] = header }
            XCTAssertEqual(fields.bearerCredential, expected, header ?? "absent")
        }
    }

    func testTheDigestOfAStringIsTheDigestOfItsUTF8() {
        let bridged = NSString(string: "géographie-ns") as String
        for text in ["", "ak_live_123", "é à ü 日本", String(repeating: "x", count: 700), bridged, "token"[...].description] {
            XCTAssertEqual(text.sha256, SHA256.hash(data: Data(text.utf8)), text)
        }
    }
}
