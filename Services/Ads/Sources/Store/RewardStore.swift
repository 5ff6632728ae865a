import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// Credits owed to users (`pending_rewards`), each delivered to subscription through the
/// outbox row written in the same transaction as the reward (ARCHITECTURE.md, "Nothing lost").
struct RewardStore: Sendable {
    let logger: Logger

    struct Reward: Sendable, Equatable {
        var amount: Int
        var outboxID: Int64?
        /// `delivered`, `pending` or `dead`, from the outbox row.
        var delivery: String
        var newBalance: Int?
    }

    /// Records the reward once per (source, reference) and writes its delivery to the outbox.
    /// Returns the outbox row id, or nil when this reference was already rewarded.
    func grant(
        app: UUID,
        user: UUID,
        amount: Int,
        source: String,
        reference: String,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> Int64? {
        let inserted = try await conn.run(
            """
            INSERT INTO pending_rewards (app_id, user_id, amount, source, reference_id, outbox_id, created_at)
            VALUES (\(app), \(user), \(amount), \(source), \(reference), 0, \(now))
            ON CONFLICT (app_id, source, reference_id) DO NOTHING RETURNING id
            """,
            logger: logger
        )
        var rewardID: Int64?
        for try await id in inserted.decode(Int64.self) { rewardID = id }
        guard let rewardID else { return nil }
        let message = try OutboxMessage(
            InternalRoutes.earnCredits,
            path: InternalRoutes.earnCredits.path(),
            body: CreditEarnRequest(userID: user, appID: app, amount: amount, source: source, referenceID: reference)
        )
        // Sent at once by the request that granted it (to answer with the new balance).
        let (outboxID, _) = try await Outbox.enqueue(message, on: conn, logger: logger, deliveredByWriter: .seconds(10))
        try await conn.run("UPDATE pending_rewards SET outbox_id = \(outboxID) WHERE id = \(rewardID)", logger: logger)
        return outboxID
    }

    /// Undoes a grant in the same transaction (the daily cap refused it after all).
    func withdraw(app: UUID, source: String, reference: String, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            WITH r AS (DELETE FROM pending_rewards WHERE app_id = \(app) AND source = \(source) AND reference_id = \(reference) RETURNING outbox_id)
            DELETE FROM outbox WHERE id IN (SELECT outbox_id FROM r)
            """,
            logger: logger
        )
    }

    func reward(app: UUID, source: String, reference: String, on conn: PostgresConnection) async throws -> Reward? {
        let rows = try await conn.run(
            """
            SELECT r.amount, r.outbox_id, COALESCE(o.status, 'delivered'), r.new_balance FROM pending_rewards r
            LEFT JOIN outbox o ON o.id = r.outbox_id
            WHERE r.app_id = \(app) AND r.source = \(source) AND r.reference_id = \(reference)
            """,
            logger: logger
        )
        for try await r in rows.decode((Int, Int64, String, Int?).self) {
            return Reward(amount: r.0, outboxID: r.1, delivery: r.2, newBalance: r.3)
        }
        return nil
    }

    /// The immediate delivery failed, so the player was told the reward is pending: the credit,
    /// when it lands, comes with a push (subscription asks auth in the credit's transaction).
    func notifyOnLanding(outboxID: Int64, db: DatabasePool) async {
        do {
            try await db.query(
                """
                UPDATE outbox SET body = jsonb_set(body, '{notify}', 'true') WHERE id = \(outboxID) AND status = 'pending'
                """,
                logger: logger
            )
        } catch {
            logger.warning("could not ask for a push on landing", metadata: ["outbox_id": "\(outboxID)", "error": "\(error)"])
        }
    }

    /// After an immediate delivery: the balance subscription answered, kept for replays.
    func recordBalance(outboxID: Int64, balance: Int, db: DatabasePool) async {
        do {
            try await db.query("UPDATE pending_rewards SET new_balance = \(balance) WHERE outbox_id = \(outboxID)", logger: logger)
        } catch {
            logger.warning("could not record the new balance", metadata: ["outbox_id": "\(outboxID)", "error": "\(error)"])
        }
    }
}
