-- uidgen migration 0002 (SQLite): worker_lease, for LeasedWorkerIdAssigner.
-- A narrow layout (10-bit Snowflake) would run out of disposable worker ids, so a worker id in
-- 0..=max is leased instead: claimed by a conditional UPDATE (or an INSERT for a never-used id),
-- renewed by a heartbeat, released on clean shutdown (holder '' and expires_at_ms 0).
-- last_issued_ms survives release and takeover: the next holder must not issue IDs until its
-- clock has passed it.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS worker_lease (
    -- The leased worker id, 0 to the layout's maximum.
    worker_id      BIGINT       NOT NULL PRIMARY KEY,
    -- Who holds it: a name (host and pid by default), "#" and a random per-claim token, so
    -- renewal and release (which match on it) never touch another claim's lease; '' when released.
    holder         VARCHAR(128) NOT NULL,
    -- Lease expiry, ms since the Unix epoch by the holder's clock; 0 when released.
    expires_at_ms  BIGINT       NOT NULL,
    -- Every ID issued under this worker id was stamped before this instant (ms since the epoch).
    last_issued_ms BIGINT       NOT NULL DEFAULT 0,
    updated        TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP
);
