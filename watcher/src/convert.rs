//! Objects as the watcher receives them, into `dovetail.v1` messages: the shared reader
//! (`k8s-reader`, the one `dovetail plan` reads manifests through too) and what only a watcher
//! decides, which pods to mirror.

use k8s_openapi::api::core::v1 as core;
use proto::v1 as pb;

pub use k8s_reader::dra;
pub use k8s_reader::{
    Error, PriorityClasses, Result, daemon_set, namespace, node, node_claim, node_class,
    node_overlay, node_pool, parse_duration, pdb, priority_class, pv, pvc, storage_class,
};

use crate::pending;

/// What the watcher does with a pod.
#[derive(Debug, Clone, PartialEq)]
pub enum PodDisposition {
    /// Mirrored: bound to a node, or pending as Karpenter defines it.
    Keep(Box<pb::Pod>),
    /// Not mirrored: finished, or unbound without being provisionable (not yet seen by the
    /// scheduler, a DaemonSet or mirror pod, being preempted onto a node).
    Ignore,
    /// Pending, but it can never be planned; the reason goes on the pod as an Event once.
    Invalid(Error),
}

/// Converts a pod, deciding whether the planner sees it at all.
pub fn pod(p: &core::Pod, priorities: &PriorityClasses) -> PodDisposition {
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    if matches!(phase, "Succeeded" | "Failed") {
        return PodDisposition::Ignore;
    }
    let bound = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !bound && !pending::is_provisionable(p) {
        return PodDisposition::Ignore;
    }
    match k8s_reader::pod(p, priorities) {
        Ok(out) => PodDisposition::Keep(Box::new(out)),
        Err(e) if bound => {
            // A bound pod whose spec cannot be read is left out: its node's allocatable and
            // the pods that can be read are what the planner has of that node.
            tracing::debug!(error = %e, "Bound pod with an unreadable spec");
            PodDisposition::Ignore
        }
        Err(e) => PodDisposition::Invalid(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending_pod(json: serde_json::Value) -> core::Pod {
        let mut p: core::Pod = serde_json::from_value(json).expect("pod");
        p.status = Some(core::PodStatus {
            conditions: Some(vec![core::PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    #[test]
    fn a_pending_pod_with_an_invalid_field_is_reported_once() {
        let p = pending_pod(serde_json::json!({
            "metadata": {"name": "bad", "namespace": "default", "uid": "u2"},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}
        }));
        let PodDisposition::Invalid(e) = pod(&p, &PriorityClasses::default()) else {
            panic!("invalid");
        };
        assert!(
            e.to_string()
                .starts_with("spec.containers[0].resources.requests.cpu:")
        );
        let mut bound = p;
        bound.spec.as_mut().expect("spec").node_name = Some("n1".into());
        assert_eq!(
            pod(&bound, &PriorityClasses::default()),
            PodDisposition::Ignore
        );
    }

    #[test]
    fn finished_and_unmarked_unbound_pods_are_not_mirrored() {
        let mut p = pending_pod(serde_json::json!({
            "metadata": {"name": "x", "namespace": "default"},
            "spec": {"containers": []}
        }));
        p.status.as_mut().expect("status").conditions = None;
        assert_eq!(pod(&p, &PriorityClasses::default()), PodDisposition::Ignore);
        let mut done = pending_pod(serde_json::json!({
            "metadata": {"name": "y", "namespace": "default"},
            "spec": {"containers": [], "nodeName": "n1"}
        }));
        done.status.as_mut().expect("status").phase = Some("Succeeded".into());
        assert_eq!(
            pod(&done, &PriorityClasses::default()),
            PodDisposition::Ignore
        );
    }
}
