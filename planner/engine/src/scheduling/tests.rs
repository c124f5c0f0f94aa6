//! Unit tests of the scheduler, one per rule.

use crate::catalog::Catalog;
use crate::labels;
use crate::model::{
    ClusterSnapshot, HostPort, MinValuesPolicy, NodeClaim, NodeClass, Operator, PlanOptions,
    Requirement as InputRequirement, Resources,
};
use crate::test_util::*;

use super::{Results, Scheduler};

fn solve(snapshot: &ClusterSnapshot, catalog: &Catalog) -> Results {
    solve_with(snapshot, catalog, &PlanOptions::default())
}

fn solve_with(snapshot: &ClusterSnapshot, catalog: &Catalog, options: &PlanOptions) -> Results {
    Scheduler::new(snapshot, catalog, options).solve()
}

fn snapshot(pods: Vec<crate::model::Pod>) -> ClusterSnapshot {
    ClusterSnapshot {
        pods,
        node_pools: vec![node_pool("default")],
        ..ClusterSnapshot::default()
    }
}

fn reason_of<'r>(r: &'r Results, pod: &str) -> &'r str {
    r.unschedulable
        .iter()
        .find(|(p, _)| p == pod)
        .map(|(_, reason)| reason.as_str())
        .unwrap_or_else(|| panic!("{pod} is not unschedulable: {r:#?}"))
}

#[test]
fn queue_orders_by_cpu_then_memory_then_creation_then_uid() {
    let mut a = pod("a", 100, 100);
    let b = pod("b", 200, 50);
    let mut c = pod("c", 100, 200);
    let mut d = pod("d", 100, 100);
    a.creation_time = Some(10);
    d.creation_time = Some(5);
    c.creation_time = Some(20);
    let mut pods = [&a, &b, &c, &d];
    pods.sort_by(|x, y| super::queue::compare(x, y));
    let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["b", "c", "d", "a"]);
}

#[test]
fn pods_are_packed_onto_one_claim_with_the_cheapest_fitting_type() {
    let r = solve(
        &snapshot(vec![
            pod("a", 1000, 1024),
            pod("b", 1000, 1024),
            pod("c", 500, 512),
        ]),
        &small_catalog(),
    );
    assert_eq!(r.new_claims.len(), 1, "{r:#?}");
    let c = &r.new_claims[0];
    // 2.5 vCPU: m.small (2) is too small; m.medium is the cheapest that fits.
    assert_eq!(c.instance_types, ["m.medium", "m.large", "m.xlarge"]);
    assert!(
        (c.price - 0.08).abs() < 1e-9,
        "spot price of m.medium: {}",
        c.price
    );
    assert_eq!(c.pods, ["default/a", "default/b", "default/c"]);
    assert_eq!(c.capacity_types, ["on-demand", "spot"]);
    assert_eq!(c.zones, ["zone-a", "zone-b"]);
    assert_eq!(
        c.labels.get(labels::NODEPOOL).map(String::as_str),
        Some("default")
    );
    assert_eq!(
        c.labels.get(labels::ARCH).map(String::as_str),
        Some("amd64")
    );
    assert!(!c.labels.contains_key(labels::HOSTNAME));
    assert!(c.name.starts_with("default-") && c.name.len() == "default-".len() + 5);
}

#[test]
fn existing_nodes_are_used_first() {
    let mut s = snapshot(vec![
        pod("a", 1000, 1024),
        bound_pod("old", 1000, 1024, "n1"),
    ]);
    s.nodes.push(node("n1", 4, 8));
    let r = solve(&s, &small_catalog());
    assert!(r.new_claims.is_empty(), "{r:#?}");
    assert_eq!(
        r.existing,
        [("n1".to_string(), vec!["default/a".to_string()])]
    );
}

#[test]
fn existing_node_capacity_counts_bound_pods() {
    let mut s = snapshot(vec![
        pod("a", 2000, 1024),
        bound_pod("old", 3000, 1024, "n1"),
    ]);
    s.nodes.push(node("n1", 4, 8));
    let r = solve(&s, &small_catalog());
    assert!(r.existing.is_empty());
    assert_eq!(r.new_claims.len(), 1);
}

#[test]
fn cordoned_deleting_and_broken_nodes_are_not_targets() {
    for case in 0..3 {
        let mut s = snapshot(vec![pod("a", 1000, 1024)]);
        let mut n = node("n1", 4, 8);
        match case {
            0 => n.unschedulable = true,
            1 => n.deletion_time = Some(1),
            _ => {
                n.ready = false;
                n.labels.insert(labels::NODEPOOL.into(), "default".into());
                n.labels.insert(labels::INITIALIZED.into(), "true".into());
            }
        }
        s.nodes.push(n);
        let r = solve(&s, &small_catalog());
        assert!(r.existing.is_empty(), "case {case}: {r:#?}");
        assert_eq!(r.new_claims.len(), 1, "case {case}");
    }
}

#[test]
fn a_starting_node_is_a_target_and_its_not_ready_taint_is_ignored() {
    let mut s = snapshot(vec![pod("a", 1000, 1024)]);
    let mut n = node("n1", 4, 8);
    n.ready = false;
    n.labels.insert(labels::NODEPOOL.into(), "default".into());
    n.taints.push(taint("node.kubernetes.io/not-ready", ""));
    s.nodes.push(n);
    let r = solve(&s, &small_catalog());
    assert_eq!(r.existing.len(), 1, "{r:#?}");
}

#[test]
fn in_flight_node_claims_take_pods_and_matched_claims_count_once() {
    let mut s = snapshot(vec![pod("a", 1000, 1024), pod("b", 1000, 1024)]);
    // Launched claim without a node: capacity from status.
    let mut c = NodeClaim {
        name: "default-abcde".into(),
        ..NodeClaim::default()
    };
    c.labels.insert(labels::NODEPOOL.into(), "default".into());
    c.allocatable = Resources {
        cpu: 1500,
        memory: 4 * GI,
        pods: 10,
        ..Resources::default()
    };
    s.node_claims.push(c);
    // A claim whose node exists: the node is the target, not the claim.
    let mut c2 = NodeClaim {
        name: "default-fghij".into(),
        node_name: Some("n2".into()),
        ..NodeClaim::default()
    };
    c2.labels.insert(labels::NODEPOOL.into(), "default".into());
    s.node_claims.push(c2);
    s.nodes.push(node("n2", 1, 2));
    let r = solve(&s, &small_catalog());
    let names: Vec<&str> = r.existing.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["default-abcde", "n2"], "{r:#?}");
    assert!(r.new_claims.is_empty());
}

