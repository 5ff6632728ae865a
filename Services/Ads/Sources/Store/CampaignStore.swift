import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

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
    /// #31: the assignment hash's salt, and whether users are split into variants.
    var salt: String = ""
    var hasVariants: Bool = false

    func isRunning(at now: Date) -> Bool { active && startsAt <= now && now <= endsAt }
}

/// What one user meets of a campaign: its variant (the campaign itself without variants).
struct CampaignOffer: Sendable {
    var campaign: Campaign
    var variant: CampaignVariant?
    var rewardAmount: Int { variant?.rewardAmount ?? campaign.rewardAmount }
    var required: Int { variant?.required ?? campaign.required }
    var conditions: JSONValue { variant?.conditions ?? campaign.conditions }
    /// A holdout user is not shown the campaign (only counted).
    var hidden: Bool { variant?.holdout ?? false }
}

struct Participation: Sendable, Equatable {
    var progress: Int
    var completed: Bool
    var completedAt: Date?
    var rewardClaimed: Bool
    var rewardClaimedAt: Date?
    /// The goal this participation must reach (its variant's; nil on rows from before #31).
    var required: Int? = nil
}

/// `freemium_campaigns`, `campaign_participations` and referral codes (UC-ADS-4.4). Progress
/// is only ever changed by the server: views it counted, check-ins it saw, redemptions it
/// recorded.
struct CampaignStore: Sendable {
    let logger: Logger

    static let columns = """
        id, app_id, name, description, campaign_type, reward_amount, conditions::text, required, placement, starts_at, ends_at, active,
        salt, has_variants
        """
    typealias Row = (UUID, UUID, String, String, String, Int, String, Int, String?, Date, Date, Bool, String, Bool)
    static func campaign(_ r: Row) throws -> Campaign {
        Campaign(
            id: r.0,
            appID: r.1,
            name: r.2,
            description: r.3,
            type: CampaignType(rawValue: r.4) ?? .watchAds,
            rewardAmount: r.5,
            conditions: try JSONDecoder().decode(JSONValue.self, from: Data(r.6.utf8)),
            required: r.7,
            placement: r.8,
            startsAt: r.9,
            endsAt: r.10,
            active: r.11,
            salt: r.12,
            hasVariants: r.13
        )
    }

    func create(_ c: Campaign, variants: [CampaignVariant] = [], on conn: PostgresConnection) async throws -> Campaign {
        let conditions = String(decoding: try JSON.encoder.encode(c.conditions), as: UTF8.self)
        let rows = try await conn.run(
            """
            INSERT INTO freemium_campaigns (id, app_id, name, description, campaign_type, reward_amount, conditions, required, placement,
                                            starts_at, ends_at, active, has_variants)
            VALUES (\(c.id), \(c.appID), \(c.name), \(c.description), \(c.type.rawValue), \(c.rewardAmount), \(conditions)::jsonb, \(c.required),
                    \(c.placement), \(c.startsAt), \(c.endsAt), true, \(!variants.isEmpty))
            RETURNING \(unescaped: Self.columns)
            """,
            logger: logger
        )
        var created: Campaign?
        for try await r in rows.decode(Row.self) { created = try Self.campaign(r) }
        guard let created else { throw AppError.unavailable }
        try await saveVariants(campaign: created.id, variants, on: conn)
        return created
    }

    // MARK: variants and assignments (#31)

    /// Writes the variants in order (new ones added, kept ones changed, the others removed: the
    /// caller has checked that no removed one has users).
    func saveVariants(campaign: UUID, _ variants: [CampaignVariant], on conn: PostgresConnection) async throws {
        for (position, v) in variants.enumerated() {
            let conditions = String(decoding: try JSON.encoder.encode(v.conditions), as: UTF8.self)
            try await conn.run(
                """
                INSERT INTO campaign_variants (campaign_id, key, position, weight, reward_amount, required, conditions, holdout)
                VALUES (\(campaign), \(v.key), \(position), \(v.weight), \(v.rewardAmount), \(v.required), \(conditions)::jsonb, \(v.holdout))
                ON CONFLICT (campaign_id, key) DO UPDATE SET position = EXCLUDED.position, weight = EXCLUDED.weight,
                    reward_amount = EXCLUDED.reward_amount, required = EXCLUDED.required, conditions = EXCLUDED.conditions, holdout = EXCLUDED.holdout
                """,
                logger: logger
            )
        }
        try await conn.run(
            "DELETE FROM campaign_variants WHERE campaign_id = \(campaign) AND NOT (key = ANY(\(variants.map(\.key))))",
            logger: logger
        )
    }

