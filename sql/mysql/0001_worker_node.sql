-- uidgen migration 0001 (MySQL/MariaDB): worker_node, Baidu uid-generator's WORKER_NODE table.
-- DisposableWorkerIdAssigner inserts one row per process start; the row's id is the worker id,
-- so a restarted process never shares a worker id with its earlier life.
-- Idempotent: safe to run by hand; uidgen records it in uidgen_schema_migrations.
CREATE TABLE IF NOT EXISTS worker_node (
    id          BIGINT      NOT NULL AUTO_INCREMENT COMMENT 'auto increment id: the worker id',
    host_name   VARCHAR(64) NOT NULL COMMENT 'host name or IP',
    port        VARCHAR(64) NOT NULL COMMENT 'port, or <millis>-<random> on a plain host',
    type        INT         NOT NULL COMMENT 'node type: CONTAINER(1), ACTUAL(2)',
    launch_date DATE        NOT NULL COMMENT 'launch date',
    modified    TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP COMMENT 'modified time',
    created     TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP COMMENT 'created time',
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'DB WorkerID Assigner for UID Generator';
