-- uidgen migration 0003 (PostgreSQL): leaf_alloc, Meituan Leaf's segment table.
-- One row per biz tag; claiming a segment adds step to max_id in one transaction and serves
-- [max_id - step, max_id).
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS leaf_alloc (
    biz_tag     VARCHAR(128) NOT NULL PRIMARY KEY,
    max_id      BIGINT       NOT NULL DEFAULT 1,
    step        INT          NOT NULL,
    description VARCHAR(256) DEFAULT NULL,
    update_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP
);
