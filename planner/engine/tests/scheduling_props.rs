//! Property tests of the scheduler on random small clusters. Safety: no node over its
//! allocatable, every pending pod in exactly one of placed/unschedulable, host ports unique per
//! node, NodePool limits kept, determinism (same input twice, shuffled input), lower bound ≤
//! cost. Liveness: a pod that fits an allowed, offered instance type of an unlimited NodePool on
//! its own is placed. Optimality: on tiny instances, lower bound ≤ brute-force optimum ≤ plan
//! cost ≤ [`OPTIMUM_FACTOR`] × optimum.

use std::collections::BTreeMap;

use planner::catalog::{Catalog, InstanceType};
use planner::labels;
use planner::model::{
    ClusterSnapshot, HostPort, Operator, PlanOptions, Pod, Requirement, Resources,
};
use planner::plan::Plan;
use planner::test_util::{
    GI, MI, SplitMix, bound_pod, daemon_set, instance_type, node, node_pool, pod, taint, toleration,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Case {
    snapshot: ClusterSnapshot,
    catalog: Catalog,
}

fn build(seed: u64) -> Case {
    let mut rng = SplitMix(seed);
    let mut catalog = Catalog::default();
    for i in 0..rng.range(1, 7) {
        let cpu = rng.range(1, 16);
        let mut it = instance_type(
            &format!("t{i}.x"),
            cpu,
            rng.range(1, 64),
            rng.range(3, 30),
            rng.range(1, 200) as f64 / 100.0,
        );
        if rng.range(0, 3) == 0 {
            it.labels.insert(labels::ARCH.into(), "arm64".into());
        }
        if rng.range(0, 4) == 0 {
            it.capacity
                .extended
                .insert("nvidia.com/gpu".into(), rng.range(1, 4) * 1000);
        }
        it.overhead.kube_reserved.cpu = rng.range(0, 200);
        for o in &mut it.offerings {
            o.available = rng.range(0, 5) != 0;
        }
        catalog.instance_types.push(it);
    }
    let mut s = ClusterSnapshot::default();
    for p in 0..rng.range(1, 3) {
        let mut np = node_pool(&format!("pool{p}"));
        np.weight = rng.range(0, 2) as i32;
        if rng.range(0, 3) == 0 {
            np.taints.push(taint("dedicated", "x"));
        }
        if rng.range(0, 3) == 0 {
            np.requirements.push(Requirement {
                key: labels::ARCH.into(),
                operator: Operator::In,
                values: vec!["amd64".into()],
                min_values: None,
            });
        }
        if rng.range(0, 3) == 0 {
            np.limits = Some(Resources {
                cpu: rng.range(4, 40) * 1000,
                ..Resources::default()
            });
            np.limited_resources = vec!["cpu".into()];
        }
        s.node_pools.push(np);
    }
    for n in 0..rng.range(0, 3) {
        let name = format!("node{n}");
        let mut nd = node(&name, rng.range(1, 8), rng.range(1, 16));
        if rng.range(0, 2) == 0 {
            nd.labels.insert(labels::NODEPOOL.into(), "pool0".into());
        }
        s.pods.push(bound_pod(
            &format!("bound{n}"),
            rng.range(0, 1000),
            rng.range(0, 1024),
            &name,
        ));
        s.nodes.push(nd);
    }
    for d in 0..rng.range(0, 2) {
        s.daemon_sets.push(daemon_set(
            &format!("ds{d}"),
            rng.range(10, 300),
            rng.range(10, 300),
        ));
    }
    for i in 0..rng.range(0, 40) {
        let mut p = pod(
            &format!("p{i}"),
            rng.range(50, 6000),
            rng.range(64, 16 * 1024),
        );
        p.creation_time = Some(rng.range(0, 5));
        if rng.range(0, 3) == 0 {
            p.tolerations.push(toleration("dedicated", "x"));
        }
        if rng.range(0, 5) == 0 {
            p.node_selector.insert(labels::ARCH.into(), "arm64".into());
        }
        if rng.range(0, 5) == 0 {
            p.host_ports.push(HostPort {
                ip: String::new(),
                protocol: "TCP".into(),
                port: 8000 + rng.range(0, 1) as i32,
            });
        }
        if rng.range(0, 8) == 0 {
            p.requests.extended.insert("nvidia.com/gpu".into(), 1000);
        }
        s.pods.push(p);
    }
    Case {
        snapshot: s,
        catalog,
    }
}

fn shuffle<T>(v: &mut [T], rng: &mut SplitMix) {
    for i in (1..v.len()).rev() {
        let j = rng.range(0, i as i64) as usize;
        v.swap(i, j);
    }
}

fn daemon_overhead(s: &ClusterSnapshot, taints_present: bool) -> Resources {
    let mut r = Resources::default();
    if !taints_present {
        for d in &s.daemon_sets {
            r.add(&d.template.requests);
        }
    }
    r
}

/// A NodePool and instance type a pending pod certainly fits on a new node of its own: the pool
/// has no limits, its taints are tolerated, its requirements (arch) hold for the type, the
/// type has an available offering, matches the pod's node selector and its allocatable holds
/// the pod plus every DaemonSet (an over-estimate of the overhead).
fn placeable_alone<'c>(
    s: &ClusterSnapshot,
    catalog: &'c Catalog,
    p: &Pod,
) -> Option<(String, &'c str)> {
    let mut need = daemon_overhead(s, false);
    need.add(&p.requests);
    need.pods += 1 + i64::try_from(s.daemon_sets.len()).unwrap_or(0);
    for pool in s.node_pools.iter().filter(|np| np.limits.is_none()) {
        let tolerated = pool
            .taints
            .iter()
            .all(|t| p.tolerations.iter().any(|o| o.key == t.key));
        if !tolerated {
            continue;
        }
        for t in &catalog.instance_types {
            let label = |k: &str| t.labels.get(k).map(String::as_str);
            let pool_ok = pool.requirements.iter().all(|r| {
                r.operator != Operator::In || r.values.iter().any(|v| label(&r.key) == Some(v))
            });
            let selector_ok = p.node_selector.iter().all(|(k, v)| label(k) == Some(v));
            let offered = t.offerings.iter().any(|o| o.available);
            if pool_ok && selector_ok && offered && need.fits_in(&t.allocatable()) {
                return Some((pool.name.clone(), t.name.as_str()));
            }
        }
    }
    None
}

