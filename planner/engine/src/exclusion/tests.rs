//! Isolation by object: what each bad object costs is itself, never the rest of the plan.

use super::*;
use crate::model::{NodeClass, Operator, PlanOptions};
use crate::test_util::{
    bound_pod, node, node_pool, pod, requirement, small_catalog, taint, toleration,
};

/// A good pool, a bad tainted pool (an invalid budget schedule), a pod for each and a bound pod
/// with negative cpu.
fn mixed() -> ClusterSnapshot {
    let mut gpu = node_pool("gpu");
    gpu.taints = vec![taint("gpu", "true")];
    gpu.disruption.budgets = vec![crate::model::Budget {
        nodes: crate::model::BudgetNodes::Count(1),
        reasons: Vec::new(),
        schedule: Some("61 * * * *".into()),
        duration: Some(3600),
    }];
    let mut train = pod("train", 500, 512);
    train.tolerations = vec![toleration("gpu", "true")];
    train
        .node_selector
        .insert(labels::NODEPOOL.into(), "gpu".into());
    let mut broken = bound_pod("broken", 100, 64, "n1");
    broken.requests.cpu = -2000;
    ClusterSnapshot {
        pods: vec![pod("web", 500, 512), train, broken],
        nodes: vec![node("n1", 2, 4)],
        node_pools: vec![node_pool("default"), gpu],
        ..ClusterSnapshot::default()
    }
}

