import Foundation
import OfflineDomain
import PostgresNIO
import ServiceKit

/// Offline's part of a user's timeline: downloads and synchronisations.
enum OfflineTimeline {
    static let timeline = UserTimeline { user, app, limit -> PostgresQuery in
        """
        SELECT at, kind, summary FROM (
            (SELECT created_at AS at, 'offline.download' AS kind,
                    status || ': ' || downloaded_count || '/' || total_count || ' items of ' || array_to_string(category_ids, ', ') AS summary
             FROM download_jobs WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at DESC LIMIT \(limit))
            UNION ALL
            (SELECT created_at, 'offline.sync',
                    status || ': ' || items_to_process || ' actions, ' || succeeded || ' applied, ' || failed || ' failed, ' || conflicts || ' conflicts'
             FROM sync_jobs WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at DESC LIMIT \(limit))
        ) t ORDER BY at DESC LIMIT \(limit)
        """
    }
}
