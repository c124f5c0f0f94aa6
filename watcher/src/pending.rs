//! Which pods are pending as Karpenter defines them (`pkg/utils/pod.IsProvisionable`).
//!
//! A pod is provisionable when kube-scheduler has tried and failed (`PodScheduled=False`,
//! reason `Unschedulable`), it is not bound (`nodeName` empty), it is not about to be placed
//! by preemption (`nominatedNodeName` empty), it is not being deleted, and no node capacity
//! would help it anyway: DaemonSet pods (their controller places them on each node) and
//! mirror pods (static pods the kubelet owns) are never provisionable.

use k8s_openapi::api::core::v1 as core;

use common::labels::MIRROR_POD;

/// True when new capacity is what this pod waits for.
pub fn is_provisionable(p: &core::Pod) -> bool {
    let spec = p.spec.as_ref();
    let status = p.status.as_ref();
    let unbound = spec
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    let nominated = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
    let deleting = p.metadata.deletion_timestamp.is_some();
    let daemon = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD));
    unbound && unschedulable && !nominated && !deleting && !daemon && !mirror
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(f: impl FnOnce(&mut serde_json::Value)) -> core::Pod {
        let mut v = serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": []},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            ]}
        });
        f(&mut v);
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn karpenter_definition() {
        assert!(is_provisionable(&pod(|_| {})));
        assert!(!is_provisionable(&pod(
            |v| v["spec"]["nodeName"] = "n1".into()
        )));
        assert!(!is_provisionable(&pod(|v| {
            v["status"]["nominatedNodeName"] = "n1".into();
        })));
        assert!(!is_provisionable(&pod(|v| {
            v["status"]["conditions"][0]["reason"] = "SchedulingGated".into();
        })));
        assert!(!is_provisionable(&pod(|v| {
            v["status"]["conditions"] = serde_json::json!([]);
        })));
        assert!(!is_provisionable(&pod(|v| {
            v["metadata"]["ownerReferences"] = serde_json::json!([
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "1", "controller": true}
            ]);
        })));
        assert!(!is_provisionable(&pod(|v| {
            v["metadata"]["annotations"] = serde_json::json!({"kubernetes.io/config.mirror": "x"});
        })));
        assert!(!is_provisionable(&pod(|v| {
            v["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        })));
    }
}
