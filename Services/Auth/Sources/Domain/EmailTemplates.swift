import Foundation
import ServiceCore

/// The emails auth sends, per app and language (#16): each app's name, sender, support address
/// and link base, its own wording where its operators set one, the built-in French or English
/// otherwise. Rendering is pure: `{{name}}` placeholders filled from known values only.
public enum EmailKind: String, CaseIterable, Codable, Sendable {
    case verification = "verify_email"
    case passwordReset = "password_reset"
    case otp = "otp_code"
    case deletionScheduled = "deletion_scheduled"
    case exportReady = "export_ready"
    case purchaseConfirmation = "purchase_confirmation"
}

public enum EmailLocale: String, CaseIterable, Codable, Sendable {
    case fr, en

    /// The first supported language of an `Accept-Language` header (`en-GB,en;q=0.9` → en).
    public static func preferred(_ header: String?) -> EmailLocale? {
        guard let header else { return nil }
        for part in header.split(separator: ",") {
            let tag = part.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            if let locale = EmailLocale(rawValue: String(tag.prefix(2))) { return locale }
        }
        return nil
    }
}

public struct EmailTemplate: Codable, Sendable, Equatable {
    public var subject: String
    public var text: String
    public init(subject: String, text: String) {
        self.subject = subject
        self.text = text
    }
}

/// One app's email settings as its operators set them (`PUT /auth/v1/admin/email-settings`).
public struct AppEmailSettings: Codable, Sendable, Equatable {
    public var appName: String
    /// `Name <address>`: the app's own sender.
    public var mailFrom: String
    public var supportEmail: String
    /// Base of the links in emails (the app's deep-link or web page).
    public var linkBaseURL: String
    public var defaultLocale: EmailLocale
    /// Overrides by language then kind; anything not given uses the built-in wording.
    public var templates: [EmailLocale: [EmailKind: EmailTemplate]]

    package enum CodingKeys: String, CodingKey {
        case appName = "app_name"
        case mailFrom = "mail_from"
        case supportEmail = "support_email"
        case linkBaseURL = "link_base_url"
        case defaultLocale = "default_locale"
        case templates
    }

    public init(
        appName: String,
        mailFrom: String,
        supportEmail: String,
        linkBaseURL: String,
        defaultLocale: EmailLocale,
        templates: [EmailLocale: [EmailKind: EmailTemplate]] = [:]
    ) {
        self.appName = appName
        self.mailFrom = mailFrom
        self.supportEmail = supportEmail
        self.linkBaseURL = linkBaseURL
        self.defaultLocale = defaultLocale
        self.templates = templates
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        appName = try c.decode(String.self, forKey: .appName)
        mailFrom = try c.decode(String.self, forKey: .mailFrom)
        supportEmail = try c.decode(String.self, forKey: .supportEmail)
        linkBaseURL = try c.decode(String.self, forKey: .linkBaseURL)
        defaultLocale = try c.decodeIfPresent(EmailLocale.self, forKey: .defaultLocale) ?? .fr
        // JSON object keys are strings: decoded by name, an unknown language or kind refused by name.
        let raw = try c.decodeIfPresent([String: [String: EmailTemplate]].self, forKey: .templates) ?? [:]
        var out: [EmailLocale: [EmailKind: EmailTemplate]] = [:]
        for (lang, kinds) in raw {
            guard let locale = EmailLocale(rawValue: lang) else {
                throw DecodingError.dataCorruptedError(forKey: .templates, in: c, debugDescription: "unknown language \(lang.prefix(16)) (fr or en)")
            }
            for (name, template) in kinds {
                guard let kind = EmailKind(rawValue: name) else {
                    throw DecodingError.dataCorruptedError(forKey: .templates, in: c, debugDescription: "unknown email \(name.prefix(40))")
                }
                out[locale, default: [:]][kind] = template
            }
        }
        templates = out
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(appName, forKey: .appName)
        try c.encode(mailFrom, forKey: .mailFrom)
        try c.encode(supportEmail, forKey: .supportEmail)
        try c.encode(linkBaseURL, forKey: .linkBaseURL)
        try c.encode(defaultLocale, forKey: .defaultLocale)
        let raw = Dictionary(
            uniqueKeysWithValues: templates.map { locale, kinds in
                (locale.rawValue, Dictionary(uniqueKeysWithValues: kinds.map { ($0.key.rawValue, $0.value) }))
            }
        )
        try c.encode(raw, forKey: .templates)
    }

    /// Each field checked, named when refused; a template may use only its kind's placeholders.
    public func validate() throws {
        guard (1...100).contains(appName.count) else { throw AppError.validation("app_name", "app_name must be 1-100 characters") }
        guard mailFrom.count <= 200, let address = Self.address(in: mailFrom), EmailAddress.normalize(address) != nil,
            !mailFrom.contains("\r"), !mailFrom.contains("\n")
        else {
            throw AppError.validation("mail_from", "mail_from must be an address, optionally as Name <address>")
        }
        guard EmailAddress.normalize(supportEmail) != nil else { throw AppError.validation("support_email", "support_email must be an address") }
        guard linkBaseURL.count <= 500, let u = URL(string: linkBaseURL), ["https", "http"].contains(u.scheme?.lowercased() ?? ""),
            u.host?.isEmpty == false, !linkBaseURL.hasSuffix("/")
        else {
            throw AppError.validation("link_base_url", "link_base_url must be an http(s) URL without a trailing slash")
        }
        for (_, kinds) in templates {
            for (kind, t) in kinds {
                guard (1...200).contains(t.subject.count), !t.subject.contains("\n"), !t.subject.contains("\r"), (1...10_000).contains(t.text.count)
                else {
                    throw AppError.validation("templates", "\(kind.rawValue): subject 1-200 characters on one line, text 1-10,000")
                }
                let allowed = Set(EmailTemplates.placeholders(kind))
                for name in EmailTemplates.placeholdersUsed(in: t.subject + t.text) where !allowed.contains(name) {
                    throw AppError.validation(
                        "templates",
                        "\(kind.rawValue) cannot use {{\(name.prefix(40))}} (allowed: \(allowed.sorted().joined(separator: ", ")))"
                    )
                }
            }
        }
    }

