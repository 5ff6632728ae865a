import AuthDomain
import Foundation
import ServiceKit
import TestSupport
import XCTest

@testable import AuthService

/// Auth's emails through a real SMTP server (aiosmtpd), and the mail folder of the local stack.
final class MailDeliveryTests: XCTestCase {
    func testVerificationEmailReachesARealSMTPServer() async throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let http = CurlHTTPClient()
        defer { http.shutdown() }
        let mailer = SMTPMailer(http: http, server: SMTPServer(url: sink.url))
        var sent = false
        for _ in 0..<100 where !sent {
            do {
                try await mailer.send(
                    SMTPMessage(
                        from: "no-reply@quiz.example",
                        to: ["player@example.com"],
                        subject: "Vérifiez votre email",
                        text: "Cliquez ici : https://app.example.com/verify-email?token=abc"
                    )
                )
                sent = true
            } catch { try await Task.sleep(for: .milliseconds(100)) }
        }
        XCTAssertTrue(sent)
        let messages = try sink.messages()
        XCTAssertEqual(messages.count, 1)
        XCTAssertTrue(messages[0].contains("verify-email?token=abc"))
    }

    func testWithoutSMTPEmailsAreWrittenAsEmlFiles() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mail-\(UUID())")
        try await MailFolder(directory: dir).send(
            SMTPMessage(from: "no-reply@quiz.example", to: ["a@example.com"], subject: "Réinitialisation", text: "https://x/reset?token=t")
        )
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        XCTAssertEqual(files.count, 1)
        XCTAssertTrue(files[0].hasSuffix(".eml"))
        let text = try String(contentsOf: dir.appendingPathComponent(files[0]), encoding: .utf8)
        XCTAssertTrue(text.contains("To: a@example.com"))
        XCTAssertTrue(text.contains("reset?token=t"))
    }
}
