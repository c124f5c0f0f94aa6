//! The real `dovetail-actuator` process: gRPC Submit (accepted, duplicate, stale), health and
//! metrics, graceful shutdown releasing every lease, and crash tests: the worker is paused at
//! each step of a launch (`DOVETAIL_TEST_PAUSE_AT`), the process SIGKILLed there and restarted,
//! and the cloud must then hold exactly one instance per claim and nothing else.
//!
//! The cloud is the actuator's `sim` stand-in persisted in a file (it outlives the killed
//! process) and ignoring client tokens as moto does, so only the ledger and the look-up by
//! NodeClaim tag stand between a crash and a second instance.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use actuator::ledger::{ClaimState, Ledger};
use proto::v1 as pb;
use support::TestDb;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// A running `dovetail-actuator`.
struct Process {
    child: Child,
    grpc: String,
    metrics: String,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Process {
    async fn start(ledger: &str, cloud_state: &Path, pause_at: Option<&str>) -> Self {
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
            "--insecure-no-auth",
            "--lease",
            "1s",
            "--poll-interval",
            "50ms",
            "--drain-delay",
            "0",
            "--instance",
            "crash-test",
        ])
        .arg("--cloud-state")
        .arg(cloud_state)
        .env_remove("DOVETAIL_TEST_PAUSE_AT")
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

    async fn client(&self) -> pb::actuator_client::ActuatorClient<tonic::transport::Channel> {
        pb::actuator_client::ActuatorClient::connect(self.grpc.clone())
            .await
            .expect("connect")
    }

