//! The scale run of issue 27, modelled on Karpenter's perf suite (kubernetes-sigs/karpenter
//! `test/suites/perf/scheduling_test.go`: one Deployment of many small pods scaled up at once,
//! then down, timing the nodes and pods): the real processes (`dovetail-watcher`, two
//! `dovetail-planner` replicas, `dovetail-actuator --cloud aws` on moto_server, the ledger on
//! Postgres, the simulated cluster) take a burst of 10,000 pending pods (250m / 256Mi;
//! `DOVETAIL_SCALE_PODS` sets another count), then the Deployment is scaled to 10% and the
//! system consolidates.
//!
//! Printed, never asserted: time to all pods bound, CreateFleet calls and NodeClaims, the
//! planners' CPU per batch (their CPU time over the burst ÷ the watcher's batches), peak RSS
//! (`VmHWM`) of the watcher, each planner and the actuator, the ledger's writes per second on
//! Postgres (`pg_stat_database` over the burst), and after the scale-in the cost ÷ the proven
//! bound after each consolidation round. `scripts/bench-scale.sh` runs it with release builds.
//!
//! What moto cannot show: it launches the first override of a fleet only and never runs out of
//! capacity; instances boot at once (the simulated kubelet's `register_after` and `ready_after`
//! are zero, so boot time is excluded as in `e2e::burst_figures`).

use std::collections::BTreeSet;
use std::time::Duration;

use integration_tests::burst::{LedgerWrites, Sampler, cpu_seconds, peak_rss_mb};
use integration_tests::convergence::{bound, cost, round};
use integration_tests::system::{self, Options, System};
use serde_json::json;

/// The pods' requests, as in the burst bench.
const CPU: &str = "250m";
const MEMORY: &str = "256Mi";
/// Rounds of consolidation printed after the scale-in at most.
const ROUNDS: usize = 5;

/// The planners' total CPU seconds so far.
fn planners_cpu(sys: &System) -> f64 {
    sys.planners
        .iter()
        .flatten()
        .filter_map(|p| p.process.pid().and_then(cpu_seconds))
        .sum()
}

/// `name: N MiB` for each running service.
fn peaks(sys: &System) -> Vec<String> {
    let mut out = Vec::new();
    let mut one = |name: &str, pid: Option<u32>| {
        let v = pid.and_then(peak_rss_mb);
        out.push(format!(
            "{name} {}",
            v.map_or("?".to_string(), |m| format!("{m:.0} MiB"))
        ));
    };
    one("watcher", sys.watcher.as_ref().and_then(|p| p.pid()));
    for (i, p) in sys.planners.iter().enumerate() {
        one(
            &format!("planner-{i}"),
            p.as_ref().and_then(|p| p.process.pid()),
        );
    }
    one("actuator", sys.actuator.as_ref().and_then(|p| p.pid()));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "benchmark: scripts/bench-scale.sh runs it (release) and prints the figures"]
