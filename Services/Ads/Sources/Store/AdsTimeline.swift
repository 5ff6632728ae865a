import AdsDomain
import Foundation
import PostgresNIO
import ServiceKit

/// Ads' part of a user's timeline: ad views (and their rewards) and consent answers.
enum AdsTimeline {
    static let timeline = UserTimeline { user, app, limit -> PostgresQuery in
        """
        SELECT at, kind, summary FROM (
            (SELECT created_at AS at, 'ads.view' AS kind,
                    ad_type || ' at ' || placement || CASE WHEN reward_granted THEN ', rewarded' ELSE '' END AS summary
             FROM ad_views WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at DESC LIMIT \(limit))
            UNION ALL
            (SELECT created_at, 'ads.consent',
                    'personalised ' || COALESCE(consent_personalized_ads::text, 'unanswered') || ' (from ' || source || ')'
             FROM user_consent_ads WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at DESC LIMIT \(limit))
        ) t ORDER BY at DESC LIMIT \(limit)
        """
    }
}