    /// Each campaign's variants, in order.
    func variants(of campaigns: [UUID], on conn: PostgresConnection) async throws -> [UUID: [CampaignVariant]] {
        guard !campaigns.isEmpty else { return [:] }
        var out: [UUID: [CampaignVariant]] = [:]
        for try await r in try await conn.run(
            """
            SELECT campaign_id, key, weight, reward_amount, required, conditions::text, holdout FROM campaign_variants
            WHERE campaign_id = ANY(\(campaigns)) ORDER BY campaign_id, position
            """,
            logger: logger
        ).decode((UUID, String, Int, Int, Int, String, Bool).self) {
            out[r.0, default: []].append(
                CampaignVariant(
                    key: r.1,
                    weight: r.2,
                    rewardAmount: r.3,
                    required: r.4,
                    conditions: try JSONDecoder().decode(JSONValue.self, from: Data(r.5.utf8)),
                    holdout: r.6
                )
            )
        }
        return out
    }

    /// What the user meets of each campaign: assigned on first meeting (the hash over the
    /// weights in force then), and the stored assignment afterwards, whatever the weights became.
    /// `expose`: the user is being shown them (a listing, an opening): the first time is recorded.
    func offers(_ campaigns: [Campaign], app: UUID, user: UUID, expose: Bool, now: Date, on conn: PostgresConnection) async throws -> [CampaignOffer]
    {
        guard !campaigns.isEmpty else { return [] }
        let variants = try await variants(of: campaigns.filter(\.hasVariants).map(\.id), on: conn)
        var stored: [UUID: (variant: String?, exposed: Bool)] = [:]
        for try await r in try await conn.run(
            """
            SELECT campaign_id, variant_key, exposed_at IS NOT NULL FROM campaign_assignments
            WHERE campaign_id = ANY(\(campaigns.map(\.id))) AND user_id = \(user)
            """,
            logger: logger
        ).decode((UUID, String?, Bool).self) { stored[r.0] = (r.1, r.2) }
        // New assignments (and first exposures) in one statement; a concurrent first meeting on
        // another replica computed the same variant, and the stored row wins anyway.
        var ids: [UUID] = []
        var keys: [String] = []
        for c in campaigns where stored[c.id] == nil || (expose && stored[c.id]?.exposed == false) {
            let key =
                stored[c.id]?.variant
                ?? variants[c.id].map {
                    CampaignExperiment.pick($0, bucket: CampaignExperiment.bucket(salt: c.salt, app: app, user: user)).key
                }
            ids.append(c.id)
            keys.append(key ?? "")
        }
        if !ids.isEmpty {
            let exposedAt: Date? = expose ? now : nil
            for try await r in try await conn.run(
                """
                INSERT INTO campaign_assignments AS a (campaign_id, app_id, user_id, variant_key, assigned_at, exposed_at)
                SELECT c, \(app), \(user), NULLIF(k, ''), \(now), \(exposedAt) FROM unnest(\(ids), \(keys)) AS t(c, k)
                ON CONFLICT (campaign_id, user_id) DO UPDATE SET exposed_at = COALESCE(a.exposed_at, EXCLUDED.exposed_at)
                RETURNING campaign_id, variant_key
                """,
                logger: logger
            ).decode((UUID, String?).self) { stored[r.0] = (r.1, expose) }
        }
        return campaigns.map { c in
            let key = stored[c.id]?.variant
            return CampaignOffer(campaign: c, variant: key.flatMap { k in variants[c.id]?.first { $0.key == k } })
        }
    }

    /// Assigned users per variant (an edit may not remove a variant that has some).
    func assignedCounts(campaign: UUID, on conn: PostgresConnection) async throws -> [String: Int] {
        var out: [String: Int] = [:]
        for try await (key, n) in try await conn.run(
            """
            SELECT variant_key, count(*)::int FROM campaign_assignments WHERE campaign_id = \(campaign) AND variant_key IS NOT NULL GROUP BY 1
            """,
            logger: logger
        ).decode((String, Int).self) { out[key] = n }
        return out
    }

    /// The operator's edit of the name, description or end (the variants separately).
    func edit(app: UUID, id: UUID, name: String?, description: String?, endsAt: Date?, on conn: PostgresConnection) async throws -> Campaign? {
        for try await r in try await conn.run(
            """
            UPDATE freemium_campaigns SET name = COALESCE(\(name), name), description = COALESCE(\(description), description),
                   ends_at = COALESCE(\(endsAt), ends_at)
            WHERE app_id = \(app) AND id = \(id) RETURNING \(unescaped: Self.columns)
            """,
            logger: logger
        ).decode(Row.self) { return try Self.campaign(r) }
        return nil
    }