#[test]
fn unlaunched_claim_uses_smallest_type_its_requirements_allow() {
    let mut s = snapshot(vec![pod("a", 3000, 1024)]);
    let mut c = NodeClaim {
        name: "default-abcde".into(),
        ..NodeClaim::default()
    };
    c.labels.insert(labels::NODEPOOL.into(), "default".into());
    c.requirements.push(requirement(
        labels::INSTANCE_TYPE,
        Operator::In,
        &["m.medium", "m.large"],
    ));
    s.node_claims.push(c);
    let r = solve(&s, &small_catalog());
    assert_eq!(r.existing.len(), 1, "m.medium holds 3 vCPU: {r:#?}");
}

#[test]
fn node_pools_are_tried_by_weight_then_name() {
    let mut s = snapshot(vec![pod("a", 1000, 1024)]);
    let mut heavy = node_pool("zeta");
    heavy.weight = 10;
    s.node_pools = vec![node_pool("beta"), heavy, node_pool("alpha")];
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims[0].node_pool, "zeta");
    // Equal weights: Karpenter's OrderByWeight tries names in descending order.
    s.node_pools[1].weight = 0;
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims[0].node_pool, "zeta");
}

#[test]
fn empty_plan_costs_positive_zero() {
    let r = solve(&snapshot(vec![]), &small_catalog());
    assert!(r.new_claims.is_empty());
    // -0.0 == 0.0, so the sign is what the JSON shows.
    assert!(
        r.cost() == 0.0 && r.cost().is_sign_positive(),
        "{}",
        r.cost()
    );
}

#[test]
fn node_pool_limits_cap_new_capacity_including_existing_nodes() {
    let mut s = snapshot(vec![pod("a", 3000, 1024), pod("b", 3000, 1024)]);
    let mut np = node_pool("default");
    np.limits = Some(Resources {
        cpu: 12_000,
        ..Resources::default()
    });
    np.limited_resources = vec!["cpu".into()];
    s.node_pools = vec![np];
    // An existing 4-vCPU node of the pool, full, uses 4 of the 12.
    let mut n = node("n1", 4, 8);
    n.labels.insert(labels::NODEPOOL.into(), "default".into());
    s.nodes.push(n);
    s.pods.push(bound_pod("full", 4000, 1024, "n1"));
    let r = solve(&s, &small_catalog());
    // 8 vCPU left: Karpenter filters types by capacity ≤ remaining and subtracts the largest
    // remaining type's capacity per claim, so one m.large (8) claim holds both pods.
    assert_eq!(r.new_claims.len(), 1, "{r:#?}");
    assert_eq!(r.new_claims[0].instance_types, ["m.large"]);
    // A third pod exceeds the limit.
    s.pods.push(pod("c", 3000, 1024));
    let r = solve(&s, &small_catalog());
    let reason = reason_of(&r, "default/c");
    assert!(reason.contains("limits"), "{reason}");
}

/// What the plan's new claims count against a pool's cpu limit, as Karpenter counts them: the
/// largest capacity among each claim's instance types (small_catalog: `m.<size>` has 2, 4, 8
/// or 16 vCPUs).
fn counted_cpu(r: &Results) -> i64 {
    let cpu = |t: &str| match t {
        "m.small" => 2_000,
        "m.medium" => 4_000,
        "m.large" => 8_000,
        "m.xlarge" => 16_000,
        other => panic!("unknown type {other}"),
    };
    r.new_claims
        .iter()
        .map(|c| c.instance_types.iter().map(|t| cpu(t)).max().unwrap_or(0))
        .sum()
}

fn zoned_pod(name: &str, cpu_milli: i64, zone: &str) -> crate::model::Pod {
    let mut p = pod(name, cpu_milli, 256);
    p.node_selector.insert(labels::ZONE.into(), zone.into());
    p
}

#[test]
fn a_binding_limit_does_not_strand_a_pod_a_smaller_type_would_hold() {
    // Two pods that cannot share a node, a 16-vCPU limit. Counting the first claim at its
    // largest type (m.xlarge, 16) leaves nothing for the second; a claim of one 1-vCPU pod
    // launches its cheapest type (m.small, 2), which leaves room for the second.
    let mut s = snapshot(vec![
        zoned_pod("a", 1000, "zone-a"),
        zoned_pod("b", 1000, "zone-b"),
    ]);
    s.node_pools[0].limits = Some(Resources {
        cpu: 16_000,
        ..Resources::default()
    });
    s.node_pools[0].limited_resources = vec!["cpu".into()];
    let r = solve(&s, &small_catalog());
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(r.new_claims.len(), 2, "{r:#?}");
    assert!(counted_cpu(&r) <= 16_000, "{r:#?}");
}

#[test]
fn a_binding_limit_places_as_many_pods_as_it_allows() {
    // Ten 1-vCPU pods per zone, a 16-vCPU limit and no overhead: at most 16 pods fit (two
    // m.large of 8 pods, or any mix of the same capacity). First-fit puts the ten zone-a pods
    // on one m.xlarge (16) and strands all of zone-b.
    let mut pods = Vec::new();
    for k in 0..10 {
        pods.push(zoned_pod(&format!("a{k}"), 1000, "zone-a"));
        pods.push(zoned_pod(&format!("b{k}"), 1000, "zone-b"));
    }
    let mut s = snapshot(pods);
    s.node_pools[0].limits = Some(Resources {
        cpu: 16_000,
        ..Resources::default()
    });
    s.node_pools[0].limited_resources = vec!["cpu".into()];
    let r = solve(&s, &small_catalog());
    let placed: usize = r.new_claims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 16, "{r:#?}");
    assert_eq!(r.unschedulable.len(), 4);
    assert!(counted_cpu(&r) <= 16_000, "{r:#?}");
    let reason = reason_of(&r, &r.unschedulable[0].0);
    assert!(reason.contains("exceed its limits"), "{reason}");
}

