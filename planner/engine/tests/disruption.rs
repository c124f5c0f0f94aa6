//! Disruption through the real scheduler: decisions in `plan()`, deletions, cheaper
//! replacements, many→k repacks, the launch plan's placements, and invariants as properties.

use planner::catalog::{Catalog, InstanceType};
use planner::consolidation::{self, Evaluation};
use planner::labels;
use planner::model::{
    ClusterSnapshot, Node, NodePool, OwnerRef, PlanOptions, Pod, PodPhase, Resources,
};
use planner::test_util::{self, GI};
use proptest::prelude::*;

const NOW: i64 = 1_795_996_800;

fn pool() -> NodePool {
    let mut p = test_util::node_pool("default");
    p.disruption.budgets[0].nodes = planner::model::BudgetNodes::Percent(100);
    p.expire_after = None;
    p
}

fn managed(name: &str, it: &InstanceType) -> Node {
    let mut labels = it.labels.clone();
    labels.insert(labels::INSTANCE_TYPE.into(), it.name.clone());
    labels.insert(labels::NODEPOOL.into(), "default".into());
    labels.insert(labels::ZONE.into(), "zone-a".into());
    labels.insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
    labels.insert(labels::HOSTNAME.into(), name.into());
    labels.insert(labels::OS.into(), "linux".into());
    labels.insert(labels::INITIALIZED.into(), "true".into());
    Node {
        name: name.into(),
        labels,
        allocatable: it.allocatable(),
        capacity: it.capacity.clone(),
        ready: true,
        creation_time: Some(NOW - 100 * 3600),
        ..Node::default()
    }
}

fn bound(name: &str, cpu: i64, node: &str) -> Pod {
    let mut p = test_util::bound_pod(name, cpu, cpu, node);
    p.owner = Some(OwnerRef {
        kind: "ReplicaSet".into(),
        name: "rs".into(),
        controller: true,
    });
    p.phase = PodPhase::Running;
    p.start_time = Some(NOW - 3600);
    p
}

/// `m.large` nodes (8 vCPU, 16 GiB, 0.4/h) with pods of the given millicores.
fn cluster(loads: &[&[i64]]) -> (ClusterSnapshot, Catalog) {
    let cat = test_util::small_catalog();
    let large = cat.get("m.large").expect("m.large").clone();
    let mut s = ClusterSnapshot {
        node_pools: vec![pool()],
        ..ClusterSnapshot::default()
    };
    for (i, pods) in loads.iter().enumerate() {
        let n = format!("n{i}");
        s.nodes.push(managed(&n, &large));
        for (j, cpu) in pods.iter().enumerate() {
            s.pods.push(bound(&format!("p{i}-{j}"), *cpu, &n));
        }
    }
    (s, cat)
}

fn opts() -> PlanOptions {
    PlanOptions {
        now: NOW,
        ..PlanOptions::default()
    }
}

#[test]
fn plan_emits_disruptions_unless_disabled() {
    let (s, cat) = cluster(&[&[1000], &[2000], &[6000], &[]]);
    let plan = planner::plan(&s, &cat, &opts());
    assert_eq!(plan.disruptions[0].reason, "Empty");
    assert_eq!(plan.disruptions[0].nodes, vec!["n3".to_string()]);
    assert!(
        plan.disruptions.iter().any(|d| d.reason == "Underutilized"),
        "{:?}",
        plan.disruptions
    );
    let total: f64 = plan.disruptions.iter().map(|d| d.savings_per_hour).sum();
    assert!(total >= 0.4 * 3.0 - 1e-9, "{total}");
    let mut o = opts();
    o.no_disruption = true;
    assert!(planner::plan(&s, &cat, &o).disruptions.is_empty());
    // Byte-for-byte determinism.
    let a = serde_json::to_string(&planner::plan(&s, &cat, &opts())).expect("json");
    let b = serde_json::to_string(&planner::plan(&s, &cat, &opts())).expect("json");
    assert_eq!(a, b);
}

