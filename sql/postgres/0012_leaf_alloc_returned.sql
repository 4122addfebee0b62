-- uidgen migration 0012 (PostgreSQL): leaf_alloc_returned, the untouched tails of segments a
-- uidgen server handed back at a clean stop (issue 33, item 2). Each row is a range
-- [start_id, end_id) of a biz tag that a uidgen server claimed from leaf_alloc and never handed
-- out; of it only the numbers = remainder mod delta are the tag's (the delta and remainder of
-- the leaf_alloc row it came from; 1 and 0 for a single-database tag). A server's next segment
-- load of the tag takes the lowest row first, deleting it in the same statement (row lock,
-- SKIP LOCKED), so no two servers ever get one range; only when none is left does it claim a
-- new segment from leaf_alloc. leaf_alloc itself is unchanged: Leaf's own servers keep working
-- beside uidgen and never see these numbers (leaf_alloc's max_id is already past them).
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS leaf_alloc_returned (
    id            BIGSERIAL    PRIMARY KEY,
    biz_tag       VARCHAR(128) NOT NULL,
    start_id      BIGINT       NOT NULL,
    end_id        BIGINT       NOT NULL,
    delta         INT          NOT NULL DEFAULT 1,
    remainder     INT          NOT NULL DEFAULT 0,
    returned_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CHECK (start_id < end_id)
);
CREATE INDEX IF NOT EXISTS leaf_alloc_returned_tag ON leaf_alloc_returned (biz_tag, start_id);
