import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// The user's data held here, for the privacy export and account deletion. Purchases and the
/// ledger are money: on deletion their rows stay (accounting) but lose the link to the person,
/// moved to an anonymous id; logs, devices, balances and unlocks go.
enum SubscriptionUserData {
    static func sections(logger: Logger) -> [UserDataSection] {
        let q = UserDataQueries(logger: logger)
        return [
            UserDataSection(
                name: "subscriptions",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(s)::text FROM (SELECT id, plan_type, status, start_date, end_date, trial_end_date, auto_renew, store,
                               store_product_id, created_at FROM subscriptions WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at) s
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    // Purchases are accounting records: they stay, detached from the person.
                    let anonymous = UUID()
                    let n = try await q.count(
                        """
                        UPDATE subscriptions SET user_id = \(anonymous), updated_at = now() WHERE app_id = \(app) AND user_id = \(user) RETURNING id
                        """,
                        conn
                    )
                    try await conn.run(
                        "UPDATE subscription_events SET user_id = \(anonymous) WHERE app_id = \(app) AND user_id = \(user)",
                        logger: logger
                    )
                    try await conn.run(
                        """
                        UPDATE iap_receipts SET user_id = \(anonymous), signed_data = NULL WHERE app_id = \(app) AND user_id = \(user)
                        """,
                        logger: logger
                    )
                    return n
                }
            ),
            UserDataSection(
                name: "access_logs",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(a)::text FROM (SELECT content_id, access_granted, via, timestamp FROM access_logs
                        WHERE app_id = \(app) AND user_id = \(user) ORDER BY timestamp) a
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    let n = try await q.count("DELETE FROM access_logs WHERE app_id = \(app) AND user_id = \(user) RETURNING id", conn)
                    try await conn.run("DELETE FROM devices WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return n
                }
            ),
            UserDataSection(
                name: "credits",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(l)::text FROM (SELECT amount, source, reference_id, content_id, balance_after, note, created_at
                        FROM credit_ledger WHERE app_id = \(app) AND user_id = \(user) ORDER BY id) l
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    let anonymous = UUID()
                    let n = try await q.count(
                        """
                        UPDATE credit_ledger SET user_id = \(anonymous) WHERE app_id = \(app) AND user_id = \(user) RETURNING id
                        """,
                        conn
                    )
                    try await conn.run("DELETE FROM credit_balances WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return n
                }
            ),
            UserDataSection(
                name: "content_unlocks",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(u)::text FROM (SELECT content_id, credits_spent, unlocked_at, expires_at
                        FROM content_unlocks WHERE app_id = \(app) AND user_id = \(user) ORDER BY unlocked_at) u
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await q.count(
                        """
                        DELETE FROM content_unlocks WHERE app_id = \(app) AND user_id = \(user) RETURNING id
                        """,
                        conn
                    )
                }
            ),
        ]
    }
}