fn check_invariants(case: &Case, plan: &Plan) -> Result<(), TestCaseError> {
    let s = &case.snapshot;
    let pods: BTreeMap<String, &Pod> = s.pods.iter().map(|p| (p.key(), p)).collect();
    let types: BTreeMap<&str, &InstanceType> = case
        .catalog
        .instance_types
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    // Every pending pod exactly once.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for c in &plan.node_claims {
        for p in &c.pods {
            *seen.entry(p.clone()).or_default() += 1;
        }
    }
    for n in &plan.existing_nodes {
        for p in &n.pods {
            *seen.entry(p.clone()).or_default() += 1;
        }
    }
    for u in &plan.unschedulable {
        *seen.entry(u.pod.clone()).or_default() += 1;
        prop_assert!(!u.reason.is_empty());
    }
    let pending: Vec<String> = s
        .pods
        .iter()
        .filter(|p| p.is_pending())
        .map(Pod::key)
        .collect();
    prop_assert_eq!(seen.len(), pending.len());
    for p in &pending {
        prop_assert_eq!(seen.get(p).copied(), Some(1), "pod {}", p);
    }
    prop_assert_eq!(plan.summary.pending_pods as usize, pending.len());
    prop_assert_eq!(
        plan.summary.scheduled_pods as usize,
        pending.len() - plan.unschedulable.len()
    );
    // No new claim over the allocatable of any type it lists.
    for c in &plan.node_claims {
        let pool = s.node_pools.iter().find(|p| p.name == c.node_pool).unwrap();
        let mut used = daemon_overhead(s, !pool.taints.is_empty());
        let mut ports = Vec::new();
        for p in &c.pods {
            used.add(&pods[p].requests);
            for hp in &pods[p].host_ports {
                prop_assert!(
                    !ports.contains(&hp.port),
                    "port {} twice on {}",
                    hp.port,
                    c.name
                );
                ports.push(hp.port);
            }
        }
        prop_assert!(!c.instance_types.is_empty());
        for t in &c.instance_types {
            let it = types[t.as_str()];
            prop_assert!(
                used.fits_in(&it.allocatable()),
                "claim {} over {}: {} > {}",
                c.name,
                t,
                used,
                it.allocatable()
            );
        }
        prop_assert!(c.price.is_finite() && c.price >= 0.0);
    }
    // No existing node over its allocatable.
    for n in &plan.existing_nodes {
        let node = s.nodes.iter().find(|x| x.name == n.name).unwrap();
        let mut used = daemon_overhead(s, false);
        for p in s
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(&n.name))
        {
            used.add(&p.requests);
        }
        for p in &n.pods {
            used.add(&pods[p].requests);
        }
        prop_assert!(used.fits_in(&node.allocatable), "node {} over", n.name);
    }
    // NodePool limits: existing capacity plus the largest listed type of each claim.
    for np in &s.node_pools {
        if let Some(limits) = &np.limits {
            let mut total: i64 = s
                .nodes
                .iter()
                .filter(|n| n.labels.get(labels::NODEPOOL) == Some(&np.name))
                .map(|n| n.capacity.cpu)
                .sum();
            for c in plan.node_claims.iter().filter(|c| c.node_pool == np.name) {
                total += c
                    .instance_types
                    .iter()
                    .map(|t| types[t.as_str()].capacity.cpu)
                    .max()
                    .unwrap_or(0);
            }
            // Existing nodes may already exceed the limit; then no claim may be added.
            let claims = plan.node_claims.iter().any(|c| c.node_pool == np.name);
            prop_assert!(
                !claims || total <= limits.cpu,
                "pool {} cpu {} > {}",
                np.name,
                total,
                limits.cpu
            );
        }
    }
    // Liveness: a pod that on its own (with every DaemonSet's overhead) fits an offered type of
    // a NodePool without limits whose taints it tolerates and whose requirements the type and
    // the pod's selector meet, is placed.
    for u in &plan.unschedulable {
        let p = pods[&u.pod];
        if let Some((pool, t)) = placeable_alone(s, &case.catalog, p) {
            prop_assert!(
                false,
                "{} fits {} of pool {} alone, yet is unschedulable: {}",
                u.pod,
                t,
                pool,
                u.reason
            );
        }
    }
    prop_assert!(
        plan.summary.lower_bound_cost_per_hour <= plan.summary.cost_per_hour + 1e-9,
        "lower bound {} > cost {}",
        plan.summary.lower_bound_cost_per_hour,
        plan.summary.cost_per_hour
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn invariants_hold(seed in any::<u64>()) {
        let case = build(seed);
        let options = PlanOptions::default();
        let plan = planner::plan(&case.snapshot, &case.catalog, &options);
        check_invariants(&case, &plan)?;
    }

    #[test]
    fn deterministic_and_independent_of_input_order(seed in any::<u64>(), shuffle_seed in any::<u64>()) {
        let case = build(seed);
        let options = PlanOptions::default();
        let a = planner::plan(&case.snapshot, &case.catalog, &options);
        let b = planner::plan(&case.snapshot, &case.catalog, &options);
        prop_assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        let mut shuffled = case.clone();
        let mut rng = SplitMix(shuffle_seed);
        shuffle(&mut shuffled.snapshot.pods, &mut rng);
        shuffle(&mut shuffled.snapshot.nodes, &mut rng);
        shuffle(&mut shuffled.snapshot.node_pools, &mut rng);
        shuffle(&mut shuffled.snapshot.daemon_sets, &mut rng);
        shuffle(&mut shuffled.catalog.instance_types, &mut rng);
        let c = planner::plan(&shuffled.snapshot, &shuffled.catalog, &options);
        prop_assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&c).unwrap());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Cost improvement with topology in play moves only pods no constraint sees: pods of a
    /// hostname anti-affinity group never share a node, and the invariants hold.
    #[test]
    fn anti_affinity_survives_cost_improvement(seed in any::<u64>()) {
        let mut case = build(seed);
        let mut rng = SplitMix(seed ^ 0x5eed);
        let term = planner::model::PodAffinityTerm {
            label_selector: Some({
                let mut s = planner::model::LabelSelector::default();
                s.match_labels.insert("app".into(), "solo".into());
                s
            }),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: labels::HOSTNAME.into(),
            match_label_keys: vec![],
            mismatch_label_keys: vec![],
        };
        for p in case.snapshot.pods.iter_mut().filter(|p| p.is_pending()) {
            if rng.range(0, 2) == 0 {
                p.labels.insert("app".into(), "solo".into());
                p.pod_anti_affinity.push(term.clone());
            }
        }
        let plan = planner::plan(&case.snapshot, &case.catalog, &PlanOptions::default());
        check_invariants(&case, &plan)?;
        let solo: Vec<String> = case
            .snapshot
            .pods
            .iter()
            .filter(|p| p.labels.get("app").map(String::as_str) == Some("solo"))
            .map(Pod::key)
            .collect();
        for c in &plan.node_claims {
            let n = c.pods.iter().filter(|p| solo.contains(p)).count();
            prop_assert!(n <= 1, "claim {} holds {} solo pods", c.name, n);
        }
        for e in &plan.existing_nodes {
            let n = e.pods.iter().filter(|p| solo.contains(p)).count();
            prop_assert!(n <= 1, "node {} holds {} solo pods", e.name, n);
        }
    }
}