    /// The experiment's figures, from the rows: assignments, participations and the credits
    /// the claims granted (`pending_rewards`, the ledger's source at ads).
    func results(campaign: UUID, on conn: PostgresConnection) async throws -> [CampaignFunnel] {
        var out: [CampaignFunnel] = []
        for try await r in try await conn.run(
            """
            SELECT a.variant_key, count(*)::int, count(a.exposed_at)::int,
                   count(p.user_id) FILTER (WHERE p.progress > 0)::int, count(*) FILTER (WHERE p.completed)::int,
                   count(*) FILTER (WHERE p.reward_claimed)::int, COALESCE(sum(r.amount), 0)::int
            FROM campaign_assignments a
            LEFT JOIN campaign_participations p ON p.campaign_id = a.campaign_id AND p.user_id = a.user_id
            LEFT JOIN pending_rewards r ON r.app_id = a.app_id AND r.source = 'promo'
                 AND r.reference_id = 'campaign:' || a.campaign_id::text || ':' || a.user_id::text
            WHERE a.campaign_id = \(campaign)
            GROUP BY a.variant_key
            """,
            logger: logger
        ).decode((String?, Int, Int, Int, Int, Int, Int).self) {
            out.append(CampaignFunnel(key: r.0, assigned: r.1, exposed: r.2, joined: r.3, completed: r.4, claimed: r.5, creditsGranted: r.6))
        }
        return out
    }

    /// Exposures and completions per UTC day.
    func resultsByDay(campaign: UUID, on conn: PostgresConnection) async throws -> [(day: String, exposed: Int, completed: Int)] {
        var out: [(String, Int, Int)] = []
        for try await r in try await conn.run(
            """
            WITH e AS (SELECT (exposed_at AT TIME ZONE 'UTC')::date AS d, count(*) AS n FROM campaign_assignments
                       WHERE campaign_id = \(campaign) AND exposed_at IS NOT NULL GROUP BY 1),
                 c AS (SELECT (completed_at AT TIME ZONE 'UTC')::date AS d, count(*) AS n FROM campaign_participations
                       WHERE campaign_id = \(campaign) AND completed GROUP BY 1)
            SELECT to_char(COALESCE(e.d, c.d), 'YYYY-MM-DD'), COALESCE(e.n, 0)::int, COALESCE(c.n, 0)::int
            FROM e FULL JOIN c ON c.d = e.d ORDER BY 1
            """,
            logger: logger
        ).decode((String, Int, Int).self) { out.append(r) }
        return out
    }

    // MARK: the reminder (#31)

    struct Reminder: Sendable {
        var campaign: UUID
        var app: UUID
        var user: UUID
        var progress: Int
        var required: Int
        var name: String
        var reward: Int
    }

    /// Records up to `batch` reminders due now (campaigns ending within a day, users at 60 % of
    /// their goal or one step short, not completed nor claimed), once per user and campaign,
    /// whichever replica runs it; returns the new ones for the caller to send in the same
    /// transaction.
    func dueReminders(now: Date, batch: Int, on conn: PostgresConnection) async throws -> [Reminder] {
        var out: [Reminder] = []
        for try await r in try await conn.run(Self.dueRemindersQuery(now: now, batch: batch), logger: logger)
            .decode((UUID, UUID, UUID, Int, Int, String, Int).self)
        {
            out.append(Reminder(campaign: r.0, app: r.1, user: r.2, progress: r.3, required: r.4, name: r.5, reward: r.6))
        }
        return out
    }

