import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// An active ad network of an app (`ad_providers`).
struct AdProvider: Codable, Sendable, Equatable {
    var name: String
    var priority: Int
    var active: Bool
    var rewardedUnitID: String?
    var interstitialUnitID: String?
    var bannerUnitID: String?
    var adDurationSeconds: Int
    var verification: String
    var testMode: Bool
    var ecpmEstimateUSD: Double

    enum CodingKeys: String, CodingKey {
        case name, priority, active
        case rewardedUnitID = "rewarded_unit_id"
        case interstitialUnitID = "interstitial_unit_id"
        case bannerUnitID = "banner_unit_id"
        case adDurationSeconds = "ad_duration_seconds"
        case verification
        case testMode = "test_mode"
        case ecpmEstimateUSD = "ecpm_estimate_usd"
    }

    func unitID(for type: AdType) -> String? {
        switch type {
        case .rewarded: rewardedUnitID
        case .interstitial: interstitialUnitID
        }
    }
}

/// One ad the app asked for (`ad_requests`).
struct AdRequestRecord: Sendable {
    var id: UUID
    var appID: UUID
    var userID: UUID?
    var adType: AdType
    var placement: String
    var provider: String
    var adDurationSeconds: Int
    var verification: String
    var createdAt: Date
    var completedAt: Date?
    /// The client reported the ad on screen (`impression` with `shown: true`).
    var shown = false
}

/// `ad_providers`, `ad_requests`, `ad_views` and `user_ad_limits`: every check-and-change of a
/// limit is one conditional UPDATE, so parallel requests (and replicas) cannot both pass a cap.
struct AdStore: Sendable {
    let logger: Logger

