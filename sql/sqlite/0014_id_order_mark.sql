-- uidgen migration 0014 (SQLite): id_order_mark, per ID space the instant up to which its
-- servers may have stamped IDs (issue 33, item 1, "order across restarts"). A server writes the
-- mark ahead of every time unit it stamps (cached generator: ahead of the ring's padding), and
-- only ever raises it; a server starting in the space reads it and stamps no unit that starts
-- before it, so the first ID of a new life sorts above every ID of every earlier life of the
-- space, whichever server issued them. One row per space; holder says who raised it last
-- (for operators only). A new table: the tables Baidu, Leaf, Vesta and Tinyid wrote are
-- unchanged, and their servers never read this one.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS id_order_mark (
    -- The ID space: 'default' for the top-level generator, else a [spaces.<name>] name.
    space           VARCHAR(32)  NOT NULL,
    -- No ID of the space was stamped with a time unit ending after this (ms since the epoch).
    issued_until_ms BIGINT       NOT NULL,
    -- Who raised it last: worker id and process, for operators.
    holder          VARCHAR(255) NOT NULL,
    -- When it was raised last (ms since the epoch, the writer's clock).
    updated_ms      BIGINT       NOT NULL,
    PRIMARY KEY (space)
);
