use std::collections::BTreeMap;

use crate::labels::{CAPACITY_TYPE, HOSTNAME, ZONE};
use crate::model::{
    LabelSelector, Namespace, NodeInclusionPolicy, Operator, Pod, Requirement as InputRequirement,
    SelectorExpression, SelectorOperator, Taint, TaintEffect, WhenUnsatisfiable,
};
use crate::requirements::{Requirement, Requirements};
use crate::scheduling::test_util::*;

use super::*;

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn zone_counts(out: &Outcome, names: impl Iterator<Item = String>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for n in names {
        let z = out
            .domain_of(&n, ZONE)
            .unwrap_or_else(|| panic!("{n} has no single zone"));
        *m.entry(z).or_default() += 1;
    }
    m
}

fn names(prefix: &str, n: usize) -> impl Iterator<Item = String> + '_ {
    (0..n).map(move |i| format!("{prefix}-{i}"))
}

fn with_spread(mut p: Pod, c: crate::model::TopologySpreadConstraint) -> Pod {
    p.topology_spread.push(c);
    p
}

#[test]
fn zone_spread_balances_pods_across_zones() {
    let pods = pods(
        "web",
        7,
        |p| with_spread(p, spread(ZONE, 1, &[("app", "web")])),
        &[("app", "web")],
    );
    let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], pods), 10);
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    let counts = zone_counts(&out, names("web", 7));
    assert_eq!(
        counts.values().copied().collect::<Vec<_>>(),
        vec![3, 2, 2],
        "{counts:?}"
    );
}

#[test]
fn zone_spread_with_existing_pods_already_skewed_fills_the_emptier_zones() {
    let mut all = vec![];
    for i in 0..3 {
        all.push(bound(pod(&format!("old-{i}"), &[("app", "web")]), "n-a"));
    }
    all.extend(pods(
        "web",
        4,
        |p| with_spread(p, spread(ZONE, 1, &[("app", "web")])),
        &[("app", "web")],
    ));
    let nodes = vec![node("n-a", "us-east-1a")];
    let out = run(&snapshot(vec![pool("default", &ZONES)], nodes, all), 10);
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    let counts = zone_counts(&out, names("web", 4));
    // 3 already in a: the new pods go to b and c (2 each); a would exceed the skew.
    assert_eq!(counts.get("us-east-1a"), None, "{counts:?}");
    assert_eq!(counts.get("us-east-1b"), Some(&2));
    assert_eq!(counts.get("us-east-1c"), Some(&2));
}

#[test]
fn min_domains_larger_than_the_zones_leaves_extra_pods_unschedulable_with_a_reason() {
    let pods = pods(
        "web",
        5,
        |p| {
            let mut c = spread(ZONE, 1, &[("app", "web")]);
            c.min_domains = Some(4);
            with_spread(p, c)
        },
        &[("app", "web")],
    );
    let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], pods), 10);
    assert_eq!(out.placed(), 3);
    assert_eq!(out.unschedulable.len(), 2);
    let reason = &out.unschedulable[0].1;
    assert!(
        reason.contains("topology spread on topology.kubernetes.io/zone needs a 4th zone")
            && reason.contains("minDomains is 4")
            && reason.contains("allow 3"),
        "{reason}"
    );
}

#[test]
fn hostname_spread_puts_one_pod_per_node_with_max_skew_one() {
    let pods = pods(
        "web",
        4,
        |p| with_spread(p, spread(HOSTNAME, 1, &[("app", "web")])),
        &[("app", "web")],
    );
    let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], pods), 10);
    assert!(out.unschedulable.is_empty());
    assert_eq!(out.nodes.len(), 4);
    assert!(out.nodes.iter().all(|n| n.pods.len() == 1));
}

#[test]
fn hostname_spread_max_skew_two_packs_two_per_node() {
    let pods = pods(
        "web",
        4,
        |p| with_spread(p, spread(HOSTNAME, 2, &[("app", "web")])),
        &[("app", "web")],
    );
    let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], pods), 10);
    assert_eq!(out.nodes.len(), 2);
}

