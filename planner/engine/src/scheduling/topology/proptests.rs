//! Property: no placement ever violates a required constraint, checked independently from the
//! final placements (recomputing counts from scratch), over random workloads.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::labels::{HOSTNAME, ZONE};
use crate::model::Pod;
use crate::scheduling::test_util::*;

#[derive(Clone, Copy, Debug)]
enum Rule {
    None,
    Spread { key: &'static str, skew: i32 },
    Anti(&'static str),
    Affinity(&'static str),
}

fn rule() -> impl Strategy<Value = Rule> {
    prop_oneof![
        Just(Rule::None),
        (1..3i32).prop_map(|skew| Rule::Spread { key: ZONE, skew }),
        (1..3i32).prop_map(|skew| Rule::Spread {
            key: HOSTNAME,
            skew
        }),
        Just(Rule::Anti(ZONE)),
        Just(Rule::Anti(HOSTNAME)),
        Just(Rule::Affinity(ZONE)),
        Just(Rule::Affinity(HOSTNAME)),
    ]
}

const ALL_ZONES: [&str; 4] = ["z-a", "z-b", "z-c", "z-d"];

fn apply(rule: Rule, mut p: Pod, app: &str) -> Pod {
    match rule {
        Rule::None => {}
        Rule::Spread { key, skew } => p.topology_spread.push(spread(key, skew, &[("app", app)])),
        Rule::Anti(key) => p.pod_anti_affinity.push(term(key, &[("app", app)])),
        Rule::Affinity(key) => p.pod_affinity.push(term(key, &[("app", app)])),
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn no_placement_violates_a_required_constraint(
        zones in 2..5usize,
        capacity in 1..5usize,
        deployments in prop::collection::vec((rule(), 1..10usize, 0..3usize), 1..4),
        existing in 0..3usize,
    ) {
        let zone_names = &ALL_ZONES[..zones];
        let nodes: Vec<_> = (0..existing).map(|i| node(&format!("n{i}"), zone_names[i % zones])).collect();
        let mut all = Vec::new();
        for (d, (rule, replicas, bound_n)) in deployments.iter().enumerate() {
            let app = format!("d{d}");
            // Bound replicas respect the rule themselves: one per existing node at most, and
            // for anti-affinity on zone one per zone.
            if existing > 0 {
                let max_bound = match rule {
                    Rule::Anti(ZONE) => existing.min(zones),
                    _ => existing,
                };
                for b in 0..(*bound_n).min(max_bound) {
                    all.push(bound(apply(*rule, pod(&format!("{app}-old-{b}"), &[("app", &app)]), &app), &format!("n{b}")));
                }
            }
            for r in 0..*replicas {
                all.push(apply(*rule, pod(&format!("{app}-{r}"), &[("app", &app)]), &app));
            }
        }
        let snap = snapshot(vec![pool("default", zone_names)], nodes, all.clone());
        let out = run(&snap, capacity);

        // Where every pod is: bound pods on their node, placed pods on theirs.
        let node_zone: BTreeMap<String, Option<String>> = out
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.domain(ZONE)))
            .collect();
        for (d, (rule, _, _)) in deployments.iter().enumerate() {
            let app = format!("d{d}");
            let mut per_node: BTreeMap<String, i32> = BTreeMap::new();
            let mut per_zone: BTreeMap<String, i32> = zone_names.iter().map(|z| (z.to_string(), 0)).collect();
            let mut new_nodes = Vec::new();
            let mut multi_zone_affinity = Vec::new();
            for p in all.iter().filter(|p| p.labels.get("app") == Some(&app)) {
                let node = match &p.node_name {
                    Some(n) => n.clone(),
                    None => match out.node_of(&p.name) {
                        Some(n) => {
                            new_nodes.push(n.name.clone());
                            n.name.clone()
                        }
                        None => continue,
                    },
                };
                *per_node.entry(node.clone()).or_default() += 1;
                if let Some(Some(z)) = node_zone.get(&node) {
                    *per_zone.entry(z.clone()).or_default() += 1;
                } else if matches!(rule, Rule::Spread { key: ZONE, .. } | Rule::Anti(ZONE)) && p.node_name.is_none() {
                    prop_assert!(false, "{} placed without a single zone", p.name);
                } else if matches!(rule, Rule::Affinity(ZONE)) && p.node_name.is_none() {
                    multi_zone_affinity.push(node.clone());
                }
            }
            let new_zones: Vec<String> = new_nodes.iter().filter_map(|n| node_zone.get(n).cloned().flatten()).collect();
            match rule {
                Rule::None => {}
                Rule::Spread { key: ZONE, skew } => {
                    let min = per_zone.values().copied().min().unwrap_or(0);
                    for z in &new_zones {
                        prop_assert!(per_zone[z] - min <= *skew, "{app}: zone {z} {per_zone:?} skew {skew}");
                    }
                }
                Rule::Spread { skew, .. } => {
                    for n in &new_nodes {
                        prop_assert!(per_node[n] <= *skew, "{app}: node {n} {per_node:?}");
                    }
                }
                Rule::Anti(ZONE) => {
                    for z in &new_zones {
                        prop_assert_eq!(per_zone[z], 1, "{}: zone {} {:?}", app, z, per_zone);
                    }
                }
                Rule::Anti(_) => {
                    for n in &new_nodes {
                        prop_assert_eq!(per_node[n], 1, "{}: node {} {:?}", app, n, per_node);
                    }
                }
                // Every new pod shares its domain with another pod of its app, unless it is the
                // only pod of the app (it bootstrapped the domain).
                Rule::Affinity(ZONE) => {
                    let total: i32 = per_zone.values().sum();
                    // A claim that may land in several zones is fine when every one of them
                    // already holds a pod of the app.
                    for n in &multi_zone_affinity {
                        let claim = out.nodes.iter().find(|x| &x.name == n).expect("node");
                        for z in zone_names {
                            if claim.reqs.get(ZONE).is_none_or(|r| r.has(z)) {
                                prop_assert!(per_zone[*z] >= 1, "{app}: claim {n} may land in empty zone {z}");
                            }
                        }
                    }
                    for z in &new_zones {
                        prop_assert!(per_zone[z] >= 2 || total == 1, "{app}: zone {z} {per_zone:?}");
                    }
                }
                Rule::Affinity(_) => {
                    let total: i32 = per_node.values().sum();
                    for n in &new_nodes {
                        prop_assert!(per_node[n] >= 2 || total == 1, "{app}: node {n} {per_node:?}");
                    }
                }
            }
        }
    }
}
