import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

enum CampaignType: String, Codable, Sendable, CaseIterable {
    case watchAds = "watch_ads"
    case streakBonus = "streak_bonus"
    case referral

    /// The condition that holds the required count.
    var conditionKey: String {
        switch self {
        case .watchAds: "min_ads_watched"
        case .streakBonus: "streak_days"
        case .referral: "referrals_count"
        }
    }
}

struct Campaign: Sendable {
    var id: UUID
    var appID: UUID
    var name: String
    var description: String
    var type: CampaignType
    var rewardAmount: Int
    var conditions: JSONValue
    var required: Int
    var placement: String?
    var startsAt: Date
    var endsAt: Date
    var active: Bool

    func isRunning(at now: Date) -> Bool { active && startsAt <= now && now <= endsAt }
}

struct Participation: Sendable, Equatable {
    var progress: Int
    var completed: Bool
    var completedAt: Date?
    var rewardClaimed: Bool
    var rewardClaimedAt: Date?
}

/// `freemium_campaigns`, `campaign_participations` and referral codes (UC-ADS-4.4). Progress
/// is only ever changed by the server: views it counted, check-ins it saw, redemptions it
/// recorded.
struct CampaignStore: Sendable {
    let logger: Logger

    static let columns = """
        id, app_id, name, description, campaign_type, reward_amount, conditions::text, required, placement, starts_at, ends_at, active
        """
    typealias Row = (UUID, UUID, String, String, String, Int, String, Int, String?, Date, Date, Bool)
    static func campaign(_ r: Row) throws -> Campaign {
        Campaign(id: r.0, appID: r.1, name: r.2, description: r.3, type: CampaignType(rawValue: r.4) ?? .watchAds, rewardAmount: r.5,
                 conditions: try JSONDecoder().decode(JSONValue.self, from: Data(r.6.utf8)), required: r.7, placement: r.8,
                 startsAt: r.9, endsAt: r.10, active: r.11)
    }

    func create(_ c: Campaign, on conn: PostgresConnection) async throws -> Campaign {
        let conditions = String(decoding: try JSON.encoder.encode(c.conditions), as: UTF8.self)
        let rows = try await conn.run("""
            INSERT INTO freemium_campaigns (id, app_id, name, description, campaign_type, reward_amount, conditions, required, placement,
                                            starts_at, ends_at, active)
            VALUES (\(c.id), \(c.appID), \(c.name), \(c.description), \(c.type.rawValue), \(c.rewardAmount), \(conditions)::jsonb, \(c.required),
                    \(c.placement), \(c.startsAt), \(c.endsAt), true)
            RETURNING \(unescaped: Self.columns)
            """, logger: logger)
        for try await r in rows.decode(Row.self) { return try Self.campaign(r) }
        throw AppError.unavailable
    }

    /// Ends a campaign now (admin): no new progress, no claim after its end.
    func end(app: UUID, id: UUID, now: Date, on conn: PostgresConnection) async throws -> Campaign? {
        let rows = try await conn.run("""
            UPDATE freemium_campaigns SET active = false, ends_at = LEAST(ends_at, GREATEST(starts_at + interval '1 second', \(now)))
            WHERE app_id = \(app) AND id = \(id) RETURNING \(unescaped: Self.columns)
            """, logger: logger)
        for try await r in rows.decode(Row.self) { return try Self.campaign(r) }
        return nil
    }

    func campaign(app: UUID, id: UUID, on conn: PostgresConnection) async throws -> Campaign? {
        let rows = try await conn.run("SELECT \(unescaped: Self.columns) FROM freemium_campaigns WHERE app_id = \(app) AND id = \(id)", logger: logger)
        for try await r in rows.decode(Row.self) { return try Self.campaign(r) }
        return nil
    }