#[test]
fn lone_underused_node_is_replaced_by_a_cheaper_one() {
    let (s, cat) = cluster(&[&[1500]]);
    let plan = planner::plan(&s, &cat, &opts());
    assert_eq!(plan.disruptions.len(), 1, "{:?}", plan.disruptions);
    let d = &plan.disruptions[0];
    assert_eq!(d.reason, "Underutilized");
    assert_eq!(d.replacements.len(), 1);
    assert_eq!(d.replacements[0].instance_types[0], "m.small");
    assert_eq!(d.replacements[0].pods, vec!["default/p0-0".to_string()]);
    // The pool allows spot and on-demand: the replacement is priced, and pinned, as spot
    // (Karpenter's rule, so that an on-demand fallback cannot cost more).
    assert_eq!(d.replacements[0].capacity_types, vec!["spot".to_string()]);
    assert!(
        (d.savings_per_hour - 0.36).abs() < 1e-9,
        "{}",
        d.savings_per_hour
    );
}

#[test]
fn four_nodes_repack_onto_fewer_cheaper_nodes() {
    // Each node holds one 5-vCPU pod: no pod fits beside another and no single node has a
    // cheaper replacement; Karpenter (many→1) finds 4 → 1 xlarge (0.8 < 1.6) or nothing,
    // dovetail takes the cheapest valid repack.
    let (s, cat) = cluster(&[&[5000], &[5000], &[5000], &[5000]]);
    let plan = planner::plan(&s, &cat, &opts());
    // The optimum, by hand: 20 vCPU of 5-vCPU pods on on-demand m.large (4 x 0.4 = 1.6/h);
    // spot replacements cost 0.4 x list: m.xlarge (16 vCPU, 0.32) takes 3 pods, m.large (8,
    // 0.16) the fourth; 0.48/h beats 2 x m.xlarge (0.64) and 4 x m.large (0.64). Saving
    // 1.6 - 0.48 = 1.12/h, every node replaced, by exactly two new nodes.
    let saved: f64 = plan.disruptions.iter().map(|d| d.savings_per_hour).sum();
    assert!(
        (saved - 1.12).abs() < 1e-9,
        "saved {saved}: {:?}",
        plan.disruptions
    );
    let removed: usize = plan.disruptions.iter().map(|d| d.nodes.len()).sum();
    assert_eq!(removed, 4, "{:?}", plan.disruptions);
    let mut new: Vec<&str> = plan
        .disruptions
        .iter()
        .flat_map(|d| &d.replacements)
        .map(|r| r.instance_types[0].as_str())
        .collect();
    new.sort_unstable();
    assert_eq!(new, ["m.large", "m.xlarge"], "{:?}", plan.disruptions);
}

#[test]
fn nodes_receiving_pending_pods_are_kept() {
    let (mut s, cat) = cluster(&[&[1000], &[1000]]);
    let mut pending = test_util::pod("web-0", 6500, 100);
    pending.owner = Some(OwnerRef {
        kind: "ReplicaSet".into(),
        name: "web".into(),
        controller: true,
    });
    s.pods.push(pending);
    let plan = planner::plan(&s, &cat, &opts());
    assert_eq!(plan.existing_nodes.len(), 1, "{plan:?}");
    let target = &plan.existing_nodes[0].name;
    for d in &plan.disruptions {
        assert!(
            !d.nodes.contains(target),
            "{target} receives a pending pod: {d:?}"
        );
    }
    // The other node's pod cannot move onto the target (6.5 + 1 + 1 > 8 fits? 8.5 > 8 no), so
    // it may only be replaced by a cheaper node.
    for d in &plan.disruptions {
        assert!(d.savings_per_hour > 0.0);
    }
}

// === Properties ===