#[test]
fn memory_units_are_consistent() {
    // Guards the fixture builders the properties rely on.
    assert_eq!(pod("x", 1, 1).requests.memory, MI);
    assert_eq!(node("n", 1, 1).allocatable.memory, GI);
}

// === optimality on tiny instances ===

/// The plan's cost is at most this factor times the brute-force optimum on the tiny instances
/// of `cost_is_near_the_brute_force_optimum`. Measured when written: the largest plan/optimum
/// ratio over 20,000 seeds was 1.521 (and the largest optimum/lower-bound ratio 56: the bound
/// is fractional, so it is only required to be positive when the optimum is).
const OPTIMUM_FACTOR: f64 = 1.6;

/// A tiny instance: one NodePool, 1–3 instance types, 1–6 pending pods that each fit the
/// largest type, nothing else.
fn tiny(seed: u64) -> Case {
    let mut rng = SplitMix(seed);
    let mut catalog = Catalog::default();
    for i in 0..rng.range(1, 3) {
        catalog.instance_types.push(instance_type(
            &format!("t{i}.x"),
            rng.range(1, 8),
            rng.range(1, 16),
            rng.range(2, 6),
            rng.range(1, 100) as f64 / 100.0,
        ));
    }
    let max_cpu = catalog
        .instance_types
        .iter()
        .map(|t| t.capacity.cpu)
        .max()
        .unwrap_or(0);
    let max_mem = catalog
        .instance_types
        .iter()
        .map(|t| t.capacity.memory)
        .max()
        .unwrap_or(0);
    let mut s = ClusterSnapshot {
        node_pools: vec![node_pool("pool0")],
        ..ClusterSnapshot::default()
    };
    for i in 0..rng.range(1, 6) {
        let mut p = pod(
            &format!("p{i}"),
            rng.range(100, 4000),
            rng.range(64, 8 * 1024),
        );
        p.creation_time = Some(rng.range(0, 5));
        // Keep only pods that fit the largest type on both axes (the others would need a
        // type with both, which may not exist: then the optimum differs only by them).
        if p.requests.cpu <= max_cpu && p.requests.memory <= max_mem {
            s.pods.push(p);
        }
    }
    Case {
        snapshot: s,
        catalog,
    }
}