    func running(app: UUID, now: Date, on conn: PostgresConnection) async throws -> [Campaign] {
        let rows = try await conn.run("""
            SELECT \(unescaped: Self.columns) FROM freemium_campaigns
            WHERE app_id = \(app) AND active AND starts_at <= \(now) AND ends_at >= \(now) ORDER BY ends_at, id
            """, logger: logger)
        var out: [Campaign] = []
        for try await r in rows.decode(Row.self) { out.append(try Self.campaign(r)) }
        return out
    }

    func participations(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> [UUID: Participation] {
        let rows = try await conn.run("""
            SELECT campaign_id, progress, completed, completed_at, reward_claimed, reward_claimed_at FROM campaign_participations
            WHERE app_id = \(app) AND user_id = \(user)
            """, logger: logger)
        var out: [UUID: Participation] = [:]
        for try await r in rows.decode((UUID, Int, Bool, Date?, Bool, Date?).self) {
            out[r.0] = Participation(progress: r.1, completed: r.2, completedAt: r.3, rewardClaimed: r.4, rewardClaimedAt: r.5)
        }
        return out
    }

    func participation(campaign: UUID, user: UUID, lock: Bool = false, on conn: PostgresConnection) async throws -> Participation? {
        let rows = try await conn.run("""
            SELECT progress, completed, completed_at, reward_claimed, reward_claimed_at FROM campaign_participations
            WHERE campaign_id = \(campaign) AND user_id = \(user) \(unescaped: lock ? "FOR UPDATE" : "")
            """, logger: logger)
        for try await r in rows.decode((Int, Bool, Date?, Bool, Date?).self) {
            return Participation(progress: r.0, completed: r.1, completedAt: r.2, rewardClaimed: r.3, rewardClaimedAt: r.4)
        }
        return nil
    }

    /// Adds `step` to the progress of the running campaigns of `type` (optionally only those
    /// for `placement`), completing those that reach their count.
    private func advance(app: UUID, user: UUID, type: CampaignType, placement: String?, now: Date,
                         on conn: PostgresConnection) async throws {
        try await conn.run("""
            INSERT INTO campaign_participations AS p (campaign_id, app_id, user_id, progress, completed, completed_at, updated_at)
            SELECT c.id, c.app_id, \(user), 1, c.required <= 1, CASE WHEN c.required <= 1 THEN \(now)::timestamptz END, \(now)
            FROM freemium_campaigns c
            WHERE c.app_id = \(app) AND c.campaign_type = \(type.rawValue) AND c.active AND c.starts_at <= \(now) AND c.ends_at >= \(now)
              AND (c.placement IS NULL OR c.placement = \(placement))
            ON CONFLICT (campaign_id, user_id) DO UPDATE SET
                progress = p.progress + 1,
                completed = p.progress + 1 >= (SELECT required FROM freemium_campaigns WHERE id = p.campaign_id),
                completed_at = CASE WHEN p.progress + 1 >= (SELECT required FROM freemium_campaigns WHERE id = p.campaign_id)
                                    THEN \(now)::timestamptz END,
                updated_at = \(now)
            WHERE NOT p.completed
            """, logger: logger)
    }

    /// A rewarded view the server granted (12a: only running watch-ads campaigns, of the
    /// view's placement when the campaign names one).
    func countWatchedAd(app: UUID, user: UUID, placement: String, now: Date, on conn: PostgresConnection) async throws {
        try await advance(app: app, user: user, type: .watchAds, placement: placement, now: now, on: conn)
    }

    /// Streak: the first check-in of a UTC day extends the streak when yesterday had one,
    /// restarts it at 1 otherwise; a second check-in the same day changes nothing.
    func checkIn(_ c: Campaign, user: UUID, now: Date, on conn: PostgresConnection) async throws {
        let today = AdStore.day(now)
        try await conn.run("""
            INSERT INTO campaign_participations AS p (campaign_id, app_id, user_id, progress, completed, completed_at, last_checkin_day, updated_at)
            VALUES (\(c.id), \(c.appID), \(user), 1, \(c.required <= 1), CASE WHEN \(c.required <= 1) THEN \(now)::timestamptz END,
                    \(today)::date, \(now))
            ON CONFLICT (campaign_id, user_id) DO UPDATE SET
                progress = CASE WHEN p.last_checkin_day = \(today)::date - 1 THEN p.progress + 1 ELSE 1 END,
                completed = (CASE WHEN p.last_checkin_day = \(today)::date - 1 THEN p.progress + 1 ELSE 1 END) >= \(c.required),
                completed_at = CASE WHEN (CASE WHEN p.last_checkin_day = \(today)::date - 1 THEN p.progress + 1 ELSE 1 END) >= \(c.required)
                                    THEN \(now)::timestamptz END,
                last_checkin_day = \(today)::date,
                updated_at = \(now)
            WHERE NOT p.completed AND p.last_checkin_day IS DISTINCT FROM \(today)::date
            """, logger: logger)
    }

    /// The claim (23a-23d): marks the reward claimed once; the caller grants the credits in
    /// the same transaction.
    func markClaimed(campaign: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> Bool {
        let rows = try await conn.run("""
            UPDATE campaign_participations SET reward_claimed = true, reward_claimed_at = \(now), updated_at = \(now)
            WHERE campaign_id = \(campaign) AND user_id = \(user) AND completed AND NOT reward_claimed RETURNING 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    // MARK: referrals

    func referralCode(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> String {
        for _ in 0..<5 {
            let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
            let candidate = String((0..<8).map { _ in alphabet.randomElement()! })
            let rows = try await conn.run("""
                WITH ins AS (
                    INSERT INTO referral_codes (app_id, user_id, code, created_at) VALUES (\(app), \(user), \(candidate), \(now))
                    ON CONFLICT DO NOTHING RETURNING code)
                SELECT code FROM ins UNION ALL SELECT code FROM referral_codes WHERE app_id = \(app) AND user_id = \(user)
                """, logger: logger)
            for try await code in rows.decode(String.self) { return code }
        }
        throw AppError.unavailable
    }

    /// `counted`: the friend had already played, so the referrer's progress moved now.
    enum Redemption: Equatable { case redeemed(referrer: UUID, counted: Bool), unknownCode, ownCode, alreadyReferred }

    func redeem(app: UUID, referee: UUID, code: String, now: Date, on conn: PostgresConnection) async throws -> Redemption {
        var referrer: UUID?
        for try await id in try await conn.run("""
            SELECT user_id FROM referral_codes WHERE app_id = \(app) AND code = \(code.uppercased())
            """, logger: logger).decode(UUID.self) { referrer = id }
        guard let referrer else { return .unknownCode }
        guard referrer != referee else { return .ownCode }
        var inserted = false
        for try await _ in try await conn.run("""
            INSERT INTO referral_redemptions (app_id, referee_id, referrer_id, created_at) VALUES (\(app), \(referee), \(referrer), \(now))
            ON CONFLICT DO NOTHING RETURNING 1
            """, logger: logger) { inserted = true }
        guard inserted else { return .alreadyReferred }
        // A friend who has already watched a rewarded ad has played: counted at once.
        var played = false
        for try await _ in try await conn.run("""
            SELECT 1 FROM pending_rewards WHERE app_id = \(app) AND user_id = \(referee) AND source = 'ad_reward' LIMIT 1
            """, logger: logger) { played = true }
        if played { try await countReferral(app: app, referee: referee, now: now, on: conn) }
        return .redeemed(referrer: referrer, counted: played)
    }

    /// The referee did something real (UC-ADS-4.4 "install and play"): his redemption, if not
    /// counted yet, now moves the referrer's referral campaigns, once.
    func countReferral(app: UUID, referee: UUID, now: Date, on conn: PostgresConnection) async throws {
        for try await referrer in try await conn.run("""
            UPDATE referral_redemptions SET counted_at = \(now)
            WHERE app_id = \(app) AND referee_id = \(referee) AND counted_at IS NULL RETURNING referrer_id
            """, logger: logger).decode(UUID.self) {
            try await advance(app: app, user: referrer, type: .referral, placement: nil, now: now, on: conn)
        }
    }
}
