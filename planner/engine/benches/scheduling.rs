//! Scheduling benchmark: Karpenter's own benchmark workload (kubernetes-sigs/karpenter
//! `pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go`, `makeDiversePods`) at
//! 1k, 5k, 10k and 20k pods on 400 synthetic instance types, each of its five pod groups alone
//! at 10k, dovetail's earlier variant of it (`mix`, see [`mix_workload`]), and a realistic
//! workload on the built-in us-east-1 catalog. Prints a table of pods/s, nodes, cost, cost ÷
//! lower bound and peak memory; asserts nothing.
//!
//! Run: `cargo bench -p planner --bench scheduling`
//!
//! Each case runs in its own child process (this binary re-executed with `--case`), so that the
//! peak resident memory it reports (`VmHWM` from /proc/self/status) is that case's alone.
//! Everything is single-threaded, as the planner is.

// A bench measures wall time; the clock ban is for the planner code, not for this.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use planner::catalog::{aws, synthetic};
use planner::labels;
use planner::model::{
    ClusterSnapshot, LabelSelector, NodeInclusionPolicy, NodePool, Operator, OwnerRef, PlanOptions,
    Pod, PodAffinityTerm, Requirement, Resources, TopologySpreadConstraint, WhenUnsatisfiable,
};
use planner::test_util::{GI, MI, SplitMix, daemon_set, taint, toleration};

