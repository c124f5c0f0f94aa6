//! Memory of a real `dovetail-planner` process around heavy requests: resident set (VmRSS)
//! idle, its peak (VmHWM) during a heavy `Plan`, right after the answer, and after some idle
//! seconds; then the same around a heavy `Plan` abandoned mid-way (cancelled).
//!
//! ```text
//! cargo run -p integration-tests --example planner_memory [--release] -- [PODS] [BINARY...]
//! ```
//! PODS defaults to 50000. Each BINARY (default: `dovetail-planner` of this build) is measured in
//! turn, e.g. the same planner built with and without the `jemalloc` feature of
//! `planner-service`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use integration_tests::binary;
use integration_tests::planner_process::PlannerProcess;
use planner::model::{ClusterSnapshot, PlanOptions, Pod, Resources};
use planner_wire::CatalogChoice;
use proto::v1 as pb;

const GI: i64 = 1 << 30;

fn snapshot(pods: usize) -> ClusterSnapshot {
    let mut s = planner_wire::fixtures::snapshot(0);
    for i in 0..pods {
        let mut p = Pod {
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
        };
        p.labels.insert("app".into(), format!("app-{}", i % 50));
        s.pods.push(p);
    }
    s
}

/// `VmRSS` and `VmHWM` of a process, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

async fn measure(bin: &Path, pods: usize) -> anyhow::Result<()> {
    let p = PlannerProcess::start(
        bin,
        &[
            "--insecure-no-auth",
            "--request-timeout",
            "10m",
            "--max-message-bytes",
            "1073741824",
        ],
    )
    .await?;
    let pid = p.child.id().expect("running");
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", p.grpc))?
        .connect()
        .await?;
    let mut client = pb::planner_client::PlannerClient::new(channel)
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(usize::MAX);
    let req = planner_wire::to_wire::plan_request(
        &snapshot(pods),
        &CatalogChoice::Default,
        &PlanOptions::default(),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (idle, _) = memory(pid);
    println!("binary {}", bin.display());
    println!("| step | RSS MiB | peak MiB |");
    println!("|---|---|---|");
    println!("| idle | {idle:.1} | |");

    let start = Instant::now();
    let answer = client.plan(req.clone()).await?.into_inner();
    let took = start.elapsed();
    let (after, peak) = memory(pid);
    println!(
        "| right after a {pods}-pod Plan ({:.1} s, {} claims) | {after:.1} | {peak:.1} |",
        took.as_secs_f64(),
        answer.node_claims.len()
    );
    for wait in [2u64, 10, 30] {
        let already = start.elapsed() - took;
        if let Some(rest) = Duration::from_secs(wait).checked_sub(already) {
            tokio::time::sleep(rest).await;
        }
        let (rss, _) = memory(pid);
        println!("| {wait} s after | {rss:.1} | |");
    }

    // The same request, abandoned half-way through its planning time.
    let mut c2 = client.clone();
    let r2 = req.clone();
    let call = tokio::spawn(async move { c2.plan(r2).await });
    tokio::time::sleep(took / 2).await;
    call.abort();
    let _ = call.await;
    let cancelled_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (rss, _) = memory(pid);
    println!("| 1 s after an abandoned Plan | {rss:.1} | |");
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(cancelled_at.elapsed())).await;
    let (rss, peak) = memory(pid);
    println!("| 10 s after an abandoned Plan | {rss:.1} | {peak:.1} |");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let pods: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(50_000);
    let mut bins: Vec<PathBuf> = args.map(PathBuf::from).collect();
    if bins.is_empty() {
        bins.push(binary("planner-service", "dovetail-planner")?);
    }
    for bin in &bins {
        measure(bin, pods).await?;
    }
    Ok(())
}
