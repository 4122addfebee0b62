//! The bookkeeping uidgen kept before sqlx's migrator, `uidgen_schema_migrations(version,
//! description, applied_at, checksum)` with the SHA-256 of each file in lowercase hex: read once,
//! when a database an older uidgen migrated is adopted (see [`super`]), never written.

use sha2::{Digest, Sha256};

use super::catalog::{Migration, hex, migrations};
use crate::error::{Result, StoreError};
use crate::store::Sql;
use crate::url::Dialect;

/// Whether an older uidgen's bookkeeping table is there to adopt.
pub(super) const HAS_TABLE: Sql = Sql {
    sqlite: "SELECT COUNT(*) FROM sqlite_master \
             WHERE type = 'table' AND name = 'uidgen_schema_migrations'",
    mysql: "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() \
            AND table_name = 'uidgen_schema_migrations'",
    postgres: "SELECT COUNT(*) FROM information_schema.tables \
               WHERE table_schema = current_schema() AND table_name = 'uidgen_schema_migrations'",
};

/// Tables an older uidgen created before it recorded checksums lack the column (its rows then
/// carry none, and are adopted on the version alone, as that uidgen would have backfilled them).
pub(super) const HAS_CHECKSUM: Sql = Sql {
    sqlite: "SELECT COUNT(*) FROM pragma_table_info('uidgen_schema_migrations') \
             WHERE name = 'checksum'",
    mysql: "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() \
            AND table_name = 'uidgen_schema_migrations' AND column_name = 'checksum'",
    postgres: "SELECT COUNT(*) FROM information_schema.columns \
               WHERE table_schema = current_schema() \
               AND table_name = 'uidgen_schema_migrations' AND column_name = 'checksum'",
};

pub(super) const ROWS: &str =
    "SELECT version, checksum FROM uidgen_schema_migrations ORDER BY version";
pub(super) const VERSIONS: &str = "SELECT version FROM uidgen_schema_migrations ORDER BY version";

/// The checksum an older uidgen recorded for `migration`: the SHA-256 of its text in hex.
fn sha256_hex(migration: &Migration) -> String {
    hex(&Sha256::digest(migration.sql.as_bytes()))
}

/// The older uidgen's rows to copy into `_sqlx_migrations`: every recorded version this build
/// embeds, after its recorded SHA-256 (when there is one) matched the embedded file's. Versions
/// this build does not know are left out, as the older runner ignored them too.
pub(super) fn to_adopt(
    dialect: Dialect,
    recorded: &[(i64, Option<String>)],
    url: &str,
) -> Result<Vec<Migration>> {
    let mut adopt = Vec::new();
    for (version, checksum) in recorded {
        let Some(migration) = migrations(dialect).iter().find(|m| m.version == *version) else {
            continue;
        };
        let embedded = sha256_hex(migration);
        match checksum {
            Some(recorded) if *recorded != embedded => {
                return Err(StoreError::MigrationChanged {
                    version: migration.version,
                    description: migration.description,
                    url: url.to_owned(),
                    recorded: recorded.clone(),
                    embedded,
                });
            }
            _ => adopt.push(*migration),
        }
    }
    Ok(adopt)
}

/// Adopt an older uidgen's bookkeeping on the concrete connection `$conn` while
/// `_sqlx_migrations` is still empty: its recorded versions are copied in with sqlx's checksums
/// (`$migrate_err` maps sqlx's migration errors). A macro for the reason
/// [`migrate_held`](super) is one.
macro_rules! adopt {
    ($store:expr, $conn:expr, $migrate_err:expr) => {{
        let adopting = "adopting uidgen_schema_migrations";
        let fresh = $conn
            .list_applied_migrations($crate::migrate::TABLE)
            .await
            .map_err($migrate_err(adopting))?
            .is_empty();
        let has_legacy: i64 = if fresh {
            sqlx::query_scalar($crate::migrate::legacy::HAS_TABLE.get($store.dialect()))
                .fetch_one(&mut *$conn)
                .await
                .map_err(|e| $store.err(adopting, e))?
        } else {
            0
        };
        if has_legacy > 0 {
            let has_checksum: i64 =
                sqlx::query_scalar($crate::migrate::legacy::HAS_CHECKSUM.get($store.dialect()))
                    .fetch_one(&mut *$conn)
                    .await
                    .map_err(|e| $store.err(adopting, e))?;
            let recorded: Vec<(i64, Option<String>)> = if has_checksum > 0 {
                sqlx::query_as($crate::migrate::legacy::ROWS)
                    .fetch_all(&mut *$conn)
                    .await
            } else {
                sqlx::query_scalar($crate::migrate::legacy::VERSIONS)
                    .fetch_all(&mut *$conn)
                    .await
                    .map(|versions| versions.into_iter().map(|v| (v, None)).collect())
            }
            .map_err(|e| $store.err(adopting, e))?;
            let adopt = $crate::migrate::legacy::to_adopt(
                $store.dialect(),
                &recorded,
                $store.redacted_url(),
            )?;
            // One transaction (a savepoint inside SQLite's): all of the older uidgen's rows
            // are adopted, or none and the next start tries again.
            let mut tx = sqlx::Connection::begin(&mut *$conn)
                .await
                .map_err(|e| $store.err(adopting, e))?;
            for migration in adopt {
                tx.skip($crate::migrate::TABLE, &migration.to_sqlx())
                    .await
                    .map_err($migrate_err(adopting))?;
            }
            tx.commit().await.map_err(|e| $store.err(adopting, e))?;
        }
    }};
}
pub(super) use adopt;