const SIZES: [usize; 4] = [1_000, 5_000, 10_000, 20_000];
/// Karpenter's five pod groups, in `makeDiversePods` order.
const GROUPS: [&str; 5] = [
    "generic",
    "zone-spread",
    "hostname-spread",
    "zone-affinity",
    "hostname-anti-affinity",
];
/// The groups of the `mix` variant.
const MIX_GROUPS: [&str; 5] = [
    "plain",
    "zone-spread",
    "hostname-spread",
    "zone-affinity",
    "hostname-anti-affinity",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--case") {
        let name = args.get(i + 1).map(String::as_str).unwrap_or("");
        let n: usize = args.get(i + 2).and_then(|s| s.parse().ok()).unwrap_or(0);
        run_case(name, n);
        return;
    }
    let exe = std::env::current_exe().expect("current exe");
    println!(
        "dovetail scheduling benchmark (single-threaded; peak = VmHWM of a child process per case)"
    );
    println!(
        "note: hostname spread (maxSkew 1) puts one pod per node, as Karpenter does (a node that \
         could still be launched is an empty domain), so that group plans one node per pod."
    );
    println!();
    println!(
        "{:<28} {:>7} {:>10} {:>12} {:>7} {:>11} {:>11} {:>8} {:>9}",
        "workload",
        "pods",
        "time ms",
        "pods/s",
        "nodes",
        "cost $/h",
        "bound $/h",
        "cost/lb",
        "peak MB"
    );
    let mut cases: Vec<(String, usize)> = SIZES
        .iter()
        .map(|n| ("karpenter".to_string(), *n))
        .collect();
    for g in GROUPS {
        cases.push((format!("karpenter-{g}"), 10_000));
    }
    cases.push(("karpenter-generic-limits".to_string(), 10_000));
    cases.push(("mix".to_string(), 10_000));
    cases.push(("realistic".to_string(), 3_000));
    cases.push(("realistic".to_string(), 10_000));
    cases.push(("realistic-limits".to_string(), 10_000));
    cases.push(("realistic-binding-limits".to_string(), 10_000));
    cases.push(("karpenter-generic-binding-limits".to_string(), 10_000));
    // `cargo bench -p planner --bench scheduling -- realistic`: only the cases whose name
    // contains one of the words given.
    let only: Vec<&String> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    cases.retain(|(name, _)| only.is_empty() || only.iter().any(|w| name.contains(w.as_str())));
    for (name, n) in cases {
        let out = std::process::Command::new(&exe)
            .args(["--case", &name, &n.to_string()])
            .output()
            .expect("run case");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

fn run_case(name: &str, n: usize) {
    let (snapshot, catalog) = match name {
        // Karpenter's benchmark NodePool has `limits: {cpu: 10000000}` (cores: never reached).
        "karpenter-generic-limits" => {
            let mut snap = karpenter_workload(n, Some(0));
            for np in &mut snap.node_pools {
                limit(np, &[("cpu", 10_000_000 * 1000)]);
            }
            (snap, synthetic::karpenter_benchmark(400))
        }
        // Limits as users write them, never reached by this workload.
        "realistic-limits" => {
            let mut snap = realistic_workload(n);
            for np in &mut snap.node_pools {
                limit(
                    np,
                    &[
                        ("cpu", 100_000 * 1000),
                        ("memory", 400_000 * GI),
                        ("nvidia.com/gpu", 1_000 * 1000),
                    ],
                );
            }
            (snap, aws::builtin("us-east-1").expect("built-in catalog"))
        }
        // Limits that bind: each NodePool may have 60% of the cpu its claims take without
        // limits. Cost ÷ bound is then over the pods placed; the unschedulable count says how
        // many pods the limits left out.
        "realistic-binding-limits" => {
            let catalog = aws::builtin("us-east-1").expect("built-in catalog");
            let snap = binding(realistic_workload(n), &catalog);
            (snap, catalog)
        }
        "karpenter-generic-binding-limits" => {
            let catalog = synthetic::karpenter_benchmark(400);
            let snap = binding(karpenter_workload(n, Some(0)), &catalog);
            (snap, catalog)
        }
        "karpenter" => (
            karpenter_workload(n, None),
            synthetic::karpenter_benchmark(400),
        ),
        "mix" => (mix_workload(n, None), synthetic::karpenter_benchmark(400)),
        "realistic" => (
            realistic_workload(n),
            aws::builtin("us-east-1").expect("built-in catalog"),
        ),
        // One NodePool's pods of the realistic workload (for a per-pool cost ÷ bound).
        "realistic-general" | "realistic-batch" | "realistic-gpu" => {
            let mut snap = realistic_workload(n);
            snap.pods.retain(|p| {
                let batch = p.node_selector.contains_key("workload");
                let gpu = !p.requests.extended.is_empty();
                match name {
                    "realistic-batch" => batch,
                    "realistic-gpu" => gpu,
                    _ => !batch && !gpu,
                }
            });
            (snap, aws::builtin("us-east-1").expect("built-in catalog"))
        }
        other if other.starts_with("mix-") => {
            let g = other.trim_start_matches("mix-");
            let idx = MIX_GROUPS
                .iter()
                .position(|x| *x == g)
                .expect("known group");
            (
                mix_workload(n, Some(idx)),
                synthetic::karpenter_benchmark(400),
            )
        }
        other => {
            let g = other.trim_start_matches("karpenter-");
            let idx = GROUPS.iter().position(|x| *x == g).expect("known group");
            (
                karpenter_workload(n, Some(idx)),
                synthetic::karpenter_benchmark(400),
            )
        }
    };
    let options = PlanOptions {
        no_disruption: true,
        ..PlanOptions::default()
    };
    // Warm-up run on a copy, then the measured run (best of 3 for small sizes).
    let runs = if n <= 5_000 { 3 } else { 1 };
    let mut best = f64::INFINITY;
    let mut plan = planner::plan(&snapshot, &catalog, &options);
    for _ in 0..runs {
        let start = Instant::now();
        plan = planner::plan(&snapshot, &catalog, &options);
        best = best.min(start.elapsed().as_secs_f64());
    }
    let pods = plan.summary.pending_pods as f64;
    let n = if n == 0 { pods as usize } else { n };
    let s = &plan.summary;
    let ratio = if s.lower_bound_cost_per_hour > 0.0 {
        s.cost_per_hour / s.lower_bound_cost_per_hour
    } else {
        f64::NAN
    };
    let unsched = plan.unschedulable.len();
    if std::env::args().any(|a| a == "--detail") {
        let mut by: std::collections::BTreeMap<(String, String), (usize, f64)> = Default::default();
        for c in &plan.node_claims {
            let t = c.instance_types.first().cloned().unwrap_or_default();
            let e = by.entry((c.node_pool.clone(), t)).or_default();
            e.0 += 1;
            e.1 += c.price;
        }
        for ((pool, t), (k, cost)) in by {
            eprintln!("  {pool:<10} {t:<16} {k:>6} {cost:>10.3}");
        }
    }
    println!(
        "{:<28} {:>7} {:>10.1} {:>12.0} {:>7} {:>11.3} {:>11.3} {:>8.4} {:>9.1}{}",
        name,
        n,
        best * 1e3,
        pods / best,
        s.new_node_claims,
        s.cost_per_hour,
        s.lower_bound_cost_per_hour,
        ratio,
        peak_mb(),
        if unsched > 0 {
            format!("  ({unsched} unschedulable)")
        } else {
            String::new()
        }
    );
}

/// `snap` with a cpu limit on each NodePool of 60% of the capacity its claims take in the plan
/// without limits (counted on each claim's cheapest type).
fn binding(mut snap: ClusterSnapshot, catalog: &planner::catalog::Catalog) -> ClusterSnapshot {
    let options = PlanOptions {
        no_disruption: true,
        ..PlanOptions::default()
    };
    let free = planner::plan(&snap, catalog, &options);
    for np in &mut snap.node_pools {
        let used: i64 = free
            .node_claims
            .iter()
            .filter(|c| c.node_pool == np.name)
            .filter_map(|c| catalog.get(c.instance_types.first()?))
            .map(|t| t.capacity.cpu)
            .sum();
        if used > 0 {
            limit(np, &[("cpu", used * 6 / 10)]);
        }
    }
    snap
}

/// Sets `np`'s `spec.limits` to `limits` (name, amount in the model's units).
fn limit(np: &mut NodePool, limits: &[(&str, i64)]) {
    let mut r = Resources::default();
    for &(name, v) in limits {
        r.set(name, v);
        np.limited_resources.push(name.to_string());
    }
    np.limits = Some(r);
}

/// Peak resident set of this process in MB (VmHWM), or NaN where /proc is missing.
fn peak_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

const CPUS: [i64; 6] = [100, 250, 500, 750, 1000, 1500];
const MEMS: [i64; 6] = [100 * MI, 250 * MI, 500 * MI, GI, 2 * GI, 4 * GI];

/// `randomCPU()` of Karpenter's benchmark (millicores).
const KARPENTER_CPUS: [i64; 5] = [100, 250, 500, 1000, 1500];
/// `randomMemory()` of Karpenter's benchmark (MiB).
const KARPENTER_MEMS_MI: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
/// `randomLabelValue()` of Karpenter's benchmark.
const KARPENTER_LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

/// A uniform pick from `values` (Karpenter: `values[r.Intn(len(values))]`).
fn pick<T: Copy>(rng: &mut SplitMix, values: &[T]) -> T {
    values[rng.range(0, values.len() as i64 - 1) as usize]
}

/// Karpenter's benchmark pods, exactly as `makeDiversePods(n)` builds them: `n/5` each of
/// generic pods, zone spread, hostname spread, zone self-affinity and hostname anti-affinity
/// pods, then generic pods for the remainder. Random draws in Karpenter's order per pod (label,
/// spread selector, cpu, memory) from a fixed seed (42, as Karpenter's `rand.NewSource(42)`; the
/// generator is SplitMix, not Go's, so the draws are like Karpenter's, not identical):
/// - generic: label `my-label` ∈ a..g;
/// - spread (zone or hostname, maxSkew 1, DoNotSchedule): label `my-label` ∈ a..g and a
///   selector `my-label` ∈ a..g drawn independently (it need not match the pod itself);
/// - zone affinity: label `my-affininity` ∈ a..g (Karpenter's spelling), required self-affinity
///   on the zone: 7 random groups;
/// - hostname anti-affinity: label `app=nginx`, anti-affinity to `app=nginx` on the hostname:
///   one group, so one pod per node.
///
/// cpu ∈ {100m, 250m, 500m, 1, 1.5}, memory ∈ {100, 256, 512, 1024, 2048, 4096} MiB. With
/// `only`, all `n` pods come from that one group.
fn karpenter_workload(n: usize, only: Option<usize>) -> ClusterSnapshot {
    let mut rng = SplitMix(42);
    let per_group = n / GROUPS.len();
    let mut pods = Vec::with_capacity(n);
    for i in 0..n {
        let group = match only {
            Some(g) => g,
            // Remainder: generic pods (makeDiversePods' fill-up).
            None if i >= per_group * GROUPS.len() => 0,
            None => i / per_group.max(1),
        };
        let label = |rng: &mut SplitMix| pick(rng, &KARPENTER_LABEL_VALUES).to_string();
        let mut p = Pod {
            namespace: "default".into(),
            uid: format!("uid-{}-{i}", GROUPS[group]),
            name: format!("{}-{i}", GROUPS[group]),
            ..Pod::default()
        };
        match group {
            1 | 2 => {
                p.labels.insert("my-label".into(), label(&mut rng));
                let mut sel = LabelSelector::default();
                sel.match_labels.insert("my-label".into(), label(&mut rng));
                let key = if group == 1 {
                    labels::ZONE
                } else {
                    labels::HOSTNAME
                };
                p.topology_spread.push(TopologySpreadConstraint {
                    label_selector: Some(sel),
                    ..spread(key, "")
                });
            }
            3 => {
                let v = label(&mut rng);
                p.labels.insert("my-affininity".into(), v.clone());
                let mut sel = LabelSelector::default();
                sel.match_labels.insert("my-affininity".into(), v);
                p.pod_affinity.push(PodAffinityTerm {
                    label_selector: Some(sel),
                    ..affinity(labels::ZONE, "")
                });
            }
            4 => {
                p.labels.insert("app".into(), "nginx".into());
                p.pod_anti_affinity
                    .push(affinity(labels::HOSTNAME, "nginx"));
            }
            _ => {
                p.labels.insert("my-label".into(), label(&mut rng));
            }
        }
        p.requests = Resources {
            cpu: pick(&mut rng, &KARPENTER_CPUS),
            memory: pick(&mut rng, &KARPENTER_MEMS_MI) * MI,
            pods: 1,
            ..Resources::default()
        };
        pods.push(p);
    }
    ClusterSnapshot {
        pods,
        node_pools: vec![NodePool {
            name: "default".into(),
            ..NodePool::default()
        }],
        ..ClusterSnapshot::default()
    }
}

fn selector(app: &str) -> LabelSelector {
    let mut s = LabelSelector::default();
    s.match_labels.insert("app".into(), app.into());
    s
}

fn base_pod(name: String, rng: &mut SplitMix) -> Pod {
    Pod {
        namespace: "default".into(),
        uid: format!("uid-{name}"),
        name,
        requests: Resources {
            cpu: CPUS[rng.range(0, 5) as usize],
            memory: MEMS[rng.range(0, 5) as usize],
            pods: 1,
            ..Resources::default()
        },
        ..Pod::default()
    }
}

fn spread(key: &str, app: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: 1,
        topology_key: key.into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: Some(selector(app)),
        min_domains: None,
        match_label_keys: vec![],
        node_affinity_policy: NodeInclusionPolicy::Honor,
        node_taints_policy: NodeInclusionPolicy::Ignore,
    }
}

