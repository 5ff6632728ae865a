import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// The user's data held here, for the privacy export and account deletion. The ledger is
/// money: on deletion its rows stay (accounting) but lose the link to the person, by moving
/// them to an anonymous id; balances and unlocks go.
enum SubscriptionUserData {
    static func sections(logger: Logger) -> [UserDataSection] {
        @Sendable func rows(_ query: PostgresQuery, _ conn: PostgresConnection) async throws -> JSONValue {
            try await UserDataSection.jsonRows(query, on: conn, logger: logger)
        }
        return [
            UserDataSection(name: "credits", export: { user, app, conn in
                try await rows("""
                    SELECT row_to_json(l)::text FROM (SELECT amount, source, reference_id, content_id, balance_after, created_at
                    FROM credit_ledger WHERE app_id = \(app) AND user_id = \(user) ORDER BY id) l
                    """, conn)
            }, delete: { user, app, conn in
                let anonymous = UUID()
                var n = 0
                for try await _ in try await conn.query("""
                    UPDATE credit_ledger SET user_id = \(anonymous) WHERE app_id = \(app) AND user_id = \(user) RETURNING id
                    """, logger: logger) { n += 1 }
                try await conn.query("DELETE FROM credit_balances WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                return n
            }),
            UserDataSection(name: "content_unlocks", export: { user, app, conn in
                try await rows("""
                    SELECT row_to_json(u)::text FROM (SELECT content_id, credits_spent, unlocked_at, expires_at
                    FROM content_unlocks WHERE app_id = \(app) AND user_id = \(user) ORDER BY unlocked_at) u
                    """, conn)
            }, delete: { user, app, conn in
                var n = 0
                for try await _ in try await conn.query("""
                    DELETE FROM content_unlocks WHERE app_id = \(app) AND user_id = \(user) RETURNING id
                    """, logger: logger) { n += 1 }
                return n
            }),
        ]
    }
}
