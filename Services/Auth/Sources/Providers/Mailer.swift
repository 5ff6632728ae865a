import AuthDomain
import Foundation
import Logging
import ServiceKit
import WireTypes

/// Sends the emails of the auth flows (verification, reset, OTP, deletion, export).
public protocol Mailer: Sendable {
    func send(_ message: SMTPMessage) async throws
}

/// Through an SMTP server, with libcurl.
public struct SMTPMailer: Mailer {
    let http: CurlHTTPClient
    let server: SMTPServer
    public init(http: CurlHTTPClient, server: SMTPServer) {
        self.http = http
        self.server = server
    }
    public func send(_ message: SMTPMessage) async throws {
        try await http.sendMail(message, via: server)
    }
}

/// With no SMTP server configured (the local stack): each message is written as an `.eml`
/// file under the data folder, so a developer can open it.
public struct MailFolder: Mailer {
    let directory: URL
    public init(directory: URL) { self.directory = directory }
    public func send(_ message: SMTPMessage) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "-")
        let file = directory.appendingPathComponent("\(stamp)-\(UUID().uuidString.prefix(8)).eml")
        try Data(message.rendered().utf8).write(to: file, options: .atomic)
    }
}
