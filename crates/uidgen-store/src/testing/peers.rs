//! The peers uidgen takes over from, as their own code talks to a database: their DDL and their
//! statements, written out as each peer issues them (values in place), for tests that seed a
//! store with exactly the state a peer leaves and run the peer beside uidgen (issue 31). One
//! home for them, shared by the store's and the server's tests.
//!
//! Sources: Baidu uid-generator's `WORKER_NODE.sql` and `WORKER_NODE.xml`; Meituan Leaf's
//! `scripts/leaf_alloc.sql` and `IDAllocMapper`; Tinyid's `db.sql`, `TinyIdInfoDAOImpl` and
//! `DbSegmentIdServiceImpl`. Their MySQL text is theirs; the PostgreSQL and SQLite forms are the
//! same statements ported, as a team running them there would have them.

use std::ops::Range;

use super::{TestDb, peer_transaction};
use crate::error::Result;
use crate::store::Store;

/// Baidu's `WORKER_NODE.sql` on MySQL.
pub const BAIDU_DDL_MYSQL: &str = "CREATE TABLE WORKER_NODE
(
ID BIGINT NOT NULL AUTO_INCREMENT COMMENT 'auto increment id',
HOST_NAME VARCHAR(64) NOT NULL COMMENT 'host name',
PORT VARCHAR(64) NOT NULL COMMENT 'port',
TYPE INT NOT NULL COMMENT 'node type: ACTUAL or CONTAINER',
LAUNCH_DATE DATE NOT NULL COMMENT 'launch date',
MODIFIED TIMESTAMP NOT NULL COMMENT 'modified time',
CREATED TIMESTAMP NOT NULL COMMENT 'created time',
PRIMARY KEY(ID)
)
 COMMENT='DB WorkerID Assigner for UID Generator',ENGINE = INNODB";

/// One start of a Baidu app on an actual host (MySQL): `DisposableWorkerIdAssigner`'s insert
/// (`addWorkerNode`, host `10.1.0.{n}`, port `<millis>-<n>`) and the id MyBatis's
/// `useGeneratedKeys` reads back (the insert's own `LAST_INSERT_ID()`): its worker id.
pub async fn baidu_start(store: &Store, n: u32) -> Result<u64> {
    let insert = format!(
        "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
         VALUES ('10.1.0.{n}', '{}-{n}', 2, '2026-11-01', NOW(), NOW())",
        1_790_000_000_000_u64 + u64::from(n)
    );
    let rows =
        peer_transaction(store, &[&insert, "SELECT CAST(LAST_INSERT_ID() AS SIGNED)"]).await?;
    Ok(rows[1]
        .as_ref()
        .and_then(|row| u64::try_from(row[0]).ok())
        .unwrap_or(0))
}

/// Leaf's `scripts/leaf_alloc.sql` (MySQL), ported to PostgreSQL and SQLite.
pub fn leaf_ddl(db: TestDb) -> &'static str {
    match db {
        TestDb::MySql => {
            "CREATE TABLE `leaf_alloc` (
  `biz_tag` varchar(128)  NOT NULL DEFAULT '',
  `max_id` bigint(20) NOT NULL DEFAULT '1',
  `step` int(11) NOT NULL,
  `description` varchar(256)  DEFAULT NULL,
  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (`biz_tag`)
) ENGINE=InnoDB"
        }
        TestDb::Postgres | TestDb::Sqlite => {
            "CREATE TABLE leaf_alloc (
  biz_tag varchar(128) NOT NULL DEFAULT '',
  max_id bigint NOT NULL DEFAULT 1,
  step int NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)"
        }
    }
}

/// Leaf's insert of a tag (its README's), which names no uidgen column.
pub async fn leaf_insert(store: &Store, tag: &str, step: i64) -> Result<()> {
    let insert = format!(
        "insert into leaf_alloc(biz_tag, max_id, step, description) \
         values('{tag}', 1, {step}, 'Test leaf Segment Mode Get Id')"
    );
    peer_transaction(store, &[&insert]).await.map(drop)
}

/// Leaf's `updateMaxIdAndGetLeafAlloc` (`IDAllocMapper.updateMaxId`, then `getLeafAlloc`, in
/// one session, committed together): the segment `[max_id - step, max_id)` Leaf then serves.
pub async fn leaf_claim(store: &Store, tag: &str) -> Result<Range<i64>> {
    let update = format!("UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = '{tag}'");
    let select = format!("SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = '{tag}'");
    let rows = peer_transaction(store, &[&update, &select]).await?;
    Ok(rows[1].as_ref().map_or(0..0, |row| row[1] - row[2]..row[1]))
}

