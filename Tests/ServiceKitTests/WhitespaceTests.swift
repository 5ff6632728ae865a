import Foundation
import ServiceKit
import XCTest

final class WhitespaceTests: XCTestCase {
    /// The byte-level trim answers what Foundation answers, ASCII or not.
    func testTrimmingWhitespaceAgreesWithFoundation() {
        let table: [(String, String)] = [
            ("device-1", "device-1"), ("  device-1", "device-1"), ("device-1 \t", "device-1"), ("\t a b \t", "a b"),
            ("", ""), ("   ", ""), ("\t", ""), ("x", "x"), (" 10.0.0.1", "10.0.0.1"),
            // Not ASCII: Foundation's set (a no-break space is whitespace; a newline is not).
            ("\u{00A0}appareil\u{00A0}", "appareil"), (" é ", "é"), ("\u{2003}", ""), ("\nx\n", "\nx\n"),
        ]
        for (input, expected) in table {
            XCTAssertEqual(input.trimmingWhitespace, expected, "\(input.debugDescription)")
            XCTAssertEqual(input.trimmingCharacters(in: .whitespaces), expected, "the table itself: \(input.debugDescription)")
            XCTAssertEqual(input[...].trimmingWhitespace, expected, "substring \(input.debugDescription)")
        }
    }
}
