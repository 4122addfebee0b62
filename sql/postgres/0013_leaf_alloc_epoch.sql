-- uidgen migration 0013 (PostgreSQL): leaf_alloc_epoch, how many times uidgen deleted each biz
-- tag. A segment claim reads the tag's epoch in its transaction; a clean stop hands a segment's
-- tail back (leaf_alloc_returned) only under the epoch it was claimed in, checked with the tag's
-- leaf_alloc row locked. A tag deleted (and perhaps re-created, restarting at max_id 1) while a
-- server still buffered its old segments then gets none of the old numbers back: the re-created
-- tag issues them again from its own segments, and handing them back would issue them twice.
-- No row means epoch 0. leaf_alloc itself is unchanged (Leaf's servers never read this table).
-- Idempotent: safe to run by hand; uidgen records it in _sqlx_migrations.
CREATE TABLE IF NOT EXISTS leaf_alloc_epoch (
    biz_tag VARCHAR(128) PRIMARY KEY,
    epoch   BIGINT       NOT NULL
);