#[test]
fn a_binding_limit_places_small_pods_before_large_ones() {
    // One 6-vCPU pod and four 1-vCPU pods, an 8-vCPU limit: the large pod alone needs an
    // m.large (8) and leaves nothing; the four small pods fit on an m.medium (4) with room for
    // nothing else large. As many pods as the limit allows: the four small ones.
    let mut pods = vec![pod("large", 6000, 256)];
    for k in 0..4 {
        pods.push(pod(&format!("small{k}"), 1000, 256));
    }
    let mut s = snapshot(pods);
    s.node_pools[0].limits = Some(Resources {
        cpu: 8_000,
        ..Resources::default()
    });
    s.node_pools[0].limited_resources = vec!["cpu".into()];
    let r = solve(&s, &small_catalog());
    let placed: usize = r.new_claims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 4, "{r:#?}");
    assert_eq!(r.unschedulable.len(), 1);
    assert_eq!(r.unschedulable[0].0, "default/large");
    assert!(counted_cpu(&r) <= 8_000, "{r:#?}");
}

#[test]
fn limits_nodes_counts_nodes() {
    // `limits: {nodes: 2}`: two pods that cannot share a node get two nodes, a third waits,
    // and an existing node of the pool counts too.
    let mut s = snapshot(vec![
        zoned_pod("a", 1000, "zone-a"),
        zoned_pod("b", 1000, "zone-b"),
        zoned_pod("c", 15_500, "zone-a"),
    ]);
    let mut limits = Resources::default();
    limits.set("nodes", 2_000);
    s.node_pools[0].limits = Some(limits);
    s.node_pools[0].limited_resources = vec!["nodes".into()];
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims.len(), 2, "{r:#?}");
    assert_eq!(r.unschedulable.len(), 1, "{r:#?}");
    let reason = reason_of(&r, &r.unschedulable[0].0);
    assert!(reason.contains("nodes=0"), "{reason}");
    // Without the limit, three nodes.
    s.node_pools[0].limited_resources.clear();
    s.node_pools[0].limits = None;
    assert_eq!(solve(&s, &small_catalog()).new_claims.len(), 3);
    // An existing node of the pool leaves one.
    let mut limits = Resources::default();
    limits.set("nodes", 2_000);
    s.node_pools[0].limits = Some(limits);
    s.node_pools[0].limited_resources = vec!["nodes".into()];
    let mut n = node("n1", 2, 4);
    n.labels.insert(labels::NODEPOOL.into(), "default".into());
    s.nodes.push(n);
    s.pods.push(bound_pod("full", 2000, 256, "n1"));
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims.len(), 1, "{r:#?}");
    assert_eq!(r.unschedulable.len(), 2, "{r:#?}");
}

#[test]
fn pods_must_tolerate_node_pool_taints() {
    let mut s = snapshot(vec![pod("plain", 500, 512)]);
    let mut gpu = node_pool("gpu");
    gpu.taints.push(taint("nvidia.com/gpu", "true"));
    s.node_pools = vec![gpu];
    let r = solve(&s, &small_catalog());
    let reason = reason_of(&r, "default/plain");
    assert_eq!(
        reason,
        "incompatible with NodePool gpu: did not tolerate nvidia.com/gpu=true:NoSchedule"
    );
    s.pods[0]
        .tolerations
        .push(toleration("nvidia.com/gpu", "true"));
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims.len(), 1);
    assert_eq!(r.new_claims[0].taints.len(), 1);
}

#[test]
fn startup_taints_are_ignored() {
    let mut s = snapshot(vec![pod("a", 500, 512)]);
    s.node_pools[0]
        .startup_taints
        .push(taint("example.com/init", "true"));
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims.len(), 1, "{r:#?}");
    assert!(r.new_claims[0].taints.is_empty());
}

#[test]
fn extended_resources_select_types_that_have_them() {
    let mut catalog = small_catalog();
    let mut g = instance_type("g.large", 8, 32, 110, 1.0);
    g.capacity.extended.insert("nvidia.com/gpu".into(), 1000);
    catalog.instance_types.push(g);
    let mut p = pod("train", 1000, 1024);
    p.requests.extended.insert("nvidia.com/gpu".into(), 1000);
    let r = solve(&snapshot(vec![p.clone(), pod("web", 1000, 1024)]), &catalog);
    let gpu_claim = r
        .new_claims
        .iter()
        .find(|c| c.pods.contains(&"default/train".to_string()))
        .expect("placed");
    assert_eq!(gpu_claim.instance_types, ["g.large"]);
    // Two GPUs fit nowhere.
    p.requests.extended.insert("nvidia.com/gpu".into(), 2000);
    let r = solve(&snapshot(vec![p]), &catalog);
    assert_eq!(
        reason_of(&r, "default/train"),
        "no instance type in NodePool default fits nvidia.com/gpu=2 (largest allows nvidia.com/gpu=1)"
    );
}

#[test]
fn max_pods_limits_pods_per_node() {
    let catalog = Catalog {
        instance_types: vec![instance_type("t.tiny", 4, 8, 3, 0.1)],
        notes: vec![],
    };
    let pods = (0..5).map(|i| pod(&format!("p{i}"), 100, 100)).collect();
    let mut s = snapshot(pods);
    // A DaemonSet pod takes one slot on every node.
    s.daemon_sets.push(daemon_set("logs", 10, 10));
    let r = solve(&s, &catalog);
    assert_eq!(r.new_claims.len(), 3, "2 pods per node: {r:#?}");
    assert!(r.new_claims.iter().all(|c| c.pods.len() <= 2));
}

#[test]
fn max_pods_from_the_node_class_kubelet() {
    let mut s = snapshot((0..4).map(|i| pod(&format!("p{i}"), 100, 100)).collect());
    s.node_pools[0].node_class = Some("small".into());
    let mut class = NodeClass {
        name: "small".into(),
        ..NodeClass::default()
    };
    class.kubelet.max_pods = Some(2);
    s.node_classes.push(class);
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims.len(), 2, "{r:#?}");
}