#[test]
fn capacity_type_spread_uses_any_node_label() {
    let mut np = pool("default", &ZONES);
    np.requirements.push(InputRequirement {
        key: CAPACITY_TYPE.into(),
        operator: Operator::In,
        values: vec!["spot".into(), "on-demand".into()],
        min_values: None,
    });
    let pods = pods(
        "w",
        4,
        |p| with_spread(p, spread(CAPACITY_TYPE, 1, &[("app", "w")])),
        &[("app", "w")],
    );
    let out = run(&snapshot(vec![np], vec![], pods), 10);
    let mut m = BTreeMap::new();
    for n in names("w", 4) {
        *m.entry(
            out.domain_of(&n, CAPACITY_TYPE)
                .expect("single capacity type"),
        )
        .or_insert(0) += 1;
    }
    assert_eq!(m.values().copied().collect::<Vec<_>>(), vec![2, 2]);
}

#[test]
fn self_affinity_in_one_batch_lands_in_one_zone() {
    let pods = pods(
        "db",
        5,
        |mut p| {
            p.pod_affinity.push(term(ZONE, &[("app", "db")]));
            p
        },
        &[("app", "db")],
    );
    let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], pods), 2);
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    let counts = zone_counts(&out, names("db", 5));
    assert_eq!(counts.len(), 1, "{counts:?}");
}

#[test]
fn affinity_to_a_pod_later_in_the_batch_is_retried_until_it_lands() {
    let mut follower = pod("follower", &[("app", "f")]);
    follower.pod_affinity.push(term(ZONE, &[("app", "leader")]));
    let mut leader = pod("leader", &[("app", "leader")]);
    leader.node_selector = labels(&[(ZONE, "us-east-1c")]);
    let out = run(
        &snapshot(
            vec![pool("default", &ZONES)],
            vec![],
            vec![follower, leader],
        ),
        10,
    );
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    assert_eq!(
        out.domain_of("follower", ZONE).as_deref(),
        Some("us-east-1c")
    );
}

#[test]
fn affinity_to_a_pod_that_exists_nowhere_is_unschedulable_with_a_reason() {
    let mut p = pod("lonely", &[("app", "x")]);
    p.pod_affinity.push(term(ZONE, &[("app", "ghost")]));
    let out = run(
        &snapshot(vec![pool("default", &ZONES)], vec![], vec![p]),
        10,
    );
    assert_eq!(
        out.reason("lonely"),
        Some(
            "pod affinity on topology.kubernetes.io/zone: no zone holds a pod matching app=ghost in namespace default"
        )
    );
}

#[test]
fn hostname_affinity_joins_the_node_of_a_bound_pod() {
    let mut p = pod("side", &[]);
    p.pod_affinity.push(term(HOSTNAME, &[("app", "main")]));
    let all = vec![bound(pod("main", &[("app", "main")]), "n2"), p];
    let out = run(
        &snapshot(
            vec![pool("default", &ZONES)],
            vec![node("n1", "us-east-1a"), node("n2", "us-east-1b")],
            all,
        ),
        10,
    );
    assert_eq!(out.node_of("side").map(|n| n.name.as_str()), Some("n2"));
}

#[test]
fn zone_anti_affinity_with_more_replicas_than_zones_leaves_extras_unschedulable() {
    let pods = pods(
        "db",
        5,
        |mut p| {
            p.pod_anti_affinity.push(term(ZONE, &[("app", "db")]));
            p
        },
        &[("app", "db")],
    );
    let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], pods), 10);
    assert_eq!(out.placed(), 3);
    let counts = zone_counts(
        &out,
        out.nodes
            .iter()
            .flat_map(|n| n.pods.iter().map(|p| p.name.clone()))
            .collect::<Vec<_>>()
            .into_iter(),
    );
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert_eq!(out.unschedulable.len(), 2);
    assert_eq!(
        out.unschedulable[0].1,
        "pod anti-affinity on topology.kubernetes.io/zone: all 3 zones already hold a pod matching \
         app=db in namespace default (us-east-1a us-east-1b us-east-1c)"
    );
}

#[test]
fn hostname_anti_affinity_puts_each_replica_on_its_own_node() {
    let pods = pods(
        "web",
        6,
        |mut p| {
            p.pod_anti_affinity.push(term(HOSTNAME, &[("app", "web")]));
            p
        },
        &[("app", "web")],
    );
    let out = run(
        &snapshot(
            vec![pool("default", &ZONES)],
            vec![node("n1", "us-east-1a")],
            pods,
        ),
        10,
    );
    assert!(out.unschedulable.is_empty());
    assert_eq!(
        out.nodes.len(),
        6,
        "the existing node takes one, five new claims"
    );
    assert!(out.nodes.iter().all(|n| n.pods.len() == 1));
}

