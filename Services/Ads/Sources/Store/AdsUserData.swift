import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// The user's data held here, for the privacy export and account deletion. Views and requests
/// feed the revenue figures: on deletion they stay without the user id (no identifiable data
/// in analytics); consent history, limits, campaign progress and referral codes go. Rewards
/// already owed stay owed (their outbox rows still deliver) but lose the user link.
enum AdsUserData {
    static func sections(logger: Logger) -> [UserDataSection] {
        let q = UserDataQueries(logger: logger)
        return [
            UserDataSection(
                name: "ad_consents",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(c)::text FROM (SELECT consent_personalized_ads, consent_data_sharing, age_gate_passed, is_under_age,
                               att_status, tcf_string, consent_form_status, country, gdpr_applies, source, created_at
                        FROM user_consent_ads WHERE app_id = \(app) AND user_id = \(user) ORDER BY id) c
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await q.count("DELETE FROM user_consent_ads WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "ad_views",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(v)::text FROM (SELECT ad_request_id, ad_type, placement, provider, ad_completed, ad_clicked,
                               display_duration_ms, reward_granted, reward_amount, created_at
                        FROM ad_views WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at) v
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    let n = try await q.count("UPDATE ad_views SET user_id = NULL WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                    try await conn.run("UPDATE ad_requests SET user_id = NULL WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return n
                }
            ),
            UserDataSection(
                name: "ad_limits",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(l)::text FROM (SELECT day, rewarded_views, interstitial_views, last_rewarded_at, last_interstitial_at
                        FROM user_ad_limits WHERE app_id = \(app) AND user_id = \(user)) l
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await q.count("DELETE FROM user_ad_limits WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "rewards",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(r)::text FROM (SELECT amount, source, reference_id, new_balance, created_at
                        FROM pending_rewards WHERE app_id = \(app) AND user_id = \(user) ORDER BY id) r
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await q.count("UPDATE pending_rewards SET user_id = NULL WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "campaigns",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(p)::text FROM (SELECT c.name, c.campaign_type, a.variant_key, a.assigned_at, a.exposed_at,
                               p.progress, p.completed, p.reward_claimed, p.reward_claimed_at, p.updated_at, r.created_at AS reminded_at
                        FROM campaign_assignments a JOIN freemium_campaigns c ON c.id = a.campaign_id
                        LEFT JOIN campaign_participations p ON p.campaign_id = a.campaign_id AND p.user_id = a.user_id
                        LEFT JOIN campaign_reminders r ON r.campaign_id = a.campaign_id AND r.user_id = a.user_id
                        WHERE a.app_id = \(app) AND a.user_id = \(user)
                        UNION ALL
                        SELECT c.name, c.campaign_type, p.variant_key, NULL, NULL, p.progress, p.completed, p.reward_claimed,
                               p.reward_claimed_at, p.updated_at, NULL
                        FROM campaign_participations p JOIN freemium_campaigns c ON c.id = p.campaign_id
                        WHERE p.app_id = \(app) AND p.user_id = \(user)
                          AND NOT EXISTS (SELECT 1 FROM campaign_assignments a WHERE a.campaign_id = p.campaign_id AND a.user_id = p.user_id)) p
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    // The experiment's counts lose this user with the rest (erasure is complete).
                    try await conn.run("DELETE FROM campaign_reminders WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    try await conn.run("DELETE FROM campaign_assignments WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return try await q.count("DELETE FROM campaign_participations WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "referrals",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(r)::text FROM (
                            SELECT 'code' AS kind, code AS value, created_at FROM referral_codes WHERE app_id = \(app) AND user_id = \(user)
                            UNION ALL SELECT 'referred_by', referrer_id::text, created_at FROM referral_redemptions WHERE app_id = \(app) AND referee_id = \(user)
                            UNION ALL SELECT 'referred', referee_id::text, created_at FROM referral_redemptions WHERE app_id = \(app) AND referrer_id = \(user)) r
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    let codes = try await q.count("DELETE FROM referral_codes WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                    let redemptions = try await q.count(
                        """
                        DELETE FROM referral_redemptions WHERE app_id = \(app) AND (referee_id = \(user) OR referrer_id = \(user)) RETURNING 1
                        """,
                        conn
                    )
                    return codes + redemptions
                }
            ),
        ]
    }
}
