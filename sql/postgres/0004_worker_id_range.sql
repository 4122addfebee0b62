-- uidgen migration 0004 (PostgreSQL): worker_id_range, one worker-id range per assigner.
-- The disposable, leased and static assigners (and later ones) draw worker ids from the same
-- space. Each registers the range it hands ids from before taking one; a range that overlaps
-- another assigner's, or differs from the one its own assigner recorded, is refused at start-up,
-- so two services on one store can never stamp the same worker id.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS worker_id_range (
    -- The assigner: 'disposable', 'leased', 'static'.
    assigner VARCHAR(32) NOT NULL PRIMARY KEY,
    -- The lowest worker id it may hand out.
    low      BIGINT      NOT NULL,
    -- The highest worker id it may hand out (inclusive); 9223372036854775807, the largest
    -- BIGINT, means "up to the layout's maximum" (written LO-max), as in the default ranges.
    high     BIGINT      NOT NULL,
    updated  TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP
);