#[test]
fn inverse_anti_affinity_of_a_bound_pod_keeps_new_pods_out_of_its_zone() {
    let mut guard = pod("guard", &[("app", "guard")]);
    guard.pod_anti_affinity.push(term(ZONE, &[("app", "web")]));
    let mut all = vec![bound(guard, "n-a")];
    all.extend(pods("web", 4, |p| p, &[("app", "web")]));
    let out = run(
        &snapshot(
            vec![pool("default", &ZONES)],
            vec![node("n-a", "us-east-1a")],
            all,
        ),
        10,
    );
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    for n in names("web", 4) {
        let node = out.node_of(&n).expect("placed");
        assert_ne!(node.name, "n-a");
        assert!(
            !node.reqs.get(ZONE).is_some_and(|r| r.has("us-east-1a")),
            "{n} may land in zone a: {}",
            node.reqs
        );
    }
}

#[test]
fn inverse_anti_affinity_in_every_zone_blocks_with_a_reason() {
    let mut all = vec![];
    let mut nodes = vec![];
    for (i, z) in ZONES.iter().enumerate() {
        let mut guard = pod(&format!("guard-{i}"), &[("app", "guard")]);
        guard.pod_anti_affinity.push(term(ZONE, &[("app", "web")]));
        all.push(bound(guard, &format!("n{i}")));
        nodes.push(node(&format!("n{i}"), z));
    }
    all.push(pod("web-0", &[("app", "web")]));
    let out = run(&snapshot(vec![pool("default", &ZONES)], nodes, all), 10);
    let reason = out.reason("web-0").expect("unschedulable");
    assert!(
        reason.contains("pods with required anti-affinity to app=web"),
        "{reason}"
    );
    assert!(reason.contains("all 3 zones"), "{reason}");
}

#[test]
fn inverse_anti_affinity_of_pods_placed_in_the_same_plan_applies() {
    // Zone-pinned pods with anti-affinity go first; the plain pod they repel cannot follow.
    let mut all = vec![];
    for (i, z) in ZONES.iter().enumerate() {
        let mut p = pod(&format!("anti-{i}"), &[]);
        p.pod_anti_affinity.push(term(ZONE, &[("security", "s2")]));
        p.node_selector = labels(&[(ZONE, z)]);
        all.push(p);
    }
    all.push(pod("target", &[("security", "s2")]));
    let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], all), 10);
    assert_eq!(out.placed(), 3);
    assert!(out.reason("target").is_some());
}

#[test]
fn preferred_anti_affinity_is_relaxed_when_it_cannot_be_met() {
    let pods = pods(
        "web",
        4,
        |mut p| {
            p.preferred_pod_anti_affinity
                .push(weighted(50, term(ZONE, &[("app", "web")])));
            p
        },
        &[("app", "web")],
    );
    let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], pods), 10);
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    assert_eq!(out.placed(), 4);
}

