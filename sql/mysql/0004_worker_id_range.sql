-- uidgen migration 0004 (MySQL/MariaDB): worker_id_range, one worker-id range per assigner.
-- The disposable, leased and static assigners (and later ones) draw worker ids from the same
-- space. Each registers the range it hands ids from before taking one; a range that overlaps
-- another assigner's, or differs from the one its own assigner recorded, is refused at start-up,
-- so two services on one store can never stamp the same worker id. assigner is case-sensitive
-- (utf8mb4_bin), as a key must be.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS worker_id_range (
    assigner VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the assigner: disposable, leased, static',
    low      BIGINT      NOT NULL COMMENT 'the lowest worker id it may hand out',
    high     BIGINT      NOT NULL COMMENT 'the highest worker id it may hand out (inclusive); the largest BIGINT means up to the layout maximum (LO-max)',
    updated  TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    PRIMARY KEY (assigner)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'worker-id range of each assigner sharing this store';
