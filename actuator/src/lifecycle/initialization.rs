//! Initialization: a registered Node is initialized once it is Ready, its startup taints and the
//! known ephemeral taints are gone, and every extended resource the NodeClaim requests is
//! allocatable; then it gets `karpenter.sh/initialized=true`. The reasons are Karpenter's.

use crds::{ConditionStatus, NodeClaim, Quantity};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::nodeclaim::{INITIALIZED, INITIALIZED_LABEL, UNREGISTERED_TAINT, set_condition};
use super::{Controller, Result, kube_err, node_name};
use crate::ledger::{ClaimRecord, ClaimState};

/// Taints that the kubelet, the cloud controller manager or the registration step remove by
/// themselves (Karpenter's known ephemeral taints), as `(key, effect)`.
pub const KNOWN_EPHEMERAL_TAINTS: [(&str, &str); 4] = [
    ("node.kubernetes.io/not-ready", "NoSchedule"),
    ("node.kubernetes.io/unreachable", "NoSchedule"),
    (
        "node.cloudprovider.kubernetes.io/uninitialized",
        "NoSchedule",
    ),
    (UNREGISTERED_TAINT, "NoExecute"),
];

fn fmt_taint(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

fn is_zero(q: &str) -> bool {
    let digits: String = q
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    digits.parse::<f64>().map_or(true, |v| v == 0.0)
}

/// Why `node` is not initialized for `nc` yet, as a condition `(reason, message)`; `None` when
/// it is.
pub fn blocker(node: &Node, nc: &NodeClaim) -> Option<(&'static str, String)> {
    let status = node.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if !ready {
        return Some(("NodeNotReady", "Node status is NotReady".to_string()));
    }
    let taints: &[Taint] = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    for st in nc.spec.startup_taints.as_deref().unwrap_or_default() {
        let effect = serde_json::to_value(st.effect).unwrap_or_default();
        if let Some(t) = taints
            .iter()
            .find(|t| t.key == st.key && effect.as_str() == Some(t.effect.as_str()))
        {
            return Some((
                "StartupTaintsExist",
                format!("StartupTaint {:?} still exists", fmt_taint(t)),
            ));
        }
    }
    if let Some(t) = taints.iter().find(|t| {
        KNOWN_EPHEMERAL_TAINTS
            .iter()
            .any(|(k, e)| t.key == *k && t.effect == *e)
            || common::labels::is_ephemeral_taint_family(&t.key)
    }) {
        return Some((
            "KnownEphemeralTaintsExist",
            format!("KnownEphemeralTaint {:?} still exists", fmt_taint(t)),
        ));
    }
    let requests = nc
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .unwrap_or_default();
    let allocatable = status
        .and_then(|s| s.allocatable.clone())
        .unwrap_or_default();
    for (name, q) in &requests {
        let requested = match q {
            Quantity::Int(i) => *i != 0,
            Quantity::String(s) => !is_zero(s),
        };
        if requested && allocatable.get(name).is_none_or(|a| is_zero(&a.0)) {
            return Some((
                "ResourceNotRegistered",
                format!("Resource {name:?} was requested but not registered"),
            ));
        }
    }
    None
}

// === impl Controller ===

impl Controller {
    pub(super) async fn initialize(
        &self,
        claim: &ClaimRecord,
        nc: &mut NodeClaim,
        node: &Node,
    ) -> Result<Option<ClaimState>> {
        let name = node_name(node);
        if !self
            .write(
                claim,
                ClaimState::Initialized,
                format!("node {name}"),
                None,
                true,
            )
            .await?
        {
            return Ok(None);
        }
        self.mark_initialized(nc, node).await?;
        tracing::info!(claim = %claim.name, node = %name, "Initialized");
        Ok(Some(ClaimState::Initialized))
    }

    /// Labels the Node `karpenter.sh/initialized=true` and sets `Initialized=True` (each only
    /// when missing).
    pub(super) async fn mark_initialized(&self, nc: &mut NodeClaim, node: &Node) -> Result<()> {
        let labelled = node
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get(INITIALIZED_LABEL).is_some_and(|v| v == "true"));
        if !labelled {
            let name = node_name(node);
            self.nodes()
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {INITIALIZED_LABEL: "true"}}})),
                )
                .await
                .map_err(kube_err(format!("labelling Node {name} initialized")))?;
        }
        self.update_status(nc, |s, now| {
            set_condition(
                s.conditions.get_or_insert_with(Vec::new),
                INITIALIZED,
                ConditionStatus::True,
                INITIALIZED,
                "",
                now,
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim() -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c1"},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
                "startupTaints": [{"key": "example.com/agent", "effect": "NoExecute"}],
                "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "0"}}
            }
        }))
        .expect("claim")
    }

    fn node(ready: &str, taints: serde_json::Value, gpus: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": taints},
            "status": {
                "conditions": [{"type": "Ready", "status": ready}],
                "allocatable": {"cpu": "2", "nvidia.com/gpu": gpus}
            }
        }))
        .expect("node")
    }

    #[test]
    fn each_blocker_is_reported_in_karpenters_order() {
        let c = claim();
        let startup = json!([{"key": "example.com/agent", "effect": "NoExecute"}]);
        assert_eq!(
            blocker(&node("False", json!([]), "1"), &c).map(|b| b.0),
            Some("NodeNotReady")
        );
        let b = blocker(&node("True", startup, "1"), &c).expect("blocked");
        assert_eq!(
            b,
            (
                "StartupTaintsExist",
                "StartupTaint \"example.com/agent:NoExecute\" still exists".to_string()
            )
        );
        let ephemeral = json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]);
        assert_eq!(
            blocker(&node("True", ephemeral, "1"), &c).map(|b| b.0),
            Some("KnownEphemeralTaintsExist")
        );
        // The Node Readiness Controller's taints (Karpenter v1.13's KnownEphemeralTaintKeyPrefixes).
        let readiness = json!([{"key": "readiness.k8s.io/network", "effect": "NoSchedule"}]);
        assert_eq!(
            blocker(&node("True", readiness, "1"), &c),
            Some((
                "KnownEphemeralTaintsExist",
                "KnownEphemeralTaint \"readiness.k8s.io/network:NoSchedule\" still exists"
                    .to_string()
            ))
        );
        let b = blocker(&node("True", json!([]), "0"), &c).expect("blocked");
        assert_eq!(
            b,
            (
                "ResourceNotRegistered",
                "Resource \"nvidia.com/gpu\" was requested but not registered".to_string()
            )
        );
        assert_eq!(blocker(&node("True", json!([]), "1"), &c), None);
    }
}
