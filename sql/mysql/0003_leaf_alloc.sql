-- uidgen migration 0003 (MySQL/MariaDB): leaf_alloc, Meituan Leaf's segment table.
-- One row per biz tag; claiming a segment adds step to max_id in one transaction and serves
-- [max_id - step, max_id). biz_tag is case- and accent-sensitive (utf8mb4_bin), as a key must be.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS leaf_alloc (
    biz_tag     VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    max_id      BIGINT       NOT NULL DEFAULT 1,
    step        INT          NOT NULL,
    description VARCHAR(256) DEFAULT NULL,
    update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    PRIMARY KEY (biz_tag)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