#[test]
fn a_bad_pool_and_a_bad_pod_leave_the_rest_planned() {
    let mut s = mixed();
    let excluded = partition(&mut s);
    let names: Vec<(&str, &str, &str, &str)> = excluded
        .iter()
        .map(|e| {
            (
                e.object.kind.as_str(),
                e.object.name.as_str(),
                e.object.reason.as_str(),
                e.object.field.as_str(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("Pod", "broken", INVALID, "requests.cpu"),
            ("NodePool", "gpu", INVALID, "disruption.budgets[0].schedule"),
        ]
    );
    assert_eq!(s.node_pools.len(), 1);
    // The bound pod stays as a placeholder that protects its node.
    let stand_in = s
        .pods
        .iter()
        .find(|p| p.name == "broken")
        .expect("placeholder");
    assert_eq!(stand_in.requests.cpu, 0);
    assert_eq!(stand_in.requests.pods, 1);
    assert_eq!(
        stand_in
            .annotations
            .get(labels::DO_NOT_DISRUPT)
            .map(String::as_str),
        Some("true")
    );
    crate::validation::snapshot(&s).expect("what is left is valid");

    let options = PlanOptions {
        no_disruption: true,
        ..PlanOptions::default()
    };
    let mut plan = crate::plan(&s, &small_catalog(), &options);
    explain(&mut plan, &s, &excluded);
    let placed: Vec<&str> = plan
        .node_claims
        .iter()
        .flat_map(|c| c.pods.iter())
        .chain(plan.existing_nodes.iter().flat_map(|e| e.pods.iter()))
        .map(String::as_str)
        .collect();
    assert!(placed.contains(&"default/web"), "{plan:?}");
    let train = plan
        .unschedulable
        .iter()
        .find(|u| u.pod == "default/train")
        .expect("train cannot be placed");
    assert!(
        train
            .reason
            .contains("NodePool gpu was left out of the plan")
            && train.reason.contains("61 * * * *"),
        "{}",
        train.reason
    );
    assert_eq!(plan.excluded.len(), 2);
    assert_eq!(plan.excluded[0].kind, "NodePool", "sorted by kind");
}

#[test]
fn pods_that_could_not_use_the_excluded_pool_are_not_blamed_on_it() {
    let mut s = mixed();
    // Nothing but the excluded pool: every pod is unschedulable, but only the one that
    // tolerates its taint is told about it.
    s.node_pools.retain(|p| p.name == "gpu");
    let excluded = partition(&mut s);
    let mut plan = crate::plan(&s, &small_catalog(), &PlanOptions::default());
    explain(&mut plan, &s, &excluded);
    let reason = |pod: &str| {
        plan.unschedulable
            .iter()
            .find(|u| u.pod == pod)
            .map(|u| u.reason.clone())
            .unwrap_or_default()
    };
    assert!(reason("default/train").contains("NodePool gpu"));
    assert!(
        !reason("default/web").contains("NodePool gpu"),
        "{}",
        reason("default/web")
    );
}

#[test]
fn a_pool_of_an_excluded_class_is_excluded_naming_the_class() {
    let mut bad = NodeClass {
        name: "broken".into(),
        ..NodeClass::default()
    };
    bad.kubelet.max_pods = Some(-1);
    let mut pool = node_pool("uses-broken");
    pool.node_class = Some("broken".into());
    let mut s = ClusterSnapshot {
        node_classes: vec![bad],
        node_pools: vec![pool, node_pool("default")],
        ..ClusterSnapshot::default()
    };
    let excluded = partition(&mut s);
    assert_eq!(excluded.len(), 2, "{excluded:?}");
    let pool = excluded
        .iter()
        .find(|e| e.object.kind == "NodePool")
        .expect("pool excluded");
    assert_eq!(pool.object.reason, NODE_CLASS_EXCLUDED);
    assert!(pool.object.message.contains("EC2NodeClass broken"));
    assert_eq!(s.node_pools.len(), 1);
}

/// A class the actuator could not resolve (its status says so) is left out with that reason,
/// and so is its pool: the pending pod gets its claim from the next pool by weight, as
/// Karpenter provisions only from NodePools whose node class is Ready.
#[test]
fn a_class_whose_status_says_it_cannot_launch_is_left_out_and_the_next_pool_serves() {
    let class = |name: &str, not_ready: &str| NodeClass {
        name: name.into(),
        not_ready: not_ready.into(),
        ..NodeClass::default()
    };
    let mut preferred = node_pool("preferred");
    preferred.node_class = Some("windows".into());
    preferred.weight = 100;
    let mut fallback = node_pool("fallback");
    fallback.node_class = Some("linux".into());
    let s = ClusterSnapshot {
        pods: vec![pod("web", 500, 512)],
        node_classes: vec![
            class(
                "windows",
                "ValidationSucceeded: spec.amiSelectorTerms[0].alias windows2022 is not supported",
            ),
            class("linux", ""),
        ],
        node_pools: vec![preferred, fallback],
        ..ClusterSnapshot::default()
    };
    let mut partitioned = s.clone();
    let excluded = partition(&mut partitioned);
    let reasons: Vec<(&str, &str, &str)> = excluded
        .iter()
        .map(|e| {
            (
                e.object.kind.as_str(),
                e.object.name.as_str(),
                e.object.reason.as_str(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            ("EC2NodeClass", "windows", NODE_CLASS_NOT_READY),
            ("NodePool", "preferred", NODE_CLASS_EXCLUDED),
        ]
    );
    assert!(
        excluded[1]
            .object
            .message
            .contains("windows2022 is not supported")
    );
    // What the doors plan (they partition first): the fallback pool serves the pod, where the
    // whole snapshot would have used the heavier pool.
    let plan = crate::plan(&partitioned, &small_catalog(), &PlanOptions::default());
    assert_eq!(plan.node_claims.len(), 1, "{plan:?}");
    assert_eq!(plan.node_claims[0].node_pool, "fallback");
    let unpartitioned = crate::plan(&s, &small_catalog(), &PlanOptions::default());
    assert_eq!(unpartitioned.node_claims[0].node_pool, "preferred");
}

#[test]
fn the_second_object_of_a_name_is_the_one_left_out() {
    let mut second = node_pool("default");
    second.requirements = vec![requirement("team", Operator::In, &["b"])];
    let mut s = ClusterSnapshot {
        node_pools: vec![node_pool("default"), second],
        pods: vec![pod("a", 1, 1), pod("a", 2, 2)],
        ..ClusterSnapshot::default()
    };
    let excluded = partition(&mut s);
    assert_eq!(excluded.len(), 2);
    assert!(excluded.iter().all(|e| e.object.reason == DUPLICATE));
    assert!(s.node_pools[0].requirements.is_empty(), "the first stays");
    assert_eq!(s.pods[0].requests.cpu, 1);
}

#[test]
fn a_valid_snapshot_loses_nothing() {
    let mut s = mixed();
    s.pods.pop();
    s.node_pools.pop();
    let before = s.clone();
    assert!(partition(&mut s).is_empty());
    assert_eq!(s, before);
}
