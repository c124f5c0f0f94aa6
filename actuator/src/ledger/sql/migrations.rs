//! The ledger's schema migrations, embedded in the binary from `migrations/postgres/` and
//! `migrations/sqlite/` (`<version>_<description>.sql`, applied in version order by sqlx's
//! `Migrator`, which records each in `_sqlx_migrations` with its SHA-384 checksum, exactly as
//! `sqlx migrate` names and sums them). A migration file is listed here once; a test checks the
//! lists against the folders, so a file that is not listed fails the tests.

use std::borrow::Cow;

use sqlx::SqlStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// One migration file: its name and its text.
type File = (&'static str, &'static str);

macro_rules! files {
    ($backend:literal: $($name:literal),+ $(,)?) => {
        &[$(($name, include_str!(concat!("../../../../migrations/", $backend, "/", $name)))),+]
    };
}

/// The Postgres ledger's migrations.
pub(super) const POSTGRES: &[File] = files!("postgres": "0001_ledger.sql", "0131_disruptions.sql");
/// The SQLite ledger's migrations.
pub(super) const SQLITE: &[File] = files!("sqlite": "0001_ledger.sql", "0131_disruptions.sql");

/// The migrator of one backend's files.
pub(super) fn migrator(files: &'static [File]) -> Migrator {
    Migrator::with_migrations(
        files
            .iter()
            .map(|&(name, sql)| migration(name, sql))
            .collect(),
    )
}

/// `0131_disruptions.sql` → version 131, description `disruptions` (underscores become spaces,
/// as sqlx names a file), run in a transaction unless the text starts with `-- no-transaction`.
fn migration(name: &'static str, sql: &'static str) -> Migration {
    let stem = name.strip_suffix(".sql").unwrap_or(name);
    let (version, description) = stem.split_once('_').unwrap_or((stem, ""));
    let version = version
        .parse()
        .unwrap_or_else(|_| panic!("migration file {name}: the name must start with <version>_"));
    Migration::new(
        version,
        Cow::Owned(description.replace('_', " ")),
        MigrationType::Simple,
        SqlStr::from_static(sql),
        sql.starts_with("-- no-transaction"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(backend: &str) -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../migrations")
            .join(backend);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn every_migration_file_is_embedded() {
        for (backend, files) in [("postgres", POSTGRES), ("sqlite", SQLITE)] {
            let embedded: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
            assert_eq!(embedded, folder(backend), "migrations/{backend}/");
        }
    }

    #[test]
    fn migrations_are_named_and_summed_as_sqlx_does() {
        let m = migrator(POSTGRES);
        let versions: Vec<(i64, &str)> = m
            .iter()
            .map(|m| (m.version, m.description.as_ref()))
            .collect();
        assert_eq!(versions, [(1, "ledger"), (131, "disruptions")]);
        for (m, (_, sql)) in m.iter().zip(POSTGRES) {
            use sha2::Digest as _;
            assert_eq!(
                m.checksum.as_ref(),
                sha2::Sha384::digest(sql.as_bytes()).as_slice()
            );
            assert_eq!(m.migration_type, MigrationType::Simple);
            assert!(!m.no_tx);
        }
    }
}
