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
    public init(http: CurlHTTPClient, server: SMTPServer) { self.http = http; self.server = server }
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

/// The texts of the emails (French, as the app's users see them).
enum Emails {
    static func verification(to email: String, from: String, link: String) -> SMTPMessage {
        SMTPMessage(from: from, to: [email], subject: "Vérifiez votre email",
                    text: "Cliquez ici pour vérifier votre compte :\n\(link)\n\nCe lien est valable 24 heures.")
    }

    static func passwordReset(to email: String, from: String, link: String) -> SMTPMessage {
        SMTPMessage(from: from, to: [email], subject: "Réinitialisation de votre mot de passe",
                    text: "Pour choisir un nouveau mot de passe :\n\(link)\n\nCe lien est valable 1 heure. Si vous n'avez rien demandé, ignorez ce message.")
    }

    /// Seed 2.1 postconditions: the purchase is confirmed by email.
    static func purchaseConfirmation(to email: String, from: String, _ p: PurchaseConfirmation) -> SMTPMessage {
        let day = DateFormatter()
        day.locale = Locale(identifier: "fr_FR")
        day.timeZone = TimeZone(identifier: "UTC")
        day.dateFormat = "d MMMM yyyy"
        let plan = p.planType == "annual" ? "annuel" : (p.planType == "monthly" ? "mensuel" : p.planType)
        let store = p.store == "apple" ? "l'App Store" : "Google Play"
        let period = p.isTrial
            ? "Votre essai gratuit est actif jusqu'au \(day.string(from: p.endDate)) ; l'abonnement commence ensuite sauf annulation."
            : "Votre accès premium est actif jusqu'au \(day.string(from: p.endDate)) et se renouvelle automatiquement."
        return SMTPMessage(from: from, to: [email], subject: "Confirmation de votre abonnement premium",
                           text: """
                           Merci ! Votre abonnement premium (\(plan)) est confirmé.
                           \(period)

                           Pour gérer ou annuler l'abonnement, passez par \(store) (réglages de votre compte).
                           Référence : \(p.subscriptionID.lowercasedString)
                           """)
    }
}
