import AuthDomain
import Foundation
import TestSupport
import XCTest

@testable import AuthService

/// The Swift port of zxcvbn against the reference `zxcvbn` package from PyPI, on 5,000
/// generated passwords of every kind it detects (dictionary words with capitals, l33t and
/// reversal, keyboard walks, sequences, repeats, years, dates, random strings, user inputs,
/// combinations).
final class ZxcvbnAgreementTests: XCTestCase {
    struct Reference: Decodable {
        var password: String
        var userInputs: [String]
        var score: Int
        var guessesLog10: Double
        enum CodingKeys: String, CodingKey {
            case password
            case userInputs = "user_inputs"
            case score
            case guessesLog10 = "guesses_log10"
        }
    }

    func testAgreesWithTheReferenceOn5000Passwords() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("zxcvbn_reference.py")
        let reference = try ChildProcess(TestEnvironment.python, [script.path, "5000"])
        XCTAssertEqual(reference.wait().status, 0, "the reference zxcvbn (pip install zxcvbn) must be available")
        let data = reference.standardOutputData
        let cases = try JSONDecoder().decode([Reference].self, from: data)
        XCTAssertEqual(cases.count, 5000)
        XCTAssertEqual(Set(cases.map(\.score)), [0, 1, 2, 3, 4], "every score is represented")

        let z = Zxcvbn.shared
        var scoreMismatches: [String] = []
        var guessMismatches: [String] = []
        for c in cases {
            let e = z.estimate(c.password, userInputs: c.userInputs)
            if e.score != c.score { scoreMismatches.append("\(c.password) swift=\(e.score) reference=\(c.score)") }
            if abs(log10(e.guesses) - c.guessesLog10) > 1e-6 {
                guessMismatches.append("\(c.password) swift=\(log10(e.guesses)) reference=\(c.guessesLog10)")
            }
        }
        XCTAssertEqual(scoreMismatches, [], "\(scoreMismatches.count) score disagreements")
        XCTAssertEqual(guessMismatches.count, 0, "guesses differ: \(guessMismatches.prefix(20))")
    }

    func testKnownScores() {
        let z = Zxcvbn.shared
        XCTAssertEqual(z.score("password", userInputs: []), 0)
        XCTAssertEqual(z.score("SecurePass123", userInputs: []), z.estimate("SecurePass123").score)
        XCTAssertGreaterThanOrEqual(z.score("correct horse battery staple", userInputs: []), 3)
        // A user's own email is a dictionary word for their password.
        XCTAssertLessThan(
            z.score("player@example.com1", userInputs: ["player@example.com"]),
            z.score("player@example.com1", userInputs: [])
        )
    }
}