/// The cheapest cost of nodes holding every placeable pod: over every partition of the pods
/// into groups, each group on its cheapest type that holds it (cheapest available offering).
/// Pods that fit no type alone are left out (the plan lists them unschedulable).
fn brute_force_optimum(case: &Case) -> f64 {
    let types: Vec<(Resources, f64)> = case
        .catalog
        .instance_types
        .iter()
        .filter_map(|t| {
            let price = t
                .offerings
                .iter()
                .filter(|o| o.available)
                .map(|o| o.price)
                .fold(f64::INFINITY, f64::min);
            price.is_finite().then(|| (t.allocatable(), price))
        })
        .collect();
    let cost_of = |group: &[&Pod]| -> f64 {
        let mut need = Resources::default();
        for p in group {
            need.add(&p.requests);
        }
        need.pods = i64::try_from(group.len()).unwrap_or(i64::MAX);
        types
            .iter()
            .filter(|(alloc, _)| need.fits_in(alloc))
            .map(|(_, price)| *price)
            .fold(f64::INFINITY, f64::min)
    };
    let pods: Vec<&Pod> = case
        .snapshot
        .pods
        .iter()
        .filter(|p| cost_of(&[p]).is_finite())
        .collect();
    // Restricted growth strings enumerate set partitions.
    fn partitions(n: usize, i: usize, labels: &mut Vec<usize>, out: &mut dyn FnMut(&[usize])) {
        if i == n {
            out(labels);
            return;
        }
        let next = labels.iter().copied().max().map_or(0, |m| m + 1);
        for g in 0..=next {
            labels.push(g);
            partitions(n, i + 1, labels, out);
            labels.pop();
        }
    }
    let mut best = f64::INFINITY;
    partitions(pods.len(), 0, &mut Vec::new(), &mut |labels| {
        let groups = labels.iter().copied().max().map_or(0, |m| m + 1);
        let mut total = 0.0;
        for g in 0..groups {
            let group: Vec<&Pod> = pods
                .iter()
                .zip(labels)
                .filter(|(_, l)| **l == g)
                .map(|(p, _)| *p)
                .collect();
            total += cost_of(&group);
            if total >= best {
                return;
            }
        }
        best = best.min(total);
    });
    if pods.is_empty() { 0.0 } else { best }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// On tiny instances the plan's cost is bracketed by the lower bound and a stated factor of
    /// the brute-force optimum, and every placeable pod is placed.
    #[test]
    fn cost_is_near_the_brute_force_optimum(seed in any::<u64>()) {
        let case = tiny(seed);
        let plan = planner::plan(&case.snapshot, &case.catalog, &PlanOptions::default());
        check_invariants(&case, &plan)?;
        let optimum = brute_force_optimum(&case);
        let cost = plan.summary.cost_per_hour;
        let bound = plan.summary.lower_bound_cost_per_hour;
        prop_assert!(bound <= optimum + 1e-9, "lower bound {} > optimum {}", bound, optimum);
        prop_assert!(optimum == 0.0 || bound > 0.0, "lower bound 0 for optimum {}", optimum);
        prop_assert!(optimum <= cost + 1e-9, "plan {} beats the optimum {}", cost, optimum);
        prop_assert!(
            cost <= OPTIMUM_FACTOR * optimum + 1e-9,
            "plan {} > {} x optimum {}: {:?}",
            cost,
            OPTIMUM_FACTOR,
            optimum,
            plan.node_claims
        );
    }
}

