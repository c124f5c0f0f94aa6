//! An abandoned plan stops in the real `dovetail-planner` process: a heavy `Plan` whose caller's
//! deadline passes mid-plan, and a `Session` closed while its batch plans. Each time the
//! server's `plans_running` gauge drops back to 0, `plans_cancelled_total` counts the run, no
//! plan is counted as computed (`pods_planned_total` stays 0), and the process's CPU time stops
//! growing: the planning work itself ended, not just the call.
//!
//! The input is heavy enough that an uncancelled plan runs for several CPU-seconds in a debug
//! build. The Plan is abandoned inside the cost improvement (`packing::improve`), the Session
//! inside the placement. "Stopped" is judged by CPU time spent after abandonment (under one
//! second; without the checks in the cost improvement it was 1.6 s at a later point of it), so
//! a loaded machine does not decide; the waits are bounds whose expiry means "did not stop",
//! and the measured stop latency is printed.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use integration_tests::binary;
use integration_tests::planner_process::PlannerProcess;
use planner::model::{ClusterSnapshot, NodePool, PlanOptions, Pod, Requirement, Resources};
use planner_wire::CatalogChoice;
use proto::v1 as pb;
use test_support::{eventually, try_eventually};
use tokio_stream::wrappers::ReceiverStream;

const GI: i64 = 1 << 30;

/// Pending pods of many shapes (61 cpu × 29 memory sizes) on one NodePool over the built-in
/// catalog: a plan that takes long enough to be abandoned mid-way, in its placement or in its
/// cost improvement.
fn heavy_snapshot(pods: usize) -> ClusterSnapshot {
    let mut s = ClusterSnapshot::default();
    s.node_pools.push(NodePool {
        name: "default".into(),
        node_class: Some("default".into()),
        requirements: vec![Requirement {
            key: planner::labels::CAPACITY_TYPE.into(),
            operator: planner::model::Operator::In,
            values: vec!["on-demand".into()],
            min_values: None,
        }],
        ..NodePool::default()
    });
    s.node_classes.push(planner::model::NodeClass {
        name: "default".into(),
        ami_family: Some("AL2023".into()),
        ..planner::model::NodeClass::default()
    });
    for i in 0..pods {
        s.pods.push(Pod {
            namespace: "default".into(),
            name: format!("p-{i}"),
            uid: format!("uid-{i}"),
            requests: Resources {
                cpu: 100 + 37 * (i % 61) as i64,
                memory: (GI / 8) * (1 + (i % 29) as i64),
                pods: 1,
                ..Resources::default()
            },
            ..Pod::default()
        });
    }
    s
}

async fn scrape(addr: SocketAddr) -> String {
    test_support::process::scrape(addr)
        .await
        .expect("GET /metrics")
}

/// The value of a metric without labels.
fn metric(text: &str, name: &str) -> f64 {
    test_support::process::sample(text, name)
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
}

/// CPU time (user + system) the process has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // Fields after the command (which may hold spaces) start at the last ')'.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    let hz: f64 = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    ticks / hz
}

/// Polls /metrics until `pred` holds; `None` after `bound` (the planner did not stop).
async fn wait_metrics(
    addr: SocketAddr,
    bound: Duration,
    pred: impl Fn(&str) -> bool,
) -> Option<(String, Duration)> {
    let start = Instant::now();
    let text = try_eventually("the metrics", bound, POLL, || async {
        let text = scrape(addr).await;
        pred(&text).then_some(text)
    })
    .await
    .ok()?;
    Some((text, start.elapsed()))
}

/// How often a wait of these tests looks again.
const POLL: Duration = Duration::from_millis(20);

/// After the caller went away (at `cpu_at_abandon` seconds of process CPU): the run ends, is
/// counted as cancelled, spends little CPU getting there, and the process goes idle. Returns
/// the wall time and the CPU time from abandonment to `plans_running 0`.
async fn assert_stopped(
    p: &PlannerProcess,
    cancelled_before: f64,
    cpu_at_abandon: f64,
    what: &str,
) -> (Duration, f64) {
    let pid = p.child.id().expect("running");
    let (text, latency) = wait_metrics(p.metrics, Duration::from_secs(60), |t| {
        metric(t, "dovetail_planner_plans_running") == 0.0
            && metric(t, "dovetail_planner_plans_cancelled_total") > cancelled_before
    })
    .await
    .unwrap_or_else(|| panic!("{what}: the abandoned plan did not stop within 60 s"));
    let cpu_to_stop = cpu_seconds(pid) - cpu_at_abandon;
    assert_eq!(
        metric(&text, "dovetail_planner_plans_cancelled_total"),
        cancelled_before + 1.0,
        "{what}"
    );
    assert_eq!(
        metric(&text, "dovetail_planner_pods_planned_total"),
        0.0,
        "{what}: no plan may complete"
    );
    // CPU time, not wall time, so that a loaded machine does not decide: the uncancelled
    // remainder of this plan is several CPU-seconds of a debug build.
    assert!(
        cpu_to_stop < 1.0,
        "{what}: {cpu_to_stop:.2} s of CPU between abandonment and stop; it should end within one"
    );
    // The work stopped: over the next second the process is idle (a running plan would use a
    // whole core).
    let before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = cpu_seconds(pid) - before;
    assert!(
        used < 0.3,
        "{what}: the planner used {used:.2} s of CPU in the second after it reported stopping"
    );
    println!(
        "{what}: planning stopped {:.0} ms ({cpu_to_stop:.2} s of CPU) after the caller went away; CPU in the next second {used:.2} s",
        latency.as_secs_f64() * 1000.0,
    );
    (latency, cpu_to_stop)
}

