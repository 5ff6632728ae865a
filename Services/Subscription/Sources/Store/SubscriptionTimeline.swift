import Foundation
import PostgresNIO
import ServiceKit
import SubscriptionDomain

/// Subscription's part of a user's timeline: store events, credits, access decisions.
enum SubscriptionTimeline {
    static let timeline = UserTimeline { user, app, limit -> PostgresQuery in
        """
        SELECT at, kind, summary FROM (
            (SELECT timestamp AS at, 'subscription.' || event_type AS kind, event_data::text AS summary FROM subscription_events
             WHERE app_id = \(app) AND user_id = \(user) ORDER BY timestamp DESC LIMIT \(limit))
            UNION ALL
            (SELECT created_at, 'credits.' || source,
                    (CASE WHEN amount > 0 THEN '+' ELSE '' END) || amount || ' (balance ' || balance_after || ')' || COALESCE(': ' || note, '')
             FROM credit_ledger WHERE app_id = \(app) AND user_id = \(user) ORDER BY id DESC LIMIT \(limit))
            UNION ALL
            (SELECT timestamp, CASE WHEN access_granted THEN 'access.granted' ELSE 'access.refused' END, content_id || COALESCE(' via ' || via, '')
             FROM access_logs WHERE app_id = \(app) AND user_id = \(user) ORDER BY timestamp DESC LIMIT \(limit))
        ) t ORDER BY at DESC LIMIT \(limit)
        """
    }
}
