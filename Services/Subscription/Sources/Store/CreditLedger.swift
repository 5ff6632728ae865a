import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// One row of the append-only credit ledger.
public struct CreditTransaction: Codable, Sendable, Equatable {
    public var id: Int64
    public var amount: Int
    public var source: String
    public var referenceID: String
    public var contentID: String?
    public var balanceAfter: Int
    public var createdAt: Date

    enum CodingKeys: String, CodingKey {
        case id, amount, source
        case referenceID = "reference_id"
        case contentID = "content_id"
        case balanceAfter = "balance_after"
        case createdAt = "created_at"
    }
}

public struct ContentUnlock: Codable, Sendable, Equatable {
    public var contentID: String
    public var creditsSpent: Int
    public var unlockedAt: Date
    public var expiresAt: Date
    enum CodingKeys: String, CodingKey {
        case contentID = "content_id"
        case creditsSpent = "credits_spent"
        case unlockedAt = "unlocked_at"
        case expiresAt = "expires_at"
    }
}

/// The credit ledger: every balance change is a row; the running balance is locked per user
/// (`FOR UPDATE`), so concurrent earns and spends serialise and the balance never goes below 0
/// (a `CHECK` holds it in the database too).
public struct CreditLedger: Sendable {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    /// Locks (creating if needed) the user's balance row; returns the balance.
    func lockBalance(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Int {
        try await conn.run(
            """
            INSERT INTO credit_balances (app_id, user_id) VALUES (\(app), \(user)) ON CONFLICT DO NOTHING
            """,
            logger: logger
        )
        for try await b in try await conn.run(
            """
            SELECT balance FROM credit_balances WHERE app_id = \(app) AND user_id = \(user) FOR UPDATE
            """,
            logger: logger
        ).decode(Int.self) { return b }
        return 0
    }

    func existing(app: UUID, user: UUID, source: String, reference: String, on conn: PostgresConnection) async throws -> CreditTransaction? {
        let rows = try await conn.run(
            """
            SELECT id, amount, source, reference_id, content_id, balance_after, created_at FROM credit_ledger
            WHERE app_id = \(app) AND user_id = \(user) AND source = \(source) AND reference_id = \(reference)
            """,
            logger: logger
        )
        for try await r in rows.decode((Int64, Int, String, String, String?, Int, Date).self) {
            return CreditTransaction(id: r.0, amount: r.1, source: r.2, referenceID: r.3, contentID: r.4, balanceAfter: r.5, createdAt: r.6)
        }
        return nil
    }

    /// Appends a row and moves the balance (the caller holds the balance lock).
    func append(
        app: UUID,
        user: UUID,
        amount: Int,
        source: String,
        reference: String,
        contentID: String?,
        balanceAfter: Int,
        note: String? = nil,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> CreditTransaction {
        let rows = try await conn.run(
            """
            INSERT INTO credit_ledger (app_id, user_id, amount, source, reference_id, content_id, balance_after, note, created_at)
            VALUES (\(app), \(user), \(amount), \(source), \(reference), \(contentID), \(balanceAfter), \(note), \(now))
            RETURNING id
            """,
            logger: logger
        )
        var id: Int64 = 0
        for try await v in rows.decode(Int64.self) { id = v }
        try await conn.run(
            """
            UPDATE credit_balances SET balance = \(balanceAfter), updated_at = \(now) WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        )
        // #33: credits.earned / credits.spent to the app's servers through auth, with the ledger
        // row's id as the version (a user's rows are ordered by it).
        try await Outbox.write(
            try OutboxMessage(
                InternalRoutes.events,
                path: InternalRoutes.events.path(),
                body: WebhookEventMessage(
                    type: amount >= 0 ? "credits.earned" : "credits.spent",
                    appID: app,
                    createdAt: now,
                    version: id,
                    data: [
                        "user_id": .string(user.lowercasedString), "transaction_id": .int(Int(id)), "amount": .int(amount),
                        "balance": .int(balanceAfter), "source": .string(source),
                    ]
                )
            ),
            on: conn,
            logger: logger
        )
        return CreditTransaction(
            id: id,
            amount: amount,
            source: source,
            referenceID: reference,
            contentID: contentID,
            balanceAfter: balanceAfter,
            createdAt: now
        )
    }

    /// Credits `amount` once per (`source`, `reference`); a repeat returns the first row.
    public func earn(
        app: UUID,
        user: UUID,
        amount: Int,
        source: String,
        reference: String,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> (CreditTransaction, created: Bool) {
        let balance = try await lockBalance(app: app, user: user, on: conn)
        if let done = try await existing(app: app, user: user, source: source, reference: reference, on: conn) { return (done, false) }
        let tx = try await append(
            app: app,
            user: user,
            amount: amount,
            source: source,
            reference: reference,
            contentID: nil,
            balanceAfter: balance + amount,
            now: now,
            on: conn
        )
        return (tx, true)
    }

    public enum SupportOutcome: Sendable {
        case done(CreditTransaction, created: Bool)
        case insufficient(balance: Int)
        case keyReused
    }

    /// Support grants (`amount` > 0) or takes back (< 0) credits with a reason, once per
    /// `key`: a retry answers the first row; the same key for another amount is refused; the
    /// balance never goes below 0.
    public func supportAdjust(
        app: UUID,
        user: UUID,
        amount: Int,
        reason: String,
        key: String,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> SupportOutcome {
        let balance = try await lockBalance(app: app, user: user, on: conn)
        let reference = "support:" + key
        if let done = try await existing(app: app, user: user, source: "support", reference: reference, on: conn) {
            return done.amount == amount ? .done(done, created: false) : .keyReused
        }
        guard balance + amount >= 0 else { return .insufficient(balance: balance) }
        return .done(
            try await append(
                app: app,
                user: user,
                amount: amount,
                source: "support",
                reference: reference,
                contentID: nil,
                balanceAfter: balance + amount,
                note: reason,
                now: now,
                on: conn
            ),
            created: true
        )
    }

    public func balance(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Int {
        for try await b in try await conn.run(
            """
            SELECT balance FROM credit_balances WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        ).decode(Int.self) { return b }
        return 0
    }

    public func transactions(app: UUID, user: UUID, before: Int64?, limit: Int, on conn: PostgresConnection) async throws -> [CreditTransaction] {
        let rows = try await conn.run(
            """
            SELECT id, amount, source, reference_id, content_id, balance_after, created_at FROM credit_ledger
            WHERE app_id = \(app) AND user_id = \(user) AND id < \(before ?? Int64.max)
            ORDER BY id DESC LIMIT \(limit)
            """,
            logger: logger
        )
        var out: [CreditTransaction] = []
        for try await r in rows.decode((Int64, Int, String, String, String?, Int, Date).self) {
            out.append(CreditTransaction(id: r.0, amount: r.1, source: r.2, referenceID: r.3, contentID: r.4, balanceAfter: r.5, createdAt: r.6))
        }
        return out
    }

    public func rule(app: UUID, content: String, on conn: PostgresConnection) async throws -> ContentRule? {
        let rows = try await conn.run(
            """
            SELECT content_id, access_level, credit_cost, unlock_hours FROM content_rules
            WHERE app_id = \(app) AND content_id = \(content) AND active
            """,
            logger: logger
        )
        for try await r in rows.decode((String, String, Int, Int).self) {
            return ContentRule(contentID: r.0, accessLevel: ContentRule.Level(rawValue: r.1) ?? .premium, creditCost: r.2, unlockHours: r.3)
        }
        return nil
    }

    public func activeUnlock(app: UUID, user: UUID, content: String, now: Date, on conn: PostgresConnection) async throws -> ContentUnlock? {
        let rows = try await conn.run(
            """
            SELECT content_id, credits_spent, unlocked_at, expires_at FROM content_unlocks
            WHERE app_id = \(app) AND user_id = \(user) AND content_id = \(content) AND expires_at > \(now)
            ORDER BY expires_at DESC LIMIT 1
            """,
            logger: logger
        )
        for try await r in rows.decode((String, Int, Date, Date).self) {
            return ContentUnlock(contentID: r.0, creditsSpent: r.1, unlockedAt: r.2, expiresAt: r.3)
        }
        return nil
    }

    public enum UnlockOutcome: Sendable {
        case unlocked(ContentUnlock, balance: Int)
        case alreadyUnlocked(ContentUnlock, balance: Int)
        case insufficient(balance: Int, cost: Int)
    }

    /// Spends the content's cost for its unlock hours; an unexpired unlock is returned free.
    public func unlock(app: UUID, user: UUID, rule: ContentRule, now: Date, on conn: PostgresConnection) async throws -> UnlockOutcome {
        let balance = try await lockBalance(app: app, user: user, on: conn)
        if let current = try await activeUnlock(app: app, user: user, content: rule.contentID, now: now, on: conn) {
            return .alreadyUnlocked(current, balance: balance)
        }
        guard balance >= rule.creditCost else { return .insufficient(balance: balance, cost: rule.creditCost) }
        let unlockID = UUID()
        let tx = try await append(
            app: app,
            user: user,
            amount: -rule.creditCost,
            source: "unlock",
            reference: unlockID.lowercasedString,
            contentID: rule.contentID,
            balanceAfter: balance - rule.creditCost,
            now: now,
            on: conn
        )
        let expires = now.addingTimeInterval(TimeInterval(rule.unlockHours) * 3600)
        try await conn.run(
            """
            INSERT INTO content_unlocks (id, app_id, user_id, content_id, ledger_id, credits_spent, unlocked_at, expires_at)
            VALUES (\(unlockID), \(app), \(user), \(rule.contentID), \(tx.id), \(rule.creditCost), \(now), \(expires))
            """,
            logger: logger
        )
        return .unlocked(
            ContentUnlock(contentID: rule.contentID, creditsSpent: rule.creditCost, unlockedAt: now, expiresAt: expires),
            balance: tx.balanceAfter
        )
    }
}
