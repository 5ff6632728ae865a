import AuthDomain
import Foundation
import ServiceKit
import WireTypes

/// Builds an app's email: its settings (read from memory, reloaded when an operator changes
/// them) or the deployment's defaults, in the asked language or the app's default.
struct EmailComposer: Sendable {
    let settings: TenantSettings<AppEmailSettings>
    let defaults: AuthSettings
    let applications: any ApplicationRepository

    /// The settings in force for an app: its own, else the deployment's with the app's registered name.
    func effective(app: UUID) async throws -> AppEmailSettings {
        if let own = try await settings.value(for: app) { return own }
        let name = try await applications.find(id: app)?.name ?? "App"
        return AppEmailSettings(
            appName: name,
            mailFrom: defaults.mailFrom,
            supportEmail: defaults.supportContact,
            linkBaseURL: defaults.linkBaseURL,
            defaultLocale: .fr
        )
    }

    /// `path` is appended to the app's link base as `{{link}}` (an absolute `link` in `values` wins).
    func message(
        _ kind: EmailKind,
        app: UUID,
        to email: String,
        locale asked: EmailLocale?,
        path: String? = nil,
        values: [String: String] = [:]
    ) async throws -> SMTPMessage {
        let s = try await effective(app: app)
        let locale = asked ?? s.defaultLocale
        var all = ["app_name": s.appName, "support_email": s.supportEmail]
        if let path { all["link"] = s.linkBaseURL + path }
        all.merge(values) { $1 }
        let template = s.templates[locale]?[kind] ?? EmailTemplates.builtIn(kind, locale)
        let rendered = EmailTemplates.render(template, all)
        return SMTPMessage(from: s.mailFrom, to: [email], subject: rendered.subject, text: rendered.text)
    }

    /// Seed 2.1 postconditions: the purchase is confirmed by email, in the app's language.
    func purchaseConfirmation(app: UUID, to email: String, _ p: PurchaseConfirmation) async throws -> SMTPMessage {
        let locale = try await effective(app: app).defaultLocale
        let day = DateFormatter()
        day.locale = Locale(identifier: locale == .fr ? "fr_FR" : "en_GB")
        day.timeZone = TimeZone(identifier: "UTC")
        day.dateFormat = "d MMMM yyyy"
        let end = day.string(from: p.endDate)
        let plan: String
        let store: String
        let period: String
        switch locale {
        case .fr:
            plan = p.planType == "annual" ? "annuel" : (p.planType == "monthly" ? "mensuel" : p.planType)
            store = p.store == "apple" ? "l'App Store" : "Google Play"
            period =
                p.isTrial
                ? "Votre essai gratuit est actif jusqu'au \(end) ; l'abonnement commence ensuite sauf annulation."
                : "Votre accès premium est actif jusqu'au \(end) et se renouvelle automatiquement."
        case .en:
            plan = p.planType
            store = p.store == "apple" ? "the App Store" : "Google Play"
            period =
                p.isTrial
                ? "Your free trial is active until \(end); the subscription starts then unless you cancel."
                : "Your premium access is active until \(end) and renews automatically."
        }
        return try await message(
            .purchaseConfirmation,
            app: app,
            to: email,
            locale: locale,
            values: ["plan": plan, "store": store, "period": period, "reference": p.subscriptionID.lowercasedString]
        )
    }
}
