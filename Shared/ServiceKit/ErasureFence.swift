import Foundation
import Logging
import PostgresNIO

/// Nothing is written for a user once their erasure has committed, whichever replica, job or
/// outbox delivery writes it. A replica accepts an erased user's token until its session watcher
/// hears of the erasure (about a second), and a request under way when the erasure commits may
/// write after the erasure's deletes: the profile a sync read created again (stop 57) was one.
///
/// The fence is in the database, so a new write path cannot forget it: each table holding a
/// user's data has a trigger that takes the user's key shared and then refuses the row if the
/// user's erased marker is there (`UE001`). The erasure takes the same key exclusively before it
/// deletes. So a write either commits before the erasure starts deleting (and is deleted with the
/// rest) or waits for it and meets the marker; the statement after the lock sees what committed
/// meanwhile (READ COMMITTED takes a snapshot per statement, also inside the trigger).
public enum ErasureFence {
    /// The advisory lock's first key: the two-key space, apart from the one-key locks of flows.
    static let lockClass: Int32 = 0x4552_4153  // "ERAS"

    /// SQLSTATE the trigger raises (a class of our own, as PostgreSQL advises).
    public static let refused = "UE001"

    /// The trigger functions, in each service's schema (`-- include platform: erasure_fence`).
    /// `refuse_erased_user` checks each row (the column is `user_id` unless the trigger names
    /// another: referral_redemptions.referee_id); `refuse_erased_users` checks a statement's rows
    /// at once, for the tables written in batches (the access log's group commit): measured with
    /// pgbench on 32-row inserts, 16 µs per row for the row trigger, 4.4 µs for the statement's.
    /// An UPDATE needs no fence unless it sets the user: the row it changes is locked, and the
    /// erasure's delete waits for it and then deletes it.
    static let migration = """
        CREATE FUNCTION refuse_erased_user() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        DECLARE
            subject uuid;
        BEGIN
            IF TG_NARGS = 0 THEN
                subject := NEW.user_id;
            ELSE
                subject := (to_jsonb(NEW) ->> TG_ARGV[0])::uuid;
            END IF;
            IF subject IS NULL THEN
                RETURN NEW;
            END IF;
            PERFORM pg_advisory_xact_lock_shared(\(lockClass), hashtext(subject::text));
            IF EXISTS (SELECT 1 FROM session_state WHERE app_id = NEW.app_id AND user_id = subject AND state = 'erased') THEN
                RAISE EXCEPTION 'the user is erased' USING ERRCODE = '\(refused)';
            END IF;
            RETURN NEW;
        END
        $$;

        -- AFTER INSERT ... REFERENCING NEW TABLE AS written FOR EACH STATEMENT: the rows are in
        -- but not committed; a refusal undoes the statement.
        CREATE FUNCTION refuse_erased_users() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock_shared(\(lockClass), hashtext(u::text))
            FROM (SELECT DISTINCT user_id AS u FROM written WHERE user_id IS NOT NULL ORDER BY 1) d;
            IF EXISTS (
                SELECT 1 FROM written w JOIN session_state s ON s.app_id = w.app_id AND s.user_id = w.user_id AND s.state = 'erased'
            ) THEN
                RAISE EXCEPTION 'the user is erased' USING ERRCODE = '\(refused)';
            END IF;
            RETURN NULL;
        END
        $$;
        """

    /// The erasure's side: taken in its transaction before its first delete, so writes under way
    /// finish first and later ones wait for its commit.
    public static func lockForErasure(user: UUID, on conn: PostgresConnection, logger: Logger) async throws {
        try await conn.run("SELECT pg_advisory_xact_lock(\(lockClass), hashtext(\(user)::text))", logger: logger)
    }

    /// Whether `error` is the fence's refusal.
    public static func isRefusal(_ error: any Error) -> Bool { DatabaseErrors.sqlState(error) == refused }
}