#[test]
fn unknown_node_class_makes_the_pool_unusable() {
    let mut s = snapshot(vec![pod("a", 100, 100)]);
    s.node_pools[0].node_class = Some("missing".into());
    let r = solve(&s, &small_catalog());
    assert_eq!(
        reason_of(&r, "default/a"),
        "NodePool default references EC2NodeClass missing, which is not in the input"
    );
}

fn port(ip: &str, protocol: &str, port: i32) -> HostPort {
    HostPort {
        ip: ip.into(),
        protocol: protocol.into(),
        port,
    }
}

#[test]
fn host_ports_conflict_per_node_by_ip_and_protocol() {
    let mut a = pod("a", 100, 100);
    let mut b = pod("b", 100, 100);
    a.host_ports.push(port("", "TCP", 8080));
    b.host_ports.push(port("", "TCP", 8080));
    let r = solve(&snapshot(vec![a.clone(), b.clone()]), &small_catalog());
    assert_eq!(r.new_claims.len(), 2, "same port: {r:#?}");
    b.host_ports[0].protocol = "UDP".into();
    let r = solve(&snapshot(vec![a.clone(), b.clone()]), &small_catalog());
    assert_eq!(r.new_claims.len(), 1, "different protocol");
    a.host_ports[0] = port("10.0.0.1", "TCP", 8080);
    b.host_ports[0] = port("10.0.0.2", "TCP", 8080);
    let r = solve(&snapshot(vec![a.clone(), b.clone()]), &small_catalog());
    assert_eq!(r.new_claims.len(), 1, "different IPs");
    b.host_ports[0] = port("0.0.0.0", "TCP", 8080);
    let r = solve(&snapshot(vec![a, b]), &small_catalog());
    assert_eq!(r.new_claims.len(), 2, "wildcard IP conflicts with any IP");
}

#[test]
fn host_ports_of_bound_pods_block_existing_nodes() {
    let mut a = pod("a", 100, 100);
    a.host_ports.push(port("", "TCP", 9100));
    let mut old = bound_pod("old", 100, 100, "n1");
    old.host_ports.push(port("", "TCP", 9100));
    let mut s = snapshot(vec![a, old]);
    s.nodes.push(node("n1", 4, 8));
    let r = solve(&s, &small_catalog());
    assert!(r.existing.is_empty());
    assert_eq!(r.new_claims.len(), 1);
}

fn family_catalog() -> Catalog {
    Catalog {
        instance_types: vec![
            instance_type("a.large", 8, 16, 110, 0.3),
            instance_type("b.large", 8, 16, 110, 0.4),
            instance_type("c.xlarge", 16, 32, 110, 0.9),
        ],
        notes: vec![],
    }
}

#[test]
fn min_values_strict_rejects_and_best_effort_relaxes() {
    let mut s = snapshot(vec![pod("big", 10_000, 1024)]);
    let mut r0 = requirement(labels::INSTANCE_FAMILY, Operator::Exists, &[]);
    r0.min_values = Some(2);
    s.node_pools[0].requirements.push(r0);
    // 10 vCPU fits only c.xlarge: one family left < 2.
    let r = solve(&s, &family_catalog());
    let reason = reason_of(&r, "default/big");
    assert!(reason.contains("minValues 2"), "{reason}");
    let options = PlanOptions {
        min_values_policy: MinValuesPolicy::BestEffort,
        ..PlanOptions::default()
    };
    let r = solve_with(&s, &family_catalog(), &options);
    assert_eq!(r.new_claims.len(), 1);
    assert!(
        r.notes.iter().any(|n| n.contains("relaxed")),
        "{:?}",
        r.notes
    );
    // A small pod keeps all three families.
    let s2 = ClusterSnapshot {
        pods: vec![pod("small", 1000, 1024)],
        ..s
    };
    let r = solve(&s2, &family_catalog());
    assert_eq!(r.new_claims[0].instance_types.len(), 3);
}

#[test]
fn daemon_set_overhead_is_reserved_on_new_claims() {
    let mut s = snapshot(vec![pod("a", 1500, 1024)]);
    s.daemon_sets.push(daemon_set("agent", 600, 256));
    let r = solve(&s, &small_catalog());
    // 1.5 + 0.6 > 2 vCPU of m.small.
    assert_eq!(r.new_claims[0].instance_types[0], "m.medium");
    // A DaemonSet that does not tolerate the pool's taint does not count.
    s.node_pools[0].taints.push(taint("dedicated", "x"));
    s.pods[0].tolerations.push(toleration("dedicated", "x"));
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims[0].instance_types[0], "m.small");
}

#[test]
fn daemon_set_with_node_selector_counts_only_where_it_matches() {
    let mut s = snapshot(vec![pod("a", 1500, 1024)]);
    let mut ds = daemon_set("arm-agent", 600, 256);
    ds.template
        .node_selector
        .insert(labels::ARCH.into(), "arm64".into());
    s.daemon_sets.push(ds);
    s.node_pools[0]
        .requirements
        .push(requirement(labels::ARCH, Operator::In, &["amd64"]));
    let r = solve(&s, &small_catalog());
    assert_eq!(r.new_claims[0].instance_types[0], "m.small");
}

#[test]
fn daemon_set_overhead_on_existing_nodes_only_without_a_bound_daemon_pod() {
    let mut s = snapshot(vec![pod("a", 3000, 1024)]);
    s.nodes.push(node("n1", 4, 8));
    s.daemon_sets.push(daemon_set("agent", 1500, 256));
    let r = solve(&s, &small_catalog());
    assert!(r.existing.is_empty(), "4 - 1.5 < 3: {r:#?}");
    // Once its pod runs there (and uses less than the template says), its real usage counts.
    let mut dp = bound_pod("agent-x", 500, 256, "n1");
    dp.owner = s.daemon_sets[0].template.owner.clone();
    s.pods.push(dp);
    let r = solve(&s, &small_catalog());
    assert_eq!(r.existing.len(), 1, "{r:#?}");
}

