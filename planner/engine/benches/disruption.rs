//! Disruption at cluster scale: dovetail's search against a Karpenter-style baseline on the
//! same input and the same scheduler. Prints figures; asserts only that both are safe to run.
//!
//! Input: the built-in us-east-1 catalog; one on-demand NodePool over the c5/m5/r5 families (budget 100%
//! so the search, not the budget, limits what is found); nodes of five sizes across three
//! zones, each holding 15 pods that use about 70% of its cpu and memory (30% slack spread
//! across nodes).
//!
//! Baseline (Karpenter v1's consolidation as its controller runs it): per pass, multi-node
//! consolidation by binary search over the first 100 candidates in disruption-cost order
//! allowing at most one replacement (many→1), else single-node consolidation taking the first
//! valid candidate; one command per pass, passes repeated until none is found.
//!
//! Run: `cargo bench -p planner --bench disruption` (`-- --quick` skips 5,000 nodes;
//! `-- --nodes=N` runs one size; `-- --verbose` lists the decisions; `-- --spread` gives every pod a zone spread;
//! `-- --pods-per-node=N` sets the pods per node (default 15; 12 gives the 1,000-node,
//! ~12k-pod cluster of a whole `dovetail plan`); `-- --plan` also times the whole plan,
//! `planner::plan`, on each cluster: what `dovetail plan` runs after reading the manifests;
//! `-- --plan-only` times only that, printing a digest of its decisions, notes and node status).

// A bench measures wall time; the clock ban is for the planner code, not for this.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use planner::catalog::{Catalog, aws};
use planner::consolidation::{self, Evaluation, Reason};
use planner::labels;
use planner::model::{
    ClusterSnapshot, LabelSelector, Node, NodeInclusionPolicy, NodePool, Operator, OwnerRef,
    PlanOptions, PodPhase, Resources, TopologySpreadConstraint, WhenUnsatisfiable,
};
use planner::test_util::{self, SplitMix};

