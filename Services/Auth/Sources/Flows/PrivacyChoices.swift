import AuthDomain
import AuthMessaging
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-AUTH-1.4 the user's privacy choices: each consent changed gets a new version and goes to
/// the service that acts on it through the outbox (auth owns them: one answer for every screen);
/// an answer given on the ads screen applies unless auth changed that consent since; a privacy
/// export is asked for. The flow owns the transactions (#50).
struct PrivacyChoices: Sendable {
    let db: DatabasePool
    let logger: Logger
    let users: UserStore
    let audit: AuditLog
    let facts: FactPublisher

    /// `apply` gives the wanted settings from the current ones, read under the user's lock (two
    /// screens changing different consents at once both count). Answers the settings before and after.
    func update(
        appID: UUID,
        userID: UUID,
        details: [String: JSONValue],
        now: Date,
        origin: AuditLog.Origin,
        apply: @Sendable (PrivacySettings) throws -> PrivacySettings
    ) async throws -> (PrivacySettings, PrivacySettings) {
        try await db.withTransaction(logger: logger) { conn -> (PrivacySettings, PrivacySettings) in
            guard let current = try await users.privacy(of: userID, on: conn, forUpdate: true) else {
                throw AppError.notFound("Privacy settings")
            }
            guard let (old, new) = try await users.updatePrivacy(of: userID, to: try apply(current), now: now, on: conn) else {
                throw AppError.notFound("Privacy settings")
            }
            try await publishChanges(app: appID, user: userID, old: old, new: new, on: conn)
            try await audit.record(origin.entry("privacy_update", "success", app: appID, user: userID, details: details), on: conn)
            return (old, new)
        }
    }

    /// The user answered on the ads screen: applied unless auth changed that consent since the
    /// answer ads held (then auth's newer answer stands and is on its way to ads). Audited.
    func answerFromAds(_ answer: ConsentAnswer, app: UUID, user: UUID, now: Date) async throws -> FactOutcome {
        try await db.withTransaction(logger: logger) { conn -> FactOutcome in
            guard try await users.find(.id(user), appID: app, on: conn) != nil,
                let current = try await users.privacy(of: user, on: conn, forUpdate: true)
            else {
                // An erased user's late answer is final news for the sender's outbox (410), not a retry.
                if try await facts.facts.isErased(app: app, user: user, on: conn) {
                    throw AppError(AuthErrorCode.userErased, "This user's data has been erased")
                }
                throw AppError.notFound("User")
            }
            let held = try await facts.consentVersion(app: app, user: user, consent: ConsentFact.personalizedAds, on: conn)
            guard answer.basedOn <= held else { throw AppError.validation("based_on", "based_on names a version auth never issued") }
            guard answer.basedOn == held else { return FactOutcome(applied: false, reason: "stale_version") }
            guard current.consentPersonalizedAds != answer.value else { return FactOutcome(applied: false, reason: "unchanged") }
            var wanted = current
            wanted.consentPersonalizedAds = answer.value
            guard let (old, new) = try await users.updatePrivacy(of: user, to: wanted, now: now, on: conn) else {
                throw AppError.notFound("User")
            }
            try await publishChanges(app: app, user: user, old: old, new: new, on: conn)
            try await audit.record(
                .init(
                    userID: user,
                    appID: app,
                    action: "privacy_update",
                    result: "success",
                    details: ["consent_personalized_ads": .bool(answer.value), "source": .string(String(answer.source.prefix(40)))]
                ),
                on: conn
            )
            return FactOutcome(applied: true)
        }
    }

    /// A privacy export, built by `PrivacyExporter`'s job; answers its id.
    func requestExport(appID: UUID, userID: UUID, now: Date, origin: AuditLog.Origin) async throws -> UUID {
        try await db.withTransaction(logger: logger) { conn in
            let id = try await ExportStore(logger: logger).create(userID: userID, appID: appID, now: now, on: conn)
            try await JobQueue.enqueue(
                on: conn,
                queue: AccountLifecycle.queue,
                kind: PrivacyExporter.job,
                payload: PrivacyExporter.Payload(exportID: id),
                runAt: now,
                maxAttempts: 10,
                uniqueKey: "export:\(id)",
                logger: logger
            )
            try await audit.record(origin.entry("privacy_export", "requested", app: appID, user: userID), on: conn)
            return id
        }
    }

    /// Each consent another service acts on gets a new version when it changes, and goes to
    /// that service through the outbox.
    func publishChanges(app: UUID, user: UUID, old: PrivacySettings, new: PrivacySettings, on conn: PostgresConnection) async throws {
        let changes: [(String, Bool, Bool)] = [
            (ConsentFact.geolocation, old.consentGeolocation, new.consentGeolocation),
            (ConsentFact.personalizedAds, old.consentPersonalizedAds, new.consentPersonalizedAds),
            (ConsentFact.analytics, old.consentAnalytics, new.consentAnalytics),
            // No service acts on these; they are versioned too, for the app's servers (#33
            // consent.changed).
            ("notifications", old.consentNotifications, new.consentNotifications),
            ("third_party", old.consentThirdParty, new.consentThirdParty),
            ("game_center", old.consentGameCenter, new.consentGameCenter),
        ]
        var version: Int64?
        var changed: [JSONValue] = []
        for (consent, before, after) in changes where before != after {
            version = try await facts.consentChanged(app: app, user: user, consent: consent, value: after, on: conn)
            changed.append(.string(consent))
        }
        // #46: the user's other devices hear it at commit.
        if let version {
            let consents: [String: JSONValue] = [
                "analytics": .bool(new.consentAnalytics), "third_party": .bool(new.consentThirdParty),
                "geolocation": .bool(new.consentGeolocation), "personalized_ads": .bool(new.consentPersonalizedAds),
                "notifications": .bool(new.consentNotifications), "game_center": .bool(new.consentGameCenter),
            ]
            try await MessagingOutbox.live(
                .consentUpdated,
                app: app,
                user: user,
                version: version,
                data: ["consents": .object(consents), "changed": .array(changed), "version": .int(Int(version))],
                on: conn,
                logger: logger
            )
        }
    }
}
