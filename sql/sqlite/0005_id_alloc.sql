-- uidgen migration 0005 (SQLite): id_alloc, the sharded mode's segment table.
-- One row per app and shard (64 shards per app, created together with the app). Claiming a
-- segment adds step to max_id in one transaction and hands out indexes [max_id - step, max_id);
-- the sharded mode pushes them to Redis lists and packs index, shard and app id into each ID.
-- max_limit_id is a ceiling on the index (0: none beyond the 49 bits of the layout).
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS id_alloc (
    app_id       INT          NOT NULL,
    app_name     VARCHAR(128) NOT NULL DEFAULT '',
    max_id       BIGINT       NOT NULL DEFAULT 1,
    shard_id     INT          NOT NULL,
    step         INT          NOT NULL DEFAULT 1000,
    description  VARCHAR(256) DEFAULT NULL,
    create_time  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    max_limit_id BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (app_id, shard_id)
);
