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

/// Polls `f` every 20 ms until it returns `Some`, failing the test after 10 s.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
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
