-- uidgen migration 0010 (MySQL/MariaDB): id_alloc_exclusive, the id_alloc rows whose max_id uidgen
-- wrote as an exclusive end. The original sharded service (the seed this table comes from)
-- keeps max_id as the highest index it handed out (a claim adds step and hands out
-- max_id - step + 1 to max_id; its rows start at 0), and so does uidgen from this migration
-- on. Before it, uidgen kept max_id as the next index to hand out (rows started at 1, a claim
-- handed out max_id - step to max_id - 1). The rows listed here are the ones uidgen wrote that
-- way: uidgen goes on reading and writing them so, so that servers of an older uidgen running
-- beside newer ones during an upgrade never hand out an index twice. Every other row follows
-- the original. `uidgen takeover sharded` empties this table, for rows the original service
-- wrote (or still writes beside uidgen).
-- Not idempotent (it lists the rows present when it runs): uidgen applies it once and records
-- it in uidgen_schema_migrations; by hand, run it once, before any newer uidgen serves.
CREATE TABLE id_alloc_exclusive (
    app_id   INT NOT NULL,
    shard_id INT NOT NULL,
    PRIMARY KEY (app_id, shard_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COMMENT = 'id_alloc rows whose max_id is the exclusive end an older uidgen wrote';
INSERT INTO id_alloc_exclusive (app_id, shard_id)
    SELECT app_id, shard_id FROM id_alloc WHERE max_id > 0;