const NOW: i64 = 1_795_996_800;
const TYPES: [&str; 5] = [
    "m5.xlarge",
    "m5.2xlarge",
    "c5.2xlarge",
    "r5.xlarge",
    "m5.4xlarge",
];
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn pool() -> NodePool {
    let mut p = test_util::node_pool("default");
    p.requirements = vec![
        test_util::requirement(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        // The families of the existing nodes: savings come from the slack, not from moving to
        // newer, cheaper generations.
        test_util::requirement(labels::INSTANCE_FAMILY, Operator::In, &["c5", "m5", "r5"]),
        test_util::requirement(labels::ARCH, Operator::In, &["amd64"]),
    ];
    p.disruption.budgets[0].nodes = planner::model::BudgetNodes::Percent(100);
    p.expire_after = Some(720 * 3600);
    p
}

fn cluster(
    catalog: &Catalog,
    nodes: usize,
    pods_per_node: usize,
    seed: u64,
    spread: bool,
) -> ClusterSnapshot {
    let mut rng = SplitMix(seed);
    let mut s = ClusterSnapshot {
        node_pools: vec![pool()],
        ..ClusterSnapshot::default()
    };
    for i in 0..nodes {
        let it = catalog
            .get(TYPES[i % TYPES.len()])
            .unwrap_or_else(|| panic!("{} missing from the built-in catalog", TYPES[i % 5]));
        let zone = ZONES[(i / TYPES.len()) % ZONES.len()];
        let name = format!("ip-10-0-{}-{}.ec2.internal", i / 250, i % 250);
        let mut l = it.labels.clone();
        l.insert(labels::INSTANCE_TYPE.into(), it.name.clone());
        l.insert(labels::NODEPOOL.into(), "default".into());
        l.insert(labels::ZONE.into(), zone.into());
        l.insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
        l.insert(labels::HOSTNAME.into(), name.clone());
        l.insert(labels::OS.into(), "linux".into());
        l.insert(labels::INITIALIZED.into(), "true".into());
        let alloc = it.allocatable();
        s.nodes.push(Node {
            name: name.clone(),
            labels: l,
            allocatable: alloc.clone(),
            capacity: it.capacity.clone(),
            ready: true,
            creation_time: Some(NOW - rng.range(1, 500) * 3600),
            ..Node::default()
        });
        // ~70% of cpu and memory, split unevenly over the pods.
        let target_cpu = alloc.cpu * 7 / 10;
        let target_mem = alloc.memory * 7 / 10;
        let wc: Vec<i64> = (0..pods_per_node).map(|_| rng.range(1, 10)).collect();
        let wm: Vec<i64> = (0..pods_per_node).map(|_| rng.range(1, 10)).collect();
        let (sc, sm): (i64, i64) = (wc.iter().sum(), wm.iter().sum());
        for j in 0..pods_per_node {
            let app = (i * 7 + j) % 60;
            let mut p = test_util::bound_pod(&format!("app{app}-{i}-{j}"), 0, 0, &name);
            p.requests = Resources {
                cpu: (target_cpu * wc[j] / sc) / 10 * 10,
                memory: (target_mem * wm[j] / sm) / (1 << 20) * (1 << 20),
                pods: 1,
                ..Resources::default()
            };
            p.labels.insert("app".into(), format!("app{app}"));
            p.owner = Some(OwnerRef {
                kind: "ReplicaSet".into(),
                name: format!("app{app}"),
                controller: true,
            });
            p.phase = PodPhase::Running;
            p.start_time = Some(NOW - rng.range(1, 50) * 3600);
            if spread {
                p.topology_spread.push(TopologySpreadConstraint {
                    max_skew: 10,
                    topology_key: labels::ZONE.into(),
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    label_selector: Some(LabelSelector {
                        match_labels: [("app".to_string(), format!("app{app}"))].into(),
                        ..LabelSelector::default()
                    }),
                    min_domains: None,
                    match_label_keys: Vec::new(),
                    node_affinity_policy: NodeInclusionPolicy::Honor,
                    node_taints_policy: NodeInclusionPolicy::Ignore,
                });
            }
            s.pods.push(p);
        }
    }
    s
}

/// A lower bound on the cost of any set of pool nodes holding every pod: the fractional
/// relaxation over cpu and memory (cheapest price per vCPU, per GiB).
fn lower_bound(s: &ClusterSnapshot, catalog: &Catalog) -> f64 {
    let (mut cpu, mut mem) = (0i64, 0i64);
    for p in &s.pods {
        cpu += p.requests.cpu;
        mem += p.requests.memory;
    }
    let types = catalog.instance_types.iter().filter(|t| {
        ["c5.", "m5.", "r5."].iter().any(|f| t.name.starts_with(f)) && !t.name.contains("metal")
    });
    let (mut per_cpu, mut per_mem) = (f64::MAX, f64::MAX);
    for t in types {
        let Some(price) = consolidation::offering_price(t, Some(ZONES[0]), Some("on-demand"))
        else {
            continue;
        };
        let a = t.allocatable();
        per_cpu = per_cpu.min(price / a.cpu as f64);
        per_mem = per_mem.min(price / a.memory as f64);
    }
    (cpu as f64 * per_cpu).max(mem as f64 * per_mem)
}

/// Fragmented slack: `nodes` m5.4xlarge, each with two 5-vCPU pods and one 1-vCPU pod (11 of
/// ~15.9 vCPU, memory light), in a pool capped at 16 vCPU per node. No big pod fits in another
/// node's slack, and no two nodes' pods fit one allowed node: deletions and many→1 find nothing
/// beyond 1→1 swaps; three nodes' pods fit two (many→k).
fn fragmented(catalog: &Catalog, nodes: usize) -> ClusterSnapshot {
    let it = catalog
        .get("m5.4xlarge")
        .expect("m5.4xlarge in the built-in catalog");
    let mut s = ClusterSnapshot {
        node_pools: vec![pool()],
        ..ClusterSnapshot::default()
    };
    s.node_pools[0].requirements.push(test_util::requirement(
        labels::INSTANCE_CPU,
        Operator::Lt,
        &["17"],
    ));
    for i in 0..nodes {
        let name = format!("frag-{i}");
        let mut l = it.labels.clone();
        l.insert(labels::INSTANCE_TYPE.into(), it.name.clone());
        l.insert(labels::NODEPOOL.into(), "default".into());
        l.insert(labels::ZONE.into(), ZONES[i % 3].into());
        l.insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
        l.insert(labels::HOSTNAME.into(), name.clone());
        l.insert(labels::OS.into(), "linux".into());
        l.insert(labels::INITIALIZED.into(), "true".into());
        s.nodes.push(Node {
            name: name.clone(),
            labels: l,
            allocatable: it.allocatable(),
            capacity: it.capacity.clone(),
            ready: true,
            creation_time: Some(NOW - 100 * 3600),
            ..Node::default()
        });
        for (j, (cpu, gib)) in [(5000, 8), (5000, 8), (1000, 2)].into_iter().enumerate() {
            let mut p = test_util::bound_pod(&format!("f{i}-{j}"), cpu, gib * 1024, &name);
            p.owner = Some(OwnerRef {
                kind: "ReplicaSet".into(),
                name: format!("f{j}"),
                controller: true,
            });
            p.phase = PodPhase::Running;
            p.start_time = Some(NOW - 3600);
            s.pods.push(p);
        }
    }
    s
}

fn cost(s: &ClusterSnapshot, catalog: &Catalog) -> f64 {
    s.nodes
        .iter()
        .filter_map(|n| {
            let it = catalog.get(&n.labels[labels::INSTANCE_TYPE])?;
            consolidation::offering_price(
                it,
                n.labels.get(labels::ZONE).map(String::as_str),
                Some("on-demand"),
            )
        })
        .sum()
}

/// CPU time of the process so far, every thread's (a plan runs two searches on two threads),
/// from `/proc/self/stat` (utime + stime in clock ticks of 10 ms; zero where that file does not
/// exist): on a shared, loaded machine it moves far less than wall time.
fn cpu_time() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    Duration::from_millis(10 * f.iter().sum::<u64>())
}