/// Waits until a plan is running and has used `cpu` seconds of CPU (well inside its work: with
/// the input below, placing pods takes about 2 CPU-seconds of a debug build and the cost
/// improvement after it about 3), and checks it is still running. Returns the process's
/// CPU time then.
async fn wait_busy(p: &PlannerProcess, cpu: f64, what: &str) -> f64 {
    wait_metrics(p.metrics, Duration::from_secs(120), |t| {
        metric(t, "dovetail_planner_plans_running") == 1.0
    })
    .await
    .unwrap_or_else(|| panic!("{what}: the plan never started"));
    let pid = p.child.id().expect("running");
    let start = cpu_seconds(pid);
    let now = eventually(
        &format!("{what}: {cpu:.2} s of planning CPU"),
        Duration::from_secs(300),
        POLL,
        || async {
            let now = cpu_seconds(pid);
            if now - start >= cpu {
                Ok(now)
            } else {
                Err(format!("{:.2} s of CPU", now - start))
            }
        },
    )
    .await;
    let text = scrape(p.metrics).await;
    assert_eq!(
        metric(&text, "dovetail_planner_plans_running"),
        1.0,
        "{what}: the plan finished before it could be abandoned; make the input heavier"
    );
    println!(
        "{what}: abandoned after {:.2} s of planning CPU",
        now - start
    );
    now
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_plan_stops_and_its_cpu_work_ends() -> anyhow::Result<()> {
    let bin = binary("planner-service", "dovetail-planner")?;
    let p = PlannerProcess::start(
        &bin,
        &[
            "--insecure-no-auth",
            "--request-timeout",
            "10m",
            "--max-message-bytes",
            "268435456",
        ],
    )
    .await?;
    let snapshot = heavy_snapshot(40_000);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", p.grpc))?
        .connect()
        .await?;

    // 1. A Plan whose caller gives up (its deadline passes on the client side, which resets
    //    the stream: what a client with a deadline does).
    let req = planner_wire::to_wire::plan_request(
        &snapshot,
        &CatalogChoice::Default,
        &PlanOptions {
            now: 1_796_025_600,
            ..PlanOptions::default()
        },
    );
    let mut client = pb::planner_client::PlannerClient::new(channel.clone())
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(usize::MAX);
    let call = tokio::spawn(async move { client.plan(req).await });
    // Past the placement, inside the cost improvement.
    let cpu = wait_busy(&p, 2.5, "Plan").await;
    call.abort();
    let _ = call.await;
    let (plan_latency, plan_cpu) = assert_stopped(&p, 0.0, cpu, "Plan").await;

    // 2. A Session closed while its batch plans.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut client = pb::planner_client::PlannerClient::new(channel.clone())
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(usize::MAX);
    tx.send(pb::ClusterUpdate {
        sequence: 1,
        update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
            snapshot: Some(planner_wire::to_wire::snapshot(&snapshot)),
            catalog_source: None,
            options: None,
        })),
    })
    .await?;
    tx.send(pb::ClusterUpdate {
        sequence: 2,
        update: Some(pb::cluster_update::Update::CloseBatch(pb::CloseBatch {
            now: 1_796_025_600,
        })),
    })
    .await?;
    let responses = client.session(ReceiverStream::new(rx)).await?.into_inner();
    // Inside the placement.
    let cpu = wait_busy(&p, 1.0, "Session").await;
    drop(responses);
    drop(tx);
    let (session_latency, session_cpu) = assert_stopped(&p, 1.0, cpu, "Session").await;

    // The server still serves.
    assert_eq!(
        p.health("dovetail.v1.Planner").await?,
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );
    println!(
        "abandoned plans stopped after {:.0} ms / {plan_cpu:.2} s CPU (Plan) and {:.0} ms / {session_cpu:.2} s CPU (Session)",
        plan_latency.as_secs_f64() * 1000.0,
        session_latency.as_secs_f64() * 1000.0
    );
    Ok(())
}