fn affinity(key: &str, app: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(selector(app)),
        namespaces: vec![],
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: vec![],
        mismatch_label_keys: vec![],
    }
}

/// dovetail's earlier variant of Karpenter's workload (kept for comparison with old figures; it
/// is NOT Karpenter's): five equal groups (plain; zone spread; hostname spread; zone
/// self-affinity in one group; hostname anti-affinity in 10 label groups), spread selectors
/// matching the pod's own label, cpu sizes with 750m added. With `only`, all `n` pods come from
/// that one group.
fn mix_workload(n: usize, only: Option<usize>) -> ClusterSnapshot {
    let mut rng = SplitMix(42);
    let mut pods = Vec::with_capacity(n);
    for i in 0..n {
        let group = only.unwrap_or(i * 5 / n.max(1));
        let mut p = base_pod(format!("{}-{i}", MIX_GROUPS[group]), &mut rng);
        match group {
            1 => {
                p.labels.insert("app".into(), "spread-zone".into());
                p.topology_spread.push(spread(labels::ZONE, "spread-zone"));
            }
            2 => {
                p.labels.insert("app".into(), "spread-host".into());
                p.topology_spread
                    .push(spread(labels::HOSTNAME, "spread-host"));
            }
            3 => {
                p.labels.insert("app".into(), "affinity".into());
                p.pod_affinity.push(affinity(labels::ZONE, "affinity"));
            }
            4 => {
                let app = format!("anti-{}", i % 10);
                p.labels.insert("app".into(), app.clone());
                p.pod_anti_affinity.push(affinity(labels::HOSTNAME, &app));
            }
            _ => {}
        }
        pods.push(p);
    }
    ClusterSnapshot {
        pods,
        node_pools: vec![NodePool {
            name: "default".into(),
            ..NodePool::default()
        }],
        ..ClusterSnapshot::default()
    }
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement {
        key: key.into(),
        operator: op,
        values: values.iter().map(|s| s.to_string()).collect(),
        min_values: None,
    }
}

