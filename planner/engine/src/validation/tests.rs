//! One case per rule: the model that breaks it and the field the error must name.

use super::*;
use crate::catalog::InstanceType;
use crate::model::{Budget, NodeClaim, Operator, Pod};
use common::catalog::{Offering, Overhead};

fn pool(name: &str) -> NodePool {
    NodePool {
        name: name.to_string(),
        ..NodePool::default()
    }
}

fn pod(ns: &str, name: &str) -> Pod {
    Pod {
        namespace: ns.to_string(),
        name: name.to_string(),
        ..Pod::default()
    }
}

fn with_pool(f: impl FnOnce(&mut NodePool)) -> ClusterSnapshot {
    let mut p = pool("default");
    f(&mut p);
    ClusterSnapshot {
        node_pools: vec![p],
        ..ClusterSnapshot::default()
    }
}

fn requirement(key: &str, min_values: Option<u32>) -> Requirement {
    Requirement {
        key: key.to_string(),
        operator: Operator::Exists,
        values: Vec::new(),
        min_values,
    }
}

fn field_of(s: &ClusterSnapshot) -> Option<String> {
    snapshot(s).err().map(|e| e.field().to_string())
}

#[test]
fn a_plain_snapshot_passes() {
    let s = ClusterSnapshot {
        pods: vec![pod("default", "a"), pod("other", "a")],
        node_pools: vec![pool("a"), pool("b")],
        ..ClusterSnapshot::default()
    };
    assert_eq!(snapshot(&s), Ok(()));
}

#[test]
fn each_rule_names_its_field() {
    let cases: Vec<(&str, ClusterSnapshot, &str)> = vec![
        (
            "negative request",
            ClusterSnapshot {
                pods: vec![Pod {
                    requests: Resources::cpu_memory(-1, 0),
                    ..pod("default", "a")
                }],
                ..ClusterSnapshot::default()
            },
            "snapshot.pods[0].requests.cpu",
        ),
        (
            "duplicate pod",
            ClusterSnapshot {
                pods: vec![pod("default", "a"), pod("default", "a")],
                ..ClusterSnapshot::default()
            },
            "snapshot.pods[1].name",
        ),
        (
            "weight 101",
            with_pool(|p| p.weight = 101),
            "snapshot.node_pools[0].weight",
        ),
        (
            "minValues 51",
            with_pool(|p| {
                p.requirements = vec![requirement("topology.kubernetes.io/zone", Some(51))]
            }),
            "snapshot.node_pools[0].requirements[0].min_values",
        ),
        (
            "minValues 0",
            with_pool(|p| {
                p.requirements = vec![requirement("topology.kubernetes.io/zone", Some(0))]
            }),
            "snapshot.node_pools[0].requirements[0].min_values",
        ),
        (
            "restricted key",
            with_pool(|p| p.requirements = vec![requirement("karpenter.sh/nodepool", None)]),
            "snapshot.node_pools[0].requirements[0].key",
        ),
        (
            "negative replicas",
            with_pool(|p| p.replicas = Some(-1)),
            "snapshot.node_pools[0].replicas",
        ),
        (
            "weight on a static pool",
            with_pool(|p| {
                p.replicas = Some(2);
                p.weight = 10;
            }),
            "snapshot.node_pools[0].weight",
        ),
        (
            "cpu limit on a static pool",
            with_pool(|p| {
                p.replicas = Some(2);
                p.limited_resources = vec!["nodes".into(), "cpu".into()];
            }),
            "snapshot.node_pools[0].limits.cpu",
        ),
        (
            "restricted domain",
            with_pool(|p| p.requirements = vec![requirement("karpenter.sh/custom", None)]),
            "snapshot.node_pools[0].requirements[0].key",
        ),
        (
            "hostname",
            with_pool(|p| p.requirements = vec![requirement("kubernetes.io/hostname", None)]),
            "snapshot.node_pools[0].requirements[0].key",
        ),
        (
            "huge expireAfter",
            with_pool(|p| p.expire_after = Some(i64::MAX)),
            "snapshot.node_pools[0].expire_after",
        ),
        (
            "huge consolidateAfter",
            with_pool(|p| p.disruption.consolidate_after = Some(i64::MAX)),
            "snapshot.node_pools[0].disruption.consolidate_after",
        ),
        (
            "bad cron",
            with_pool(|p| {
                p.disruption.budgets = vec![Budget {
                    nodes: BudgetNodes::Count(1),
                    reasons: Vec::new(),
                    schedule: Some("61 * * * *".to_string()),
                    duration: Some(3600),
                }]
            }),
            "snapshot.node_pools[0].disruption.budgets[0].schedule",
        ),
        (
            "schedule without duration",
            with_pool(|p| {
                p.disruption.budgets = vec![Budget {
                    nodes: BudgetNodes::Count(1),
                    reasons: Vec::new(),
                    schedule: Some("0 * * * *".to_string()),
                    duration: None,
                }]
            }),
            "snapshot.node_pools[0].disruption.budgets[0].duration",
        ),
        (
            "budget 101%",
            with_pool(|p| {
                p.disruption.budgets = vec![Budget {
                    nodes: BudgetNodes::Percent(101),
                    reasons: Vec::new(),
                    schedule: None,
                    duration: None,
                }]
            }),
            "snapshot.node_pools[0].disruption.budgets[0].nodes",
        ),
        (
            "duplicate NodePool",
            ClusterSnapshot {
                node_pools: vec![pool("a"), pool("a")],
                ..ClusterSnapshot::default()
            },
            "snapshot.node_pools[1].name",
        ),
        (
            "negative claim expireAfter",
            ClusterSnapshot {
                node_claims: vec![NodeClaim {
                    name: "c".to_string(),
                    expire_after: Some(-1),
                    ..NodeClaim::default()
                }],
                ..ClusterSnapshot::default()
            },
            "snapshot.node_claims[0].expire_after",
        ),
    ];
    for (what, s, field) in cases {
        assert_eq!(field_of(&s).as_deref(), Some(field), "{what}");
    }
}

