-- uidgen migration 0005 (MySQL/MariaDB): id_alloc, the sharded mode's segment table.
-- One row per app and shard (64 shards per app, created together with the app). Claiming a
-- segment adds step to max_id in one transaction and hands out indexes [max_id - step, max_id);
-- the sharded mode pushes them to Redis lists and packs index, shard and app id into each ID.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS id_alloc (
    app_id       INT          NOT NULL COMMENT 'the app: 0 to 255, the low 8 bits of its IDs',
    app_name     VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL DEFAULT '',
    max_id       BIGINT       NOT NULL DEFAULT 1 COMMENT 'the next segment ends here; indexes below it are handed out',
    shard_id     INT          NOT NULL COMMENT 'the shard: 0 to 63, bits 8 to 13 of its IDs',
    step         INT          NOT NULL DEFAULT 1000,
    description  VARCHAR(256) DEFAULT NULL,
    create_time  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    max_limit_id BIGINT       NOT NULL DEFAULT 0 COMMENT 'the largest index this shard may hand out; 0: no limit but the 49 index bits',
    PRIMARY KEY (app_id, shard_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'sharded mode: one segment row per app and shard';