    /// The UTC day of `date` as `yyyy-MM-dd`, by arithmetic (a DateFormatter per request cost
    /// more than the rest of `GET /ads/available`).
    static func day(_ date: Date) -> String {
        // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
        let z = Int((date.timeIntervalSince1970 / 86400).rounded(.down)) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        // Not `String(format:)`: CoreFoundation's formatter was 4 % of a cached `/ads/available`.
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))"
    }

    // MARK: providers

    static let providerColumns = """
        name, priority, active, rewarded_unit_id, interstitial_unit_id, banner_unit_id, ad_duration_seconds, verification, test_mode,
        ecpm_estimate_usd::float8
        """

    typealias ProviderRow = (String, Int, Bool, String?, String?, String?, Int, String, Bool, Double)
    static func provider(_ r: ProviderRow) -> AdProvider {
        AdProvider(
            name: r.0,
            priority: r.1,
            active: r.2,
            rewardedUnitID: r.3,
            interstitialUnitID: r.4,
            bannerUnitID: r.5,
            adDurationSeconds: r.6,
            verification: r.7,
            testMode: r.8,
            ecpmEstimateUSD: r.9
        )
    }

    func providers(app: UUID, on conn: PostgresConnection) async throws -> [AdProvider] {
        let rows = try await conn.run(
            "SELECT \(unescaped: Self.providerColumns) FROM ad_providers WHERE app_id = \(app) ORDER BY priority, name",
            logger: logger
        )
        var out: [AdProvider] = []
        for try await r in rows.decode(ProviderRow.self) { out.append(Self.provider(r)) }
        return out
    }

    func upsertProvider(app: UUID, _ p: AdProvider, on conn: PostgresConnection) async throws -> AdProvider {
        let rows = try await conn.run(
            """
            INSERT INTO ad_providers (app_id, name, priority, active, rewarded_unit_id, interstitial_unit_id, banner_unit_id,
                                      ad_duration_seconds, verification, test_mode, ecpm_estimate_usd, updated_at)
            VALUES (\(app), \(p.name), \(p.priority), \(p.active), \(p.rewardedUnitID), \(p.interstitialUnitID), \(p.bannerUnitID),
                    \(p.adDurationSeconds), \(p.verification), \(p.testMode), \(p.ecpmEstimateUSD)::numeric, now())
            ON CONFLICT (app_id, name) DO UPDATE SET priority = EXCLUDED.priority, active = EXCLUDED.active,
                rewarded_unit_id = EXCLUDED.rewarded_unit_id, interstitial_unit_id = EXCLUDED.interstitial_unit_id,
                banner_unit_id = EXCLUDED.banner_unit_id, ad_duration_seconds = EXCLUDED.ad_duration_seconds,
                verification = EXCLUDED.verification, test_mode = EXCLUDED.test_mode,
                ecpm_estimate_usd = EXCLUDED.ecpm_estimate_usd, updated_at = now()
            RETURNING \(unescaped: Self.providerColumns)
            """,
            logger: logger
        )
        for try await r in rows.decode(ProviderRow.self) { return Self.provider(r) }
        throw AppError.unavailable
    }

    // MARK: limits

    /// The user's limits and latest consent in one round trip (the hot path of
    /// `GET /ads/available`).
    /// Everything `GET /ads/available` decides from, in one round trip: the day's counters and
    /// cooldowns, the latest consent, and the entitlement subscription pushed.
    func eligibilityInputs(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> (UserAdLimits?, AdConsentRecord?, EntitlementState?) {
        let rows = try await conn.run(
            """
            SELECT l.day::text, l.rewarded_views, l.interstitial_views, l.last_rewarded_at, l.rewarded_cooldown_until, l.last_interstitial_at,
                   c.consent_personalized_ads, c.consent_data_sharing, c.age_gate_passed, c.is_under_age, c.att_status, c.country,
                   c.gdpr_applies, c.source, c.created_at, e.is_premium, e.valid_until, e.version
            FROM (SELECT 1) one
            LEFT JOIN user_ad_limits l ON l.app_id = \(app) AND l.user_id = \(user)
            LEFT JOIN LATERAL (SELECT * FROM user_consent_ads WHERE app_id = \(app) AND user_id = \(user) ORDER BY id DESC LIMIT 1) c ON true
            LEFT JOIN entitlement_state e ON e.app_id = \(app) AND e.user_id = \(user)
            """,
            logger: logger
        )
        for try await r in rows.decode(
            (
                String?, Int?, Int?, Date?, Date?, Date?, Bool?, Bool?, Bool?, Bool?, String?, String?, Bool?, String?, Date?,
                Bool?, Date?, Int64?
            ).self
        ) {
            let limits = r.0.map {
                UserAdLimits(
                    day: $0,
                    rewardedViews: r.1 ?? 0,
                    interstitialViews: r.2 ?? 0,
                    lastRewardedAt: r.3,
                    rewardedCooldownUntil: r.4,
                    lastInterstitialAt: r.5
                )
            }
            var consent: AdConsentRecord?
            if let personalized = r.6, let sharing = r.7, let gate = r.8, let under = r.9, let gdpr = r.12, let source = r.13, let at = r.14 {
                consent = AdConsentRecord(
                    consentPersonalizedAds: personalized,
                    consentDataSharing: sharing,
                    ageGatePassed: gate,
                    isUnderAge: under,
                    attStatus: r.10,
                    tcfString: nil,
                    consentFormStatus: nil,
                    country: r.11,
                    gdprApplies: gdpr,
                    source: source,
                    updatedAt: at
                )
            }
            let entitlement = r.15.map { EntitlementState(isPremium: $0, validUntil: r.16, version: r.17 ?? 0) }
            return (limits, consent, entitlement)
        }
        return (nil, nil, nil)
    }

    func limits(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> UserAdLimits? {
        let rows = try await conn.run(
            """
            SELECT day::text, rewarded_views, interstitial_views, last_rewarded_at, rewarded_cooldown_until, last_interstitial_at
            FROM user_ad_limits WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        )
        for try await r in rows.decode((String, Int, Int, Date?, Date?, Date?).self) {
            return UserAdLimits(
                day: r.0,
                rewardedViews: r.1,
                interstitialViews: r.2,
                lastRewardedAt: r.3,
                rewardedCooldownUntil: r.4,
                lastInterstitialAt: r.5
            )
        }
        return nil
    }

    /// Takes the user's slot for one ad if the cap and the cooldown allow it, in one statement:
    /// a rewarded request starts the 30 s cooldown, an interstitial request the 180 s interval.
    /// Returns false when another request got there first (or the cap is reached).
    func reserve(_ type: AdType, app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> Bool {
        let today = Self.day(now)
        try await conn.run(
            """
            INSERT INTO user_ad_limits (app_id, user_id, day) VALUES (\(app), \(user), \(today)::date) ON CONFLICT DO NOTHING
            """,
            logger: logger
        )
        let rows: PostgresRows
        switch type {
        case .rewarded:
            let until = now.addingTimeInterval(AdRules.rewardedCooldown)
            rows = try await conn.run(
                """
                UPDATE user_ad_limits SET
                    rewarded_views = CASE WHEN day = \(today)::date THEN rewarded_views ELSE 0 END,
                    interstitial_views = CASE WHEN day = \(today)::date THEN interstitial_views ELSE 0 END,
                    day = \(today)::date, rewarded_cooldown_until = \(until)
                WHERE app_id = \(app) AND user_id = \(user)
                  AND (day <> \(today)::date OR rewarded_views < \(AdRules.rewardedDailyLimit))
                  AND (rewarded_cooldown_until IS NULL OR rewarded_cooldown_until <= \(now))
                RETURNING 1
                """,
                logger: logger
            )
        case .interstitial:
            let since = now.addingTimeInterval(-AdRules.interstitialInterval)
            rows = try await conn.run(
                """
                UPDATE user_ad_limits SET
                    rewarded_views = CASE WHEN day = \(today)::date THEN rewarded_views ELSE 0 END,
                    interstitial_views = CASE WHEN day = \(today)::date THEN interstitial_views ELSE 0 END,
                    day = \(today)::date, last_interstitial_at = \(now)
                WHERE app_id = \(app) AND user_id = \(user)
                  AND (day <> \(today)::date OR interstitial_views < \(AdRules.interstitialDailySoftCap))
                  AND (last_interstitial_at IS NULL OR last_interstitial_at <= \(since))
                RETURNING 1
                """,
                logger: logger
            )
        }
        for try await _ in rows { return true }
        return false
    }

    /// Counts a rewarded view that earns its credit, if the daily cap still allows it (21d).
    func countRewardedView(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> Bool {
        let today = Self.day(now)
        let until = now.addingTimeInterval(AdRules.rewardedCooldown)
        try await conn.run(
            """
            INSERT INTO user_ad_limits (app_id, user_id, day) VALUES (\(app), \(user), \(today)::date) ON CONFLICT DO NOTHING
            """,
            logger: logger
        )
        let rows = try await conn.run(
            """
            UPDATE user_ad_limits SET
                rewarded_views = CASE WHEN day = \(today)::date THEN rewarded_views ELSE 0 END + 1,
                interstitial_views = CASE WHEN day = \(today)::date THEN interstitial_views ELSE 0 END,
                day = \(today)::date, last_rewarded_at = \(now), rewarded_cooldown_until = \(until)
            WHERE app_id = \(app) AND user_id = \(user)
              AND (day <> \(today)::date OR rewarded_views < \(AdRules.rewardedDailyLimit))
            RETURNING 1
            """,
            logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    /// 18a: a rewarded view closed early: a short cooldown instead of the full one.
    func setShortCooldown(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws {
        let until = now.addingTimeInterval(AdRules.abandonedCooldown)
        try await conn.run(
            """
            UPDATE user_ad_limits SET rewarded_cooldown_until = \(until) WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        )
    }

    /// UC-ADS-4.2 step 15: an interstitial shown: counted, and the 180 s interval starts now.
    func countInterstitial(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws {
        let today = Self.day(now)
        try await conn.run(
            """
            INSERT INTO user_ad_limits (app_id, user_id, day) VALUES (\(app), \(user), \(today)::date) ON CONFLICT DO NOTHING
            """,
            logger: logger
        )
        try await conn.run(
            """
            UPDATE user_ad_limits SET
                rewarded_views = CASE WHEN day = \(today)::date THEN rewarded_views ELSE 0 END,
                interstitial_views = CASE WHEN day = \(today)::date THEN interstitial_views ELSE 0 END + 1,
                day = \(today)::date, last_interstitial_at = \(now)
            WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        )
    }

    // MARK: requests and views

    func insertRequest(_ r: AdRequestRecord, unitID: String, personalized: Bool, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO ad_requests (id, app_id, user_id, ad_type, placement, provider, ad_unit_id, ad_duration_seconds, verification,
                                     personalized, created_at)
            VALUES (\(r.id), \(r.appID), \(r.userID), \(r.adType.rawValue), \(r.placement), \(r.provider), \(unitID), \(r.adDurationSeconds),
                    \(r.verification), \(personalized), \(r.createdAt))
            """,
            logger: logger
        )
    }

    static let requestColumns =
        "id, app_id, user_id, ad_type, placement, provider, ad_duration_seconds, verification, created_at, completed_at, shown"
    typealias RequestRow = (UUID, UUID, UUID?, String, String, String, Int, String, Date, Date?, Bool)
    static func request(_ r: RequestRow) -> AdRequestRecord {
        AdRequestRecord(
            id: r.0,
            appID: r.1,
            userID: r.2,
            adType: AdType(rawValue: r.3) ?? .rewarded,
            placement: r.4,
            provider: r.5,
            adDurationSeconds: r.6,
            verification: r.7,
            createdAt: r.8,
            completedAt: r.9,
            shown: r.10
        )
    }

    /// The request, locked for the rest of the transaction (completion and the server-side
    /// callback of the same request serialise on it).
    func lockRequest(id: UUID, on conn: PostgresConnection) async throws -> AdRequestRecord? {
        let rows = try await conn.run("SELECT \(unescaped: Self.requestColumns) FROM ad_requests WHERE id = \(id) FOR UPDATE", logger: logger)
        for try await r in rows.decode(RequestRow.self) { return Self.request(r) }
        return nil
    }

    func recordImpression(
        id: UUID,
        app: UUID,
        user: UUID,
        loaded: Bool,
        shown: Bool,
        loadTimeMs: Int?,
        error: String?,
        on conn: PostgresConnection
    ) async throws -> Bool {
        let rows = try await conn.run(
            """
            UPDATE ad_requests SET loaded = loaded OR \(loaded), shown = shown OR \(shown),
                   load_time_ms = COALESCE(\(loadTimeMs), load_time_ms), load_error = COALESCE(\(error), load_error),
                   load_failures = load_failures + CASE WHEN \(loaded) THEN 0 ELSE 1 END
            WHERE id = \(id) AND app_id = \(app) AND user_id = \(user) RETURNING 1
            """,
            logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    func markCompleted(id: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE ad_requests SET completed_at = \(now) WHERE id = \(id)", logger: logger)
    }

    struct View: Sendable {
        var completed: Bool
        var rewardGranted: Bool
        var rewardAmount: Int
        var refusal: String?
    }

    func insertView(
        request r: AdRequestRecord,
        completed: Bool,
        clicked: Bool,
        displayMs: Int,
        rewardGranted: Bool,
        rewardAmount: Int,
        refusal: String?,
        revenueUSD: Double?,
        revenueFlagged: Bool,
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        try await conn.run(
            """
            INSERT INTO ad_views (app_id, user_id, ad_request_id, ad_type, placement, provider, ad_completed, ad_clicked, display_duration_ms,
                                  reward_granted, reward_amount, reward_refusal, revenue_usd, revenue_source, created_at)
            VALUES (\(r.appID), \(r.userID), \(r.id), \(r.adType.rawValue), \(r.placement), \(r.provider), \(completed), \(clicked), \(displayMs),
                    \(rewardGranted), \(rewardAmount), \(refusal), \(revenueUSD)::numeric,
                    \(revenueUSD == nil ? nil : (revenueFlagged ? "client_capped" : "client")), \(now))
            """,
            logger: logger
        )
    }

    /// The provider's eCPM estimate (the bound on what a client may report).
    func ecpmEstimate(app: UUID, provider: String, on conn: PostgresConnection) async throws -> Double? {
        for try await e in try await conn.run(
            """
            SELECT ecpm_estimate_usd::float8 FROM ad_providers WHERE app_id = \(app) AND name = \(provider)
            """,
            logger: logger
        ).decode(Double?.self) { return e }
        return nil
    }

    func view(request id: UUID, on conn: PostgresConnection) async throws -> View? {
        let rows = try await conn.run(
            """
            SELECT ad_completed, reward_granted, reward_amount, reward_refusal FROM ad_views WHERE ad_request_id = \(id)
            """,
            logger: logger
        )
        for try await r in rows.decode((Bool, Bool, Int, String?).self) {
            return View(completed: r.0, rewardGranted: r.1, rewardAmount: r.2, refusal: r.3)
        }
        return nil
    }

    /// The server-side callback confirmed the reward after the client reported the view.
    /// Records AdMob's server-side verification callback once per transaction id: false when
    /// this transaction was already received (AdMob retries; each reward is paid once).
    func recordVerificationCallback(
        transactionID: String,
        request r: AdRequestRecord,
        keyID: Int64,
        rewardAmount: Int?,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> Bool {
        for try await _ in try await conn.run(
            """
            INSERT INTO ssv_callbacks (transaction_id, app_id, ad_request_id, key_id, reward_amount, received_at)
            VALUES (\(transactionID), \(r.appID), \(r.id), \(keyID), \(rewardAmount), \(now))
            ON CONFLICT DO NOTHING RETURNING 1
            """,
            logger: logger
        ) { return true }
        return false
    }

    func markViewRewarded(request id: UUID, amount: Int, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE ad_views SET reward_granted = true, reward_amount = \(amount), reward_refusal = NULL WHERE ad_request_id = \(id)
            """,
            logger: logger
        )
    }
}