fn instance_type(name: &str, cpu: i64, arch: &str) -> InstanceType {
    InstanceType {
        name: name.to_string(),
        capacity: Resources::cpu_memory(cpu, 1 << 30),
        overhead: Overhead::default(),
        labels: [(labels::ARCH.to_string(), arch.to_string())]
            .into_iter()
            .collect(),
        os: vec!["linux".to_string()],
        offerings: vec![Offering {
            zone: "z".to_string(),
            capacity_type: "on-demand".to_string(),
            price: 0.1,
            available: true,
            unpriced: false,
        }],
    }
}

#[test]
fn catalog_rules() {
    let cat = |types: Vec<InstanceType>| Catalog {
        instance_types: types,
        notes: Vec::new(),
    };
    let field = |c: &Catalog| catalog(c, "catalog").err().map(|e| e.field().to_string());
    assert_eq!(field(&cat(vec![instance_type("a", 2000, "amd64")])), None);
    assert_eq!(
        field(&cat(Vec::new())).as_deref(),
        Some("catalog.instance_types")
    );
    assert_eq!(
        field(&cat(vec![instance_type("a", 0, "amd64")])).as_deref(),
        Some("catalog.instance_types[0].capacity.cpu")
    );
    assert_eq!(
        field(&cat(vec![instance_type("a", 1000, "sparc")])).as_deref(),
        Some("catalog.instance_types[0].labels[\"kubernetes.io/arch\"]")
    );
    assert_eq!(
        field(&cat(vec![
            instance_type("a", 1000, "amd64"),
            instance_type("a", 1000, "amd64")
        ]))
        .as_deref(),
        Some("catalog.instance_types[1].name")
    );
    let mut nan = instance_type("a", 1000, "amd64");
    nan.offerings[0].price = f64::NAN;
    assert_eq!(
        field(&cat(vec![nan])).as_deref(),
        Some("catalog.instance_types[0].offerings[0].price")
    );
}

#[test]
fn a_catalog_file_that_is_a_list_says_what_the_top_level_must_be() {
    let e = crate::catalog::file::parse("- a\n", "cat.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("expected a mapping with `instanceTypes` at the top level"),
        "{e}"
    );
}