/// A mixed cluster on the built-in catalog: three NodePools (general on-demand/spot c/m/r
/// generation > 5; a spot batch pool for pods that select `workload=batch`; a tainted GPU pool),
/// DaemonSets (one with a host port, one only on GPU nodes), and deployments of several shapes.
fn realistic_workload(n: usize) -> ClusterSnapshot {
    let mut general = NodePool {
        name: "general".into(),
        ..NodePool::default()
    };
    general.requirements = vec![
        req(labels::ARCH, Operator::In, &["amd64"]),
        req(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
        req(labels::INSTANCE_GENERATION, Operator::Gt, &["5"]),
        req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
    ];
    let mut batch = NodePool {
        name: "batch".into(),
        weight: 10,
        ..NodePool::default()
    };
    batch.labels.insert("workload".into(), "batch".into());
    batch.taints.push(taint("workload", "batch"));
    batch.requirements = vec![
        req(labels::CAPACITY_TYPE, Operator::In, &["spot"]),
        req(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m"]),
    ];
    let mut gpu = NodePool {
        name: "gpu".into(),
        ..NodePool::default()
    };
    gpu.taints.push(taint("nvidia.com/gpu", "true"));
    gpu.requirements = vec![req(labels::INSTANCE_CATEGORY, Operator::In, &["g"])];

    let mut ds = vec![
        daemon_set("kube-proxy", 100, 128),
        daemon_set("aws-node", 25, 64),
        daemon_set("node-exporter", 50, 64),
        daemon_set("nvidia-device-plugin", 50, 64),
    ];
    ds[2].template.host_ports.push(planner::model::HostPort {
        ip: String::new(),
        protocol: "TCP".into(),
        port: 9100,
    });
    ds[3]
        .template
        .tolerations
        .push(toleration("nvidia.com/gpu", "true"));
    ds[3]
        .template
        .required_node_affinity
        .push(planner::model::NodeSelectorTerm {
            requirements: vec![req(labels::INSTANCE_CATEGORY, Operator::In, &["g", "p"])],
        });
    for d in &mut ds[..3] {
        d.template.tolerations.push(planner::model::Toleration {
            key: String::new(),
            operator: planner::model::TolerationOperator::Exists,
            value: String::new(),
            effect: None,
        });
    }

    // (name, share per mille, cpu m, memory Mi, batch, gpus)
    let shapes: [(&str, usize, i64, i64, bool, i64); 8] = [
        ("web", 300, 250, 512, false, 0),
        ("api", 200, 500, 1024, false, 0),
        ("worker", 150, 1000, 2048, false, 0),
        ("cache", 80, 500, 6144, false, 0),
        ("search", 60, 2000, 8192, false, 0),
        ("ingest", 50, 1500, 1024, false, 0),
        ("batch", 155, 2000, 3072, true, 0),
        ("train", 5, 4000, 16384, false, 1),
    ];
    let mut pods = Vec::with_capacity(n);
    for (app, share, cpu, mem, is_batch, gpus) in shapes {
        let count = (n * share).div_ceil(1000);
        for i in 0..count {
            let mut p = Pod {
                namespace: "prod".into(),
                name: format!("{app}-{i}"),
                uid: format!("uid-{app}-{i}"),
                requests: Resources {
                    cpu,
                    memory: mem * MI,
                    pods: 1,
                    ..Resources::default()
                },
                owner: Some(OwnerRef {
                    kind: "ReplicaSet".into(),
                    name: app.into(),
                    controller: true,
                }),
                ..Pod::default()
            };
            p.labels.insert("app".into(), app.into());
            if is_batch {
                p.node_selector.insert("workload".into(), "batch".into());
                p.tolerations.push(toleration("workload", "batch"));
            }
            if gpus > 0 {
                p.requests
                    .extended
                    .insert("nvidia.com/gpu".into(), gpus * 1000);
                p.tolerations.push(toleration("nvidia.com/gpu", "true"));
            }
            pods.push(p);
        }
    }
    ClusterSnapshot {
        pods,
        node_pools: vec![general, batch, gpu],
        daemon_sets: ds,
        ..ClusterSnapshot::default()
    }
}
