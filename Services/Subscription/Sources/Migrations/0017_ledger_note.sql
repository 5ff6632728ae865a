-- #16 why an operator granted or took credits (support), kept with the ledger row.
ALTER TABLE credit_ledger ADD COLUMN note text CHECK (length(note) <= 500);