#[test]
fn preferred_spread_that_cannot_be_met_still_schedules_the_pods() {
    // Zone b exists (an existing full node) but the NodePool only launches in zone a, where 4
    // matching pods already run: a ScheduleAnyway spread cannot be met, the pods still land.
    let mut all = vec![];
    for i in 0..4 {
        all.push(bound(pod(&format!("old-{i}"), &[("app", "web")]), "n-a"));
    }
    let mut full = node("n-b", "us-east-1b");
    full.taints.push(Taint {
        key: "full".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    all.extend(pods(
        "web",
        3,
        |p| {
            let mut c = spread(ZONE, 1, &[("app", "web")]);
            c.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
            with_spread(p, c)
        },
        &[("app", "web")],
    ));
    let out = run(
        &snapshot(
            vec![pool("default", &["us-east-1a"])],
            vec![node("n-a", "us-east-1a"), full],
            all,
        ),
        10,
    );
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    assert_eq!(out.placed(), 3);
}

#[test]
fn required_spread_that_cannot_be_met_is_unschedulable_with_the_counts() {
    let mut all = vec![];
    for i in 0..4 {
        all.push(bound(pod(&format!("old-{i}"), &[("app", "web")]), "n-a"));
    }
    all.push(with_spread(
        pod("web-0", &[("app", "web")]),
        spread(ZONE, 1, &[("app", "web")]),
    ));
    let out = run(
        &snapshot(
            vec![pool("default", &["us-east-1a"])],
            vec![node("n-a", "us-east-1a"), node("n-b", "us-east-1b")],
            all,
        ),
        0,
    );
    let reason = out.reason("web-0").expect("unschedulable");
    assert!(reason.starts_with("topology spread on topology.kubernetes.io/zone (maxSkew 1, pods matching app=web in namespace default)"), "{reason}");
    assert!(reason.contains("us-east-1a=4 us-east-1b=0"), "{reason}");
}

#[test]
fn namespace_selector_counts_pods_in_selected_namespaces() {
    let mut other = bound(pod("db-other", &[("app", "db")]), "n-a");
    other.namespace = "team-x".into();
    other.uid = "team-x/db-other".into();
    let mut p = pod("web", &[]);
    let mut t = term(ZONE, &[("app", "db")]);
    t.namespace_selector = Some(selector(&[("team", "x")]));
    p.pod_anti_affinity.push(t);
    let mut snap = snapshot(
        vec![pool("default", &ZONES)],
        vec![node("n-a", "us-east-1a")],
        vec![other, p],
    );
    snap.namespaces.push(Namespace {
        name: "team-x".into(),
        labels: labels(&[("team", "x")]),
    });
    let out = run(&snap, 0);
    let node = out.node_of("web").expect("placed");
    assert!(
        !node.reqs.get(ZONE).is_some_and(|r| r.has("us-east-1a")),
        "{}",
        node.reqs
    );

    // Without the namespace label the pod in team-x does not count: zone a is allowed.
    snap.namespaces[0].labels.clear();
    let out = run(&snap, 0);
    assert_eq!(out.domain_of("web", ZONE).as_deref(), Some("us-east-1a"));
}

#[test]
fn empty_namespace_selector_means_all_namespaces() {
    let mut other = bound(pod("db-other", &[("app", "db")]), "n-a");
    other.namespace = "elsewhere".into();
    other.uid = "elsewhere/db-other".into();
    let mut p = pod("web", &[]);
    let mut t = term(ZONE, &[("app", "db")]);
    t.namespace_selector = Some(LabelSelector::default());
    p.pod_anti_affinity.push(t);
    let snap = snapshot(
        vec![pool("default", &ZONES)],
        vec![node("n-a", "us-east-1a")],
        vec![other, p],
    );
    let out = run(&snap, 0);
    assert_ne!(out.domain_of("web", ZONE).as_deref(), Some("us-east-1a"));
}

#[test]
fn match_label_keys_only_count_pods_of_the_same_revision() {
    let mut all = vec![];
    for i in 0..3 {
        all.push(bound(
            pod(&format!("old-{i}"), &[("app", "web"), ("hash", "v1")]),
            "n-a",
        ));
    }
    all.extend(pods(
        "web",
        3,
        |p| {
            let mut c = spread(ZONE, 1, &[("app", "web")]);
            c.match_label_keys = vec!["hash".into()];
            with_spread(p, c)
        },
        &[("app", "web"), ("hash", "v2")],
    ));
    let out = run(
        &snapshot(
            vec![pool("default", &ZONES)],
            vec![node("n-a", "us-east-1a")],
            all,
        ),
        10,
    );
    let counts = zone_counts(&out, names("web", 3));
    // v1 pods in zone a do not count: the v2 pods spread over all three zones.
    assert_eq!(counts.len(), 3, "{counts:?}");
}

#[test]
fn mismatch_label_keys_exclude_pods_with_the_same_value() {
    let mut t = term(HOSTNAME, &[("app", "web")]);
    t.mismatch_label_keys = vec!["tenant".into()];
    let mut p = pod("web-new", &[("app", "web"), ("tenant", "a")]);
    p.pod_anti_affinity.push(t);
    // Same tenant on n1 does not repel; another tenant on n2 does.
    let all = vec![
        bound(pod("same", &[("app", "web"), ("tenant", "a")]), "n1"),
        bound(pod("other", &[("app", "web"), ("tenant", "b")]), "n2"),
        p,
    ];
    let snap = snapshot(
        vec![],
        vec![node("n2", "us-east-1a"), node("n1", "us-east-1a")],
        all,
    );
    let out = run(&snap, 10);
    assert_eq!(out.node_of("web-new").map(|n| n.name.as_str()), Some("n1"));
}

#[test]
fn node_taints_policy_honor_ignores_zones_the_pod_cannot_use() {
    // Zone c is only offered by a tainted pool. With Ignore (the default) it is an empty domain and
    // the global minimum stays 0, so a 3rd pod cannot go to a or b; with Honor it does not count.
    let taint = Taint {
        key: "gpu".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    };
    let mut tainted = pool("gpu", &["us-east-1c"]);
    tainted.taints.push(taint);
    for (policy, expect_placed) in [
        (NodeInclusionPolicy::Ignore, 2),
        (NodeInclusionPolicy::Honor, 3),
    ] {
        let pods = pods(
            "web",
            3,
            |p| {
                let mut c = spread(ZONE, 1, &[("app", "web")]);
                c.node_taints_policy = policy;
                with_spread(p, c)
            },
            &[("app", "web")],
        );
        let out = run(
            &snapshot(
                vec![
                    pool("default", &["us-east-1a", "us-east-1b"]),
                    tainted.clone(),
                ],
                vec![],
                pods,
            ),
            10,
        );
        assert_eq!(
            out.placed(),
            expect_placed,
            "{policy:?}: {:?}",
            out.unschedulable
        );
    }
}

#[test]
fn node_affinity_policy_decides_whether_pods_on_other_nodes_count() {
    // Pods of the same app run on non-ssd nodes in zone a. The new pods only use ssd nodes: with
    // Honor those pods do not count, with Ignore they do and zone a is avoided.
    let mut ssd = pool("ssd", &ZONES);
    ssd.labels = labels(&[("disk", "ssd")]);
    for (policy, a_allowed) in [
        (NodeInclusionPolicy::Honor, true),
        (NodeInclusionPolicy::Ignore, false),
    ] {
        let mut all = vec![];
        for i in 0..2 {
            all.push(bound(pod(&format!("old-{i}"), &[("app", "web")]), "n-a"));
        }
        all.extend(pods(
            "web",
            3,
            |mut p| {
                p.node_selector = labels(&[("disk", "ssd")]);
                let mut c = spread(ZONE, 1, &[("app", "web")]);
                c.node_affinity_policy = policy;
                with_spread(p, c)
            },
            &[("app", "web")],
        ));
        let out = run(
            &snapshot(vec![ssd.clone()], vec![node("n-a", "us-east-1a")], all),
            10,
        );
        let counts = zone_counts(&out, names("web", 3));
        assert_eq!(
            counts.contains_key("us-east-1a"),
            a_allowed,
            "{policy:?}: {counts:?}"
        );
    }
}

#[test]
fn spread_combined_with_anti_affinity_on_the_same_key_narrows_both() {
    // Each pod spreads on zone and repels the other app in zone b.
    let mut all = vec![bound(pod("other", &[("app", "other")]), "n-b")];
    all.extend(pods(
        "web",
        2,
        |mut p| {
            p.pod_anti_affinity.push(term(ZONE, &[("app", "other")]));
            with_spread(p, spread(ZONE, 1, &[("app", "web")]))
        },
        &[("app", "web")],
    ));
    let out = run(
        &snapshot(
            vec![pool("default", &ZONES)],
            vec![node("n-b", "us-east-1b")],
            all,
        ),
        10,
    );
    let counts = zone_counts(&out, names("web", 2));
    assert!(!counts.contains_key("us-east-1b"), "{counts:?}");
    assert_eq!(counts.len(), 2);
}

#[test]
fn unrecord_restores_counts() {
    let p = with_spread(
        pod("web-0", &[("app", "web")]),
        spread(ZONE, 1, &[("app", "web")]),
    );
    let q = with_spread(
        pod("web-1", &[("app", "web")]),
        spread(ZONE, 1, &[("app", "web")]),
    );
    let snap = snapshot(
        vec![pool("default", &ZONES)],
        vec![],
        vec![p.clone(), q.clone()],
    );
    let domains = universe(&snap);
    let excluded = BTreeSet::new();
    let pending = vec![&p, &q];
    let mut t = Topology::new(&TopologyInput {
        snapshot: &snap,
        pending: &pending,
        domains: &domains,
        excluded_nodes: &excluded,
    });
    let node = Requirements::from_iter([Requirement::is_in(ZONE, ["us-east-1a"])]);
    let open = Requirements::from_iter([Requirement::is_in(ZONE, ZONES)]);
    t.record(&p, &node, &[]);
    let after = t
        .add_requirements(&q, &Requirements::new(), &open)
        .expect("a zone");
    assert_eq!(
        after.get(ZONE).and_then(Requirement::single_value),
        Some("us-east-1b")
    );
    t.unrecord(&p, &node, &[]);
    let back = t
        .add_requirements(&q, &Requirements::new(), &open)
        .expect("a zone");
    assert_eq!(
        back.get(ZONE).and_then(Requirement::single_value),
        Some("us-east-1a")
    );
}

#[test]
fn pods_with_equal_constraints_share_groups() {
    let pods = pods(
        "web",
        50,
        |p| with_spread(p, spread(ZONE, 1, &[("app", "web")])),
        &[("app", "web")],
    );
    let snap = snapshot(vec![pool("default", &ZONES)], vec![], pods);
    let out = run(&snap, 100);
    assert_eq!(out.topology.group_count(), (1, 0));
}

#[test]
fn excluded_nodes_do_not_count() {
    let mut all = vec![];
    for i in 0..3 {
        all.push(bound(pod(&format!("old-{i}"), &[("app", "web")]), "n-a"));
    }
    let p = with_spread(
        pod("web-0", &[("app", "web")]),
        spread(ZONE, 1, &[("app", "web")]),
    );
    all.push(p.clone());
    let snap = snapshot(
        vec![pool("default", &ZONES)],
        vec![node("n-a", "us-east-1a")],
        all,
    );
    let domains = universe(&snap);
    let pending = vec![&p];
    let open = Requirements::from_iter([Requirement::is_in(ZONE, ["us-east-1a"])]);
    let build = |excluded: &BTreeSet<String>| {
        Topology::new(&TopologyInput {
            snapshot: &snap,
            pending: &pending,
            domains: &domains,
            excluded_nodes: excluded,
        })
    };
    assert!(
        build(&BTreeSet::new())
            .add_requirements(&p, &Requirements::new(), &open)
            .is_err()
    );
    let excluded = BTreeSet::from(["n-a".to_string()]);
    assert!(
        build(&excluded)
            .add_requirements(&p, &Requirements::new(), &open)
            .is_ok()
    );
}

#[test]
fn selector_expressions_and_missing_selectors() {
    let mut p = pod("web", &[("tier", "front")]);
    let mut c = spread(ZONE, 1, &[]);
    c.label_selector = Some(LabelSelector {
        match_labels: Default::default(),
        match_expressions: vec![SelectorExpression {
            key: "tier".into(),
            operator: SelectorOperator::In,
            values: vec!["front".into(), "back".into()],
        }],
    });
    p.topology_spread.push(c);
    // An affinity term with no selector matches nothing: unschedulable.
    let mut q = pod("q", &[]);
    let mut t = term(ZONE, &[]);
    t.label_selector = None;
    q.pod_affinity.push(t);
    let out = run(
        &snapshot(vec![pool("default", &ZONES)], vec![], vec![p, q]),
        10,
    );
    assert!(out.reason("web").is_none());
    assert!(
        out.reason("q")
            .expect("unschedulable")
            .contains("no labelSelector")
    );
}

#[test]
fn pods_unknown_to_the_topology_still_get_their_constraints() {
    let known = with_spread(
        pod("web-0", &[("app", "web")]),
        spread(ZONE, 1, &[("app", "web")]),
    );
    let snap = snapshot(vec![pool("default", &ZONES)], vec![], vec![known.clone()]);
    let domains = universe(&snap);
    let pending = vec![&known];
    let excluded = BTreeSet::new();
    let mut t = Topology::new(&TopologyInput {
        snapshot: &snap,
        pending: &pending,
        domains: &domains,
        excluded_nodes: &excluded,
    });
    let a = Requirements::from_iter([Requirement::is_in(ZONE, ["us-east-1a"])]);
    t.record(&known, &a, &[]);
    let mut stranger = pod("stranger", &[("app", "web")]);
    stranger
        .pod_anti_affinity
        .push(term(ZONE, &[("app", "web")]));
    let err = t
        .add_requirements(&stranger, &Requirements::new(), &a)
        .expect_err("zone a is taken");
    assert!(
        err.to_string().contains("us-east-1a already holds"),
        "{err}"
    );
}

#[test]
fn identity_ignores_labels_no_selector_looks_at() {
    let mk = |name: &str, app: &str| {
        let mut p = pod(
            name,
            &[("app", app), ("statefulset.kubernetes.io/pod-name", name)],
        );
        p.pod_anti_affinity.push(term(HOSTNAME, &[("app", "db")]));
        p.preferred_pod_anti_affinity
            .push(weighted(10, term(ZONE, &[("app", "db")])));
        p
    };
    let (a, b, c) = (mk("db-0", "db"), mk("db-1", "db"), mk("other-0", "other"));
    let snap = snapshot(
        vec![pool("default", &ZONES)],
        vec![],
        vec![a.clone(), b.clone(), c.clone()],
    );
    let domains = universe(&snap);
    let pending = vec![&a, &b, &c];
    let excluded = BTreeSet::new();
    let t = Topology::new(&TopologyInput {
        snapshot: &snap,
        pending: &pending,
        domains: &domains,
        excluded_nodes: &excluded,
    });
    assert_eq!(t.identity(&a), t.identity(&b));
    // `other` is not selected by the anti-affinity: a different identity.
    assert_ne!(t.identity(&a), t.identity(&c));
    // A relaxed copy is a different state.
    let mut relaxed = a.clone();
    assert!(crate::scheduling::preferences::Preferences::default().relax(&mut relaxed));
    assert_ne!(t.identity(&a), t.identity(&relaxed));
}

/// Builds a topology over `pods` (all pending) with the default pool and `nodes`.
fn topology_for(nodes: Vec<crate::model::Node>, all: &[Pod]) -> Topology {
    let snap = snapshot(vec![pool("default", &ZONES)], nodes, all.to_vec());
    let domains = universe(&snap);
    let pending: Vec<&Pod> = all.iter().filter(|p| p.is_pending()).collect();
    Topology::new(&TopologyInput {
        snapshot: &snap,
        pending: &pending,
        domains: &domains,
        excluded_nodes: &BTreeSet::new(),
    })
}

fn host(h: &str) -> Requirements {
    Requirements::from_iter([
        Requirement::is_in(HOSTNAME, [h]),
        Requirement::is_in(ZONE, ["us-east-1a"]),
    ])
}

#[test]
fn reasons_name_the_node_and_what_it_holds() {
    let mut a = pod("web-0", &[("app", "web")]);
    a.topology_spread
        .push(spread(HOSTNAME, 1, &[("app", "web")]));
    let mut b = a.clone();
    b.name = "web-1".into();
    b.uid = "default/web-1".into();
    let mut t = topology_for(vec![], &[a.clone(), b.clone()]);
    t.register(HOSTNAME, "h1");
    t.record(&a, &host("h1"), &[]);
    let e = t
        .add_requirements(&b, &Requirements::new(), &host("h1"))
        .expect_err("h1 is full");
    assert!(e.is_permanent());
    assert_eq!(
        e.to_string(),
        "topology spread on kubernetes.io/hostname (maxSkew 1, pods matching app=web in namespace \
         default): node h1 already holds 1 and the emptiest holds 0"
    );
    // A fresh node is fine.
    assert!(
        t.add_requirements(&b, &Requirements::new(), &host("h2"))
            .is_ok()
    );
}

#[test]
fn affinity_reason_says_where_the_matching_pods_are() {
    let leader = pod("leader", &[("app", "leader")]);
    let mut f = pod("follower", &[]);
    f.pod_affinity.push(term(HOSTNAME, &[("app", "leader")]));
    let mut t = topology_for(vec![], &[leader.clone(), f.clone()]);
    t.register(HOSTNAME, "h1");
    t.record(&leader, &host("h1"), &[]);
    let e = t
        .add_requirements(&f, &Requirements::new(), &host("h2"))
        .expect_err("not with the leader");
    assert!(!e.is_permanent(), "a leader may still come to h2");
    assert_eq!(
        e.to_string(),
        "pod affinity on kubernetes.io/hostname: pods matching app=leader in namespace default are \
         on 1 other node(s), not on h2"
    );
    assert!(
        t.add_requirements(&f, &Requirements::new(), &host("h1"))
            .is_ok()
    );
}

#[test]
fn inverse_reason_names_the_other_pods_term() {
    let mut guard = pod("guard", &[("app", "guard")]);
    guard
        .pod_anti_affinity
        .push(term(HOSTNAME, &[("app", "web")]));
    let web = pod("web-0", &[("app", "web")]);
    let mut t = topology_for(vec![], &[guard.clone(), web.clone()]);
    t.register(HOSTNAME, "h1");
    t.record(&guard, &host("h1"), &[]);
    let e = t
        .add_requirements(&web, &Requirements::new(), &host("h1"))
        .expect_err("guarded");
    assert!(e.is_permanent());
    assert_eq!(
        e.to_string(),
        "pod anti-affinity on kubernetes.io/hostname: node h1 already holds pods with required \
         anti-affinity to app=web in namespace default (which selects this pod)"
    );
}

#[test]
fn zone_spread_rejections_are_not_permanent() {
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            with_spread(
                pod(&format!("w-{i}"), &[("app", "w")]),
                spread(ZONE, 1, &[("app", "w")]),
            )
        })
        .collect();
    let mut t = topology_for(vec![], &pods);
    let a = Requirements::from_iter([Requirement::is_in(ZONE, ["us-east-1a"])]);
    t.record(&pods[0], &a, &[]);
    t.record(&pods[1], &a, &[]);
    let mut third = pods[0].clone();
    third.uid = "default/w-0".into();
    let e = t
        .add_requirements(&third, &Requirements::new(), &a)
        .expect_err("skew");
    assert!(
        !e.is_permanent(),
        "other zones may fill up and raise the minimum"
    );
}

