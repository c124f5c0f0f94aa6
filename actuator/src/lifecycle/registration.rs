//! Registration: the Node whose `spec.providerID` is the claim's gets the claim's labels,
//! annotations, taints and startup taints (merged into its own), an owner reference to the
//! NodeClaim, the `karpenter.sh/termination` finalizer (see [`super::termination`]) and the
//! label `karpenter.sh/registered=true`, and loses the
//! `karpenter.sh/unregistered:NoExecute` taint it registered with, as Karpenter's registration
//! controller does. Once the label is there the sync is done and is never repeated (a daemon
//! removes the startup taints afterwards).

use std::collections::BTreeMap;

use crds::{ConditionStatus, NodeClaim};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::nodeclaim::{
    REGISTERED, REGISTERED_LABEL, TERMINATION_FINALIZER, UNREGISTERED_TAINT, rfc3339, set_condition,
};
use super::{Controller, Result, SYNC_CONFLICT_RETRIES, kube_err, node_name};
use crate::ledger::{ClaimRecord, ClaimState};

/// True when the Node has been synced with its NodeClaim (it carries `karpenter.sh/registered`).
pub fn is_synced(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.get(REGISTERED_LABEL).is_some_and(|v| v == "true"))
}

fn same_taint(a: &Taint, key: &str, effect: &str) -> bool {
    a.key == key && a.effect == effect
}

/// Merges `add` into `taints`: a taint whose key and effect are already there is not added
/// again (Karpenter's `Taints.Merge`).
fn merge_taints(taints: &mut Vec<Taint>, add: &[crds::Taint]) {
    for t in add {
        let effect = serde_json::to_value(t.effect)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        if !taints.iter().any(|n| same_taint(n, &t.key, &effect)) {
            taints.push(Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect,
                time_added: None,
            });
        }
    }
}

/// The JSON merge patch that registers `node` for `nc` (guarded by the Node's
/// `resourceVersion`, since it replaces the taint list), or `None` when the Node is already
/// synced.
pub fn sync_patch(nc: &NodeClaim, node: &Node) -> Option<Value> {
    if is_synced(node) {
        return None;
    }
    let mut labels: BTreeMap<String, String> = node.metadata.labels.clone().unwrap_or_default();
    labels.extend(nc.metadata.labels.clone().unwrap_or_default());
    labels.insert(REGISTERED_LABEL.to_string(), "true".to_string());
    let mut annotations: BTreeMap<String, String> =
        node.metadata.annotations.clone().unwrap_or_default();
    annotations.extend(nc.metadata.annotations.clone().unwrap_or_default());

    let mut taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    taints.retain(|t| !same_taint(t, UNREGISTERED_TAINT, "NoExecute"));
    merge_taints(&mut taints, nc.spec.taints.as_deref().unwrap_or_default());
    merge_taints(
        &mut taints,
        nc.spec.startup_taints.as_deref().unwrap_or_default(),
    );

    let mut owners: Vec<OwnerReference> =
        node.metadata.owner_references.clone().unwrap_or_default();
    let name = nc.metadata.name.clone().unwrap_or_default();
    if !owners
        .iter()
        .any(|o| o.kind == "NodeClaim" && o.name == name)
    {
        owners.push(OwnerReference {
            api_version: "karpenter.sh/v1".into(),
            kind: "NodeClaim".into(),
            name,
            uid: nc.metadata.uid.clone().unwrap_or_default(),
            block_owner_deletion: Some(true),
            controller: None,
        });
    }
    let mut finalizers: Vec<String> = node.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        finalizers.push(TERMINATION_FINALIZER.to_string());
    }
    Some(json!({
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": owners,
            "finalizers": finalizers,
        },
        "spec": {"taints": taints},
    }))
}

// === impl Controller ===

impl Controller {
    pub(super) async fn sync_node(&self, nc: &NodeClaim, node: &Node) -> Result<bool> {
        let name = node_name(node);
        let mut current = node.clone();
        let mut conflicts = 0;
        loop {
            let Some(patch) = sync_patch(nc, &current) else {
                return Ok(false);
            };
            match self
                .nodes()
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => return Ok(true),
                // The kubelet wrote the Node since it was read (the patch carries its
                // resourceVersion): read it again and retry now rather than a pass later.
                Err(kube::Error::Api(s)) if s.code == 409 && conflicts < SYNC_CONFLICT_RETRIES => {
                    conflicts += 1;
                    current = self
                        .nodes()
                        .get(&name)
                        .await
                        .map_err(kube_err(format!("reading Node {name}")))?;
                }
                Err(e) => {
                    return Err(kube_err(format!("syncing Node {name} with its NodeClaim"))(
                        e,
                    ));
                }
            }
        }
    }

    pub(super) async fn register(
        &self,
        claim: &ClaimRecord,
        nc: &mut NodeClaim,
        node: &Node,
    ) -> Result<Option<ClaimState>> {
        let name = node_name(node);
        if !self
            .write(
                claim,
                ClaimState::Registered,
                format!("node {name}"),
                None,
                true,
            )
            .await?
        {
            return Ok(None);
        }
        self.sync_node(nc, node).await?;
        self.update_status(nc, |s, now| {
            s.node_name = Some(name.clone());
            set_condition(
                s.conditions.get_or_insert_with(Vec::new),
                REGISTERED,
                ConditionStatus::True,
                REGISTERED,
                "",
                now,
            )
        })
        .await?;
        let label = |k: &str| {
            nc.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(k))
                .or_else(|| node.metadata.labels.as_ref().and_then(|l| l.get(k)))
                .cloned()
                .unwrap_or_default()
        };
        self.metrics.node_created(
            &label(common::labels::NODEPOOL),
            &label("topology.kubernetes.io/zone"),
        );
        self.registration
            .record(
                &self.client,
                &claim.node_pool,
                true,
                &rfc3339(self.clock.now_ms()),
            )
            .await;
        tracing::info!(claim = %claim.name, node = %name, "Registered");
        Ok(Some(ClaimState::Registered))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_merges_labels_and_taints_and_drops_the_unregistered_taint() {
        let nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c1", "uid": "u1", "labels": {"team": "web", "karpenter.sh/nodepool": "default"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
                "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "example.com/agent", "effect": "NoExecute"}]
            }
        }))
        .expect("claim");
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "resourceVersion": "7", "labels": {"kubernetes.io/os": "linux"}},
            "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": [
                {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                {"key": "dedicated", "value": "web", "effect": "NoSchedule"}
            ]}
        }))
        .expect("node");
        let p = sync_patch(&nc, &node).expect("a patch");
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(p["metadata"]["labels"]["team"], "web");
        assert_eq!(p["metadata"]["labels"]["kubernetes.io/os"], "linux");
        assert_eq!(p["metadata"]["labels"][REGISTERED_LABEL], "true");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "NodeClaim");
        assert_eq!(
            p["metadata"]["finalizers"],
            json!([TERMINATION_FINALIZER]),
            "kubectl delete node waits for the instance"
        );
        let keys: Vec<&str> = p["spec"]["taints"]
            .as_array()
            .expect("taints")
            .iter()
            .filter_map(|t| t["key"].as_str())
            .collect();
        assert_eq!(keys, ["dedicated", "example.com/agent"]);

        let mut synced = node.clone();
        synced.metadata.labels = Some(BTreeMap::from([(REGISTERED_LABEL.into(), "true".into())]));
        assert!(
            sync_patch(&nc, &synced).is_none(),
            "synced once, never again"
        );
    }
}
