//! The scripted story: five phases, each an action on the cluster or the services followed by
//! waiting (with a progress bar) until the cluster shows the expected outcome or the phase's
//! time is up. A phase whose outcome never shows is reported as such, with what was seen — the
//! story never claims what it did not observe.
//!
//! 1. burst: the scenario is applied; every pod must end up bound on launched nodes.
//! 2. scale-in: every Deployment shrinks to a quarter; consolidation should remove nodes.
//! 3. interruption: a spot instance gets an interruption notice; its node should be drained
//!    and replaced before the instance is reclaimed.
//! 4. drift: a NodePool's template gains a label; its nodes should be replaced.
//! 5. failover: the planner replica holding the watcher's session is SIGKILLed and new pods
//!    arrive; they must still be planned and bound (through the other replica).

use std::collections::BTreeSet;
use std::time::Duration;

// The runtime's monotonic clock (clippy.toml keeps std's for clock modules).
use tokio::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::cluster;
use super::scenario::Scenario;
use super::view::{self, Frame, PhaseView, SharedBoard};

/// How a phase ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// The expected outcome was observed.
    Done,
    /// It was not observed in time.
    NotReached,
    /// The phase could not be played (e.g. no spot node to interrupt).
    Skipped,
}

/// The record of one phase.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct PhaseReport {
    pub(crate) name: String,
    pub(crate) outcome: Outcome,
    pub(crate) seconds: f64,
    pub(crate) detail: String,
}

/// What the story needs.
pub(crate) struct Stage<'a> {
    pub(crate) client: kube::Client,
    pub(crate) board: SharedBoard,
    pub(crate) scenario: &'a Scenario,
    pub(crate) sim: &'a simulator::Simulation,
    pub(crate) planners: &'a [super::supervise::Shared],
    /// Planner metrics addresses, parallel to `planners`.
    pub(crate) planner_metrics: Vec<Option<String>>,
    pub(crate) speed: f64,
    pub(crate) started: Instant,
}

/// The phases, in order: name and base duration in seconds (divided by `--speed`).
/// Their sum, with the pauses between phases, keeps the default run under two minutes even
/// when a phase waits out its time.
const PHASES: [(&str, f64); 5] = [
    ("burst", 40.0),
    ("scale-in", 20.0),
    ("interruption", 15.0),
    ("drift", 25.0),
    ("failover", 15.0),
];

/// No phase waits less than this, whatever the speed: the services' own work takes time.
const MIN_PHASE: Duration = Duration::from_secs(20);

/// The burst waits at least this: launching capacity for a few hundred pods takes a few plans,
/// launches and registrations, whatever the speed (it ends as soon as every pod is bound).
const MIN_BURST: Duration = Duration::from_secs(40);

