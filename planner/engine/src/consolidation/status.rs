//! What Karpenter writes on each disruption candidate, in its words: the NodeClaim conditions
//! `Drifted` (with Karpenter's drift reason) and `Consolidatable`, and the messages of the Events
//! `DisruptionBlocked` and `Unconsolidatable` (kubernetes-sigs/karpenter v1.14
//! `pkg/controllers/nodeclaim/disruption/{drift,consolidation}.go`,
//! `pkg/controllers/state/statenode.go` `ValidateNodeDisruptable` / `ValidatePodsDisruptable`,
//! `pkg/controllers/disruption/{consolidation,emptiness}.go` `ShouldDisrupt`,
//! aws/karpenter-provider-aws `pkg/cloudprovider/drift.go`).
//!
//! It reads the same candidates the disruption search reads ([`Candidates`], built once per plan)
//! and decides nothing new: the watcher writes these facts to the cluster.

use std::collections::BTreeMap;

use super::Candidates;
use super::candidate::{self, Candidate};
use crate::catalog::Catalog;
use crate::labels;
use crate::model::{ClusterSnapshot, ConsolidationPolicy, Pod, Timestamp};
use crate::plan::{NodeDisruptionStatus, NodePoolBudgetStatus};

/// The status of every candidate of `snapshot` at `now` with something to say, sorted by node.
/// (A plan builds its candidates once, [`Candidates::new`], and asks them instead.)
pub fn node_status(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: Timestamp,
) -> Vec<NodeDisruptionStatus> {
    Candidates::new(snapshot, catalog, now).node_status()
}

/// [`node_status`] and each NodePool's allowed disruptions per reason (Karpenter's
/// `BuildDisruptionBudgetMapping`), from one set of candidates.
pub fn disruption_status(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: Timestamp,
) -> (Vec<NodeDisruptionStatus>, Vec<NodePoolBudgetStatus>) {
    let set = Candidates::new(snapshot, catalog, now);
    (set.node_status(), set.budget_status())
}

/// Each NodePool's allowed disruptions per reason, from candidates already built.
pub(super) fn budgets_of_candidates(set: &Candidates<'_>) -> Vec<NodePoolBudgetStatus> {
    super::budgets::status(&set.snapshot.node_pools, &set.counts, set.now)
}

/// [`node_status`] from candidates already built.
pub(super) fn of_candidates(set: &Candidates<'_>) -> Vec<NodeDisruptionStatus> {
    let (snapshot, now) = (set.snapshot, set.now);
    let (candidates, pods_on, pdbs) = (&set.candidates, &set.pods_on, &set.pdbs);
    let pools: BTreeMap<&str, _> = snapshot
        .node_pools
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let nodes: BTreeMap<&str, &crate::model::Node> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let mut out = Vec::new();
    for c in candidates {
        let mut pods: Vec<&Pod> = pods_on
            .get(&c.name)
            .map(|v| v.iter().map(|&i| &snapshot.pods[i]).collect())
            .unwrap_or_default();
        pods.sort_by_key(|p| p.key());
        let empty = !pods.iter().any(|p| candidate::is_reschedulable(p));
        let blocked = nodes
            .get(c.name.as_str())
            .and_then(|node| blocked(c, node, &pods, pdbs, now))
            .unwrap_or_default();
        let consolidation_disabled = pools
            .get(c.node_pool.as_str())
            .is_none_or(|p| p.disruption.consolidate_after.is_none());
        let unconsolidatable = if blocked.is_empty() && !c.static_pool {
            unconsolidatable(c, consolidation_disabled, empty).unwrap_or_default()
        } else {
            String::new()
        };
        let (drifted, drift_message) = match &c.drift {
            Some(why) => (drift_reason(why).to_string(), why.clone()),
            None => (String::new(), String::new()),
        };
        if drifted.is_empty()
            && !c.consolidatable
            && blocked.is_empty()
            && unconsolidatable.is_empty()
        {
            continue;
        }
        out.push(NodeDisruptionStatus {
            node: c.name.clone(),
            node_claim: c.claim.clone().unwrap_or_default(),
            node_pool: c.node_pool.clone(),
            drifted,
            drift_message,
            consolidatable: c.consolidatable,
            blocked,
            unconsolidatable,
            empty,
        });
    }
    out.sort_by(|a, b| a.node.cmp(&b.node));
    out
}

