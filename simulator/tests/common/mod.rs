//! Helpers shared by the simulator's integration tests.
#![allow(dead_code, unreachable_pub)] // Each test binary uses a different subset.

use std::future::Future;
use std::time::Duration;

use simulator::cloud::CloudConfig;
use simulator::controllers::kubelet::KubeletConfig;
use simulator::{Config, Simulation};

/// A config with short delays so that tests on real time stay fast.
pub fn fast_config() -> Config {
    Config {
        cloud: CloudConfig {
            pending_for: Duration::from_millis(50),
            shutting_down_for: Duration::from_millis(50),
            interruption_notice: Duration::from_millis(300),
            ..CloudConfig::default()
        },
        kubelet: KubeletConfig {
            register_after: Duration::from_millis(50),
            ready_after: Duration::from_millis(50),
        },
        scheduler_interval: Duration::from_millis(20),
        bookmark_interval: Duration::from_millis(100),
        ..Config::default()
    }
}

pub async fn start() -> Simulation {
    Simulation::start(fast_config())
        .await
        .expect("simulation starts")
}

/// Waits until `f` returns `Some`, checking it again after every change to the simulation's
/// store or cloud; no clock is read, so a slow machine cannot fail the test (a condition that
/// never holds hangs; nextest's per-package timeout in `.config/nextest.toml` ends it).
///
/// Only for conditions on the server's state (read through the API): a condition on a
/// client-side cache can lag the last change; use [`poll_until`] for those.
pub async fn eventually<T, F, Fut>(sim: &Simulation, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let mut store = sim.store().changed();
    let mut cloud = sim.cloud().changed();
    loop {
        store.borrow_and_update();
        cloud.borrow_and_update();
        if let Some(v) = f().await {
            return v;
        }
        tokio::select! {
            r = store.changed() => r.unwrap_or_else(|_| panic!("simulation stopped before {what}")),
            r = cloud.changed() => r.unwrap_or_else(|_| panic!("simulation stopped before {what}")),
        }
    }
}

/// Polls `f` every 20 ms until it returns `Some`, failing the test after 10 s: only for
/// conditions on client-side caches (kube's reflector), which no server-side change signals.
pub async fn poll_until<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn pod_json(name: &str, labels: serde_json::Value, cpu: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]},
    })
}

/// A client that does not retry 429/503/504, so tests see those answers at once.
pub fn client_without_retries(sim: &Simulation) -> kube::Client {
    let mut config = sim.kube_config().unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// A simulation without the scheduler, for tests that count every event on pods.
pub async fn start_without_scheduler() -> Simulation {
    Simulation::start(Config {
        scheduler: false,
        ..fast_config()
    })
    .await
    .expect("simulation starts")
}
