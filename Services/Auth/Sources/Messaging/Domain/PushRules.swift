import AuthDomain
import Foundation
import ServiceKit
import WireTypes

/// What a push is about. The specification's triggers (UC-ADS-4.1 21c.4, UC-ADS-4.4 23c.5 and
/// its rules, UC-OFFLINE-3.2) and what an operator sends.
public enum PushKind: String, Codable, Sendable, CaseIterable {
    /// A reward that landed after the player was told it was pending.
    case creditAdded = "credit_added"
    /// A campaign ends within a day and the player is close to its goal.
    case campaignReminder = "campaign_reminder"
    /// Content the player keeps offline changed.
    case contentUpdate = "content_update"
    /// Written by an operator (title and body given).
    case operatorMessage = "operator"
    /// `POST /admin/push/test`.
    case test

    /// Pushes of one kind replace each other on the device (`apns-collapse-id`, FCM's
    /// `collapse_key`): three credit pushes show as one.
    var collapseID: String? {
        switch self {
        case .creditAdded: "credits"
        case .campaignReminder: "campaign"
        case .contentUpdate: "content"
        case .operatorMessage, .test: nil
        }
    }

    /// Services may ask for these; operator and test messages come from the admin routes.
    static let requestable: Set<PushKind> = [.creditAdded, .campaignReminder, .contentUpdate]
}

public enum PushPlatform: String, Codable, Sendable { case ios, android }
public enum PushEnvironment: String, Codable, Sendable { case sandbox, production }

/// A device's registration as the app sends it (`PUT /auth/push-tokens`).
struct PushTokenRegistration: Decodable, Sendable {
    var deviceID: String
    var platform: String
    var token: String
    var environment: String?
    var locale: String?
    enum CodingKeys: String, CodingKey {
        case deviceID = "device_id"
        case platform, token, environment, locale
    }

    static let maxDevices = 20

    /// The checked registration; each bad field named. An APNs token is the hex of the bytes
    /// Apple gave (32 today, up to 100 allowed); an FCM registration token is 100-4096
    /// characters of its URL-safe alphabet.
    func checked(acceptLanguage: String?) throws -> PushDevice {
        guard (1...200).contains(deviceID.utf8.count), deviceID.allSatisfy({ !$0.isWhitespace && !$0.isNewline }) else {
            throw AppError.validation("device_id", "device_id must be 1 to 200 characters without spaces")
        }
        guard let platform = PushPlatform(rawValue: platform) else {
            throw AppError.validation("platform", "platform must be 'ios' or 'android'")
        }
        let env: PushEnvironment
        switch platform {
        case .ios:
            guard token.utf8.count % 2 == 0, (64...200).contains(token.utf8.count), token.allSatisfy(\.isHexDigit) else {
                throw AppError.validation("token", "an iOS token is the device token's bytes in hex (64 to 200 hex digits)")
            }
            guard let e = PushEnvironment(rawValue: environment ?? "production") else {
                throw AppError.validation("environment", "environment must be 'sandbox' or 'production'")
            }
            env = e
        case .android:
            let alphabet = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_:.")
            guard (100...4096).contains(token.utf8.count), token.unicodeScalars.allSatisfy(alphabet.contains) else {
                throw AppError.validation("token", "an Android token is the FCM registration token (100 to 4096 characters)")
            }
            guard environment == nil || environment == "production" else {
                throw AppError.validation("environment", "environment applies to iOS tokens only")
            }
            env = .production
        }
        var lang: PushLocale?
        if let locale {
            guard let l = PushLocale(rawValue: String(locale.prefix(2)).lowercased()) else {
                throw AppError.validation("locale", "locale must be 'fr' or 'en'")
            }
            lang = l
        } else {
            lang = EmailLocale.preferred(acceptLanguage).flatMap { PushLocale(rawValue: $0.rawValue) }
        }
        return PushDevice(deviceID: deviceID, platform: platform, token: token.lowercasedIfHex(platform), environment: env, locale: lang)
    }
}

