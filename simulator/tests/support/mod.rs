//! Helpers shared by the simulator's integration tests.
#![allow(dead_code, unreachable_pub)] // Each test binary uses a different subset.

use std::future::Future;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use simulator::cloud::CloudConfig;
use simulator::controllers::kubelet::KubeletConfig;
use simulator::{Config, Simulation};
use tokio::process::Command;

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
/// client-side cache can lag the last change; poll those with `test_support::eventually`
/// ([`CACHE_WAIT`]).
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

/// How long a condition on a client-side cache (kube's reflector), which no server-side change
/// signals, may take to hold, and how often `test_support::eventually` checks it.
pub const CACHE_WAIT: Duration = Duration::from_secs(10);
/// See [`CACHE_WAIT`].
pub const CACHE_POLL: Duration = Duration::from_millis(20);

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

/// The venv `scripts/python-env.sh` creates.
pub fn venv() -> Option<PathBuf> {
    let cache = std::env::var_os("DOVETAIL_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("dovetail")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/dovetail")))?;
    Some(cache.join("venv-py"))
}

/// A client binary: `env` if set (it must exist), else the venv's `bin/<name>`, else `PATH`
/// (when `search_path`).
pub fn client(env: &str, name: &str, search_path: bool) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{env}={} does not exist", p.display());
        return Some(p);
    }
    let in_venv = venv()
        .map(|v| v.join("bin").join(name))
        .filter(|p| p.is_file());
    in_venv.or_else(|| {
        search_path
            .then(|| std::env::var_os("PATH"))
            .flatten()
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// A test whose client is missing fails, unless `DOVETAIL_ALLOW_MISSING` names it (then it
/// skips with a notice): `test_support::missing_tool`.
pub fn missing(what: &str, how: &str) {
    test_support::missing_tool(what, how);
}

/// kubectl: `DOVETAIL_KUBECTL` (set by `scripts/test.sh`, which installs it), else the venv's,
/// else `PATH`.
pub fn kubectl() -> Option<PathBuf> {
    client("DOVETAIL_KUBECTL", "kubectl", true)
}

/// Runs kubectl against `server` without any kubeconfig: (success, stdout, stderr).
pub async fn run_kubectl(
    kubectl: &PathBuf,
    server: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    let mut cmd = Command::new(kubectl);
    cmd.arg(format!("--server={server}"))
        .args(["--kubeconfig=/dev/null", "--request-timeout=10s"])
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl starts");
    if let Some(input) = stdin {
        use tokio::io::AsyncWriteExt;
        let mut s = child.stdin.take().expect("stdin");
        s.write_all(input.as_bytes()).await.unwrap();
        drop(s);
    }
    let out = child.wait_with_output().await.unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