/// Karpenter's drift reason for the engine's explanation of a drift.
pub fn drift_reason(why: &str) -> &'static str {
    if why.starts_with(labels::NODEPOOL_HASH) {
        "NodePoolDrifted"
    } else if why.starts_with(labels::NODECLASS_HASH) {
        "NodeClassDrift"
    } else if why.starts_with("AMIDrift") {
        "AMIDrift"
    } else if why.starts_with("SubnetDrift") {
        "SubnetDrift"
    } else if why.starts_with("SecurityGroupDrift") {
        "SecurityGroupDrift"
    } else if why.starts_with("instance type ") || why.starts_with("node has no ") {
        "InstanceTypeNotFound"
    } else {
        // A NodePool requirement that no longer admits the node (or cannot be read).
        "RequirementsDrifted"
    }
}

/// Karpenter's capitalisation of an error into an Event message (`pretty.Sentence`).
fn sentence(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(f) => f.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The `DisruptionBlocked` message: the node's `do-not-disrupt` annotation, then per pod (by
/// key) an active `do-not-disrupt` annotation or a PDB that allows no eviction (or more than one
/// PDB), as Karpenter checks them; then dovetail's own blocker (a pod without a controller).
fn blocked(
    c: &Candidate,
    node: &crate::model::Node,
    pods: &[&Pod],
    pdbs: &[candidate::PdbState<'_>],
    now: Timestamp,
) -> Option<String> {
    if node
        .annotations
        .get(labels::DO_NOT_DISRUPT)
        .map(String::as_str)
        == Some("true")
    {
        return Some(sentence(&format!(
            "disruption is blocked through the {:?} annotation",
            labels::DO_NOT_DISRUPT
        )));
    }
    for p in pods {
        if p.deletion_time.is_some() || !candidate::is_reschedulable(p) {
            continue;
        }
        if candidate::pod_do_not_disrupt(p, now).is_some() {
            return Some(sentence(&format!(
                "pod has {:?} annotation (Pod={})",
                labels::DO_NOT_DISRUPT,
                p.key()
            )));
        }
        let covering = candidate::pdbs_of(p, pdbs);
        let keys = || {
            covering
                .iter()
                .map(|&i| format!("{}/{}", pdbs[i].pdb.namespace, pdbs[i].pdb.name))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if covering.len() > 1 {
            return Some(sentence(&format!(
                "eviction does not support multiple PDBs (PodDisruptionBudget(s)=[{}])",
                keys()
            )));
        }
        if covering.iter().any(|&i| pdbs[i].allowed <= 0) {
            return Some(sentence(&format!(
                "pdb prevents pod evictions (PodDisruptionBudget=[{}])",
                keys()
            )));
        }
    }
    c.blocker.as_deref().map(sentence)
}

/// The `Unconsolidatable` message of a candidate that is not blocked, in the order of
/// Karpenter's `ShouldDisrupt` (consolidation, then emptiness): nothing for a node whose
/// `consolidateAfter` has not elapsed.
fn unconsolidatable(c: &Candidate, disabled: bool, empty: bool) -> Option<String> {
    if c.price.is_none() {
        return Some(format!(
            "Instance Type {:?} not found",
            c.instance_type.as_deref().unwrap_or_default()
        ));
    }
    if c.capacity_type.is_none() {
        return Some(format!(
            "Node does not have label {:?}",
            labels::CAPACITY_TYPE
        ));
    }
    if c.zone.is_none() {
        return Some(format!("Node does not have label {:?}", labels::ZONE));
    }
    if disabled {
        return Some(format!(
            "NodePool {:?} has consolidation disabled",
            c.node_pool
        ));
    }
    if !c.consolidatable {
        return None;
    }
    if c.policy == ConsolidationPolicy::WhenEmpty && !empty {
        return Some(format!(
            "NodePool {:?} has consolidation policy WhenEmpty, but node is not empty",
            c.node_pool
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consolidation::tests::{NOW, catalog, cluster};
    use crate::model::{Operator, PodDisruptionBudget, Requirement};

    fn of<'a>(st: &'a [NodeDisruptionStatus], node: &str) -> &'a NodeDisruptionStatus {
        st.iter()
            .find(|n| n.node == node)
            .unwrap_or_else(|| panic!("{node} not in {st:?}"))
    }

    /// kubernetes-sigs/karpenter `pkg/controllers/disruption/consolidation_test.go` ("should only
    /// allow 3 empty nodes to be disrupted": 30% of 10 is 3; "should allow no empty nodes to be
    /// disrupted": 0%) and `helpers.go` `BuildDisruptionBudgetMapping` (no active budget:
    /// `math.MaxInt32`; a budget for one reason leaves the others unbounded).
    #[test]
    fn allowed_disruptions_per_pool_and_reason_as_karpenter_counts_them() {
        use crate::model::{Budget, BudgetNodes};
        let loads: Vec<&[i64]> = vec![&[]; 10];
        let mut s = cluster(&loads);
        s.node_pools[0].disruption.budgets[0].nodes = BudgetNodes::Percent(30);
        let (_, b) = disruption_status(&s, &catalog(), NOW);
        let got: Vec<(&str, i32, u32)> = b
            .iter()
            .map(|b| (b.reason.as_str(), b.allowed, b.nodes))
            .collect();
        assert_eq!(
            got,
            [
                ("Empty", 3, 10),
                ("Drifted", 3, 10),
                ("Underutilized", 3, 10)
            ]
        );
        assert!(
            b.iter()
                .all(|b| b.node_pool == "default" && !b.is_blocked())
        );

        s.node_pools[0].disruption.budgets = vec![Budget {
            nodes: BudgetNodes::Percent(0),
            reasons: vec!["Empty".into()],
            schedule: None,
            duration: None,
        }];
        let (_, b) = disruption_status(&s, &catalog(), NOW);
        assert_eq!(b[0].allowed, 0);
        assert!(b[0].is_blocked());
        assert_eq!(
            b[0].blocked_message(),
            "No allowed disruptions for disruption reason Empty due to blocking budget"
        );
        assert_eq!(b[1].allowed, i32::MAX);
        assert!(!b[2].is_blocked());

        // A pool without nodes is never blocked.
        let mut empty = cluster(&[]);
        empty.node_pools[0].disruption.budgets[0].nodes = BudgetNodes::Count(0);
        let (_, b) = disruption_status(&empty, &catalog(), NOW);
        assert!(b.iter().all(|b| b.allowed == 0 && !b.is_blocked()));
    }

    #[test]
    fn consolidatable_blocked_and_drifted_as_karpenter_says() {
        // n0 empty, n1 with a pod; consolidateAfter elapsed on both (the fixture's pool).
        let mut s = cluster(&[&[], &[1000]]);
        let st = node_status(&s, &catalog(), NOW);
        let n0 = of(&st, "n0");
        assert!(
            n0.consolidatable && n0.empty && n0.blocked.is_empty(),
            "{n0:?}"
        );
        assert!(
            n0.drifted.is_empty() && n0.unconsolidatable.is_empty(),
            "{n0:?}"
        );
        assert!(!of(&st, "n1").empty);

        s.nodes[0]
            .annotations
            .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
        s.pods[0]
            .annotations
            .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
        let st = node_status(&s, &catalog(), NOW);
        assert_eq!(
            of(&st, "n0").blocked,
            r#"Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation"#
        );
        assert_eq!(
            of(&st, "n1").blocked,
            format!(
                r#"Pod has "karpenter.sh/do-not-disrupt" annotation (Pod={})"#,
                s.pods[0].key()
            )
        );

        // A PDB that allows nothing.
        let mut s = cluster(&[&[1000]]);
        s.pdbs.push(PodDisruptionBudget {
            namespace: s.pods[0].namespace.clone(),
            name: "guard".into(),
            selector: Some(crate::model::LabelSelector {
                match_labels: [("app".to_string(), "p0-0".to_string())]
                    .into_iter()
                    .collect(),
                ..crate::model::LabelSelector::default()
            }),
            disruptions_allowed: Some(0),
            ..PodDisruptionBudget::default()
        });
        let st = node_status(&s, &catalog(), NOW);
        assert_eq!(
            of(&st, "n0").blocked,
            format!(
                "Pdb prevents pod evictions (PodDisruptionBudget=[{}/guard])",
                s.pods[0].namespace
            )
        );

        // Requirements no longer admit the node.
        let mut s = cluster(&[&[1000]]);
        s.node_pools[0].requirements.push(Requirement {
            key: labels::INSTANCE_FAMILY.into(),
            operator: Operator::In,
            values: vec!["c".into()],
            min_values: None,
        });
        let st = node_status(&s, &catalog(), NOW);
        assert_eq!(of(&st, "n0").drifted, "RequirementsDrifted");
        // An instance type the catalog no longer sells.
        let mut s = cluster(&[&[1000]]);
        s.nodes[0]
            .labels
            .insert(labels::INSTANCE_TYPE.into(), "gone.large".into());
        let st = node_status(&s, &catalog(), NOW);
        let n0 = of(&st, "n0");
        assert_eq!(n0.drifted, "InstanceTypeNotFound");
        assert_eq!(
            n0.unconsolidatable,
            r#"Instance Type "gone.large" not found"#
        );
        // A stale NodePool hash.
        let mut s = cluster(&[&[1000]]);
        s.node_pools[0].template_hash = "new".into();
        s.nodes[0]
            .annotations
            .insert(labels::NODEPOOL_HASH.into(), "old".into());
        s.nodes[0].annotations.insert(
            crate::consolidation::NODEPOOL_HASH_VERSION.into(),
            crate::consolidation::HASH_VERSION.into(),
        );
        let st = node_status(&s, &catalog(), NOW);
        assert_eq!(of(&st, "n0").drifted, "NodePoolDrifted");
    }

    #[test]
    fn unconsolidatable_as_karpenter_says() {
        let mut s = cluster(&[&[1000]]);
        s.node_pools[0].disruption.consolidate_after = None;
        let st = node_status(&s, &catalog(), NOW);
        let n0 = of(&st, "n0");
        assert!(!n0.consolidatable);
        assert_eq!(
            n0.unconsolidatable,
            format!(
                "NodePool {:?} has consolidation disabled",
                s.node_pools[0].name
            )
        );
        let mut s = cluster(&[&[1000]]);
        s.node_pools[0].disruption.consolidation_policy = ConsolidationPolicy::WhenEmpty;
        let st = node_status(&s, &catalog(), NOW);
        assert_eq!(
            of(&st, "n0").unconsolidatable,
            format!(
                "NodePool {:?} has consolidation policy WhenEmpty, but node is not empty",
                s.node_pools[0].name
            )
        );
        // consolidateAfter not elapsed and nothing else to say: not listed.
        let mut s = cluster(&[&[1000]]);
        s.node_pools[0].disruption.consolidate_after = Some(1_000_000);
        assert!(node_status(&s, &catalog(), NOW).is_empty());
    }

    #[test]
    fn drift_reasons_are_karpenters() {
        for (why, want) in [
            (
                "karpenter.sh/nodepool-hash 1 (version v3) differs from NodePool default's 2",
                "NodePoolDrifted",
            ),
            (
                "karpenter.k8s.aws/ec2nodeclass-hash 1 (version v4) differs from EC2NodeClass default's 2",
                "NodeClassDrift",
            ),
            ("AMIDrift: image ami-1 is not among ...", "AMIDrift"),
            ("SubnetDrift: subnet s-1 is not among ...", "SubnetDrift"),
            (
                "SecurityGroupDrift: security groups (sg-1) differ ...",
                "SecurityGroupDrift",
            ),
            (
                "instance type m5.large is not in the catalog",
                "InstanceTypeNotFound",
            ),
            (
                "node has no node.kubernetes.io/instance-type label",
                "InstanceTypeNotFound",
            ),
            (
                "NodePool default requirement karpenter.sh/capacity-type In [spot] no longer admits the node",
                "RequirementsDrifted",
            ),
        ] {
            assert_eq!(drift_reason(why), want, "{why}");
        }
    }

    #[test]
    fn sentence_capitalises_the_first_letter_only() {
        assert_eq!(
            sentence("pdb prevents pod evictions"),
            "Pdb prevents pod evictions"
        );
        assert_eq!(sentence(""), "");
    }
}