    /// The reminder sweep's statement (a periodic query).
    static func dueRemindersQuery(now: Date, batch: Int) -> PostgresQuery {
        """
        WITH due AS (
            SELECT p.campaign_id, p.app_id, p.user_id, p.progress, COALESCE(p.required, c.required) AS required, c.name,
                   COALESCE(v.reward_amount, c.reward_amount) AS reward
            FROM freemium_campaigns c
            JOIN campaign_participations p ON p.campaign_id = c.id
            LEFT JOIN campaign_variants v ON v.campaign_id = c.id AND v.key = p.variant_key
            WHERE c.active AND c.ends_at > \(now) AND c.ends_at <= \(now)::timestamptz + interval '1 day'
              AND NOT p.completed AND NOT p.reward_claimed
              AND (p.progress >= 0.6 * COALESCE(p.required, c.required) OR p.progress >= COALESCE(p.required, c.required) - 1)
              AND NOT EXISTS (SELECT 1 FROM campaign_reminders r WHERE r.campaign_id = p.campaign_id AND r.user_id = p.user_id)
            LIMIT \(batch)),
        ins AS (
            INSERT INTO campaign_reminders (campaign_id, app_id, user_id, progress, required, created_at)
            SELECT campaign_id, app_id, user_id, progress, required, \(now) FROM due
            ON CONFLICT DO NOTHING
            RETURNING campaign_id, user_id)
        SELECT due.campaign_id, due.app_id, due.user_id, due.progress, due.required, due.name, due.reward
        FROM ins JOIN due USING (campaign_id, user_id)
        """
    }

    /// Ends a campaign now (admin): no new progress, no claim after its end.
    func end(app: UUID, id: UUID, now: Date, on conn: PostgresConnection) async throws -> Campaign? {
        let rows = try await conn.run(
            """
            UPDATE freemium_campaigns SET active = false, ends_at = LEAST(ends_at, GREATEST(starts_at + interval '1 second', \(now)))
            WHERE app_id = \(app) AND id = \(id) RETURNING \(unescaped: Self.columns)
            """,
            logger: logger
        )
        for try await r in rows.decode(Row.self) { return try Self.campaign(r) }
        return nil
    }

    func campaign(app: UUID, id: UUID, on conn: PostgresConnection) async throws -> Campaign? {
        let rows = try await conn.run(
            "SELECT \(unescaped: Self.columns) FROM freemium_campaigns WHERE app_id = \(app) AND id = \(id)",
            logger: logger
        )
        for try await r in rows.decode(Row.self) { return try Self.campaign(r) }
        return nil
    }

    /// The app's campaigns for its operator, latest start first, a page at a time.
    func list(app: UUID, limit: Int, offset: Int, on conn: PostgresConnection) async throws -> [Campaign] {
        let rows = try await conn.run(
            """
            SELECT \(unescaped: Self.columns) FROM freemium_campaigns WHERE app_id = \(app)
            ORDER BY starts_at DESC, id DESC LIMIT \(limit) OFFSET \(offset)
            """,
            logger: logger
        )
        var out: [Campaign] = []
        for try await r in rows.decode(Row.self) { out.append(try Self.campaign(r)) }
        return out
    }

    func running(app: UUID, now: Date, on conn: PostgresConnection) async throws -> [Campaign] {
        let rows = try await conn.run(
            """
            SELECT \(unescaped: Self.columns) FROM freemium_campaigns
            WHERE app_id = \(app) AND active AND starts_at <= \(now) AND ends_at >= \(now) ORDER BY ends_at, id
            """,
            logger: logger
        )
        var out: [Campaign] = []
        for try await r in rows.decode(Row.self) { out.append(try Self.campaign(r)) }
        return out
    }

