//! Test support shared by the actuator's integration tests: fresh ledgers on both backends
//! (a new Postgres database per test from `test_support::postgres`, dropped afterwards; a SQLite
//! file in a fresh temporary directory), launch fixtures and the simulated cluster the
//! lifecycle tests start from ([`cluster`]); [`fx`]: the one fixture builder of the tests
//! against the simulator; [`process`]: the `dovetail-actuator` process; [`frozen`]: a ledger
//! for paused tokio time.

#![allow(dead_code, unreachable_pub)] // Each test crate uses a different part.

pub mod frozen;
pub mod fx;
pub mod process;

use std::path::PathBuf;
use std::sync::Arc;

use actuator::launch::LaunchSpec;
use actuator::ledger::{self, Basis, Ledger, NewLaunch, Submission};
use cloud::CapacityType;
use crds::NodePool;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use simulator::Simulation;
use test_support::postgres::{self, Database};

/// The cluster name the tests' lifecycle and workers run for.
pub const CLUSTER: &str = "test";

/// The lifecycle controller's options of the tests: owner `lifecycle-1`, passes `interval`
/// apart, garbage collection for [`CLUSTER`].
pub fn lifecycle_options(interval: std::time::Duration) -> actuator::lifecycle::Options {
    actuator::lifecycle::Options {
        owner: "lifecycle-1".into(),
        interval,
        gc: actuator::lifecycle::gc::Options {
            cluster_name: CLUSTER.into(),
            ..actuator::lifecycle::gc::Options::default()
        },
        ..actuator::lifecycle::Options::default()
    }
}

/// The `spec.template.spec` of a NodePool of the EC2NodeClass `default` with no requirements.
pub fn template_spec() -> Value {
    json!({
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": []
    })
}

/// A simulated cluster (its kube-scheduler on when `scheduler`) holding the NodePool `default`
/// with `spec`, and a client of it.
pub async fn cluster(scheduler: bool, spec: Value) -> (Simulation, kube::Client) {
    let sim = Simulation::start(simulator::Config {
        scheduler,
        ..simulator::Config::default()
    })
    .await
    .expect("simulation");
    let client = sim.kube_client().expect("client");
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": spec,
    }))
    .expect("pool");
    Api::<NodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .expect("create the NodePool");
    (sim, client)
}

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
