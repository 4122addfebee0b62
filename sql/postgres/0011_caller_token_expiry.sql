-- uidgen migration 0011 (PostgreSQL): caller_token.expires_ms, when a caller token stops being
-- accepted (issue 32). 0 means never, as every token made before this migration is; a server
-- answers an expired token 401 saying it expired, and its row stays, as a revoked one does, so
-- its name stays taken. Times are ms since the Unix epoch.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
ALTER TABLE caller_token ADD COLUMN IF NOT EXISTS expires_ms BIGINT NOT NULL DEFAULT 0;