fn clusters() -> impl Strategy<Value = (ClusterSnapshot, Catalog)> {
    let node_s = (0usize..4, prop::collection::vec(100i64..6000, 0..5));
    (prop::collection::vec(node_s, 1..8), 0u32..4).prop_map(|(nodes, budget)| {
        let cat = test_util::small_catalog();
        let mut s = ClusterSnapshot {
            node_pools: vec![pool()],
            ..ClusterSnapshot::default()
        };
        s.node_pools[0].disruption.budgets[0].nodes = planner::model::BudgetNodes::Count(budget);
        for (i, (t, pods)) in nodes.into_iter().enumerate() {
            let it = &cat.instance_types[t];
            let name = format!("n{i}");
            s.nodes.push(managed(&name, it));
            let mut used = 0;
            for (j, cpu) in pods.into_iter().enumerate() {
                if used + cpu <= it.capacity.cpu {
                    used += cpu;
                    s.pods.push(bound(&format!("p{i}-{j}"), cpu, &name));
                }
            }
        }
        (s, cat)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn decisions_hold_with_the_real_scheduler((s, cat) in clusters()) {
        let o = opts();
        let mut session = Evaluation::new(&s, &cat, &o).expect("valid");
        consolidation::run(&mut session, &consolidation::with_scheduler);
        let after = session.snapshot().clone();
        let out = session.finish();
        let again = consolidation::disrupt(&s, &cat, &o, &consolidation::with_scheduler).expect("valid");
        prop_assert_eq!(&out, &again);

        // Every displaced pod has a place; no node is overcommitted.
        let removed: Vec<&String> = out.decisions.iter().flat_map(|d| &d.nodes).collect();
        for p in &s.pods {
            let q = after.pods.iter().find(|q| q.key() == p.key()).expect("kept");
            let n = q.node_name.as_deref().expect("placed");
            prop_assert!(after.nodes.iter().any(|x| x.name == n));
            prop_assert!(!removed.iter().any(|r| r.as_str() == n));
        }
        for n in &after.nodes {
            let used = after.pods.iter()
                .filter(|p| p.node_name.as_deref() == Some(n.name.as_str()))
                .fold(Resources::default(), |mut a, p| { a.add(&p.requests); a });
            prop_assert!(used.cpu <= n.allocatable.cpu && used.memory <= n.allocatable.memory,
                "{} overcommitted", n.name);
        }
        // Budget.
        let limit = match s.node_pools[0].disruption.budgets[0].nodes {
            planner::model::BudgetNodes::Count(c) => c as usize,
            planner::model::BudgetNodes::Percent(_) => usize::MAX,
        };
        prop_assert!(removed.len() <= limit);
        // Cost never rises.
        let price = |name: &str| {
            let n = s.nodes.iter().find(|n| n.name == name).expect("node");
            cat.get(&n.labels[labels::INSTANCE_TYPE]).map(|t| t.offerings[0].price).unwrap_or(0.0)
        };
        for d in &out.decisions {
            let before: f64 = d.nodes.iter().map(|n| price(n)).sum();
            let new: f64 = d.replacements.iter().map(|r| r.price).sum();
            prop_assert!(new < before || (new == 0.0 && before == 0.0), "{:?}", d);
            prop_assert!(d.savings_per_hour >= 0.0);
        }
        let _ = GI;
    }
}

// === Plans audited from outside ===

/// Replays a plan's decisions on the input from the plan alone (nodes, replacements and
/// `destinations`), as a user or the actuator would audit it, and checks that every displaced
/// pod has exactly one destination, that destinations are nodes that exist at that point, and
/// that at the end every pod is on a node that exists and no node is overcommitted. Returns how
/// many times the most-moved pod moved.
fn audit(
    s: &ClusterSnapshot,
    cat: &Catalog,
    decisions: &[planner::plan::DisruptionDecision],
) -> usize {
    use std::collections::{BTreeMap, BTreeSet};
    let mut nodes: BTreeMap<String, Resources> = s
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.allocatable.clone()))
        .collect();
    let mut on: BTreeMap<String, String> = s
        .pods
        .iter()
        .filter_map(|p| Some((p.key(), p.node_name.clone()?)))
        .collect();
    let requests: BTreeMap<String, Resources> = s
        .pods
        .iter()
        .map(|p| (p.key(), p.requests.clone()))
        .collect();
    let mut moves: BTreeMap<String, usize> = BTreeMap::new();
    for (k, d) in decisions.iter().enumerate() {
        let gone: BTreeSet<&str> = d.nodes.iter().map(String::as_str).collect();
        for n in &gone {
            assert!(
                nodes.contains_key(*n),
                "decision {k} removes {n}, which no longer exists"
            );
        }
        let displaced: BTreeSet<String> = on
            .iter()
            .filter(|(_, n)| gone.contains(n.as_str()))
            .map(|(p, _)| p.clone())
            .collect();
        let mut destined: BTreeSet<String> = BTreeSet::new();
        let replacements: BTreeMap<&str, &planner::plan::PlannedNodeClaim> = d
            .replacements
            .iter()
            .map(|r| (r.name.as_str(), r))
            .collect();
        for dest in &d.destinations {
            let is_new = replacements.contains_key(dest.name.as_str());
            assert!(
                is_new || (nodes.contains_key(&dest.name) && !gone.contains(dest.name.as_str())),
                "decision {k} sends pods to {}, which is neither a replacement nor a remaining node",
                dest.name
            );
            if let Some(r) = replacements.get(dest.name.as_str()) {
                let mut a = r.pods.clone();
                let mut b = dest.pods.clone();
                a.sort();
                b.sort();
                assert_eq!(a, b, "decision {k}: replacement {} pods", r.name);
            }
            for p in &dest.pods {
                assert!(
                    destined.insert(p.clone()),
                    "decision {k}: {p} has two destinations"
                );
            }
        }
        assert_eq!(
            displaced, destined,
            "decision {k}: displaced pods and destinations differ"
        );
        for n in &gone {
            nodes.remove(*n);
        }
        for r in &d.replacements {
            let it = cat
                .get(&r.instance_types[0])
                .expect("replacement type in catalog");
            nodes.insert(r.name.clone(), it.allocatable());
        }
        for dest in &d.destinations {
            for p in &dest.pods {
                on.insert(p.clone(), dest.name.clone());
                *moves.entry(p.clone()).or_default() += 1;
            }
        }
    }
    let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
    for (p, n) in &on {
        assert!(
            nodes.contains_key(n),
            "{p} ends on {n}, which the plan removed"
        );
        used.entry(n.as_str()).or_default().add(&requests[p]);
    }
    for (n, u) in used {
        let a = &nodes[n];
        assert!(
            u.cpu <= a.cpu && u.memory <= a.memory,
            "{n} overcommitted: {u:?} > {a:?}"
        );
    }
    moves.values().copied().max().unwrap_or(0)
}

