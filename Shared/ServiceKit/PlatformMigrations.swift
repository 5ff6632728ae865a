/// Tables every service's schema has: the outbox, the job queue, idempotency keys and rate
/// limit counters. They run first in each service's migration list.
public enum PlatformMigrations {
    public static let all: [Migration] = [
        Migration(
            name: "0000_platform_tables",
            sql: """
                CREATE TABLE outbox (
                    id bigserial PRIMARY KEY,
                    idempotency_key uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
                    target_service text NOT NULL,
                    method text NOT NULL,
                    path text NOT NULL,
                    body jsonb,
                    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
                    attempts integer NOT NULL DEFAULT 0,
                    max_attempts integer NOT NULL DEFAULT 20,
                    next_attempt_at timestamptz NOT NULL DEFAULT now(),
                    last_error text,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    delivered_at timestamptz
                );
                CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';

                CREATE TABLE jobs (
                    id bigserial PRIMARY KEY,
                    queue text NOT NULL,
                    kind text NOT NULL,
                    payload jsonb NOT NULL DEFAULT '{}',
                    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'done', 'dead')),
                    run_at timestamptz NOT NULL DEFAULT now(),
                    attempts integer NOT NULL DEFAULT 0,
                    max_attempts integer NOT NULL DEFAULT 5,
                    locked_until timestamptz,
                    last_error text,
                    unique_key text UNIQUE,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    updated_at timestamptz NOT NULL DEFAULT now(),
                    finished_at timestamptz
                );
                CREATE INDEX jobs_due ON jobs (queue, run_at) WHERE status IN ('pending', 'running');

                CREATE TABLE idempotency_keys (
                    scope text NOT NULL,
                    key text NOT NULL,
                    status_code integer,
                    response_body text,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (scope, key)
                );

                CREATE TABLE rate_limits (
                    scope text NOT NULL,
                    key text NOT NULL,
                    window_start timestamptz NOT NULL,
                    count integer NOT NULL,
                    PRIMARY KEY (scope, key, window_start)
                );
                """
        )
    ]
}