extension String {
    /// APNs tokens compare in lower case (apps print them either way).
    fileprivate func lowercasedIfHex(_ platform: PushPlatform) -> String { platform == .ios ? lowercased() : self }
}

public enum PushLocale: String, Codable, Sendable, CaseIterable { case fr, en }

/// A registered device, as stored.
struct PushDevice: Sendable, Equatable {
    var deviceID: String
    var platform: PushPlatform
    var token: String
    var environment: PushEnvironment
    var locale: PushLocale?
}

/// An app's push options (`PUT /admin/push/settings`).
struct PushOptions: Codable, Sendable, Equatable {
    /// At most this many pushes a user a day (a sliding 24 hours); 0 turns pushes off.
    var dailyLimit: Int = 5
    /// A silent (background) sync hint may reach a user who has not consented to notifications.
    var silentWithoutConsent: Bool = false
    /// No push before the user said yes (`consent_notifications`); when false, a user who never
    /// answered gets them (a withdrawal still stops them).
    var requireOptIn: Bool = true
    var defaultLocale: PushLocale = .fr
    /// Wording per language and kind, over the built-in texts.
    var templates: [PushLocale: [String: PushTemplate]] = [:]

    enum CodingKeys: String, CodingKey {
        case dailyLimit = "daily_limit"
        case silentWithoutConsent = "silent_without_consent"
        case requireOptIn = "require_opt_in"
        case defaultLocale = "default_locale"
        case templates
    }

    init() {}
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        dailyLimit = try c.decodeIfPresent(Int.self, forKey: .dailyLimit) ?? 5
        silentWithoutConsent = try c.decodeIfPresent(Bool.self, forKey: .silentWithoutConsent) ?? false
        requireOptIn = try c.decodeIfPresent(Bool.self, forKey: .requireOptIn) ?? true
        defaultLocale = try c.decodeIfPresent(PushLocale.self, forKey: .defaultLocale) ?? .fr
        let raw = try c.decodeIfPresent([String: [String: PushTemplate]].self, forKey: .templates) ?? [:]
        var t: [PushLocale: [String: PushTemplate]] = [:]
        for (k, v) in raw {
            guard let l = PushLocale(rawValue: k) else {
                throw AppError.validation("templates", "templates are keyed by language: fr or en")
            }
            t[l] = v
        }
        templates = t
    }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(dailyLimit, forKey: .dailyLimit)
        try c.encode(silentWithoutConsent, forKey: .silentWithoutConsent)
        try c.encode(requireOptIn, forKey: .requireOptIn)
        try c.encode(defaultLocale, forKey: .defaultLocale)
        try c.encode(Dictionary(uniqueKeysWithValues: templates.map { ($0.key.rawValue, $0.value) }), forKey: .templates)
    }

    /// Refuses what cannot be sent: each bad field named.
    func check() throws {
        guard (0...100).contains(dailyLimit) else { throw AppError.validation("daily_limit", "daily_limit must be 0 to 100") }
        for (locale, kinds) in templates {
            for (kind, template) in kinds {
                guard let k = PushKind(rawValue: kind), k != .operatorMessage else {
                    throw AppError.validation(
                        "templates.\(locale.rawValue).\(kind)",
                        "templates name kinds: \(PushKind.allCases.filter { $0 != .operatorMessage }.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                guard (1...100).contains(template.title.count), (1...400).contains(template.body.count) else {
                    throw AppError.validation("templates.\(locale.rawValue).\(kind)", "a title is 1-100 characters, a body 1-400")
                }
                let unknown = Set(template.placeholders).subtracting(PushTemplates.placeholders(k))
                guard unknown.isEmpty else {
                    throw AppError.validation(
                        "templates.\(locale.rawValue).\(kind)",
                        "unknown placeholder {\(unknown.sorted().joined(separator: "}, {"))}; allowed: \(PushTemplates.placeholders(k).sorted().joined(separator: ", "))"
                    )
                }
            }
        }
    }
}

struct PushTemplate: Codable, Sendable, Equatable {
    var title: String
    var body: String