#[test]
fn node_selectors_on_well_known_and_custom_labels() {
    let mut p = pod("a", 500, 512);
    p.node_selector
        .insert(labels::INSTANCE_TYPE.into(), "m.large".into());
    let r = solve(&snapshot(vec![p]), &small_catalog());
    assert_eq!(r.new_claims[0].instance_types, ["m.large"]);
    assert_eq!(
        r.new_claims[0]
            .labels
            .get(labels::INSTANCE_TYPE)
            .map(String::as_str),
        Some("m.large")
    );
    // A custom label the pool does not set cannot be satisfied...
    let mut q = pod("q", 500, 512);
    q.node_selector.insert("team".into(), "web".into());
    let r = solve(&snapshot(vec![q.clone()]), &small_catalog());
    let reason = reason_of(&r, "default/q");
    assert!(reason.contains("team"), "{reason}");
    // ... but a pool template label can.
    let mut s = snapshot(vec![q]);
    s.node_pools[0].labels.insert("team".into(), "web".into());
    let r = solve(&s, &small_catalog());
    assert_eq!(
        r.new_claims[0].labels.get("team").map(String::as_str),
        Some("web")
    );
}

#[test]
fn arch_and_os_select_types() {
    let mut catalog = small_catalog();
    let mut arm = instance_type("g.medium", 4, 8, 110, 0.15);
    arm.labels.insert(labels::ARCH.into(), "arm64".into());
    catalog.instance_types.push(arm);
    let mut win = instance_type("w.medium", 4, 8, 110, 0.05);
    win.os = vec!["windows".into()];
    catalog.instance_types.push(win);
    let mut p = pod("a", 3000, 512);
    p.node_selector.insert(labels::ARCH.into(), "arm64".into());
    let r = solve(&snapshot(vec![p]), &catalog);
    assert_eq!(r.new_claims[0].instance_types, ["g.medium"]);
    let mut p = pod("b", 3000, 512);
    p.node_selector.insert(labels::OS.into(), "linux".into());
    let r = solve(&snapshot(vec![p]), &catalog);
    assert!(
        !r.new_claims[0]
            .instance_types
            .contains(&"w.medium".to_string())
    );
    let p = pod("c", 3000, 512);
    let r = solve(&snapshot(vec![p]), &catalog);
    assert_eq!(
        r.new_claims[0].instance_types[0], "w.medium",
        "cheapest without a selector"
    );
}

#[test]
fn capacity_type_and_zone_requirements_narrow_offerings_and_price() {
    let mut p = pod("a", 500, 512);
    p.node_selector
        .insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
    p.node_selector.insert(labels::ZONE.into(), "zone-b".into());
    let r = solve(&snapshot(vec![p]), &small_catalog());
    let c = &r.new_claims[0];
    assert_eq!(c.capacity_types, ["on-demand"]);
    assert_eq!(c.zones, ["zone-b"]);
    assert!((c.price - 0.1).abs() < 1e-9);
    assert_eq!(
        c.labels.get(labels::ZONE).map(String::as_str),
        Some("zone-b")
    );
    // A zone nobody offers.
    let mut q = pod("q", 500, 512);
    q.node_selector.insert(labels::ZONE.into(), "zone-z".into());
    let r = solve(&snapshot(vec![q]), &small_catalog());
    assert!(reason_of(&r, "default/q").contains("zone-z"));
}

#[test]
fn unavailable_offerings_are_not_used() {
    let mut catalog = small_catalog();
    for it in &mut catalog.instance_types {
        for o in &mut it.offerings {
            if o.capacity_type == "spot" {
                o.available = false;
            }
        }
    }
    let r = solve(&snapshot(vec![pod("a", 500, 512)]), &catalog);
    assert_eq!(r.new_claims[0].capacity_types, ["on-demand"]);
    assert!((r.new_claims[0].price - 0.1).abs() < 1e-9);
}

#[test]
fn too_big_pod_gets_an_actionable_reason() {
    let r = solve(&snapshot(vec![pod("big", 200_000, 1024)]), &small_catalog());
    assert_eq!(
        reason_of(&r, "default/big"),
        "no instance type in NodePool default fits cpu=200 (largest allows cpu=16)"
    );
    let mut s = snapshot(vec![pod("big", 200_000, 1024)]);
    s.node_pools.clear();
    assert_eq!(
        reason_of(&solve(&s, &small_catalog()), "default/big"),
        "no NodePool exists"
    );
}

#[test]
fn reasons_list_every_pool() {
    let mut s = snapshot(vec![pod("big", 20_000, 1024)]);
    let mut gpu = node_pool("gpu");
    gpu.taints.push(taint("nvidia.com/gpu", "true"));
    s.node_pools.push(gpu);
    let r = solve(&s, &small_catalog());
    assert_eq!(
        reason_of(&r, "default/big"),
        "incompatible with NodePool gpu: did not tolerate nvidia.com/gpu=true:NoSchedule; \
         no instance type in NodePool default fits cpu=20 (largest allows cpu=16)"
    );
}

#[test]
fn required_node_affinity_and_invalid_requirements() {
    let mut p = pod("a", 500, 512);
    p.required_node_affinity
        .push(crate::model::NodeSelectorTerm {
            requirements: vec![requirement(
                labels::INSTANCE_FAMILY,
                Operator::NotIn,
                &["m"],
            )],
        });
    let mut catalog = small_catalog();
    catalog
        .instance_types
        .push(instance_type("c.large", 8, 16, 110, 0.5));
    let r = solve(&snapshot(vec![p.clone()]), &catalog);
    assert_eq!(r.new_claims[0].instance_types, ["c.large"]);
    p.required_node_affinity[0].requirements = vec![InputRequirement {
        key: "karpenter.k8s.aws/instance-cpu".into(),
        operator: Operator::Gt,
        values: vec!["four".into()],
        min_values: None,
    }];
    let r = solve(&snapshot(vec![p]), &catalog);
    assert!(reason_of(&r, "default/a").contains("not an integer"));
}

#[test]
fn daemon_set_and_terminated_pods_are_not_provisioned_for() {
    let mut d = pod("ds-pod", 100, 100);
    d.owner = Some(crate::model::OwnerRef {
        kind: "DaemonSet".into(),
        name: "x".into(),
        controller: true,
    });
    let mut done = pod("done", 100, 100);
    done.phase = crate::model::PodPhase::Succeeded;
    let s = snapshot(vec![d, done]);
    let (catalog, options) = (small_catalog(), PlanOptions::default());
    let sch = Scheduler::new(&s, &catalog, &options);
    assert_eq!(sch.pending_count(), 0);
}

