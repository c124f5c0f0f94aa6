//! The `dovetail-actuator` process for tests: started on loopback ports with the `sim` cloud
//! in a file, its stdout lines readable, stopped by SIGKILL or SIGTERM; plan fixtures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use actuator::ledger::{ClaimState, Ledger};
use proto::v1 as pb;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::TestDb;

/// A running `dovetail-actuator`.
pub struct Process {
    child: Child,
    pub grpc: String,
    pub metrics: String,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Process {
    pub async fn start(ledger: &str, cloud_state: &Path, pause_at: Option<&str>) -> Self {
        Self::start_with(ledger, cloud_state, pause_at, &["--insecure-no-auth"]).await
    }

    /// Starts it with `extra` flags (authentication among them).
    pub async fn start_with(
        ledger: &str,
        cloud_state: &Path,
        pause_at: Option<&str>,
        extra: &[&str],
    ) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dovetail-actuator"));
        cmd.args([
            "--ledger",
            ledger,
            "--cloud",
            "sim",
            "--sim-ignore-client-token",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
            "--lease",
            "1s",
            "--poll-interval",
            "50ms",
            "--drain-delay",
            "0",
            "--instance",
            "crash-test",
        ])
        .args(extra)
        .args(if extra.contains(&"--kubeconfig") {
            &[][..]
        } else {
            // No cluster: the worker alone, never a cluster inferred from this machine.
            &["--kubeconfig", "none"][..]
        })
        .arg("--cloud-state")
        .arg(cloud_state);
        Self::spawn(cmd, pause_at).await
    }

    /// Starts `cmd` (a `dovetail-actuator` command with its arguments) with `RUST_LOG=warn`,
    /// stdout read line by line, killed on drop, paused at `pause_at`; waits for its
    /// `listening` line.
    pub async fn spawn(mut cmd: Command, pause_at: Option<&str>) -> Self {
        cmd.env_remove("DOVETAIL_TEST_PAUSE_AT")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(step) = pause_at {
            cmd.env("DOVETAIL_TEST_PAUSE_AT", step);
        }
        let mut child = cmd.spawn().expect("spawn dovetail-actuator");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, mut lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut r = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = r.next_line().await {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let first = tokio::time::timeout(Duration::from_secs(60), lines.recv())
            .await
            .expect("actuator started in time")
            .expect("a listening line");
        let mut grpc = String::new();
        let mut metrics = String::new();
        for word in first.split_whitespace() {
            if let Some(a) = word.strip_prefix("grpc=") {
                grpc = format!("http://{a}");
            } else if let Some(a) = word.strip_prefix("metrics=") {
                metrics = a.to_string();
            }
        }
        assert!(!grpc.is_empty(), "unexpected first line {first:?}");
        Self {
            child,
            grpc,
            metrics,
            lines,
        }
    }

    pub async fn client(&self) -> pb::actuator_client::ActuatorClient<tonic::transport::Channel> {
        pb::actuator_client::ActuatorClient::connect(self.grpc.clone())
            .await
            .expect("connect")
    }

    pub async fn wait_line(&mut self, prefix: &str) -> String {
        loop {
            let l = tokio::time::timeout(Duration::from_secs(60), self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no {prefix:?} line in time"))
                .unwrap_or_else(|| panic!("stdout closed before {prefix:?}"));
            if l.starts_with(prefix) {
                return l;
            }
        }
    }

    pub async fn sigkill(mut self) {
        self.child.kill().await.expect("SIGKILL");
    }

    pub async fn sigterm(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("pid").to_string();
        let ok = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("kill");
        assert!(ok.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("stopped in time")
            .expect("exit status")
    }
}

pub fn launch(name: &str) -> pb::Command {
    pb::Command {
        command: Some(pb::command::Command::Launch(pb::LaunchCommand {
            idempotency_key: format!("launch-{name}"),
            node_claim: Some(pb::PlannedNodeClaim {
                name: name.into(),
                node_pool: "default".into(),
                instance_types: vec!["m5.large".into(), "c5.large".into()],
                zones: vec!["us-east-1a".into(), "us-east-1b".into()],
                capacity_types: vec!["on-demand".into()],
                price: 0.096,
                ..Default::default()
            }),
            template: Some(pb::NodeClaimTemplate {
                node_class: "default".into(),
                ..Default::default()
            }),
        })),
    }
}

pub fn request(plan_id: &str, in_flight: &[&str], names: &[&str]) -> pb::SubmitRequest {
    pb::SubmitRequest {
        plan_id: plan_id.into(),
        session_id: "session-1".into(),
        basis: Some(pb::PlanBasis {
            in_flight_claims: in_flight.iter().map(|s| s.to_string()).collect(),
            now: 1_767_225_600,
            sequence: 1,
        }),
        commands: names.iter().map(|n| launch(n)).collect(),
    }
}

pub fn statuses(r: &pb::SubmitResponse) -> Vec<&str> {
    r.results.iter().map(|r| r.status.as_str()).collect()
}

/// Waits (30 s at most) until the ledger holds `n` claims, all in `state`.
pub async fn wait_all(l: &dyn Ledger, n: usize, state: ClaimState) {
    test_support::eventually(
        &format!("{n} claims all {state}"),
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            let claims = l.claims().await.expect("claims");
            if claims.len() == n && claims.iter().all(|c| c.state == state) {
                Ok(())
            } else {
                Err(format!(
                    "{:?}",
                    claims
                        .iter()
                        .map(|c| (c.name.clone(), c.state))
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
    .await;
}

/// Live instances per claim tag in the stand-in's file, and the total.
pub fn instances(cloud_state: &Path) -> (BTreeMap<String, usize>, usize) {
    let all = actuator::standin::instances_in(cloud_state).expect("cloud state");
    let mut m = BTreeMap::new();
    for i in &all {
        let claim = i
            .tags
            .get(cloud::TAG_NODECLAIM)
            .cloned()
            .unwrap_or_default();
        *m.entry(claim).or_insert(0) += 1;
    }
    (m, all.len())
}

pub fn cloud_file(db: &TestDb, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "dovetail-actuator-cloud-{}-{tag}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let _ = db;
    dir.join("cloud.json")
}

/// The Prometheus text of `GET /metrics` at `addr`.
pub async fn get_metrics(addr: &str) -> String {
    test_support::process::scrape(addr)
        .await
        .unwrap_or_else(|e| panic!("GET /metrics at {addr}: {e}"))
}
