-- uidgen migration 0015 (SQLite): leaf_alloc_ordered, the biz tags whose IDs strictly increase
-- across the whole cluster (issue 35, "ordered tags"). A row marks its tag ordered: one server at
-- a time, the tag's leader, issues its IDs, and the others forward to it. The row is the
-- leader's lease: who holds it (holder, unique per server life), where to forward (address),
-- until when (lease_until_ms, the database's clock) and under which term (raised by every new
-- leader: a segment claim names its term and fails once the term has moved on). A segment
-- claim of an ordered tag outside its leader's term is refused, and a tag's returned ranges are
-- dropped when it is marked: a new leader's first segment lies above every number claimed before.
-- A new table: leaf_alloc is unchanged (Leaf's servers never read this one).
-- Idempotent: safe to run by hand; uidgen records it in _sqlx_migrations.
CREATE TABLE IF NOT EXISTS leaf_alloc_ordered (
    biz_tag          VARCHAR(128) NOT NULL,
    -- Raised by each new leader; 0 while no server has led the tag.
    term             BIGINT       NOT NULL,
    -- The leader of the current term ('' before the first), unique per server life.
    holder           VARCHAR(255) NOT NULL,
    -- Where the other servers forward the tag's calls: the leader's gRPC address.
    address          VARCHAR(255) NOT NULL,
    -- The lease ends here (ms since the epoch, the database's clock); a new term may begin after.
    lease_until_ms   BIGINT       NOT NULL,
    -- When the tag was marked ordered (ms since the epoch, the database's clock).
    ordered_since_ms BIGINT       NOT NULL,
    PRIMARY KEY (biz_tag)
);