struct Figures {
    shape: Vec<(String, usize, usize, f64)>,
    time: Duration,
    cpu: Duration,
    first_pass: Duration,
    simulations: usize,
    rebuilds: usize,
    decisions: usize,
    nodes_removed: usize,
    replacements: usize,
    savings: f64,
    digest: u64,
}

/// FNV-1a over the JSON of the decisions and the notes: two runs print the same digest only if
/// they decided exactly the same (nodes, replacements, destinations, savings, notes).
fn digest(out: &consolidation::Outcome) -> u64 {
    fnv(&serde_json::to_string(&(&out.decisions, &out.notes)).expect("plan is JSON"))
}

fn fnv(json: &str) -> u64 {
    json.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn figures(
    out: &consolidation::Outcome,
    (time, cpu): (Duration, Duration),
    first_pass: Duration,
) -> Figures {
    Figures {
        shape: out
            .decisions
            .iter()
            .map(|d| {
                (
                    d.reason.clone(),
                    d.nodes.len(),
                    d.replacements.len(),
                    d.savings_per_hour,
                )
            })
            .collect(),
        time,
        cpu,
        first_pass,
        simulations: out.stats.simulations,
        rebuilds: out.stats.rebuilds,
        decisions: out.decisions.len(),
        nodes_removed: out.decisions.iter().map(|d| d.nodes.len()).sum(),
        replacements: out.decisions.iter().map(|d| d.replacements.len()).sum(),
        savings: out.decisions.iter().map(|d| d.savings_per_hour).sum(),
        digest: digest(out),
    }
}

/// dovetail: every candidate simulated alone, then the largest jointly valid prefixes
/// (deletions, then many→k), until nothing more is found. The first pass is timed alone by
/// running a session that stops after one scheduler state.
fn dovetail(s: &ClusterSnapshot, catalog: &Catalog, o: &PlanOptions) -> Figures {
    let (start, cpu) = (Instant::now(), cpu_time());
    let out =
        consolidation::disrupt(s, catalog, o, &consolidation::with_scheduler).expect("valid input");
    let time = (start.elapsed(), cpu_time() - cpu);
    audit(s, &out.decisions);
    // One state: build the scheduler, evaluate every candidate alone, one prefix search.
    let start = Instant::now();
    let session = Evaluation::new(s, catalog, o).expect("valid input");
    {
        let sim = session.build(&consolidation::with_scheduler);
        let order = session.underutilized_order();
        let mut ok = Vec::new();
        for &c in &order {
            if session
                .evaluate(&*sim, &[c], Reason::Underutilized, None)
                .is_ok()
            {
                ok.push(c);
            }
        }
        let _ = session.prefix_search(&*sim, &ok, Reason::Underutilized, Some(0), 1);
    }
    let first_pass = start.elapsed();
    figures(&out, time, first_pass)
}

/// The whole plan of the snapshot (`planner::plan`: the launch plan, then disruption), timed,
/// with its peak resident memory so far.
fn plan(s: &ClusterSnapshot, catalog: &Catalog, o: &PlanOptions, base_cost: f64) {
    let (start, cpu) = (Instant::now(), cpu_time());
    let plan = planner::plan(s, catalog, o);
    let (time, cpu) = (start.elapsed(), cpu_time() - cpu);
    audit(s, &plan.disruptions);
    let savings: f64 = plan.disruptions.iter().map(|d| d.savings_per_hour).sum();
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or_else(|| "?".to_string(), |kb| format!("{}", kb / 1024));
    // Over the decisions, the notes and the node status: the same digest, the same plan.
    let digest = fnv(
        &serde_json::to_string(&(&plan.disruptions, &plan.notes, &plan.node_status))
            .expect("plan is JSON"),
    );
    println!(
        "  {:<10} time {time:>8.2?} cpu {cpu:>8.2?}  decisions {:>4}  nodes removed {:>4}  new nodes {:>3}  saves {savings:>8.3}/h ({:.1}% of {base_cost:.2}/h)  peak {peak} MB  digest {digest:016x}",
        "plan",
        plan.disruptions.len(),
        plan.disruptions
            .iter()
            .map(|d| d.nodes.len())
            .sum::<usize>(),
        plan.disruptions
            .iter()
            .map(|d| d.replacements.len())
            .sum::<usize>(),
        100.0 * savings / base_cost,
    );
}

/// Replays the decisions from the plan alone (nodes, replacements, `destinations`) and prints
/// how many pods were displaced, how many of them a decision gives no destination, and how many
/// end on a node the plan removes; also how many moved pods appear in no replacement (what an
/// audit saw before decisions carried `destinations`).
fn audit(s: &ClusterSnapshot, decisions: &[planner::plan::DisruptionDecision]) {
    use std::collections::{BTreeMap, BTreeSet};
    let mut on: BTreeMap<String, String> = s
        .pods
        .iter()
        .filter_map(|p| Some((p.key(), p.node_name.clone()?)))
        .collect();
    let mut nodes: BTreeSet<String> = s.nodes.iter().map(|n| n.name.clone()).collect();
    let (mut displaced, mut no_destination) = (0usize, 0usize);
    let mut moved: BTreeSet<String> = BTreeSet::new();
    let mut in_replacement: BTreeSet<String> = BTreeSet::new();
    for d in decisions {
        let gone: BTreeSet<&str> = d.nodes.iter().map(String::as_str).collect();
        let dest: BTreeMap<&str, &str> = d
            .destinations
            .iter()
            .flat_map(|e| e.pods.iter().map(move |p| (p.as_str(), e.name.as_str())))
            .collect();
        for (pod, node) in on.iter_mut() {
            if gone.contains(node.as_str()) {
                displaced += 1;
                moved.insert(pod.clone());
                match dest.get(pod.as_str()) {
                    Some(to) => *node = to.to_string(),
                    None => no_destination += 1,
                }
            }
        }
        for n in &gone {
            nodes.remove(*n);
        }
        for r in &d.replacements {
            nodes.insert(r.name.clone());
            in_replacement.extend(r.pods.iter().cloned());
        }
    }
    let stranded = on.values().filter(|n| !nodes.contains(*n)).count();
    println!(
        "  audit: {displaced} pod moves; {no_destination} without a destination; {stranded} pods end on a removed node; {} moved pods appear in no replacement (they went to existing nodes)",
        moved.difference(&in_replacement).count()
    );
}

/// The Karpenter-style baseline (see the header).
fn karpenter(s: &ClusterSnapshot, catalog: &Catalog, o: &PlanOptions) -> (Figures, usize) {
    let (start, cpu) = (Instant::now(), cpu_time());
    let mut session = Evaluation::new(s, catalog, o).expect("valid input");
    // Karpenter takes any strictly cheaper command.
    session.set_min_repack_saving(0.0);
    let mut passes = 0;
    let mut first_pass = None;
    loop {
        passes += 1;
        let cmd = {
            let sim = session.build(&consolidation::with_scheduler);
            let order = session.underutilized_order();
            let multi = &order[..order.len().min(100)];
            session
                .prefix_search(&*sim, multi, Reason::Underutilized, Some(1), 1)
                .or_else(|| {
                    order.iter().find_map(|&c| {
                        session
                            .evaluate(&*sim, &[c], Reason::Underutilized, Some(1))
                            .ok()
                    })
                })
        };
        first_pass.get_or_insert(start.elapsed());
        match cmd {
            Some(cmd) => session.commit(cmd),
            None => break,
        }
    }
    let time = (start.elapsed(), cpu_time() - cpu);
    let out = session.finish();
    (figures(&out, time, first_pass.unwrap_or_default()), passes)
}

fn report(name: &str, f: &Figures, base_cost: f64) {
    if std::env::args().any(|a| a == "--verbose") {
        for (reason, nodes, new, saves) in &f.shape {
            println!("    {name}: {reason} {nodes} node(s) -> {new} new, saves {saves:.3}/h");
        }
    }
    println!(
        "  {name:<10} time {:>8.2?} cpu {:>8.2?} (first pass {:>8.2?})  simulations {:>6}  scheduler builds {:>4}  decisions {:>4}  nodes removed {:>4}  new nodes {:>3}  saves {:>8.3}/h ({:.1}% of {:.2}/h)  digest {:016x}",
        f.time,
        f.cpu,
        f.first_pass,
        f.simulations,
        f.rebuilds,
        f.decisions,
        f.nodes_removed,
        f.replacements,
        f.savings,
        100.0 * f.savings / base_cost,
        base_cost,
        f.digest
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // Every pod with a zone spread (maxSkew 10) over its app: simulations then go through the
    // topology model.
    let spread = std::env::args().any(|a| a == "--spread");
    let only: Option<usize> =
        std::env::args().find_map(|a| a.strip_prefix("--nodes=").and_then(|n| n.parse().ok()));
    let catalog = aws::builtin("us-east-1").expect("built-in catalog");
    let o = PlanOptions {
        now: NOW,
        ..PlanOptions::default()
    };
    let sizes: Vec<usize> = match only {
        Some(n) => vec![n],
        None if quick => vec![1000],
        None => vec![1000, 5000],
    };
    if !spread && !std::env::args().any(|a| a == "--plan-only") {
        let s = fragmented(&catalog, 300);
        let base = cost(&s, &catalog);
        println!(
            "disruption bench: fragmented slack, 300 m5.4xlarge with 2x5 + 1 vCPU pods, pool capped at 16 vCPU"
        );
        let d = dovetail(&s, &catalog, &o);
        report("dovetail", &d, base);
        let (k, passes) = karpenter(&s, &catalog, &o);
        report("karpenter", &k, base);
        println!(
            "  baseline passes {passes}; dovetail finds {:+.3}/h more",
            d.savings - k.savings
        );
    }
    let pods_per_node: usize = std::env::args()
        .find_map(|a| {
            a.strip_prefix("--pods-per-node=")
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(15);
    let plan_only = std::env::args().any(|a| a == "--plan-only");
    let whole_plan = plan_only || std::env::args().any(|a| a == "--plan");
    for n in sizes {
        let s = cluster(&catalog, n, pods_per_node, 42, spread);
        let base = cost(&s, &catalog);
        println!(
            "disruption bench: {n} nodes, {} bound pods, 30% slack, built-in us-east-1 catalog ({} types)",
            s.pods.len(),
            catalog.instance_types.len()
        );
        let start = Instant::now();
        let session = Evaluation::new(&s, &catalog, &o).expect("valid");
        let candidates = session.candidates().len();
        drop(session);
        println!(
            "  candidates {candidates} (model built in {:.2?})",
            start.elapsed()
        );
        // What every plan now adds: the candidates' conditions and Events in Karpenter's words.
        let start = Instant::now();
        let status = consolidation::node_status(&s, &catalog, NOW);
        println!(
            "  node status (Drifted, Consolidatable, DisruptionBlocked, Unconsolidatable) of {} nodes in {:.2?}",
            status.len(),
            start.elapsed()
        );
        let lb = lower_bound(&s, &catalog);
        println!(
            "  cost now {base:.2}/h; lower bound for these pods on c5/m5/r5 {lb:.2}/h: at most {:.2}/h can be saved",
            base - lb
        );
        if whole_plan {
            plan(&s, &catalog, &o, base);
        }
        if plan_only {
            continue;
        }
        let d = dovetail(&s, &catalog, &o);
        report("dovetail", &d, base);
        let (k, passes) = karpenter(&s, &catalog, &o);
        report("karpenter", &k, base);
        println!(
            "  baseline passes {passes}; dovetail finds {:+.3}/h more ({:.2}x the baseline's savings)",
            d.savings - k.savings,
            if k.savings > 0.0 {
                d.savings / k.savings
            } else {
                f64::INFINITY
            }
        );
    }
}