/// The brute force itself: two 1-vCPU pods and a type holding both is one node, not two.
#[test]
fn brute_force_optimum_packs_and_partitions() {
    let mut catalog = Catalog::default();
    catalog
        .instance_types
        .push(instance_type("a.x", 2, 4, 10, 1.0));
    catalog
        .instance_types
        .push(instance_type("b.x", 1, 4, 10, 0.3));
    let mut s = ClusterSnapshot {
        node_pools: vec![node_pool("pool0")],
        ..ClusterSnapshot::default()
    };
    s.pods.push(pod("p0", 1000, 64));
    s.pods.push(pod("p1", 1000, 64));
    // One a.x (spot 0.4) beats two b.x (2 x 0.12 = 0.24)? No: two b.x are cheaper.
    let case = Case {
        snapshot: s,
        catalog,
    };
    assert!(
        (brute_force_optimum(&case) - 0.24).abs() < 1e-9,
        "{}",
        brute_force_optimum(&case)
    );
    let mut dear = case.clone();
    dear.catalog.instance_types[1] = instance_type("b.x", 1, 4, 10, 1.5);
    assert!(
        (brute_force_optimum(&dear) - 0.4).abs() < 1e-9,
        "{}",
        brute_force_optimum(&dear)
    );
}

/// The liveness check bites: a plan that gives up on every pod of a tiny instance (each pod
/// fits the largest type alone) is rejected.
#[test]
fn liveness_rejects_an_unschedulable_everything_plan() {
    let case = (0..100u64)
        .map(tiny)
        .find(|c| !c.snapshot.pods.is_empty())
        .expect("a tiny case with pods");
    let mut plan = planner::plan(&case.snapshot, &case.catalog, &PlanOptions::default());
    check_invariants(&case, &plan).expect("the real plan passes");
    let mut given_up = Vec::new();
    for c in plan.node_claims.drain(..) {
        for p in c.pods {
            given_up.push(planner::plan::Unschedulable {
                pod: p,
                reason: "gave up".into(),
            });
        }
    }
    plan.unschedulable.extend(given_up);
    plan.summary.scheduled_pods = 0;
    plan.summary.cost_per_hour = 0.0;
    plan.summary.lower_bound_cost_per_hour = 0.0;
    let err = check_invariants(&case, &plan).expect_err("liveness must reject it");
    assert!(
        err.to_string().contains("alone, yet is unschedulable"),
        "{err}"
    );
}

