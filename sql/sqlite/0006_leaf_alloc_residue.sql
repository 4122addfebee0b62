-- uidgen migration 0006 (SQLite): leaf_alloc's delta and remainder (Tinyid's multi-database
-- segments). A tag served from N databases holds delta = N in each, and remainder k (0 to N-1)
-- in the k-th: of each segment [max_id - step, max_id) that database hands out only the numbers
-- congruent to k modulo N, so the databases never hand out the same number. The defaults
-- (1, 0) keep every existing single-database tag exactly as it was: every number is served.
-- Not idempotent (SQLite has no ADD COLUMN IF NOT EXISTS): uidgen applies it once and records it
-- in uidgen_schema_migrations; by hand, run it once.
ALTER TABLE leaf_alloc ADD COLUMN delta INT NOT NULL DEFAULT 1;
ALTER TABLE leaf_alloc ADD COLUMN remainder INT NOT NULL DEFAULT 0;
