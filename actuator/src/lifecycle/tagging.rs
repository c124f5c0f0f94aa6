//! Instance tags that need the Node: once a claim's Node registered, its instance is tagged
//! `Name` = the Node's name (what the EC2 console shows), `karpenter.sh/nodeclaim` and
//! `eks:eks-cluster-name`, skipping tags it already has, and the NodeClaim is annotated
//! `karpenter.k8s.aws/tagged=true` (and `compatibility.karpenter.k8s.aws/cluster-name-tagged`)
//! so that it is done once, as Karpenter's tagging controller does
//! (`pkg/controllers/nodeclaim/tagging/controller.go` of aws/karpenter-provider-aws).

use cloud::{ProviderId, Tags};
use crds::NodeClaim;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{Controller, Result, cloud_err, kube_err, node_name};
use crate::ledger::ClaimRecord;

/// Annotation of a NodeClaim whose instance is tagged.
pub const TAGGED: &str = "karpenter.k8s.aws/tagged";
/// Karpenter's companion annotation for the `eks:eks-cluster-name` tag.
pub const CLUSTER_NAME_TAGGED: &str = "compatibility.karpenter.k8s.aws/cluster-name-tagged";

/// True when `nc` says its instance is tagged.
pub fn is_tagged(nc: &NodeClaim) -> bool {
    let a = nc.metadata.annotations.as_ref();
    [TAGGED, CLUSTER_NAME_TAGGED]
        .iter()
        .all(|k| a.and_then(|a| a.get(*k)).is_some_and(|v| v == "true"))
}

/// The tags the instance of `claim` gets once `node` registered.
pub fn tags(claim: &str, node: &str, cluster: &str) -> Tags {
    Tags::from([
        (cloud::TAG_NAME.to_string(), node.to_string()),
        (cloud::TAG_NODECLAIM.to_string(), claim.to_string()),
        (cloud::TAG_EKS_CLUSTER_NAME.to_string(), cluster.to_string()),
    ])
}

// === the tagging step of the Controller ===

impl Controller {
    /// Tags the instance of a registered claim (see the module docs); `nc` becomes the
    /// annotated NodeClaim.
    pub(crate) async fn tag_instance(
        &self,
        claim: &ClaimRecord,
        nc: &mut NodeClaim,
        node: &Node,
    ) -> Result<()> {
        if is_tagged(nc) {
            return Ok(());
        }
        let Some(inst) = &claim.instance else {
            return Ok(());
        };
        let Ok(pid) = inst.provider_id.parse::<ProviderId>() else {
            return Ok(());
        };
        let mut want = tags(&claim.name, &node_name(node), &self.options.gc.cluster_name);
        if let Ok(i) = self.cloud.get(&pid).await {
            want.retain(|k, v| i.tags.get(k) != Some(v));
        }
        if !want.is_empty() {
            match self.cloud.tag(&pid, &want).await {
                Ok(()) => {
                    tracing::info!(claim = %claim.name, instance = %inst.instance_id, node = %node_name(node), "Tagged the instance")
                }
                Err(cloud::Error::InvalidRequest { reason }) => {
                    tracing::warn!(claim = %claim.name, %reason, "Instance not tagged")
                }
                Err(e) => {
                    return Err(cloud_err(format!("tagging instance {}", inst.instance_id))(
                        e,
                    ));
                }
            }
        }
        let name = claim.name.clone();
        *nc = self
            .nodeclaims()
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    TAGGED: "true",
                    CLUSTER_NAME_TAGGED: "true",
                }}})),
            )
            .await
            .map_err(kube_err(format!("annotating NodeClaim {name} tagged")))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_the_node_the_claim_and_the_cluster() {
        let t = tags("default-abcde", "ip-10-0-1-2.ec2.internal", "prod");
        assert_eq!(t["Name"], "ip-10-0-1-2.ec2.internal");
        assert_eq!(t["karpenter.sh/nodeclaim"], "default-abcde");
        assert_eq!(t["eks:eks-cluster-name"], "prod");
        let mut nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "annotations": {TAGGED: "true"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                     "requirements": []}
        }))
        .expect("nodeclaim");
        assert!(!is_tagged(&nc));
        nc.metadata
            .annotations
            .get_or_insert_default()
            .insert(CLUSTER_NAME_TAGGED.into(), "true".into());
        assert!(is_tagged(&nc));
    }
}
