-- uidgen migration 0012 (MySQL/MariaDB): leaf_alloc_returned, the untouched tails of segments
-- a uidgen server handed back at a clean stop (issue 33, item 2). Each row is a range
-- [start_id, end_id) of a biz tag that a uidgen server claimed from leaf_alloc and never handed
-- out; of it only the numbers = remainder mod delta are the tag's (the delta and remainder of
-- the leaf_alloc row it came from; 1 and 0 for a single-database tag). A server's next segment
-- load of the tag takes the lowest row first (SELECT ... FOR UPDATE SKIP LOCKED, then DELETE,
-- in one transaction: MariaDB 10.6+, MySQL 8.0+), so no two servers ever get one range; only
-- when none is left does it claim a new segment from leaf_alloc. leaf_alloc itself is
-- unchanged: Leaf's own servers keep working beside uidgen and never see these numbers
-- (leaf_alloc's max_id is already past them).
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS leaf_alloc_returned (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    biz_tag       VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    start_id      BIGINT       NOT NULL,
    end_id        BIGINT       NOT NULL,
    delta         INT          NOT NULL DEFAULT 1,
    remainder     INT          NOT NULL DEFAULT 0,
    returned_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    KEY leaf_alloc_returned_tag (biz_tag, start_id),
    CHECK (start_id < end_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