/// `case` with every NodePool limited to `cpu` millicores and `memory` bytes.
fn with_limits(case: &Case, cpu: i64, memory: i64) -> Case {
    let mut out = case.clone();
    for np in &mut out.snapshot.node_pools {
        np.limits = Some(Resources {
            cpu,
            memory,
            ..Resources::default()
        });
        np.limited_resources = vec!["cpu".into(), "memory".into()];
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A limit that never binds does not change the plan's cost by more than 1% (cost
    /// improvement runs on pools with limits), and the lower bound stays below the cost.
    #[test]
    fn non_binding_limits_keep_the_cost(seed in any::<u64>()) {
        let mut case = build(seed);
        for np in &mut case.snapshot.node_pools {
            np.limits = None;
            np.limited_resources.clear();
        }
        let options = PlanOptions::default();
        let free = planner::plan(&case.snapshot, &case.catalog, &options);
        let limited_case = with_limits(&case, 1_000_000_000, 1 << 50);
        let limited = planner::plan(&limited_case.snapshot, &limited_case.catalog, &options);
        check_invariants(&limited_case, &limited)?;
        let (a, b) = (free.summary.cost_per_hour, limited.summary.cost_per_hour);
        prop_assert!((a - b).abs() <= 0.01 * a + 1e-9, "without limits {} with {}", a, b);
        prop_assert_eq!(free.unschedulable.len(), limited.unschedulable.len());
        prop_assert!(
            limited.summary.lower_bound_cost_per_hour <= b + 1e-9,
            "bound {} > cost {}", limited.summary.lower_bound_cost_per_hour, b
        );
    }

    /// With limits that may bind, on tiny instances: limits kept (checked by the invariants),
    /// lower bound ≤ cost, and the lower bound ≤ the brute-force optimum of the pods the plan
    /// placed (a limit is a constraint on the plan, not a reason for the bound to grow).
    #[test]
    fn binding_limits_are_kept_and_the_bound_holds(seed in any::<u64>(), cpu in 1i64..24) {
        let case = with_limits(&tiny(seed), cpu * 1000, 1 << 50);
        let plan = planner::plan(&case.snapshot, &case.catalog, &PlanOptions::default());
        check_invariants(&case, &plan)?;
        let cost = plan.summary.cost_per_hour;
        let bound = plan.summary.lower_bound_cost_per_hour;
        prop_assert!(bound <= cost + 1e-9, "bound {} > cost {}", bound, cost);
        let mut placed = case.clone();
        placed.snapshot.node_pools[0].limits = None;
        placed.snapshot.node_pools[0].limited_resources.clear();
        let unschedulable: Vec<String> = plan.unschedulable.iter().map(|u| u.pod.clone()).collect();
        placed.snapshot.pods.retain(|p| !unschedulable.contains(&format!("{}/{}", p.namespace, p.name)));
        let optimum = brute_force_optimum(&placed);
        prop_assert!(bound <= optimum + 1e-9, "bound {} > optimum {} of the placed pods", bound, optimum);
    }
}