/// `n` nodes of every small_catalog size at 20–60% cpu use, pods of 100m–2 vCPU.
fn big_cluster(n: usize, seed: u64) -> (ClusterSnapshot, Catalog) {
    let cat = test_util::small_catalog();
    let mut rng = test_util::SplitMix(seed);
    let mut s = ClusterSnapshot {
        node_pools: vec![pool()],
        ..ClusterSnapshot::default()
    };
    for i in 0..n {
        let it = &cat.instance_types[rng.range(1, 3) as usize];
        let name = format!("n{i}");
        s.nodes.push(managed(&name, it));
        let target = it.capacity.cpu * rng.range(20, 60) / 100;
        let (mut used, mut j) = (0, 0);
        while used < target {
            let cpu = rng.range(100, 2000).min(target - used).max(100);
            s.pods.push(bound(&format!("p{i}-{j}"), cpu, &name));
            used += cpu;
            j += 1;
        }
    }
    (s, cat)
}

#[test]
fn chained_decisions_lose_no_pod_and_say_where_each_goes() {
    // Budget 100%: most nodes are disrupted, in several decisions, and pods that an earlier
    // decision moved onto an existing node move again when a later decision disrupts it.
    let (s, cat) = big_cluster(150, 7);
    let out =
        consolidation::disrupt(&s, &cat, &opts(), &consolidation::with_scheduler).expect("valid");
    let removed: usize = out.decisions.iter().map(|d| d.nodes.len()).sum();
    assert!(
        out.decisions.len() >= 2,
        "{} decisions",
        out.decisions.len()
    );
    assert!(removed >= 100, "only {removed} of 150 nodes disrupted");
    let most = audit(&s, &cat, &out.decisions);
    assert!(
        most >= 2,
        "no pod moved twice: the chain this test is for did not happen"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn every_plan_can_be_replayed_from_its_destinations(n in 10usize..60, seed in 0u64..1000) {
        let (s, cat) = big_cluster(n, seed);
        let out = consolidation::disrupt(&s, &cat, &opts(), &consolidation::with_scheduler).expect("valid");
        audit(&s, &cat, &out.decisions);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A plan runs the bulk search and Karpenter's sequence on two threads, from candidates it
    /// also writes the node status from: its decisions are those of the searches run one after
    /// the other, and its status that of the candidates built alone.
    #[test]
    fn a_plans_concurrent_search_and_shared_candidates_change_nothing((s, cat) in clusters()) {
        let o = opts();
        let mut one_after_the_other = Evaluation::new(&s, &cat, &o).expect("valid");
        consolidation::run(&mut one_after_the_other, &consolidation::with_scheduler);
        let mut concurrent = Evaluation::new(&s, &cat, &o).expect("valid");
        consolidation::run_concurrently(
        &mut concurrent,
        &consolidation::with_scheduler,
        &planner::stopwatch::Untimed,
    );
        let sequential = one_after_the_other.finish();
        prop_assert_eq!(&concurrent.finish(), &sequential);
        let plan = planner::plan(&s, &cat, &o);
        prop_assert_eq!(&plan.disruptions, &sequential.decisions);
        prop_assert_eq!(&plan.node_status, &consolidation::node_status(&s, &cat, o.now));
    }

    /// Skipping the cost improvement of new claims changes no verdict: the unpriced evaluation
    /// of a group is the priced one whenever it gives a command or a rejection, and otherwise
    /// the priced one replaces the nodes or finds the replacement not cheaper.
    #[test]
    fn an_unpriced_evaluation_says_what_the_priced_one_says((s, cat) in clusters()) {
        use consolidation::{Reason, Rejection};
        let o = opts();
        let session = Evaluation::new(&s, &cat, &o).expect("valid");
        let sim = session.build(&consolidation::with_scheduler);
        let n = session.candidates().len();
        let groups: Vec<Vec<usize>> = (0..n).map(|c| vec![c]).chain((1..n).map(|c| vec![c - 1, c])).collect();
        for group in &groups {
            for reason in [Reason::Underutilized, Reason::Drifted] {
                let priced = session.evaluate(&*sim, group, reason, None);
                match session.evaluate_unpriced(&*sim, group, reason) {
                    Ok(Some(cmd)) => prop_assert_eq!(&priced, &Ok(cmd), "{:?} {:?}", group, reason),
                    Ok(None) => prop_assert!(
                        matches!(&priced, Ok(c) if !c.replacements.is_empty())
                            || matches!(&priced, Err(Rejection::NotCheaper(_))),
                        "{:?} {:?}: {:?}", group, reason, priced
                    ),
                    Err(r) => prop_assert_eq!(&priced, &Err(r), "{:?} {:?}", group, reason),
                }
            }
        }
    }
}
