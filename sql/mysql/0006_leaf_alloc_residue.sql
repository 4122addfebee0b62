-- uidgen migration 0006 (MySQL/MariaDB): leaf_alloc's delta and remainder (Tinyid's
-- multi-database segments). A tag served from N databases holds delta = N in each, and
-- remainder k (0 to N-1) in the k-th: of each segment [max_id - step, max_id) that database
-- hands out only the numbers congruent to k modulo N, so the databases never hand out the same
-- number. The defaults (1, 0) keep every existing single-database tag exactly as it was.
-- Not idempotent on MySQL 8 (no ADD COLUMN IF NOT EXISTS there): uidgen applies it once and
-- records it in uidgen_schema_migrations; by hand, run it once.
ALTER TABLE leaf_alloc
    ADD COLUMN delta     INT NOT NULL DEFAULT 1 COMMENT 'how many databases serve this tag (Tinyid)',
    ADD COLUMN remainder INT NOT NULL DEFAULT 0 COMMENT 'this database serves numbers = remainder mod delta';
