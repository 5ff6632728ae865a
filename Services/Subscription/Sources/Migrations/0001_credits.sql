-- UC-SUB-2.4 credits. The ledger is append-only: every change of a balance is one row,
-- corrections are reversing rows. `credit_balances` holds the running balance (never
-- negative), locked per user so concurrent spends and earns serialise.
CREATE TABLE credit_balances (
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    balance integer NOT NULL DEFAULT 0 CHECK (balance >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, user_id)
);

CREATE TABLE credit_ledger (
    id bigserial PRIMARY KEY,
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    amount integer NOT NULL CHECK (amount <> 0),
    source text NOT NULL,
    reference_id text NOT NULL,
    content_id text,
    balance_after integer NOT NULL CHECK (balance_after >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- An earn (or spend) is recorded once per reference: ads' reward id, an unlock id...
    UNIQUE (app_id, user_id, source, reference_id)
);
CREATE INDEX credit_ledger_user ON credit_ledger (app_id, user_id, id DESC);

-- Content rules (UC-SUB-2.2): access level and the credit price of a freemium unlock.
CREATE TABLE content_rules (
    app_id uuid NOT NULL,
    content_id text NOT NULL,
    access_level text NOT NULL CHECK (access_level IN ('free', 'premium', 'freemium')),
    credit_cost integer NOT NULL DEFAULT 3 CHECK (credit_cost > 0),
    unlock_hours integer NOT NULL DEFAULT 24 CHECK (unlock_hours > 0),
    active boolean NOT NULL DEFAULT true,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, content_id)
);

CREATE TABLE content_unlocks (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_id uuid NOT NULL,
    user_id uuid NOT NULL,
    content_id text NOT NULL,
    ledger_id bigint NOT NULL REFERENCES credit_ledger (id),
    credits_spent integer NOT NULL,
    unlocked_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX content_unlocks_user ON content_unlocks (app_id, user_id, content_id, expires_at DESC);