    /// `{name}` placeholders in the title and body.
    var placeholders: [String] {
        var out: [String] = []
        for text in [title, body] {
            var rest = Substring(text)
            while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
                out.append(String(rest[rest.index(after: open)..<close]))
                rest = rest[rest.index(after: close)...]
            }
        }
        return out
    }

    func rendered(_ values: [String: String]) -> PushTemplate {
        func fill(_ s: String) -> String {
            values.reduce(s) { $0.replacingOccurrences(of: "{\($1.key)}", with: $1.value) }
        }
        return PushTemplate(title: fill(title), body: fill(body))
    }
}

/// The specification's texts, the defaults of every app.
enum PushTemplates {
    static func builtIn(_ kind: PushKind, _ locale: PushLocale) -> PushTemplate {
        switch (kind, locale) {
        case (.creditAdded, .fr): PushTemplate(title: "Crédits ajoutés", body: "+{amount} crédits ajoutés à votre solde")
        case (.creditAdded, .en): PushTemplate(title: "Credits added", body: "+{amount} credits added to your balance")
        case (.campaignReminder, .fr):
            PushTemplate(title: "{campaign} se termine demain", body: "Plus que {remaining} pour gagner {reward} crédits !")
        case (.campaignReminder, .en): PushTemplate(title: "{campaign} ends tomorrow", body: "Only {remaining} to go to win {reward} credits!")
        case (.contentUpdate, .fr): PushTemplate(title: "Nouveau contenu", body: "{changes} nouveautés dans {category}")
        case (.contentUpdate, .en): PushTemplate(title: "New content", body: "{changes} updates in {category}")
        case (.test, .fr): PushTemplate(title: "Test", body: "Les notifications fonctionnent.")
        case (.test, .en): PushTemplate(title: "Test", body: "Notifications work.")
        case (.operatorMessage, _): PushTemplate(title: "{title}", body: "{body}")
        }
    }

    static func placeholders(_ kind: PushKind) -> Set<String> {
        switch kind {
        case .creditAdded: ["amount", "balance"]
        case .campaignReminder: ["campaign", "remaining", "reward"]
        case .contentUpdate: ["changes", "category"]
        case .operatorMessage: ["title", "body"]
        case .test: []
        }
    }
}

/// What one notification becomes for one user: the decision without I/O.
enum PushDecision: Equatable, Sendable {
    /// A visible alert with this text.
    case alert(PushTemplate)
    /// A background hint (content-available / data-only, low priority): no text shown.
    case silent
    case skip(outcome: String)

    /// `consent`: the user's `consent_notifications`, nil when never answered. `sentToday`: the
    /// alerts this user received in the last 24 hours. A content update of fewer than 3 changes
    /// is a silent sync (UC-OFFLINE-3.2).
    static func decide(
        kind: PushKind,
        data: [String: String],
        consent: Bool?,
        options: PushOptions,
        sentToday: Int,
        locale: PushLocale?
    ) -> PushDecision {
        let consented = consent ?? !options.requireOptIn
        let silent = kind == .contentUpdate && (Int(data["changes"] ?? "") ?? 0) < 3
        if silent {
            return consented || options.silentWithoutConsent ? .silent : .skip(outcome: "skipped_consent")
        }
        guard consented else { return .skip(outcome: "skipped_consent") }
        // Test and operator messages are the operator's own decision, not counted against the cap.
        if kind != .test && kind != .operatorMessage && sentToday >= options.dailyLimit { return .skip(outcome: "skipped_limit") }
        let lang = locale ?? options.defaultLocale
        let template = options.templates[lang]?[kind.rawValue] ?? PushTemplates.builtIn(kind, lang)
        return .alert(template.rendered(data))
    }
}

/// The provider's answer to one send, and what it means for the token.
struct PushResult: Sendable, Equatable {
    enum Action: Sendable, Equatable {
        case delivered
        /// The token is dead (APNs 410 Unregistered, 400 BadDeviceToken/DeviceTokenNotForTopic;
        /// FCM UNREGISTERED / SENDER_ID_MISMATCH): removed, never tried again.
        case removeToken
        /// Try again later (429, 5xx), after `retryAfter` when the provider said.
        case retry(retryAfter: Int?)
        /// Our credentials are refused (APNs 403 provider token errors): keep the token and
        /// tell the operator.
        case credentialsRefused
        /// Refused for this message (payload, topic): not retried.
        case failed
    }
    var action: Action
    var status: Int?
    var reason: String?

