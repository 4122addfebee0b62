//! Database URLs: which dialect a URL names, and how to show it without its password.

use crate::error::{Result, StoreError};

/// The SQL dialect of a store; chosen by the URL's scheme.
///
/// ```
/// use uidgen_store::Dialect;
/// assert_eq!(Dialect::from_url("mariadb://root@db/uid")?, Dialect::MySql);
/// assert_eq!(Dialect::from_url("postgresql://db/uid")?, Dialect::Postgres);
/// assert_eq!(Dialect::from_url("sqlite://uidgen.db")?, Dialect::Sqlite);
/// assert!(Dialect::from_url("redis://db").is_err());
/// # Ok::<(), uidgen_store::StoreError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// SQLite: `sqlite://PATH` (the embedded default).
    Sqlite,
    /// MySQL or MariaDB: `mysql://` or `mariadb://`.
    MySql,
    /// PostgreSQL: `postgres://` or `postgresql://`.
    Postgres,
}

impl Dialect {
    /// The dialect a URL's scheme names.
    pub fn from_url(url: &str) -> Result<Self> {
        let scheme = url.split_once(':').map_or("", |(s, _)| s);
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" => Ok(Self::Sqlite),
            "mysql" | "mariadb" => Ok(Self::MySql),
            "postgres" | "postgresql" => Ok(Self::Postgres),
            _ => Err(StoreError::UnsupportedUrl {
                url: redact_url(url),
            }),
        }
    }

    /// A name for messages: "SQLite", "MySQL/MariaDB", "PostgreSQL".
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "SQLite",
            Self::MySql => "MySQL/MariaDB",
            Self::Postgres => "PostgreSQL",
        }
    }

    /// The folder of the store crate's `sql/` holding this dialect's migrations.
    pub fn dir(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::MySql => "mysql",
            Self::Postgres => "postgres",
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The URL with any password replaced by `***`, for messages and logs.
///
/// ```
/// use uidgen_store::redact_url;
/// assert_eq!(redact_url("mysql://root:s3cret@db:3306/uid"), "mysql://root:***@db:3306/uid");
/// assert_eq!(redact_url("postgres://app@db/uid"), "postgres://app@db/uid");
/// assert_eq!(redact_url("sqlite://data/uidgen.db"), "sqlite://data/uidgen.db");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The authority ends at the first '/', '?' or '#'; userinfo ends at its last '@'.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let (userinfo, host) = authority.split_at(at);
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***{host}{tail}"),
        None => url.to_owned(),
    }
}

/// The user name a URL's userinfo holds (`mysql://root:pw@db/uid`: `root`), if any.
pub(crate) fn user_of(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let (userinfo, _) = authority.rsplit_once('@')?;
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    (!user.is_empty()).then(|| user.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_hides_passwords_with_odd_characters() {
        assert_eq!(
            redact_url("postgres://u:p%40ss@h:5432/d?sslmode=disable"),
            "postgres://u:***@h:5432/d?sslmode=disable"
        );
        assert_eq!(redact_url("mariadb://u:@h/d"), "mariadb://u:***@h/d");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn user_of_reads_the_userinfo_without_the_password() {
        assert_eq!(user_of("mysql://root:pw@db/uid").as_deref(), Some("root"));
        assert_eq!(user_of("postgres://app@db/uid").as_deref(), Some("app"));
        assert_eq!(user_of("postgres://db/uid?user=x"), None);
        assert_eq!(user_of("mysql://:pw@db/uid"), None);
    }
}