#[test]
fn claims_are_listed_with_at_most_60_types_cheapest_first() {
    let catalog = Catalog {
        instance_types: (0..80)
            .map(|i| instance_type(&format!("t{i:02}.x"), 2 + i, 4 + 2 * i, 110, 1.0 + i as f64))
            .collect(),
        notes: vec![],
    };
    let r = solve(&snapshot(vec![pod("a", 100, 100)]), &catalog);
    let types = &r.new_claims[0].instance_types;
    assert_eq!(types.len(), 60);
    assert_eq!(types[0], "t00.x");
    assert_eq!(types[59], "t59.x");
}

#[test]
fn cost_improvement_merges_claims_when_cheaper() {
    // Prices make one m.xlarge (0.8) cheaper than m.large + m.large... equal here, so use a
    // catalog where the big type is a bargain.
    let catalog = Catalog {
        instance_types: vec![
            instance_type("s.medium", 4, 8, 110, 0.3),
            instance_type("s.large", 8, 16, 110, 0.45),
        ],
        notes: vec![],
    };
    // First fit opens s.large for the 5-vCPU pod, then the 3.5 pod does not fit beside it.
    let r = solve(
        &snapshot(vec![pod("a", 5000, 1024), pod("b", 3500, 1024)]),
        &catalog,
    );
    assert_eq!(r.new_claims.len(), 2);
    let cost = r.cost();
    assert!(r.lower_bound <= cost + 1e-9);
    assert!(r.lower_bound > 0.0);
}

#[test]
fn simulate_places_displaced_pods_without_the_removed_node() {
    let mut s = snapshot(vec![]);
    s.nodes.push(node("n1", 4, 8));
    s.nodes.push(node("n2", 4, 8));
    s.pods.push(bound_pod("x", 1000, 1024, "n1"));
    s.pods.push(bound_pod("y", 3500, 1024, "n2"));
    s.pods.push(bound_pod("z", 2500, 1024, "n2"));
    let catalog = small_catalog();
    let options = PlanOptions::default();
    let sch = Scheduler::new(&s, &catalog, &options);
    let x = s.pods[0].clone();
    let r = sch.simulate(&["n1"], &[&x]);
    assert!(r.existing.is_empty(), "n2 is full: {r:#?}");
    assert_eq!(r.new_claims.len(), 1);
    let y = s.pods[2].clone();
    let r = sch.simulate(&["n2"], &[&y]);
    assert_eq!(
        r.existing,
        [("n1".to_string(), vec!["default/z".to_string()])]
    );
    // Calling again gives the same answer (no state leaks between simulations).
    assert_eq!(sch.simulate(&["n2"], &[&y]), r);
}

#[test]
fn simulate_placement_agrees_with_simulate_except_on_claim_cost() {
    let mut s = snapshot(vec![]);
    s.nodes.push(node("n1", 4, 8));
    s.nodes.push(node("n2", 4, 8));
    s.nodes.push(node("n3", 4, 8));
    for (i, cpu) in [1500, 1200, 900, 700, 500, 300].into_iter().enumerate() {
        let on = ["n1", "n2", "n3"][i % 3];
        s.pods.push(bound_pod(&format!("p{i}"), cpu, 1024, on));
    }
    let catalog = small_catalog();
    let options = PlanOptions::default();
    let sch = Scheduler::new(&s, &catalog, &options);
    let pods: Vec<crate::model::Pod> = s.pods.clone();
    for removed in [&["n1"][..], &["n1", "n2"], &["n1", "n2", "n3"]] {
        let displaced: Vec<&crate::model::Pod> = pods
            .iter()
            .filter(|p| removed.contains(&p.node_name.as_deref().unwrap_or("")))
            .collect();
        let full = sch.simulate(removed, &displaced);
        let placement = sch.simulate_placement(removed, &displaced);
        assert_eq!(placement.existing, full.existing, "removed {removed:?}");
        assert_eq!(placement.unschedulable, full.unschedulable);
        assert_eq!(placement.new_claims.is_empty(), full.new_claims.is_empty());
    }
}

#[test]
fn preference_policy_ignore_drops_preferred_node_affinity() {
    let mut p = pod("a", 500, 512);
    p.preferred_node_affinity.push(crate::model::PreferredTerm {
        weight: 10,
        term: crate::model::NodeSelectorTerm {
            requirements: vec![requirement(labels::ZONE, Operator::In, &["zone-b"])],
        },
    });
    let r = solve(&snapshot(vec![p.clone()]), &small_catalog());
    assert_eq!(r.new_claims[0].zones, ["zone-b"], "preference honoured");
    let options = PlanOptions {
        preference_policy: crate::model::PreferencePolicy::Ignore,
        ..PlanOptions::default()
    };
    let r = solve_with(&snapshot(vec![p]), &small_catalog(), &options);
    assert_eq!(r.new_claims[0].zones, ["zone-a", "zone-b"]);
}

#[test]
fn daemon_set_for_another_architecture_does_not_count_on_a_type() {
    let mut catalog = small_catalog();
    let mut arm = instance_type("g.small", 2, 4, 110, 0.09);
    arm.labels.insert(labels::ARCH.into(), "arm64".into());
    catalog.instance_types.push(arm);
    let mut s = snapshot(vec![pod("a", 1500, 1024)]);
    let mut ds = daemon_set("arm-agent", 600, 256);
    ds.template
        .node_selector
        .insert(labels::ARCH.into(), "arm64".into());
    s.daemon_sets.push(ds);
    let r = solve(&s, &catalog);
    // The arm64 type carries the agent (1.5 + 0.6 > 2); the amd64 m.small does not.
    assert_eq!(r.new_claims[0].instance_types[0], "m.small", "{r:#?}");
    assert!(
        !r.new_claims[0]
            .instance_types
            .contains(&"g.small".to_string())
    );
}