    async fn wait_line(&mut self, prefix: &str) -> String {
        loop {
            let l = tokio::time::timeout(Duration::from_secs(30), self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no {prefix:?} line in time"))
                .unwrap_or_else(|| panic!("stdout closed before {prefix:?}"));
            if l.starts_with(prefix) {
                return l;
            }
        }
    }

    async fn sigkill(mut self) {
        self.child.kill().await.expect("SIGKILL");
    }

    async fn sigterm(mut self) -> std::process::ExitStatus {
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

fn launch(name: &str) -> pb::Command {
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

fn request(plan_id: &str, in_flight: &[&str], names: &[&str]) -> pb::SubmitRequest {
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

fn statuses(r: &pb::SubmitResponse) -> Vec<&str> {
    r.results.iter().map(|r| r.status.as_str()).collect()
}

async fn wait_all(l: &dyn Ledger, n: usize, state: ClaimState) {
    for _ in 0..600 {
        let claims = l.claims().await.expect("claims");
        if claims.len() == n && claims.iter().all(|c| c.state == state) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "claims did not all reach {state}: {:?}",
        l.claims()
            .await
            .expect("claims")
            .iter()
            .map(|c| (c.name.clone(), c.state))
            .collect::<Vec<_>>()
    );
}

/// Live instances per claim tag in the stand-in's file, and the total.
fn instances(cloud_state: &Path) -> (BTreeMap<String, usize>, usize) {
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

fn cloud_file(db: &TestDb, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "dovetail-actuator-cloud-{}-{tag}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let _ = db;
    dir.join("cloud.json")
}

const CLAIMS: [&str; 3] = ["default-aaaaa", "default-bbbbb", "default-ccccc"];

/// Kills the actuator at `step` of the launch of three claims, restarts it, and checks that
/// each claim ends launched with exactly one instance and nothing leaked.
async fn crash_at(db: TestDb, step: &str) {
    let ledger = db.ledger().await;
    let cloud = cloud_file(&db, step);
    let mut p = Process::start(db.url(), &cloud, Some(step)).await;
    let r = p
        .client()
        .await
        .submit(request("plan-1", &[], &CLAIMS))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted"; 3]);
    let paused = p.wait_line("DOVETAIL_PAUSED").await;
    assert!(paused.contains(&format!("step={step}")), "{paused}");
    p.sigkill().await;

    let claims = ledger.claims().await.expect("claims");
    let expected_state = match step {
        "requested" => ClaimState::Requested,
        "launching" | "created" => ClaimState::Launching,
        _ => ClaimState::Launched,
    };
    assert!(
        claims.iter().any(|c| c.state == expected_state),
        "killed at {step}: {claims:?}"
    );

    let p = Process::start(db.url(), &cloud, None).await;
    wait_all(&*ledger, 3, ClaimState::Launched).await;
    let (per_claim, total) = instances(&cloud);
    assert_eq!(total, 3, "no leaked instance: {per_claim:?}");
    for c in CLAIMS {
        assert_eq!(per_claim.get(c), Some(&1), "{c}: {per_claim:?}");
        let rec = ledger.claim(c).await.expect("read").expect("claim");
        assert!(rec.instance.is_some(), "{rec:?}");
    }
    // The plan re-sent after the restart launches nothing.
    let again = p
        .client()
        .await
        .submit(request("plan-1", &[], &CLAIMS))
        .await
        .expect("resubmit")
        .into_inner();
    assert_eq!(statuses(&again), ["Duplicate"; 3]);
    assert_eq!(p.sigterm().await.code(), Some(0));
    assert_eq!(instances(&cloud).1, 3);
    let _ = std::fs::remove_dir_all(cloud.parent().expect("dir"));
    ledger.close().await;
    db.drop().await;
}

#[tokio::test]
async fn crash_after_the_claims_were_requested() {
    crash_at(TestDb::sqlite(), "requested").await;
}

#[tokio::test]
async fn crash_after_launching_was_written() {
    crash_at(TestDb::sqlite(), "launching").await;
}

#[tokio::test]
async fn crash_after_the_create_call_returned() {
    crash_at(TestDb::sqlite(), "created").await;
}

#[tokio::test]
async fn crash_after_launched_was_written() {
    crash_at(TestDb::sqlite(), "launched").await;
}

#[tokio::test]
async fn crash_after_the_create_call_returned_postgres() {
    crash_at(TestDb::postgres().await, "created").await;
}

#[tokio::test]
async fn submit_over_grpc_dedupes_refuses_stale_plans_and_shuts_down_cleanly() {
    let db = TestDb::postgres().await;
    let ledger = db.ledger().await;
    let cloud = cloud_file(&db, "api");
    let p = Process::start(db.url(), &cloud, None).await;

    let channel = tonic::transport::Endpoint::from_shared(p.grpc.clone())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let h = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "dovetail.v1.Actuator".into(),
        })
        .await
        .expect("health")
        .into_inner();
    assert_eq!(
        h.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    let mut c = p.client().await;
    let r = c
        .submit(request("plan-1", &[], &["a-1", "a-2"]))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted", "Accepted"]);
    // A plan that did not see a-1 and a-2 in flight must not launch.
    let stale = c
        .submit(request("plan-2", &[], &["b-1"]))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&stale), ["Rejected"]);
    assert!(stale.results[0].message.contains("stale plan"), "{stale:?}");
    // A plan that saw them may launch; a re-planned identical decision is a duplicate.
    let fresh = c
        .submit(request("plan-3", &["a-1", "a-2"], &["a-2", "b-1"]))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&fresh), ["Duplicate", "Accepted"]);
    // Bad input names the field and records nothing.
    let mut bad = request("plan-4", &["a-1", "a-2", "b-1"], &["c-1"]);
    if let Some(pb::command::Command::Launch(l)) = &mut bad.commands[0].command {
        l.node_claim.as_mut().expect("claim").zones.clear();
    }
    let e = c.submit(bad).await.expect_err("invalid");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message()
            .starts_with("commands[0].launch.node_claim.zones"),
        "{e:?}"
    );

    wait_all(&*ledger, 3, ClaimState::Launched).await;
    assert_eq!(instances(&cloud).1, 3);
    let text = reqwest_metrics(&p.metrics).await;
    assert!(
        text.contains("dovetail_actuator_launches_total 3"),
        "{text}"
    );
    assert!(
        text.contains(r#"dovetail_actuator_commands_total{status="Rejected"} 1"#),
        "{text}"
    );
    // Three submissions were recorded; the invalid one was refused before the ledger.
    assert!(
        text.contains("dovetail_actuator_submit_duration_seconds_count 3"),
        "{text}"
    );

    assert_eq!(p.sigterm().await.code(), Some(0));
    let leased: Vec<_> = ledger
        .claims()
        .await
        .expect("claims")
        .into_iter()
        .filter(|c| c.lease_owner.is_some())
        .collect();
    assert!(
        leased.is_empty(),
        "graceful shutdown releases leases: {leased:?}"
    );
    let _ = std::fs::remove_dir_all(cloud.parent().expect("dir"));
    ledger.close().await;
    db.drop().await;
}

/// GET /metrics over a plain TCP connection (no HTTP client in the dependencies).
async fn reqwest_metrics(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut body = String::new();
    s.read_to_string(&mut body).await.expect("read");
    body
}