    var outcome: String {
        switch action {
        case .delivered: "sent"
        case .removeToken: "removed_token"
        case .retry: "retrying"
        case .credentialsRefused: "credentials_refused"
        case .failed: "failed"
        }
    }

    /// APNs' status and `reason` (Apple's "Handling notification responses from APNs").
    static func apns(status: Int, reason: String?, retryAfter: Int?) -> PushResult {
        let action: Action
        switch (status, reason) {
        case (200, _): action = .delivered
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"): action = .removeToken
        case (403, "ExpiredProviderToken"), (403, "InvalidProviderToken"), (403, "MissingProviderToken"), (403, _): action = .credentialsRefused
        case (429, _), (500...599, _): action = .retry(retryAfter: retryAfter)
        default: action = .failed
        }
        return PushResult(action: action, status: status, reason: reason)
    }

    /// FCM HTTP v1's status and `errorCode` (FcmError), or the canonical status.
    static func fcm(status: Int, errorCode: String?, retryAfter: Int?) -> PushResult {
        let action: Action
        switch (status, errorCode) {
        case (200, _): action = .delivered
        case (404, _), (_, "UNREGISTERED"), (_, "SENDER_ID_MISMATCH"): action = .removeToken
        case (429, _), (_, "QUOTA_EXCEEDED"), (500...599, _), (_, "UNAVAILABLE"), (_, "INTERNAL"): action = .retry(retryAfter: retryAfter)
        case (401, _), (_, "THIRD_PARTY_AUTH_ERROR"): action = .credentialsRefused
        default: action = .failed
        }
        return PushResult(action: action, status: status, reason: errorCode)
    }
}

/// The payloads, as each provider wants them.
enum PushPayload {
    /// Apple's limit for a notification's payload.
    static let apnsMaxBytes = 4096

    /// `aps` with the alert (or `content-available` for a silent hint) and the data beside it.
    static func apns(_ decision: PushDecision, kind: PushKind, data: [String: String]) -> Data {
        var aps: [String: JSONValue] = [:]
        switch decision {
        case .alert(let t):
            aps["alert"] = .object(["title": .string(t.title), "body": .string(t.body)])
            aps["sound"] = .string("default")
        case .silent, .skip: aps["content-available"] = .int(1)
        }
        var body: [String: JSONValue] = ["aps": .object(aps), "kind": .string(kind.rawValue)]
        for (k, v) in data where body[k] == nil { body[k] = .string(v) }
        var encoded = (try? JSON.encoder.encode(JSONValue.object(body))) ?? Data()
        if encoded.count > apnsMaxBytes {
            // The text is what grows (an operator's message): shorten the body, keep the rest.
            if case .alert(var t) = decision {
                t.body = String(t.body.prefix(max(0, t.body.count - (encoded.count - apnsMaxBytes) - 3))) + "…"
                encoded = apns(.alert(t), kind: kind, data: [:])
            }
        }
        return encoded
    }

    /// An FCM HTTP v1 `message`: a notification for an alert, data only for a silent hint.
    static func fcm(_ decision: PushDecision, kind: PushKind, token: String, data: [String: String]) -> Data {
        var message: [String: JSONValue] = ["token": .string(token)]
        var d = data.mapValues(JSONValue.string)
        d["kind"] = .string(kind.rawValue)
        message["data"] = .object(d)
        var android: [String: JSONValue] = [:]
        switch decision {
        case .alert(let t):
            message["notification"] = .object(["title": .string(t.title), "body": .string(t.body)])
            android["priority"] = .string("high")
        case .silent, .skip:
            android["priority"] = .string("normal")
        }
        if let collapse = kind.collapseID { android["collapse_key"] = .string(collapse) }
        message["android"] = .object(android)
        return (try? JSON.encoder.encode(JSONValue.object(["message": .object(message)]))) ?? Data()
    }
}