#[test]
fn deleting_node_pools_launch_nothing() {
    let mut s = snapshot(vec![pod("a", 100, 100)]);
    s.node_pools[0].deletion_time = Some(1);
    let r = solve(&s, &small_catalog());
    assert_eq!(
        reason_of(&r, "default/a"),
        "NodePool default is being deleted"
    );
}

#[test]
fn initialized_nodes_are_tried_before_starting_ones() {
    let mut s = snapshot(vec![pod("a", 100, 100)]);
    let mut booting = node("a-booting", 4, 8);
    booting
        .labels
        .insert(labels::NODEPOOL.into(), "default".into());
    let mut ready = node("b-ready", 4, 8);
    ready
        .labels
        .insert(labels::NODEPOOL.into(), "default".into());
    ready
        .labels
        .insert(labels::INITIALIZED.into(), "true".into());
    s.nodes = vec![booting, ready];
    let r = solve(&s, &small_catalog());
    assert_eq!(
        r.existing,
        [("b-ready".to_string(), vec!["default/a".to_string()])]
    );
}

#[test]
fn a_claim_is_split_when_smaller_nodes_are_cheaper() {
    // One 16-vCPU type is a bad deal next to two 8-vCPU ones.
    let catalog = Catalog {
        instance_types: vec![
            instance_type("s.large", 8, 16, 110, 0.2),
            instance_type("s.xlarge", 16, 32, 110, 1.0),
        ],
        notes: vec![],
    };
    let r = solve(
        &snapshot(vec![pod("a", 6000, 1024), pod("b", 6000, 1024)]),
        &catalog,
    );
    assert_eq!(r.new_claims.len(), 2, "{r:#?}");
    assert!(
        r.new_claims
            .iter()
            .all(|c| c.instance_types[0] == "s.large")
    );
    assert!(r.lower_bound <= r.cost() + 1e-9);
}

#[test]
fn cost_improvement_never_moves_pods_across_node_pools() {
    let mut s = snapshot(vec![pod("big", 1000, 1024), pod("web", 100, 100)]);
    let mut arm = node_pool("arm");
    arm.weight = 10;
    arm.requirements
        .push(requirement(labels::ARCH, Operator::In, &["arm64"]));
    s.node_pools.push(arm);
    s.pods[1]
        .node_selector
        .insert(labels::ARCH.into(), "amd64".into());
    let mut catalog = small_catalog();
    let mut g = instance_type("g.small", 2, 4, 110, 0.09);
    g.labels.insert(labels::ARCH.into(), "arm64".into());
    catalog.instance_types.push(g);
    let r = solve(&s, &catalog);
    let pool_of = |p: &str| {
        r.new_claims
            .iter()
            .find(|c| c.pods.contains(&p.to_string()))
            .map(|c| c.node_pool.as_str())
    };
    assert_eq!(pool_of("default/big"), Some("arm"));
    assert_eq!(pool_of("default/web"), Some("default"));
}

#[test]
fn lower_bound_counts_nodes_that_anti_affinity_forces() {
    let term = crate::model::PodAffinityTerm {
        label_selector: Some({
            let mut s = crate::model::LabelSelector::default();
            s.match_labels.insert("app".into(), "web".into());
            s
        }),
        namespaces: vec![],
        namespace_selector: None,
        topology_key: labels::HOSTNAME.into(),
        match_label_keys: vec![],
        mismatch_label_keys: vec![],
    };
    let pods: Vec<_> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("web-{i}"), 100, 100);
            p.labels.insert("app".into(), "web".into());
            p.pod_anti_affinity.push(term.clone());
            p
        })
        .collect();
    let r = solve(&snapshot(pods), &small_catalog());
    assert_eq!(r.new_claims.len(), 3, "{r:#?}");
    // Three nodes at least: three times the cheapest node (m.small spot, 0.04).
    assert!(
        r.lower_bound >= 3.0 * 0.04 * (1.0 - 1e-6),
        "{}",
        r.lower_bound
    );
    assert!(r.lower_bound <= r.cost() + 1e-9);
}

#[test]
fn daemon_set_selecting_a_provider_label_counts_only_on_types_carrying_it() {
    // A 1.5-vCPU agent that runs only on the `c` family: the cheapest type (c.small) has no
    // room left for a 1-vCPU pod, an m.small does (the agent does not run there).
    let mut catalog = small_catalog();
    catalog
        .instance_types
        .push(instance_type("c.small", 2, 4, 110, 0.09));
    let mut s = snapshot(vec![pod("a", 1000, 256)]);
    let mut ds = daemon_set("c-agent", 1500, 128);
    ds.template.required_node_affinity = vec![crate::model::NodeSelectorTerm {
        requirements: vec![requirement(labels::INSTANCE_FAMILY, Operator::In, &["c"])],
    }];
    s.daemon_sets.push(ds);
    let r = solve(&s, &catalog);
    assert_eq!(r.new_claims.len(), 1, "{r:#?}");
    assert_eq!(r.new_claims[0].instance_types[0], "m.small", "{r:#?}");
    assert!(
        !r.new_claims[0]
            .instance_types
            .contains(&"c.small".to_string())
    );
    // Without the agent the c.small is the cheapest.
    s.daemon_sets.clear();
    assert_eq!(
        solve(&s, &catalog).new_claims[0].instance_types[0],
        "c.small"
    );
}

/// small_catalog with the custom label `example.com/rack` on m.small (r1) and m.large (r2), as
/// an `--instance-types` catalog file's `labels` gives them.
fn racked_catalog() -> Catalog {
    let mut catalog = small_catalog();
    for (t, rack) in [("m.small", "r1"), ("m.large", "r2")] {
        catalog
            .instance_types
            .iter_mut()
            .find(|it| it.name == t)
            .expect("type")
            .labels
            .insert("example.com/rack".into(), rack.into());
    }
    catalog
}

