-- uidgen migration 0011 (MySQL/MariaDB): caller_token.expires_ms, when a caller token stops
-- being accepted (issue 32). 0 means never, as every token made before this migration is; a
-- server answers an expired token 401 saying it expired, and its row stays, as a revoked one
-- does, so its name stays taken. Times are ms since the Unix epoch.
-- Not idempotent (MySQL 8 has no ADD COLUMN IF NOT EXISTS): uidgen applies it once and records
-- it in uidgen_schema_migrations; by hand, run it once.
ALTER TABLE caller_token
    ADD COLUMN expires_ms BIGINT NOT NULL DEFAULT 0 COMMENT 'when the token stops being accepted, ms since the Unix epoch; 0 never';