impl Stage<'_> {
    fn t(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn act(&self, text: impl Into<String>) {
        view::lock(&self.board).act(self.t(), text);
    }

    fn frame(&self) -> Frame {
        view::lock(&self.board).frame.clone()
    }

    fn phase_time(&self, base: f64) -> Duration {
        Duration::from_secs_f64(base / self.speed).max(MIN_PHASE)
    }

    fn begin(&self, index: usize, goal: &str) {
        let mut b = view::lock(&self.board);
        b.phase = PhaseView {
            index: index + 1,
            count: PHASES.len(),
            name: PHASES[index].0.to_string(),
            goal: goal.to_string(),
            progress: 0.0,
        };
    }

    fn progress(&self, p: f64) {
        view::lock(&self.board).phase.progress = p.clamp(0.0, 1.0);
    }

    /// Waits until `check` says done (returning its progress on the way) or `limit` passes.
    /// Returns whether it was done.
    async fn wait(&self, limit: Duration, mut check: impl FnMut(&Frame) -> (f64, bool)) -> bool {
        let start = Instant::now();
        loop {
            let (p, done) = check(&self.frame());
            self.progress(if done { 1.0 } else { p });
            if done {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits for the cluster to settle: no pending pods, no node leaving, same node set for
    /// `quiet`. Returns at `limit` regardless.
    async fn settle(&self, quiet: Duration, limit: Duration) {
        let start = Instant::now();
        let mut last: (BTreeSet<String>, Instant) = (BTreeSet::new(), Instant::now());
        while start.elapsed() < limit {
            let f = self.frame();
            let names: BTreeSet<String> = f.nodes.iter().map(|n| n.name.clone()).collect();
            let calm = f.pods_pending == 0 && f.nodes.iter().all(|n| n.ready && !n.leaving);
            if names != last.0 || !calm {
                last = (names, Instant::now());
            } else if last.1.elapsed() >= quiet {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Pods the scenario asks for: Deployment replicas plus bare Pods.
fn expected_pods(deployments: &[(String, String, i64)], bare: usize) -> usize {
    deployments
        .iter()
        .map(|d| usize::try_from(d.2).unwrap_or(0))
        .sum::<usize>()
        + bare
}

/// Plays the story; returns the report of each phase.
///
/// # Errors
/// When the cluster refuses a change the story makes (applying the scenario, scaling).
pub(crate) async fn play(stage: &mut Stage<'_>) -> anyhow::Result<Vec<PhaseReport>> {
    let mut reports = Vec::new();
    let mut deployments: Vec<(String, String, i64)> = stage
        .scenario
        .of_kind("Deployment")
        .map(|o| {
            (
                o.namespace().to_string(),
                o.name().to_string(),
                o.value["spec"]["replicas"].as_i64().unwrap_or(1),
            )
        })
        .collect();
    let bare = stage.scenario.of_kind("Pod").count();

    // 1. Burst.
    let start = Instant::now();
    let mut expected = expected_pods(&deployments, bare);
    stage.begin(0, &format!("{expected} pods bound"));
    let objects: Vec<_> = stage.scenario.objects.iter().collect();
    cluster::apply(&stage.client, &objects).await?;
    stage.act(format!(
        "applied {} objects from {} ({expected} pods wanted)",
        objects.len(),
        stage.scenario.origin
    ));
    let done = stage
        .wait(stage.phase_time(PHASES[0].1).max(MIN_BURST), |f| {
            let p = f.pods_bound as f64 / expected.max(1) as f64;
            (p, f.pods_bound >= expected && f.pods_pending == 0)
        })
        .await;
    let f = stage.frame();
    reports.push(PhaseReport {
        name: "burst".into(),
        outcome: if done {
            Outcome::Done
        } else {
            Outcome::NotReached
        },
        seconds: start.elapsed().as_secs_f64(),
        detail: format!(
            "{} of {expected} pods bound on {} nodes ({} pending); cost ${:.3}/h, lower bound {}",
            f.pods_bound,
            f.nodes.len(),
            f.pods_pending,
            f.cost_per_hour,
            f.lower_bound_per_hour
                .map_or_else(|| "not computed".into(), |v| format!("${v:.3}/h"))
        ),
    });
    stage
        .settle(Duration::from_secs(2), Duration::from_secs(8))
        .await;

    // 2. Scale-in → consolidation.
    let start = Instant::now();
    let before = stage.frame();
    stage.begin(1, "consolidation removes nodes within budgets");
    for d in &mut deployments {
        let to = (d.2 / 4).max(1);
        cluster::scale(&stage.client, &d.0, &d.1, to).await?;
        stage.act(format!("scaled Deployment {}/{} {} → {to}", d.0, d.1, d.2));
        d.2 = to;
    }
    expected = expected_pods(&deployments, bare);
    let n0 = before.nodes.len();
    let limit = stage.phase_time(PHASES[1].1);
    let t0 = Instant::now();
    let removed_any = stage
        .wait(limit, |f| {
            let gone = n0.saturating_sub(f.nodes.len());
            (
                t0.elapsed().as_secs_f64() / limit.as_secs_f64(),
                gone > 0 && f.pods_pending == 0 && f.nodes.iter().all(|n| !n.leaving),
            )
        })
        .await;
    // Budgets let consolidation go in rounds (each plan's decisions, confirmed a few seconds
    // later, then executed): give it the rest of the phase, and measure the cost ÷ the proven
    // lower bound each time the cluster settles on a new set of nodes (the goal: ≤ 1.2× within
    // three rounds).
    let mut ratios: Vec<f64> = Vec::new();
    if removed_any {
        let names =
            |f: &Frame| -> BTreeSet<String> { f.nodes.iter().map(|n| n.name.clone()).collect() };
        let mut last = names(&before);
        while t0.elapsed() < limit && ratios.len() < 3 {
            stage
                .settle(Duration::from_secs(3), limit.saturating_sub(t0.elapsed()))
                .await;
            let f = stage.frame();
            let now = names(&f);
            if now == last {
                continue;
            }
            last = now;
            if let Some(bound) = f.lower_bound_per_hour.filter(|b| *b > 0.0) {
                let ratio = f.cost_per_hour / bound;
                ratios.push(ratio);
                stage.act(format!(
                    "consolidation round {}: cost ${:.3}/h = {ratio:.2} × the lower bound",
                    ratios.len(),
                    f.cost_per_hour
                ));
                if ratio <= 1.2 {
                    break;
                }
            }
        }
    }
    let after = stage.frame();
    reports.push(PhaseReport {
        name: "scale-in".into(),
        outcome: if removed_any {
            Outcome::Done
        } else {
            Outcome::NotReached
        },
        seconds: start.elapsed().as_secs_f64(),
        detail: if removed_any {
            format!(
                "nodes {n0} → {}, cost ${:.3}/h → ${:.3}/h; cost ÷ lower bound after each round: {}",
                after.nodes.len(),
                before.cost_per_hour,
                after.cost_per_hour,
                if ratios.is_empty() {
                    "none measured".to_string()
                } else {
                    ratios
                        .iter()
                        .map(|r| format!("{r:.2}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )
        } else {
            format!(
                "no node removed in {:.0}s ({} nodes, cost ${:.3}/h)",
                limit.as_secs_f64(),
                after.nodes.len(),
                after.cost_per_hour
            )
        },
    });

    // 3. Spot interruption.
    stage.begin(2, "the interrupted node is drained and replaced");
    reports.push(interruption(stage, expected).await);

    // 4. Drift.
    let start = Instant::now();
    stage.begin(3, "the edited pool's nodes are replaced");
    reports.push(drift(stage, expected, start).await?);

    // 5. Failover.
    let start = Instant::now();
    stage.begin(4, "new pods bound after a planner replica is killed");
    reports.push(failover(stage, &mut deployments, bare, start).await?);

    Ok(reports)
}

async fn interruption(stage: &Stage<'_>, expected: usize) -> PhaseReport {
    let start = Instant::now();
    let f = stage.frame();
    let target = f
        .nodes
        .iter()
        .filter(|n| n.capacity_type == "spot" && n.ready && !n.leaving)
        .max_by_key(|n| n.pods.len())
        .cloned();
    let report = |outcome, detail: String| PhaseReport {
        name: "interruption".into(),
        outcome,
        seconds: start.elapsed().as_secs_f64(),
        detail,
    };
    let Some(target) = target else {
        return report(Outcome::Skipped, "no spot node to interrupt".into());
    };
    let provider_id = match node_provider_id(&stage.client, &target.name).await {
        Some(p) => p,
        None => {
            return report(
                Outcome::Skipped,
                format!("node {} has no providerID", target.name),
            );
        }
    };
    let parsed: Result<cloud::ProviderId, _> = provider_id.parse();
    let sent = match parsed {
        Ok(p) => stage.sim.cloud().interrupt(&p).map_err(|e| e.to_string()),
        Err(e) => Err(format!("{e}")),
    };
    if let Err(e) = sent {
        return report(
            Outcome::Skipped,
            format!(
                "the simulated cloud does not run node {} ({provider_id}): {e}",
                target.name
            ),
        );
    }
    stage.act(format!(
        "spot interruption notice for {} ({provider_id}, {} pods)",
        target.name,
        target.pods.len()
    ));
    // Every change of the Node, not the sampled frames: at high speed the actuator cordons,
    // drains and removes it within one frame.
    let cordoned = cordon_witness(stage.sim.store(), &target.name);
    let mut drained_first = false;
    let done = stage
        .wait(stage.phase_time(PHASES[2].1), |f| {
            let node = f.nodes.iter().find(|n| n.name == target.name);
            if node.is_some_and(|n| n.leaving) || cordoned.load(std::sync::atomic::Ordering::SeqCst)
            {
                drained_first = true;
            }
            let p = if node.is_none() {
                0.5 + 0.5 * f.pods_bound as f64 / expected.max(1) as f64
            } else if drained_first {
                0.4
            } else {
                0.1
            };
            (p, node.is_none() && f.pods_pending == 0)
        })
        .await;
    let f = stage.frame();
    if done && drained_first {
        report(
            Outcome::Done,
            format!(
                "node {} cordoned and drained, then removed; its pods rebound ({} nodes)",
                target.name,
                f.nodes.len()
            ),
        )
    } else if done {
        // Gone without a cordon seen: the cloud reclaimed it, nobody drained it first.
        report(
            Outcome::NotReached,
            format!(
                "node {} went away without being cordoned and drained first (the instance was \
                 reclaimed at the end of its notice); its pods were rebound elsewhere",
                target.name
            ),
        )
    } else {
        let still = f.nodes.iter().any(|n| n.name == target.name);
        report(
            Outcome::NotReached,
            format!(
                "after {:.0}s node {} is {}{} and {} pods are pending: the interruption was not \
                 handled in time",
                start.elapsed().as_secs_f64(),
                target.name,
                if still { "still there" } else { "gone" },
                if drained_first { " (cordoned)" } else { "" },
                f.pods_pending
            ),
        )
    }
}

/// True once the API server recorded the Node `name` cordoned or tainted
/// `karpenter.sh/disrupted` (what a drain starts with), from a watch of every change of the
/// Nodes (not from sampled frames); the watch ends with the returned flag's last holder.
fn cordon_witness(
    store: &std::sync::Arc<simulator::api::Store>,
    name: &str,
) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let seen = std::sync::Arc::new(AtomicBool::new(false));
    let Some(kind) = store.kinds().find("", "v1", "nodes") else {
        return seen;
    };
    let Ok(mut sub) = store.subscribe(&kind, None) else {
        return seen;
    };
    let cordoned = |n: &Value| {
        n["spec"]["unschedulable"] == Value::Bool(true)
            || n["spec"]["taints"]
                .as_array()
                .is_some_and(|ts| ts.iter().any(|t| t["key"] == "karpenter.sh/disrupted"))
    };
    let is_target = |n: &Value| n["metadata"]["name"].as_str() == Some(name);
    if sub
        .initial
        .iter()
        .any(|c| is_target(&c.object) && cordoned(&c.object))
    {
        seen.store(true, Ordering::SeqCst);
        return seen;
    }
    let key = kind.key();
    let name = name.to_string();
    let weak = std::sync::Arc::downgrade(&seen);
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let change = match sub.live.recv().await {
                Ok(c) => c,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            let Some(seen) = weak.upgrade() else { return };
            let n = &change.object;
            if change.res == key
                && n["metadata"]["name"].as_str() == Some(name.as_str())
                && cordoned(n)
            {
                seen.store(true, Ordering::SeqCst);
                return;
            }
        }
    });
    seen
}

async fn node_provider_id(client: &kube::Client, name: &str) -> Option<String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    api.get(name).await.ok()?.spec?.provider_id
}

async fn drift(stage: &Stage<'_>, expected: usize, start: Instant) -> anyhow::Result<PhaseReport> {
    let f = stage.frame();
    let pools: Vec<&str> = stage
        .scenario
        .of_kind("NodePool")
        .map(|o| o.name())
        .collect();
    // The pool with the most nodes.
    let pool = pools
        .iter()
        .max_by_key(|p| f.nodes.iter().filter(|n| n.pool == **p).count())
        .map(|p| (*p).to_string())
        .unwrap_or_default();
    let old: BTreeSet<String> = f
        .nodes
        .iter()
        .filter(|n| n.pool == pool)
        .map(|n| n.name.clone())
        .collect();
    if old.is_empty() {
        return Ok(PhaseReport {
            name: "drift".into(),
            outcome: Outcome::Skipped,
            seconds: 0.0,
            detail: "no NodePool has nodes".into(),
        });
    }
    cluster::label_pool_template(&stage.client, &pool, "dovetail.dev/demo-revision", "2").await?;
    stage.act(format!(
        "edited NodePool {pool}: template label dovetail.dev/demo-revision=2 ({} nodes drift)",
        old.len()
    ));
    let before: BTreeSet<String> = f.nodes.iter().map(|n| n.name.clone()).collect();
    // Waits for every drifted node to be replaced; the pool's drift budget lets replacement go
    // in steps, so a phase that runs out of time reports how far it got.
    let all = stage
        .wait(stage.phase_time(PHASES[3].1), |f| {
            let left = f.nodes.iter().filter(|n| old.contains(&n.name)).count();
            let p = (old.len() - left) as f64 / old.len() as f64;
            (
                p,
                left == 0 && f.pods_pending == 0 && f.pods_bound >= expected,
            )
        })
        .await;
    let f = stage.frame();
    let left = f.nodes.iter().filter(|n| old.contains(&n.name)).count();
    let fresh = f
        .nodes
        .iter()
        .filter(|n| n.pool == pool && !before.contains(&n.name))
        .count();
    let replaced = old.len() - left;
    Ok(PhaseReport {
        name: "drift".into(),
        // Replacement seen (drifted nodes gone, new ones of the pool up), in full or in part;
        // pods of the nodes being drained right now may be pending for a moment.
        outcome: if replaced > 0 && fresh > 0 {
            Outcome::Done
        } else {
            Outcome::NotReached
        },
        seconds: start.elapsed().as_secs_f64(),
        detail: format!(
            "{replaced} of {} drifted nodes of pool {pool} replaced{}, {fresh} new node(s) in \
             the pool, {} pods pending",
            old.len(),
            if all {
                ""
            } else {
                " so far (the rest follow within the pool's drift budget)"
            },
            f.pods_pending
        ),
    })
}

async fn failover(
    stage: &mut Stage<'_>,
    deployments: &mut [(String, String, i64)],
    bare: usize,
    start: Instant,
) -> anyhow::Result<PhaseReport> {
    // The replica holding the watcher's session, from the planners' own metrics.
    let mut victim = 0;
    for (i, m) in stage.planner_metrics.iter().enumerate() {
        if let Some(addr) = m
            && sessions(addr).await.unwrap_or(0.0) > 0.0
        {
            victim = i;
            break;
        }
    }
    let survivor = (victim + 1) % stage.planners.len().max(1);
    let (name, pid) = {
        let mut p = stage.planners[victim].lock().await;
        p.kill().await;
        (p.name.clone(), p.pid)
    };
    stage.act(format!(
        "SIGKILL {name} (pid {pid}), the replica holding the watcher's session"
    ));
    let Some(d) = deployments.first_mut() else {
        return Ok(PhaseReport {
            name: "failover".into(),
            outcome: Outcome::Skipped,
            seconds: 0.0,
            detail: "no Deployment to scale up".into(),
        });
    };
    // New pods, many enough that they usually need new capacity, which only a planner plans.
    let claims_before = stage.frame().claim_names;
    let to = d.2 + 40;
    cluster::scale(&stage.client, &d.0, &d.1, to).await?;
    stage.act(format!("scaled Deployment {}/{} {} → {to}", d.0, d.1, d.2));
    d.2 = to;
    let expected = expected_pods(deployments, bare);
    let mut launched = 0;
    let done = stage
        .wait(stage.phase_time(PHASES[4].1), |f| {
            launched = f.claim_names.difference(&claims_before).count();
            (
                f.pods_bound as f64 / expected.max(1) as f64,
                f.pods_bound >= expected && f.pods_pending == 0,
            )
        })
        .await;
    // The pods may have fit on nodes already there (the kube-scheduler binds them without any
    // planner): the failover itself is the watcher's session reopened on the survivor.
    let survivor_addr = stage.planner_metrics.get(survivor).cloned().flatten();
    let wait_until = Instant::now() + Duration::from_secs(10);
    let survivor_sessions = loop {
        let n = match &survivor_addr {
            Some(addr) => sessions(addr).await.ok(),
            None => None,
        };
        if n.is_some_and(|n| n >= 1.0) || Instant::now() >= wait_until {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let f = stage.frame();
    let survivor_name = stage.planners[survivor].lock().await.name.clone();
    let failed_over = survivor_sessions.is_some_and(|s| s >= 1.0);
    Ok(PhaseReport {
        name: "failover".into(),
        outcome: if done && failed_over {
            Outcome::Done
        } else {
            Outcome::NotReached
        },
        seconds: start.elapsed().as_secs_f64(),
        detail: format!(
            "{} of {expected} pods bound after {name} was killed, {launched} NodeClaim(s) \
             launched since; the watcher's session is on {survivor_name} ({} open)",
            f.pods_bound,
            survivor_sessions.map_or_else(|| "?".into(), |s| format!("{s}"))
        ),
    })
}

/// Open sessions of a planner, from its Prometheus endpoint (`dovetail_planner_sessions`).
async fn sessions(addr: &str) -> anyhow::Result<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await?;
    let mut body = String::new();
    s.read_to_string(&mut body).await?;
    Ok(body
        .lines()
        .find_map(|l| {
            l.strip_prefix("dovetail_planner_sessions ")
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0.0))
}

/// The summary: the phases and the cluster at the end.
pub(crate) fn summary(
    reports: &[PhaseReport],
    frame: &Frame,
    board_actions: usize,
    scenario: &str,
    speed: f64,
    seconds: f64,
) -> Value {
    let [types, zones, caps] = frame.counts();
    serde_json::json!({
        "scenario": scenario,
        "speed": speed,
        "seconds": seconds,
        // The time of the look at the cluster the summary shows (as the actions print it).
        "frameT": format!("{:.1}", frame.t),
        "phases": reports,
        "pods": {
            "total": frame.pods_total,
            "bound": frame.pods_bound,
            "pending": frame.pods_pending,
        },
        "nodes": frame.nodes.iter().map(|n| serde_json::json!({
            "name": n.name,
            "instanceType": n.instance_type,
            "zone": n.zone,
            "capacityType": n.capacity_type,
            "pool": n.pool,
            "pods": n.pods.len(),
            "pricePerHour": n.price,
        })).collect::<Vec<_>>(),
        "nodesByType": types,
        "nodesByZone": zones,
        "nodesByCapacityType": caps,
        "nodeClaims": frame.node_claims,
        "costPerHour": frame.cost_per_hour,
        "lowerBoundPerHour": frame.lower_bound_per_hour,
        "actions": board_actions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use simulator::api::{Store, Subresource};

    /// The actuator cordons, drains and removes a Node in well under a 500 ms frame at
    /// `--speed 5`: the interruption phase must see the cordon in the API server's changes, not
    /// in whatever frame it samples next (which would have the Node gone already).
    #[tokio::test]
    async fn a_cordon_and_removal_between_two_frames_is_seen() {
        let store = std::sync::Arc::new(Store::new(simulator::Clock::new(), 100));
        let nodes = store.kinds().find("", "v1", "nodes").expect("nodes");
        store
            .create(&nodes, "", serde_json::json!({"metadata": {"name": "n1"}}))
            .expect("node");
        let seen = cordon_witness(&store, "n1");
        let other = cordon_witness(&store, "n2");
        assert!(!seen.load(std::sync::atomic::Ordering::SeqCst));
        let mut n = store.get(&nodes, "", "n1").expect("get");
        n["spec"]["taints"] =
            serde_json::json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]);
        store
            .update(&nodes, "", "n1", n, Subresource::Main)
            .expect("taint");
        store.delete(&nodes, "", "n1", None).expect("delete");
        assert!(
            store.get(&nodes, "", "n1").is_err(),
            "gone before any frame"
        );
        for _ in 0..100 {
            if seen.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(seen.load(std::sync::atomic::Ordering::SeqCst));
        assert!(!other.load(std::sync::atomic::Ordering::SeqCst));
    }
}
