-- uidgen migration 0008 (MySQL/MariaDB): worker_lease per ID space (issue 36). A server's named
-- ID spaces ([spaces.<name>]) are separate ID spaces whose IDs may be equal, so a worker id
-- need only be unique within one space: each space leases its worker ids apart, and a narrow
-- space no longer shares its few ids with the others. The key becomes (space, worker_id);
-- every row written so far is the default space's ('default', the top-level generator's), and
-- so is a row an older uidgen inserts later (the column's default). space is case-sensitive
-- (utf8mb4_bin), as a key must be.
-- worker_lease_before_spaces keeps, for each worker id leased before, where every ID stamped
-- with it lies below: an older uidgen leased one worker id for all of a server's spaces, so
-- a named space takes a worker id it never leased only once its clock passed that point.
-- Not idempotent (the primary key changes): uidgen applies it once and records it in
-- uidgen_schema_migrations; by hand, run it once.
CREATE TABLE IF NOT EXISTS worker_lease_before_spaces (
    worker_id BIGINT NOT NULL PRIMARY KEY COMMENT 'a worker id leased before leases were kept per space',
    floor_ms  BIGINT NOT NULL COMMENT 'every ID stamped with it before then lies before this instant (ms): the later of its lease expiry and issued-until time'
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
INSERT IGNORE INTO worker_lease_before_spaces (worker_id, floor_ms)
    SELECT worker_id, GREATEST(expires_at_ms, last_issued_ms) FROM worker_lease;
ALTER TABLE worker_lease
    ADD COLUMN space VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT 'default'
        COMMENT 'the ID space: default for the top-level generator, else a [spaces.<name>] name' FIRST,
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (space, worker_id);
