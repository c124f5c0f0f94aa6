//! Live convergence after a scale-in: the running system — `dovetail-watcher`, two
//! `dovetail-planner` replicas, `dovetail-actuator --cloud aws` on moto, the ledger on Postgres,
//! the simulated cluster — consolidates a cluster whose Deployments shrank to a quarter until
//! its cost is within 1.2× of the planner's proven lower bound for the pods left, within three
//! consolidation rounds, as Karpenter's disruption controller would (kubernetes-sigs/karpenter
//! `pkg/controllers/disruption/{controller,multinodeconsolidation,singlenodeconsolidation}.go`:
//! one command per pass, each validated after its 15 s wait).
//!
//! A round is what the running system does between two quiet moments: the disruptions it
//! executes at once (each plan commits every decision its budgets allow), until none is
//! executing and EC2, the ledger and the cluster agree again. After each round the test prints
//! the cost (the built-in catalog's on-demand prices of the live instances) divided by the bound
//! (the same planner library planning the pods left as if none were bound, `dovetail plan`'s
//! summary). Convergence is asserted in rounds, never in time.
//!
//! What moto cannot show: it launches the first override of a fleet only (so a replacement is
//! the cheapest type the planner listed first), and never runs out of capacity.
//!
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it.

use std::collections::BTreeSet;

use integration_tests::convergence::{bound, cost, round};
use integration_tests::system::{self, Options, System};
use serde_json::json;

/// The Deployments: (name, replicas before the scale-in, cpu, memory).
const DEPLOYMENTS: [(&str, i32, &str, &str); 3] = [
    ("web", 32, "500m", "512Mi"),
    ("api", 16, "1", "2Gi"),
    ("worker", 24, "250m", "256Mi"),
];

/// The goal: cost within this factor of the proven bound ...
const GOAL: f64 = 1.2;
/// ... within this many rounds.
const ROUNDS: usize = 3;

/// After the scale-in, rounds of consolidation until the cost is within [`GOAL`] of the bound:
/// reached by round [`ROUNDS`], with the cost ÷ bound printed after each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scale_in_converges_to_the_proven_bound_within_three_rounds() -> anyhow::Result<()> {
    let mut opts = Options::new("convergence");
    // Budgets bound what one round may do: at 20% of five nodes (the demo's budget) a round
    // removes one node, so no three rounds could take five nodes to two (measured: cost ÷
    // bound 3.82, 3.61, 3.47, 3.33, then 1.04 in round 5). The rounds measured here are the
    // system's own, with a budget that lets a round do what the plan decides.
    opts.disruption = Some(json!({
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "100%"}]
    }));
    // A confirmation wait of 2 s instead of Karpenter's 15 s: rounds, not seconds, are measured.
    opts.actuator_args = vec!["--disruption-confirm-after".into(), "2s".into()];
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    let catalog = planner::catalog::aws::builtin(system::REGION)?;
    for (name, n, cpu, memory) in DEPLOYMENTS {
        sys.deploy(name, n, cpu, memory).await?;
    }
    for (name, n, _, _) in DEPLOYMENTS {
        sys.wait_running(name, n as usize).await?;
    }
    let big = sys.wait_agreement().await?;
    let before = cost(&sys, &catalog).await?;
    let full_bound = bound(&sys, &catalog, &DEPLOYMENTS)?;
    println!(
        "== before the scale-in: {} instances, ${before:.4}/h, bound ${full_bound:.4}/h, cost ÷ bound {:.2}",
        big.instances,
        before / full_bound
    );

    let quarter: Vec<(&str, i32, &str, &str)> = DEPLOYMENTS
        .iter()
        .map(|&(name, n, cpu, memory)| (name, (n / 4).max(1), cpu, memory))
        .collect();
    for (name, n, _, _) in &quarter {
        sys.scale(name, *n).await?;
    }
    for (name, n, _, _) in &quarter {
        sys.wait_running(name, *n as usize).await?;
    }
    let goal_bound = bound(&sys, &catalog, &quarter)?;
    let start = cost(&sys, &catalog).await?;
    println!(
        "== round 0 (scaled to a quarter): ${start:.4}/h, bound ${goal_bound:.4}/h, cost ÷ bound {:.2}",
        start / goal_bound
    );

    let mut ratios: Vec<f64> = Vec::new();
    let mut seen_done: BTreeSet<String> = BTreeSet::new();
    // Rounds until the goal is reached and one more round has nothing to do, or past the goal's
    // rounds by two (to show where it stops).
    while ratios.len() < ROUNDS + 2 {
        // A round: at least one disruption executes, then none is executing and all agree.
        let r = match round(&sys, &mut seen_done).await {
            Ok(r) => r,
            // Nothing more to do: the system stopped consolidating.
            Err(e) if !ratios.is_empty() && ratios.last().is_some_and(|r| *r <= GOAL) => {
                println!("   no further round ({e})");
                break;
            }
            Err(e) => return Err(e),
        };
        for (name, n, _, _) in &quarter {
            sys.wait_running(name, *n as usize).await?;
        }
        let a = sys.wait_agreement().await?;
        let c = cost(&sys, &catalog).await?;
        let ratio = c / goal_bound;
        ratios.push(ratio);
        println!(
            "== round {}: {} instances, ${c:.4}/h, cost ÷ bound {ratio:.2} ({})",
            ratios.len(),
            a.instances,
            r.reasons.join("; ")
        );
        if ratio <= GOAL {
            break;
        }
    }
    let reached = ratios.iter().position(|r| *r <= GOAL).map(|i| i + 1);
    assert!(
        reached.is_some_and(|r| r <= ROUNDS),
        "cost ÷ bound after each round: {ratios:.2?}; the goal is ≤ {GOAL} within {ROUNDS} rounds"
    );
    sys.finish().await
}
