-- uidgen migration 0008 (SQLite): worker_lease per ID space (issue 36). A server's named ID
-- spaces ([spaces.<name>]) are separate ID spaces whose IDs may be equal, so a worker id need
-- only be unique within one space: each space leases its worker ids apart, and a narrow space
-- no longer shares its few ids with the others. The key becomes (space, worker_id); every row
-- written so far is the default space's ('default', the top-level generator's), and so is a
-- row an older uidgen inserts later (the column's default).
-- worker_lease_before_spaces keeps, for each worker id leased before, where every ID stamped
-- with it lies below: an older uidgen leased one worker id for all of a server's spaces, so
-- a named space takes a worker id it never leased only once its clock passed that point.
-- Not idempotent (SQLite cannot change a primary key in place, so the table is rebuilt): uidgen
-- applies it once and records it in uidgen_schema_migrations; by hand, run it once.
CREATE TABLE IF NOT EXISTS worker_lease_before_spaces (
    -- A worker id leased before leases were kept per space.
    worker_id BIGINT NOT NULL PRIMARY KEY,
    -- Every ID stamped with it before then lies before this instant (ms since the epoch): the
    -- later of its lease's expiry and its recorded issued-until time.
    floor_ms  BIGINT NOT NULL
);
INSERT OR IGNORE INTO worker_lease_before_spaces (worker_id, floor_ms)
    SELECT worker_id, MAX(expires_at_ms, last_issued_ms) FROM worker_lease;
CREATE TABLE worker_lease_by_space (
    -- The ID space: 'default' for the top-level generator, else a [spaces.<name>] name.
    space          VARCHAR(32)  NOT NULL DEFAULT 'default',
    -- The leased worker id, 0 to the space's layout's maximum.
    worker_id      BIGINT       NOT NULL,
    -- Who holds it: a name (host and pid by default), "#" and a random per-claim token, so
    -- renewal and release (which match on it) never touch another claim's lease; '' when released.
    holder         VARCHAR(128) NOT NULL,
    -- Lease expiry, ms since the Unix epoch by the holder's clock; 0 when released.
    expires_at_ms  BIGINT       NOT NULL,
    -- Every ID issued under this worker id in this space was stamped before this instant.
    last_issued_ms BIGINT       NOT NULL DEFAULT 0,
    updated        TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (space, worker_id)
);
INSERT INTO worker_lease_by_space (space, worker_id, holder, expires_at_ms, last_issued_ms, updated)
    SELECT 'default', worker_id, holder, expires_at_ms, last_issued_ms, updated FROM worker_lease;
DROP TABLE worker_lease;
ALTER TABLE worker_lease_by_space RENAME TO worker_lease;