#[test]
fn zones_only_existing_nodes_have_count_only_when_those_nodes_pass_the_filter() {
    // The ssd pool launches in a and b; an existing non-ssd node is the only thing in zone c.
    // The pods select ssd nodes, so with nodeAffinityPolicy Honor zone c is not a domain of
    // their spread (it would otherwise stay empty and hold the minimum at 0).
    let mut ssd = pool("ssd", &["us-east-1a", "us-east-1b"]);
    ssd.labels = labels(&[("disk", "ssd")]);
    let mk = || {
        pods(
            "web",
            4,
            |mut p| {
                p.node_selector = labels(&[("disk", "ssd")]);
                with_spread(p, spread(ZONE, 1, &[("app", "web")]))
            },
            &[("app", "web")],
        )
    };
    let out = run(
        &snapshot(vec![ssd.clone()], vec![node("other", "us-east-1c")], mk()),
        10,
    );
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    assert_eq!(zone_counts(&out, names("web", 4)).len(), 2);

    // With an ssd node in zone c, c is a domain: one pod per zone, then the minimum (0 in c,
    // where no new node can launch and the node is full) blocks the rest.
    let mut c = node("ssd-c", "us-east-1c");
    c.labels.insert("disk".into(), "ssd".into());
    let out = run(&snapshot(vec![ssd], vec![c], mk()), 0);
    assert_eq!(out.placed(), 2, "{:?}", out.unschedulable);
}

#[test]
fn node_affinity_policy_ignore_counts_zones_the_pod_cannot_use_for_the_minimum() {
    // Pods restricted to zone a, spreading over zones: with Ignore, empty b and c hold the
    // minimum at 0 (as kube-scheduler counts), so only one pod fits; with Honor all do.
    for (policy, placed) in [
        (NodeInclusionPolicy::Ignore, 1),
        (NodeInclusionPolicy::Honor, 3),
    ] {
        let pods = pods(
            "web",
            3,
            |mut p| {
                p.node_selector = labels(&[(ZONE, "us-east-1a")]);
                let mut c = spread(ZONE, 1, &[("app", "web")]);
                c.node_affinity_policy = policy;
                with_spread(p, c)
            },
            &[("app", "web")],
        );
        let out = run(&snapshot(vec![pool("default", &ZONES)], vec![], pods), 10);
        assert_eq!(out.placed(), placed, "{policy:?}: {:?}", out.unschedulable);
    }
}
