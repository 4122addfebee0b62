//! The embedded migrations: what each dialect's schema is made of, read by the migrator
//! (`super`) and by the adoption of an older uidgen's bookkeeping (`legacy`) alike.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::MigrationType;

use crate::url::Dialect;

/// One schema change.
///
/// ```
/// use uidgen_store::{Dialect, migrations};
/// let all = migrations(Dialect::Postgres);
/// assert_eq!(all[0].version, 1);
/// assert_eq!(all[0].description, "worker_node");
/// assert!(all[0].sql.contains("CREATE TABLE IF NOT EXISTS worker_node"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// Applied in ascending order; the file's `NNNN` prefix.
    pub version: i64,
    /// The file's name after the prefix.
    pub description: &'static str,
    /// The DDL.
    pub sql: &'static str,
}

impl Migration {
    /// The checksum `_sqlx_migrations` records for this migration (sqlx's: the SHA-384 of
    /// [`sql`](Self::sql)), so an edited landed migration is noticed.
    ///
    /// ```
    /// use uidgen_store::{Dialect, migrations};
    /// let checksum = migrations(Dialect::Sqlite)[0].checksum();
    /// assert_eq!(checksum.len(), 48);
    /// assert_ne!(checksum, migrations(Dialect::Sqlite)[1].checksum());
    /// ```
    pub fn checksum(&self) -> Vec<u8> {
        self.to_sqlx().checksum.into_owned()
    }

    /// The migration as sqlx's migrator takes it. The description stays the file's name after
    /// the prefix (sqlx's `migrate!` would put spaces for underscores), so `uidgen migrate`
    /// and `_sqlx_migrations` name it as the file does.
    pub(super) fn to_sqlx(self) -> sqlx::migrate::Migration {
        sqlx::migrate::Migration::new(
            self.version,
            Cow::Borrowed(self.description),
            MigrationType::Simple,
            self.sql.into_sql_str(),
            false,
        )
    }
}

/// Every dialect's migrations, from the top-level `sql/<dialect>/NNNN_<description>.sql`: one
/// list, so a new migration is one line here plus its three files.
///
/// Embedded with `include_str!` rather than `sqlx::migrate!`: the macro needs sqlx's
/// proc-macro crates (`sqlx-macros-core` and its dependencies) in every build for a list this
/// short, and a file listed here and missing fails the build just the same.
macro_rules! migrations_in {
    ($dialect:literal) => {
        &[
            migration!($dialect, 1, "0001", "worker_node"),
            migration!($dialect, 2, "0002", "worker_lease"),
            migration!($dialect, 3, "0003", "leaf_alloc"),
            migration!($dialect, 4, "0004", "worker_id_range"),
            migration!($dialect, 5, "0005", "id_alloc"),
            migration!($dialect, 6, "0006", "leaf_alloc_residue"),
            migration!($dialect, 7, "0007", "caller_token"),
            migration!($dialect, 8, "0008", "worker_lease_space"),
            migration!($dialect, 9, "0009", "takeover"),
            migration!($dialect, 10, "0010", "id_alloc_exclusive"),
            migration!($dialect, 11, "0011", "caller_token_expiry"),
            migration!($dialect, 12, "0012", "leaf_alloc_returned"),
            migration!($dialect, 13, "0013", "leaf_alloc_epoch"),
            migration!($dialect, 14, "0014", "id_order_mark"),
            migration!($dialect, 15, "0015", "leaf_alloc_ordered"),
        ]
    };
}

macro_rules! migration {
    ($dialect:literal, $version:literal, $prefix:literal, $description:literal) => {
        Migration {
            version: $version,
            description: $description,
            // The schema's one home is the workspace's top-level `sql/` (ARCHITECTURE.md).
            // `cargo package` leaves files outside the crate out, so a packaged crate builds
            // only inside this workspace; uidgen is not published.
            sql: include_str!(concat!(
                "../../../../sql/",
                $dialect,
                "/",
                $prefix,
                "_",
                $description,
                ".sql"
            )),
        }
    };
}

const SQLITE: &[Migration] = migrations_in!("sqlite");
const MYSQL: &[Migration] = migrations_in!("mysql");
const POSTGRES: &[Migration] = migrations_in!("postgres");

/// The embedded migrations of a dialect, in the order they apply.
pub fn migrations(dialect: Dialect) -> &'static [Migration] {
    match dialect {
        Dialect::Sqlite => SQLITE,
        Dialect::MySql => MYSQL,
        Dialect::Postgres => POSTGRES,
    }
}

/// Lowercase hex, as checksums are shown.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
