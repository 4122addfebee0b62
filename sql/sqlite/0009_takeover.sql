-- uidgen migration 0009 (SQLite): uidgen_takeover, what `uidgen takeover <peer>` decided.
-- One row per peer uidgen took over from (baidu, leaf, vesta, sharded, tinyid): the decision
-- as JSON (which layout, worker ids, table, key prefix or tags uidgen continues with, so that
-- no ID the peer handed out is handed out again), the report `--check` printed, and when it
-- was recorded (ms since the Unix epoch). `uidgen serve` reads it at start and refuses a
-- configuration that contradicts a recorded decision, naming the peer and what to change.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS uidgen_takeover (
    peer        VARCHAR(16) NOT NULL PRIMARY KEY,
    decision    TEXT        NOT NULL,
    summary     TEXT        NOT NULL,
    recorded_ms BIGINT      NOT NULL
);
