-- uidgen migration 0006 (PostgreSQL): leaf_alloc's delta and remainder (Tinyid's multi-database
-- segments). A tag served from N databases holds delta = N in each, and remainder k (0 to N-1)
-- in the k-th: of each segment [max_id - step, max_id) that database hands out only the numbers
-- congruent to k modulo N, so the databases never hand out the same number. The defaults
-- (1, 0) keep every existing single-database tag exactly as it was: every number is served.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
ALTER TABLE leaf_alloc ADD COLUMN IF NOT EXISTS delta INT NOT NULL DEFAULT 1;
ALTER TABLE leaf_alloc ADD COLUMN IF NOT EXISTS remainder INT NOT NULL DEFAULT 0;
