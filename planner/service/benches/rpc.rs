//! Plan RPC latency and throughput against 1, 2 and 3 `dovetail-planner` processes, and the RPC
//! overhead compared with calling `planner::plan` in-process.
//!
//! `cargo bench -p planner --bench rpc` (add `-- --quick` for fewer rounds). Replicas are real
//! processes of this package's `dovetail-planner` binary on 127.0.0.1, planning against the
//! built-in us-east-1 catalog by reference; callers share one balanced, retrying
//! `planner_client::PlannerClient`. On a 2-core machine the replicas and the callers compete
//! for the same cores, so more replicas cannot add throughput beyond the cores: the per-replica
//! efficiency column says how much each added replica actually contributes.
#![allow(missing_docs)]
// Benches measure wall time; the clock lint is for services and the planner core.
#![allow(clippy::disallowed_methods)]

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use planner::model::{ClusterSnapshot, PlanOptions};
use planner_client::{ClientConfig, PlannerClient};
use planner_service::api::RemotePlan;
use planner_wire::fixtures;
use planner_wire::{CatalogChoice, to_wire::plan_request as to_plan_request};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

struct Replica {
    _child: Child,
    endpoint: String,
}

async fn start_replica() -> Replica {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dovetail-planner"))
        .args([
            "--insecure-no-auth",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
            "--max-concurrent-requests",
            "64",
            "--request-timeout",
            "5m",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("dovetail-planner starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = lines
        .next_line()
        .await
        .expect("reads")
        .expect("a listening line");
    let endpoint = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("grpc="))
        .expect("grpc=ADDR")
        .to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Replica {
        _child: child,
        endpoint,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Run {
    calls: usize,
    throughput: f64,
    p50: Duration,
    p99: Duration,
}

/// `callers` concurrent loops of Plan calls until `max_calls` are done in total or `budget` has
/// passed (every caller makes at least one call).
async fn drive(
    client: &PlannerClient,
    snapshot: Arc<ClusterSnapshot>,
    callers: usize,
    max_calls: usize,
    budget: Duration,
) -> Run {
    let start = Instant::now();
    let issued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let client = client.clone();
        let snapshot = snapshot.clone();
        let issued = issued.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let n = issued.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if !lat.is_empty() && (n >= max_calls || start.elapsed() > budget) {
                    break;
                }
                let t = Instant::now();
                client
                    .plan(&snapshot, &CatalogChoice::Default, &PlanOptions::default())
                    .await
                    .expect("plan succeeds");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("caller"));
    }
    let wall = start.elapsed();
    all.sort();
    Run {
        calls: all.len(),
        throughput: all.len() as f64 / wall.as_secs_f64(),
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let catalog = planner::catalog::aws::builtin("us-east-1").expect("built-in catalog");
    let options = PlanOptions::default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("# Plan RPC bench ({cores} cores; built-in us-east-1 catalog by reference)");

    for pods in [1_000usize, 10_000] {
        let snapshot = Arc::new(fixtures::snapshot(pods));
        let calls = if quick { 16 } else { 60 };
        let budget = Duration::from_secs(if quick { 15 } else { 45 });

        // In-process baseline.
        let rounds = if quick { 3 } else { 10 };
        let mut local = Vec::new();
        let mut plan = None;
        let began = Instant::now();
        for _ in 0..rounds {
            let t = Instant::now();
            plan = Some(planner::plan(&snapshot, &catalog, &options));
            local.push(t.elapsed());
            if began.elapsed() > budget {
                break;
            }
        }
        local.sort();
        let plan = plan.expect("planned");
        // Wire cost alone: model → proto → bytes → proto → model.
        let mut wire = Vec::new();
        let mut bytes = 0;
        for _ in 0..10 {
            let t = Instant::now();
            let req = to_plan_request(&snapshot, &CatalogChoice::Default, &options);
            let buf = prost::Message::encode_to_vec(&req);
            bytes = buf.len();
            let back: proto::v1::PlanRequest =
                prost::Message::decode(buf.as_slice()).expect("decodes");
            let _ = planner_service::api::convert::to_model::plan_request(back).expect("converts");
            wire.push(t.elapsed());
        }
        wire.sort();
        println!(
            "\n## {pods} pods: {} new claims, request {:.1} MiB",
            plan.node_claims.len(),
            bytes as f64 / (1 << 20) as f64
        );
        println!(
            "in-process planner::plan      p50 {:8.2} ms  p99 {:8.2} ms",
            ms(percentile(&local, 0.5)),
            ms(percentile(&local, 0.99))
        );
        println!(
            "wire conversion (enc+dec)     p50 {:8.2} ms",
            ms(percentile(&wire, 0.5))
        );

        println!("replicas callers  calls  plans/s   p50 ms    p99 ms  per-replica efficiency");
        let mut base = None;
        rt.block_on(async {
            let mut replicas = Vec::new();
            for r in 1..=3 {
                while replicas.len() < r {
                    replicas.push(start_replica().await);
                }
                let client = PlannerClient::connect(ClientConfig::new(
                    replicas.iter().map(|x| x.endpoint.clone()).collect(),
                ))
                .await
                .expect("client");
                // Warm up every connection and the server-side catalog.
                for _ in 0..r {
                    client
                        .plan(&snapshot, &CatalogChoice::Default, &options)
                        .await
                        .expect("warm-up");
                }
                for callers in [1usize, 4] {
                    let run = drive(&client, snapshot.clone(), callers, calls, budget).await;
                    let eff = match (callers, r, base) {
                        (4, 1, _) => {
                            base = Some(run.throughput);
                            1.0
                        }
                        (4, _, Some(b)) => run.throughput / (b * r as f64),
                        _ => f64::NAN,
                    };
                    let eff_text = if eff.is_nan() {
                        String::from("-")
                    } else {
                        format!("{:.0}%", eff * 100.0)
                    };
                    println!(
                        "{r:>8} {callers:>7} {:>6} {:>8.2} {:>8.2} {:>9.2}  {eff_text}",
                        run.calls,
                        run.throughput,
                        ms(run.p50),
                        ms(run.p99)
                    );
                    if r == 1 && callers == 1 {
                        let overhead = run.p50.saturating_sub(percentile(&local, 0.5));
                        println!(
                            "         RPC overhead at 1 caller, 1 replica: {:.2} ms p50 ({:.0}% of in-process)",
                            ms(overhead),
                            100.0 * overhead.as_secs_f64()
                                / percentile(&local, 0.5).as_secs_f64().max(1e-9)
                        );
                    }
                }
            }
        });
    }
}
