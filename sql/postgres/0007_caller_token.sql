-- uidgen migration 0007 (PostgreSQL): caller_token, per-caller bearer tokens (Tinyid's
-- tiny_id_token). A token is 32 random bytes shown to its creator once; only the SHA-256 of the
-- token text is kept (token_hash, lowercase hex), so a copy of this table lets no one call the
-- service. routes, tags, apps and spaces are the token's scopes: newline-separated lists, '*'
-- allowing anything. A revoked token keeps its row (revoked_at_ms > 0) so its name stays taken
-- and the metrics labelled by it stay unambiguous. Times are ms since the Unix epoch.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS caller_token (
    id            BIGSERIAL    PRIMARY KEY,
    name          VARCHAR(64)  NOT NULL UNIQUE,
    token_hash    CHAR(64)     NOT NULL UNIQUE,
    routes        TEXT         NOT NULL,
    tags          TEXT         NOT NULL,
    apps          TEXT         NOT NULL,
    spaces        TEXT         NOT NULL,
    created_ms    BIGINT       NOT NULL,
    revoked_at_ms BIGINT       NOT NULL DEFAULT 0
);