/// Tinyid's `db.sql` (MySQL), ported to PostgreSQL.
pub fn tinyid_ddl(db: TestDb) -> &'static str {
    match db {
        TestDb::MySql => {
            "CREATE TABLE `tiny_id_info` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `biz_type` varchar(63) NOT NULL DEFAULT '',
  `begin_id` bigint(20) NOT NULL DEFAULT '0',
  `max_id` bigint(20) NOT NULL DEFAULT '0',
  `step` int(11) DEFAULT '0',
  `delta` int(11) NOT NULL DEFAULT '1',
  `remainder` int(11) NOT NULL DEFAULT '0',
  `create_time` timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  `update_time` timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  `version` bigint(20) NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`),
  UNIQUE KEY `uniq_biz_type` (`biz_type`)
) ENGINE=InnoDB AUTO_INCREMENT=1 DEFAULT CHARSET=utf8;
CREATE TABLE `tiny_id_token` (
  `id` int(11) unsigned NOT NULL AUTO_INCREMENT,
  `token` varchar(255) NOT NULL DEFAULT '',
  `biz_type` varchar(63) NOT NULL DEFAULT '',
  `remark` varchar(255) NOT NULL DEFAULT '',
  `create_time` timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  `update_time` timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB AUTO_INCREMENT=1 DEFAULT CHARSET=utf8"
        }
        TestDb::Postgres | TestDb::Sqlite => {
            "CREATE TABLE tiny_id_info (
  id bigserial PRIMARY KEY,
  biz_type varchar(63) NOT NULL DEFAULT '' UNIQUE,
  begin_id bigint NOT NULL DEFAULT 0,
  max_id bigint NOT NULL DEFAULT 0,
  step int DEFAULT 0,
  delta int NOT NULL DEFAULT 1,
  remainder int NOT NULL DEFAULT 0,
  create_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  update_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  version bigint NOT NULL DEFAULT 0
);
CREATE TABLE tiny_id_token (
  id serial PRIMARY KEY,
  token varchar(255) NOT NULL DEFAULT '',
  biz_type varchar(63) NOT NULL DEFAULT '',
  remark varchar(255) NOT NULL DEFAULT '',
  create_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  update_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00'
)"
        }
    }
}

/// `db.sql`'s sample rows: biz types `test` (step 100000) and `test_odd` (delta 2, remainder 1),
/// both at `max_id` 1, and their token `0f673adf80504e2eaa552f5d791b644c`.
pub async fn tinyid_samples(store: &Store) -> Result<()> {
    peer_transaction(
        store,
        &[
            "INSERT INTO tiny_id_info (id, biz_type, begin_id, max_id, step, delta, remainder, \
         create_time, update_time, version) VALUES (1, 'test', 1, 1, 100000, 1, 0, \
         '2018-07-21 23:52:58', '2018-07-22 23:19:27', 1)",
            "INSERT INTO tiny_id_info (id, biz_type, begin_id, max_id, step, delta, remainder, \
         create_time, update_time, version) VALUES (2, 'test_odd', 1, 1, 100000, 2, 1, \
         '2018-07-21 23:52:58', '2018-07-23 00:39:24', 3)",
            "INSERT INTO tiny_id_token (id, token, biz_type, remark, create_time, update_time) \
         VALUES (1, '0f673adf80504e2eaa552f5d791b644c', 'test', '1', '2017-12-14 16:36:46', \
         '2017-12-14 16:36:48')",
            "INSERT INTO tiny_id_token (id, token, biz_type, remark, create_time, update_time) \
         VALUES (2, '0f673adf80504e2eaa552f5d791b644c', 'test_odd', '1', \
         '2017-12-14 16:36:46', '2017-12-14 16:36:48')",
        ],
    )
    .await
    .map(drop)
}

/// Tinyid's `getNextSegmentId` for `biz`: read the row, move `max_id` under its optimistic lock
/// (`version`). The segment `(old, new]` it then serves, or `None` when the biz type is not
/// found ("can not find biztype").
pub async fn tinyid_claim(store: &Store, biz: &str) -> Result<Option<(i64, i64)>> {
    let select = format!(
        "select id, begin_id, max_id, step, delta, remainder, version from tiny_id_info \
         where biz_type = '{biz}'"
    );
    let Some(row) = peer_transaction(store, &[&select]).await?.remove(0) else {
        return Ok(None);
    };
    let (id, max_id, step, version) = (row[0], row[2], row[3], row[6]);
    let update = format!(
        "update tiny_id_info set max_id= {}, update_time=now(), version=version+1 where id={id} \
         and max_id={max_id} and version={version} and biz_type='{biz}'",
        max_id + step
    );
    peer_transaction(store, &[&update]).await?;
    Ok(Some((max_id, max_id + step)))
}