    package static func address(in from: String) -> String? {
        if let open = from.lastIndex(of: "<"), let close = from.lastIndex(of: ">"), open < close {
            return String(from[from.index(after: open)..<close])
        }
        return from.contains("@") ? from.trimmingCharacters(in: .whitespaces) : nil
    }
}

public enum EmailTemplates {
    /// The values each kind may use (all of them also `app_name` and `support_email`).
    public static func placeholders(_ kind: EmailKind) -> [String] {
        let common = ["app_name", "support_email"]
        switch kind {
        case .verification, .passwordReset, .exportReady: return common + ["link"]
        case .otp: return common + ["code"]
        case .deletionScheduled: return common + ["link", "date"]
        case .purchaseConfirmation: return common + ["plan", "store", "period", "reference"]
        }
    }

    package static func placeholdersUsed(in text: String) -> [String] {
        var out: [String] = []
        var rest = Substring(text)
        while let open = rest.range(of: "{{") {
            guard let close = rest[open.upperBound...].range(of: "}}") else { break }
            out.append(rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces))
            rest = rest[close.upperBound...]
        }
        return out
    }

    /// The built-in wording.
    public static func builtIn(_ kind: EmailKind, _ locale: EmailLocale) -> EmailTemplate {
        switch (kind, locale) {
        case (.verification, .fr):
            EmailTemplate(
                subject: "Vérifiez votre email",
                text: "Cliquez ici pour vérifier votre compte {{app_name}} :\n{{link}}\n\nCe lien est valable 24 heures."
            )
        case (.verification, .en):
            EmailTemplate(
                subject: "Verify your email",
                text: "Click here to verify your {{app_name}} account:\n{{link}}\n\nThis link is valid for 24 hours."
            )
        case (.passwordReset, .fr):
            EmailTemplate(
                subject: "Réinitialisation de votre mot de passe",
                text:
                    "Pour choisir un nouveau mot de passe {{app_name}} :\n{{link}}\n\nCe lien est valable 1 heure. Si vous n'avez rien demandé, ignorez ce message."
            )
        case (.passwordReset, .en):
            EmailTemplate(
                subject: "Reset your password",
                text:
                    "To choose a new {{app_name}} password:\n{{link}}\n\nThis link is valid for 1 hour. If you did not ask for it, ignore this message."
            )
        case (.otp, .fr): EmailTemplate(subject: "Votre code de connexion", text: "Votre code {{app_name}} : {{code}}\n\nIl est valable 5 minutes.")
        case (.otp, .en): EmailTemplate(subject: "Your sign-in code", text: "Your {{app_name}} code: {{code}}\n\nIt is valid for 5 minutes.")
        case (.deletionScheduled, .fr):
            EmailTemplate(
                subject: "Votre compte sera supprimé dans 30 jours",
                text: "Votre compte {{app_name}} sera supprimé le {{date}}.\nPour annuler : {{link}}"
            )
        case (.deletionScheduled, .en):
            EmailTemplate(
                subject: "Your account will be deleted in 30 days",
                text: "Your {{app_name}} account will be deleted on {{date}}.\nTo cancel: {{link}}"
            )
        case (.exportReady, .fr):
            EmailTemplate(
                subject: "Vos données sont prêtes",
                text: "Votre export {{app_name}} est prêt. Téléchargez-le ici (lien valable 7 jours) :\n{{link}}"
            )
        case (.exportReady, .en):
            EmailTemplate(
                subject: "Your data is ready",
                text: "Your {{app_name}} export is ready. Download it here (link valid for 7 days):\n{{link}}"
            )
        case (.purchaseConfirmation, .fr):
            EmailTemplate(
                subject: "Confirmation de votre abonnement premium",
                text: """
                    Merci ! Votre abonnement premium {{app_name}} ({{plan}}) est confirmé.
                    {{period}}

                    Pour gérer ou annuler l'abonnement, passez par {{store}} (réglages de votre compte).
                    Référence : {{reference}}
                    """
            )
        case (.purchaseConfirmation, .en):
            EmailTemplate(
                subject: "Your premium subscription is confirmed",
                text: """
                    Thank you! Your {{app_name}} premium subscription ({{plan}}) is confirmed.
                    {{period}}

                    To manage or cancel it, use {{store}} (your account settings).
                    Reference: {{reference}}
                    """
            )
        }
    }

    /// Fills the placeholders (unknown ones are left as written: validation refuses them first).
    public static func render(_ template: EmailTemplate, _ values: [String: String]) -> EmailTemplate {
        func fill(_ s: String) -> String {
            var out = s
            for (k, v) in values { out = out.replacingOccurrences(of: "{{\(k)}}", with: v) }
            return out
        }
        // A value never breaks the subject onto a second header line.
        return EmailTemplate(
            subject: fill(template.subject).replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " "),
            text: fill(template.text)
        )
    }
}