    func participations(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> [UUID: Participation] {
        let rows = try await conn.run(
            """
            SELECT campaign_id, progress, completed, completed_at, reward_claimed, reward_claimed_at, required FROM campaign_participations
            WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        )
        var out: [UUID: Participation] = [:]
        for try await r in rows.decode((UUID, Int, Bool, Date?, Bool, Date?, Int?).self) {
            out[r.0] = Participation(progress: r.1, completed: r.2, completedAt: r.3, rewardClaimed: r.4, rewardClaimedAt: r.5, required: r.6)
        }
        return out
    }

    func participation(campaign: UUID, user: UUID, lock: Bool = false, on conn: PostgresConnection) async throws -> Participation? {
        let rows = try await conn.run(
            """
            SELECT progress, completed, completed_at, reward_claimed, reward_claimed_at, required FROM campaign_participations
            WHERE campaign_id = \(campaign) AND user_id = \(user) \(unescaped: lock ? "FOR UPDATE" : "")
            """,
            logger: logger
        )
        for try await r in rows.decode((Int, Bool, Date?, Bool, Date?, Int?).self) {
            return Participation(progress: r.0, completed: r.1, completedAt: r.2, rewardClaimed: r.3, rewardClaimedAt: r.4, required: r.5)
        }
        return nil
    }

    /// Adds one to the progress of the running campaigns of `type` (optionally only those for
    /// `placement`), completing those that reach their goal: the user's variant's goal, which the
    /// participation keeps. A holdout user's progress is not counted (he is not in the campaign).
    private func advance(
        app: UUID,
        user: UUID,
        type: CampaignType,
        placement: String?,
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        // The user's variants first (assigned, not exposed: showing is what exposes).
        let running = try await running(app: app, now: now, on: conn).filter {
            $0.type == type && $0.hasVariants && ($0.placement == nil || $0.placement == placement)
        }
        _ = try await offers(running, app: app, user: user, expose: false, now: now, on: conn)
        let rows = try await conn.run(
            """
            INSERT INTO campaign_participations AS p (campaign_id, app_id, user_id, variant_key, required, progress, completed, completed_at, updated_at)
            SELECT c.id, c.app_id, \(user), v.key, COALESCE(v.required, c.required), 1, COALESCE(v.required, c.required) <= 1,
                   CASE WHEN COALESCE(v.required, c.required) <= 1 THEN \(now)::timestamptz END, \(now)
            FROM freemium_campaigns c
            LEFT JOIN campaign_assignments a ON a.campaign_id = c.id AND a.user_id = \(user)
            LEFT JOIN campaign_variants v ON v.campaign_id = c.id AND v.key = a.variant_key
            WHERE c.app_id = \(app) AND c.campaign_type = \(type.rawValue) AND c.active AND c.starts_at <= \(now) AND c.ends_at >= \(now)
              AND (c.placement IS NULL OR c.placement = \(placement))
              AND (NOT c.has_variants OR (v.key IS NOT NULL AND NOT v.holdout))
            ON CONFLICT (campaign_id, user_id) DO UPDATE SET
                progress = p.progress + 1,
                completed = p.progress + 1 >= COALESCE(p.required, (SELECT required FROM freemium_campaigns WHERE id = p.campaign_id)),
                completed_at = CASE WHEN p.progress + 1 >= COALESCE(p.required, (SELECT required FROM freemium_campaigns WHERE id = p.campaign_id))
                                    THEN \(now)::timestamptz END,
                updated_at = \(now)
            WHERE NOT p.completed
            RETURNING campaign_id, completed, progress, variant_key
            """,
            logger: logger
        )
        for try await (campaign, completed, progress, variant) in rows.decode((UUID, Bool, Int, String?).self) where completed {
            try await Self.announceCompletion(
                app: app,
                user: user,
                campaign: campaign,
                progress: progress,
                variant: variant,
                now: now,
                on: conn,
                logger: logger
            )
        }
    }

    /// #33: `campaign.completed` to the app's servers through auth when the goal is reached (the
    /// claim is a `credits.earned`), iff this transaction commits; its version is the progress.
    static func announceCompletion(
        app: UUID,
        user: UUID,
        campaign: UUID,
        progress: Int,
        variant: String?,
        now: Date,
        on conn: PostgresConnection,
        logger: Logger
    ) async throws {
        var data: [String: JSONValue] = [
            "user_id": .string(user.lowercasedString), "campaign_id": .string(campaign.lowercasedString),
            "progress": .int(progress),
        ]
        if let variant { data["variant"] = .string(variant) }
        try await Outbox.write(
            try OutboxMessage(
                InternalRoutes.events,
                path: InternalRoutes.events.path(),
                body: WebhookEventMessage(
                    type: "campaign.completed",
                    appID: app,
                    createdAt: now,
                    version: Int64(progress),
                    data: data
                )
            ),
            on: conn,
            logger: logger
        )
    }

    /// A rewarded view the server granted (12a: only running watch-ads campaigns, of the
    /// view's placement when the campaign names one).
    func countWatchedAd(app: UUID, user: UUID, placement: String, now: Date, on conn: PostgresConnection) async throws {
        try await advance(app: app, user: user, type: .watchAds, placement: placement, now: now, on: conn)
    }

    /// Streak: the first check-in of a UTC day extends the streak when yesterday had one,
    /// restarts it at 1 otherwise; a second check-in the same day changes nothing.
    func checkIn(_ offer: CampaignOffer, user: UUID, now: Date, on conn: PostgresConnection) async throws {
        let today = AdStore.day(now)
        let c = offer.campaign
        let required = offer.required
        let rows = try await conn.run(
            """
            INSERT INTO campaign_participations AS p (campaign_id, app_id, user_id, variant_key, required, progress, completed, completed_at,
                                                      last_checkin_day, updated_at)
            VALUES (\(c.id), \(c.appID), \(user), \(offer.variant?.key), \(required), 1, \(required <= 1),
                    CASE WHEN \(required <= 1) THEN \(now)::timestamptz END, \(today)::date, \(now))
            ON CONFLICT (campaign_id, user_id) DO UPDATE SET
                progress = CASE WHEN p.last_checkin_day = \(today)::date - 1 THEN p.progress + 1 ELSE 1 END,
                completed = (CASE WHEN p.last_checkin_day = \(today)::date - 1 THEN p.progress + 1 ELSE 1 END) >= \(required),
                completed_at = CASE WHEN (CASE WHEN p.last_checkin_day = \(today)::date - 1 THEN p.progress + 1 ELSE 1 END) >= \(required)
                                    THEN \(now)::timestamptz END,
                last_checkin_day = \(today)::date,
                updated_at = \(now)
            WHERE NOT p.completed AND p.last_checkin_day IS DISTINCT FROM \(today)::date
            RETURNING completed, progress
            """,
            logger: logger
        )
        for try await (completed, progress) in rows.decode((Bool, Int).self) where completed {
            try await Self.announceCompletion(
                app: c.appID,
                user: user,
                campaign: c.id,
                progress: progress,
                variant: offer.variant?.key,
                now: now,
                on: conn,
                logger: logger
            )
        }
    }

    /// The claim (23a-23d): marks the reward claimed once; the caller grants the credits in
    /// the same transaction.
    func markClaimed(campaign: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> Bool {
        let rows = try await conn.run(
            """
            UPDATE campaign_participations SET reward_claimed = true, reward_claimed_at = \(now), updated_at = \(now)
            WHERE campaign_id = \(campaign) AND user_id = \(user) AND completed AND NOT reward_claimed RETURNING 1
            """,
            logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    // MARK: referrals

    func referralCode(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> String {
        for _ in 0..<5 {
            let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
            let candidate = String((0..<8).map { _ in alphabet.randomElement()! })
            let rows = try await conn.run(
                """
                WITH ins AS (
                    INSERT INTO referral_codes (app_id, user_id, code, created_at) VALUES (\(app), \(user), \(candidate), \(now))
                    ON CONFLICT DO NOTHING RETURNING code)
                SELECT code FROM ins UNION ALL SELECT code FROM referral_codes WHERE app_id = \(app) AND user_id = \(user)
                """,
                logger: logger
            )
            for try await code in rows.decode(String.self) { return code }
        }
        throw AppError.unavailable
    }

    /// `counted`: the friend had already played, so the referrer's progress moved now.
    enum Redemption: Equatable {
        case redeemed(referrer: UUID, counted: Bool)
        case unknownCode, ownCode, alreadyReferred
    }

    func redeem(app: UUID, referee: UUID, code: String, now: Date, on conn: PostgresConnection) async throws -> Redemption {
        var referrer: UUID?
        for try await id in try await conn.run(
            """
            SELECT user_id FROM referral_codes WHERE app_id = \(app) AND code = \(code.uppercased())
            """,
            logger: logger
        ).decode(UUID.self) { referrer = id }
        guard let referrer else { return .unknownCode }
        guard referrer != referee else { return .ownCode }
        var inserted = false
        for try await _ in try await conn.run(
            """
            INSERT INTO referral_redemptions (app_id, referee_id, referrer_id, created_at) VALUES (\(app), \(referee), \(referrer), \(now))
            ON CONFLICT DO NOTHING RETURNING 1
            """,
            logger: logger
        ) { inserted = true }
        guard inserted else { return .alreadyReferred }
        // A friend who has already watched a rewarded ad has played: counted at once.
        var played = false
        for try await _ in try await conn.run(
            """
            SELECT 1 FROM pending_rewards WHERE app_id = \(app) AND user_id = \(referee) AND source = 'ad_reward' LIMIT 1
            """,
            logger: logger
        ) { played = true }
        if played { try await countReferral(app: app, referee: referee, now: now, on: conn) }
        return .redeemed(referrer: referrer, counted: played)
    }

    /// The referee did something real (UC-ADS-4.4 "install and play"): his redemption, if not
    /// counted yet, now moves the referrer's referral campaigns, once.
    func countReferral(app: UUID, referee: UUID, now: Date, on conn: PostgresConnection) async throws {
        for try await referrer in try await conn.run(
            """
            UPDATE referral_redemptions SET counted_at = \(now)
            WHERE app_id = \(app) AND referee_id = \(referee) AND counted_at IS NULL RETURNING referrer_id
            """,
            logger: logger
        ).decode(UUID.self) {
            try await advance(app: app, user: referrer, type: .referral, placement: nil, now: now, on: conn)
        }
    }
}