#[test]
fn node_selector_on_a_custom_catalog_label_filters_types() {
    let mut p = pod("a", 500, 256);
    p.node_selector
        .insert("example.com/rack".into(), "r2".into());
    let s = snapshot(vec![p]);
    let r = solve(&s, &racked_catalog());
    assert!(r.unschedulable.is_empty(), "{r:#?}");
    assert_eq!(r.new_claims[0].instance_types, ["m.large"], "{r:#?}");
    // A value no type carries: no type matches, and the reason says so.
    let mut p = pod("b", 500, 256);
    p.node_selector
        .insert("example.com/rack".into(), "r9".into());
    let r = solve(&snapshot(vec![p]), &racked_catalog());
    let reason = reason_of(&r, "default/b");
    assert!(reason.contains("example.com/rack"), "{reason}");
    // A label no type of the catalog carries stays undefined, as Karpenter has it.
    let mut p = pod("c", 500, 256);
    p.node_selector.insert("example.com/row".into(), "x".into());
    let r = solve(&snapshot(vec![p]), &racked_catalog());
    assert!(reason_of(&r, "default/c").contains("example.com/row"));
}

#[test]
fn daemon_set_selecting_a_custom_catalog_label_counts_only_on_types_carrying_it() {
    // A 1.5-vCPU agent on rack r1 (only m.small carries it): a 1-vCPU pod no longer fits an
    // m.small, and fits an m.medium, where the agent does not run.
    let mut s = snapshot(vec![pod("a", 1000, 256)]);
    let mut ds = daemon_set("rack-agent", 1500, 128);
    ds.template
        .node_selector
        .insert("example.com/rack".into(), "r1".into());
    s.daemon_sets.push(ds);
    let r = solve(&s, &racked_catalog());
    assert_eq!(r.new_claims[0].instance_types[0], "m.medium", "{r:#?}");
}

#[test]
fn preference_policy_ignore_drops_preferred_pod_affinity_and_anti_affinity() {
    // Pods of mixed shapes, each preferring to be apart from the others (and one preferring
    // to be with them). Under Ignore the plan is exactly the plan of the same pods without
    // those preferences: they constrain nothing, so cost improvement runs as usual.
    let mut rng = SplitMix(11);
    let mut plain = Vec::new();
    for k in 0..40 {
        let mut p = pod(
            &format!("p{k}"),
            rng.range(100, 3000),
            rng.range(128, 12_000),
        );
        p.labels.insert("app".into(), "web".into());
        plain.push(p);
    }
    let mut preferring = plain.clone();
    let term = crate::model::PodAffinityTerm {
        label_selector: Some(crate::model::LabelSelector {
            match_labels: [("app".to_string(), "web".to_string())].into(),
            match_expressions: Vec::new(),
        }),
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: labels::HOSTNAME.into(),
        match_label_keys: Vec::new(),
        mismatch_label_keys: Vec::new(),
    };
    for (k, p) in preferring.iter_mut().enumerate() {
        let w = crate::model::WeightedPodAffinityTerm {
            weight: 50,
            term: term.clone(),
        };
        if k == 0 {
            p.preferred_pod_affinity.push(w);
        } else {
            p.preferred_pod_anti_affinity.push(w);
        }
    }
    let ignore = PlanOptions {
        preference_policy: crate::model::PreferencePolicy::Ignore,
        ..PlanOptions::default()
    };
    let a = solve_with(&snapshot(preferring.clone()), &small_catalog(), &ignore);
    let b = solve_with(&snapshot(plain), &small_catalog(), &ignore);
    assert!(a.unschedulable.is_empty() && b.unschedulable.is_empty());
    assert_eq!(a.new_claims.len(), b.new_claims.len(), "{a:#?}\n{b:#?}");
    assert!(
        (a.cost() - b.cost()).abs() < 1e-9,
        "{} vs {}",
        a.cost(),
        b.cost()
    );
    // Respected, the anti-affinity spreads them over more nodes.
    let r = solve(&snapshot(preferring), &small_catalog());
    assert!(
        r.new_claims.len() > a.new_claims.len(),
        "{} nodes",
        r.new_claims.len()
    );
}

#[test]
fn pods_of_a_going_node_are_scheduled_as_if_pending() {
    // Karpenter's provisioner: pods on nodes being deleted (or disrupted) need a place before
    // they are evicted. Two ways a node is going: deleting, tainted karpenter.sh/disrupted (an
    // interruption or disruption); and a control where it is not.
    for case in 0..3 {
        let mut daemon = bound_pod("agent", 100, 64, "n1");
        daemon.owner = Some(crate::model::OwnerRef {
            kind: "DaemonSet".into(),
            name: "agent".into(),
            controller: true,
        });
        let mut leaving = bound_pod("leaving", 100, 64, "n1");
        leaving.deletion_time = Some(5);
        let mut s = snapshot(vec![
            bound_pod("web", 1000, 1024, "n1"),
            daemon,
            leaving,
            bound_pod("db", 500, 512, "n2"),
        ]);
        let mut n1 = node("n1", 4, 8);
        match case {
            0 => n1.deletion_time = Some(1),
            1 => n1.taints.push(taint(labels::DISRUPTED_TAINT, "")),
            2 => s.node_claims.push(NodeClaim {
                name: "default-abcde".into(),
                node_name: Some("n1".into()),
                deletion_time: Some(1),
                ..NodeClaim::default()
            }),
            _ => {}
        }
        s.nodes.push(n1);
        s.nodes.push(node("n2", 1, 2));
        let r = solve(&s, &small_catalog());
        if case == 2 {
            assert!(r.new_claims.is_empty() && r.existing.is_empty(), "{r:#?}");
            continue;
        }
        // Only the active, non-daemon pod moves; n2 is too small for it, so a claim is opened.
        assert_eq!(r.new_claims.len(), 1, "case {case}: {r:#?}");
        assert_eq!(r.new_claims[0].pods, ["default/web"], "case {case}");
        assert!(r.existing.is_empty(), "case {case}: {r:#?}");
    }
}

#[test]
fn pods_of_a_going_node_move_to_existing_room_first() {
    let mut s = snapshot(vec![bound_pod("web", 1000, 1024, "n1")]);
    let mut n1 = node("n1", 4, 8);
    n1.taints.push(taint(labels::DISRUPTED_TAINT, ""));
    s.nodes.push(n1);
    s.nodes.push(node("n2", 4, 8));
    let r = solve(&s, &small_catalog());
    assert!(r.new_claims.is_empty(), "{r:#?}");
    assert_eq!(
        r.existing,
        [("n2".to_string(), vec!["default/web".to_string()])]
    );
}
