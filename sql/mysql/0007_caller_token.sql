-- uidgen migration 0007 (MySQL/MariaDB): caller_token, per-caller bearer tokens (Tinyid's
-- tiny_id_token). A token is 32 random bytes shown to its creator once; only the SHA-256 of the
-- token text is kept (token_hash, lowercase hex), so a copy of this table lets no one call the
-- service. routes, tags, apps and spaces are the token's scopes: newline-separated lists, '*'
-- allowing anything. A revoked token keeps its row (revoked_at_ms > 0) so its name stays taken
-- and the metrics labelled by it stay unambiguous. name is case-sensitive (utf8mb4_bin), as a
-- key must be. Times are ms since the Unix epoch.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS caller_token (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    name          VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    token_hash    CHAR(64)     CHARACTER SET ascii NOT NULL COMMENT 'SHA-256 of the token, lowercase hex; the token itself is never stored',
    routes        TEXT         CHARACTER SET utf8mb4 NOT NULL COMMENT 'route families allowed, one per line; * for all',
    tags          TEXT         CHARACTER SET utf8mb4 NOT NULL COMMENT 'segment tags allowed, one per line; * for all',
    apps          TEXT         CHARACTER SET utf8mb4 NOT NULL COMMENT 'sharded app ids allowed, one per line; * for all',
    spaces        TEXT         CHARACTER SET utf8mb4 NOT NULL COMMENT 'spaces allowed, one per line; * for all',
    created_ms    BIGINT       NOT NULL,
    revoked_at_ms BIGINT       NOT NULL DEFAULT 0 COMMENT '0 while the token is valid',
    PRIMARY KEY (id),
    UNIQUE KEY caller_token_name (name),
    UNIQUE KEY caller_token_hash (token_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'per-caller bearer tokens, hashed';
