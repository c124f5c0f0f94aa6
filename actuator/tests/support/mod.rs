//! Test support shared by the actuator's integration tests: fresh ledgers on both backends
//! (a new Postgres database per test from `test_support::postgres`, dropped afterwards; a SQLite
//! file in a fresh temporary directory) and launch fixtures.

#![allow(dead_code, unreachable_pub)] // Each test crate uses a different part.

use std::path::PathBuf;
use std::sync::Arc;

use actuator::launch::LaunchSpec;
use actuator::ledger::{self, Basis, Ledger, NewLaunch, Submission};
use cloud::CapacityType;
use test_support::postgres::{self, Database};

/// A fresh, empty ledger database.
pub enum TestDb {
    /// A database on a Postgres server.
    Postgres(Database),
    /// A SQLite file.
    Sqlite {
        /// Its URL.
        url: String,
        /// Its directory.
        dir: PathBuf,
    },
}

impl TestDb {
    /// A new database on the shared test Postgres server.
    pub async fn postgres() -> Self {
        Self::postgres_at(&postgres::admin_url()).await
    }

    /// A new database on the server at `admin` (a URL of an existing database).
    pub async fn postgres_at(admin: &str) -> Self {
        Self::Postgres(
            Database::create(admin, "dovetail_actuator_test")
                .await
                .unwrap_or_else(|e| panic!("cannot create a database on Postgres at {admin}: {e}")),
        )
    }

    /// A new SQLite file in a fresh directory.
    pub fn sqlite() -> Self {
        let dir = std::env::temp_dir().join(test_support::unique("dovetail-actuator-test"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self::Sqlite {
            url: format!("sqlite://{}", dir.join("ledger.db").display()),
            dir,
        }
    }

    /// Its URL.
    pub fn url(&self) -> &str {
        match self {
            TestDb::Postgres(db) => &db.url,
            TestDb::Sqlite { url, .. } => url,
        }
    }

    /// A migrated ledger on it.
    pub async fn ledger(&self) -> Arc<dyn Ledger> {
        let l = ledger::open(self.url()).expect("open ledger");
        l.migrate().await.expect("migrate");
        l
    }

    /// Drops the database (or deletes the file).
    pub async fn drop(self) {
        match self {
            TestDb::Postgres(db) => db.drop_database().await.expect("drop database"),
            TestDb::Sqlite { dir, .. } => {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

/// A launch spec for claim `name` in pool `default`.
pub fn spec(name: &str) -> LaunchSpec {
    LaunchSpec {
        name: name.to_string(),
        node_pool: "default".into(),
        instance_types: vec!["m5.large".into(), "c5.large".into()],
        zones: vec!["us-east-1a".into(), "us-east-1b".into()],
        capacity_types: vec![CapacityType::OnDemand],
        price: 0.096,
        node_class: Some("default".into()),
        ..LaunchSpec::default()
    }
}

/// A launch of claim `name` keyed `key-<name>`.
pub fn launch(name: &str) -> NewLaunch {
    NewLaunch {
        idempotency_key: format!("key-{name}"),
        payload: name.as_bytes().to_vec(),
        spec: spec(name),
    }
}

/// A plan `plan_id` launching `names`, having seen `in_flight`.
pub fn plan(plan_id: &str, in_flight: &[&str], names: &[&str]) -> Submission {
    Submission {
        plan_id: plan_id.to_string(),
        session_id: "session-1".into(),
        basis: Basis {
            in_flight: in_flight.iter().map(|s| s.to_string()).collect(),
            now: 1_000,
            sequence: 1,
        },
        launches: names.iter().map(|n| launch(n)).collect(),
    }
}