async fn scale_run_figures() -> anyhow::Result<()> {
    let pods: i32 = std::env::var("DOVETAIL_SCALE_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let mut opts = Options::new(&format!("scale-{pods}"));
    opts.register_after = Duration::ZERO;
    opts.ready_after = Duration::ZERO;
    opts.kubelet_poll = Duration::from_millis(100);
    opts.planners = 2;
    // Karpenter's perf suite consolidates with its defaults; the rounds after the scale-in are
    // what is measured here, with a budget that lets a round do what the plan decides.
    opts.disruption = Some(json!({
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "100%"}]
    }));
    opts.actuator_args = vec!["--disruption-confirm-after".into(), "2s".into()];
    if std::env::var("DOVETAIL_BENCH_LOG").as_deref() == Ok("info") {
        opts.rust_log = "info";
    }
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    let catalog = planner::catalog::aws::builtin(system::REGION)?;

    // The burst.
    let cpu0 = planners_cpu(&sys);
    let batches0 = sys
        .watcher_metric("dovetail_watcher_batch_size_pods_count")
        .await?
        .unwrap_or(0.0);
    let writes0 = LedgerWrites::read(sys.ledger_url()).await?;
    let t0 = tokio::time::Instant::now();
    let sampler = Sampler::start(&sys, t0)?;
    sys.deploy("scale", pods, CPU, MEMORY).await?;
    let deadline = t0 + Duration::from_secs(1800);
    let bound_at = loop {
        let (_, running) = sys.pods("scale").await?;
        if running == pods as usize {
            break t0.elapsed();
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{running} of {pods} pods running after 30 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let samples = sampler.finish().await?;
    let writes = LedgerWrites::read(sys.ledger_url()).await?.since(writes0);
    let cpu = planners_cpu(&sys) - cpu0;
    let batches = sys
        .watcher_metric("dovetail_watcher_batch_size_pods_count")
        .await?
        .unwrap_or(0.0)
        - batches0;
    let agreement = sys.wait_agreement().await?;
    let secs = bound_at.as_secs_f64();
    println!(
        "== scale run: {pods} pods ({CPU} / {MEMORY}) in one burst → {} NodeClaims, {} instances",
        agreement.claims, agreement.instances
    );
    println!(
        "   all pods bound and Running:              {:>9.2} s",
        secs
    );
    if let Some((node, n)) = samples.last_node {
        println!(
            "   last of {n} Nodes registered:             {:>9.2} s (all bound +{} ms after it)",
            node.as_secs_f64(),
            bound_at.saturating_sub(node).as_millis()
        );
    }
    println!(
        "   CreateFleet calls:                       {:>9} (first {:?}, last {:?})",
        samples.creates.len(),
        samples.creates.first(),
        samples.creates.last()
    );
    println!(
        "   planner CPU (both planners):             {:>9.2} s over {batches} batches = {:.3} s per batch",
        cpu,
        if batches > 0.0 { cpu / batches } else { 0.0 }
    );
    println!(
        "   ledger writes on Postgres:               {:>9.1} commits/s, {:.1} rows/s ({} commits, {} rows in {secs:.1} s)",
        writes.commits as f64 / secs,
        writes.rows as f64 / secs,
        writes.commits,
        writes.rows
    );
    println!(
        "   peak RSS (VmHWM) after the burst:        {}",
        peaks(&sys).join(", ")
    );

    // The scale-in to 10% and the consolidation rounds.
    let left = (pods / 10).max(1);
    let before = cost(&sys, &catalog).await?;
    sys.scale("scale", left).await?;
    sys.wait_running("scale", left as usize).await?;
    let goal_bound = bound(&sys, &catalog, &[("scale", left, CPU, MEMORY)])?;
    let start = cost(&sys, &catalog).await?;
    println!(
        "== scaled to {left} pods: ${start:.2}/h (was ${before:.2}/h), proven bound ${goal_bound:.2}/h, cost ÷ bound {:.2}",
        start / goal_bound
    );
    let t_in = tokio::time::Instant::now();
    let mut seen = BTreeSet::new();
    for n in 1..=ROUNDS {
        let r = match round(&sys, &mut seen).await {
            Ok(r) => r,
            Err(e) => {
                println!("   no further round ({e})");
                break;
            }
        };
        sys.wait_running("scale", left as usize).await?;
        let a = sys.wait_agreement().await?;
        let c = cost(&sys, &catalog).await?;
        println!(
            "   round {n} (+{:.1} s): {} instances, ${c:.2}/h, cost ÷ bound {:.2} ({})",
            t_in.elapsed().as_secs_f64(),
            a.instances,
            c / goal_bound,
            r.reasons.join("; ")
        );
        if c / goal_bound <= 1.05 {
            break;
        }
    }
    println!(
        "   peak RSS (VmHWM) at the end:             {}",
        peaks(&sys).join(", ")
    );
    println!(
        "   (simulated boot excluded: register_after = ready_after = 0; moto launches the first override)"
    );
    sys.finish().await
}
