-- uidgen migration 0001 (PostgreSQL): worker_node, after Baidu uid-generator's WORKER_NODE table.
-- DisposableWorkerIdAssigner inserts one row per process start; the row's id is the worker id,
-- so a restarted process never shares a worker id with its earlier life.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS worker_node (
    -- The worker id.
    id          BIGSERIAL   PRIMARY KEY,
    -- Host name or IP (UIDGEN_HOST in a container).
    host_name   VARCHAR(64) NOT NULL,
    -- Port (UIDGEN_PORT in a container), else '<millis>-<random>'.
    port        VARCHAR(64) NOT NULL,
    -- Node type: 1 = CONTAINER, 2 = ACTUAL.
    type        INT         NOT NULL,
    launch_date DATE        NOT NULL,
    modified    TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    created     TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP
);
