//! Nodes and NodeClaims: capacity that exists or will exist.

use serde::{Deserialize, Serialize};

use super::{Labels, Requirement, Resources, Taint, Timestamp};

/// An existing Kubernetes Node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Name.
    pub name: String,
    /// Labels (zone, instance type, capacity type, nodepool, hostname, ...).
    pub labels: Labels,
    /// Annotations (hashes, do-not-disrupt).
    pub annotations: Labels,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `status.allocatable`.
    pub allocatable: Resources,
    /// `status.capacity`.
    pub capacity: Resources,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// Whether the Ready condition is True.
    pub ready: bool,
    /// When it was created.
    pub creation_time: Option<Timestamp>,
    /// Set when it is being deleted.
    pub deletion_time: Option<Timestamp>,
}

/// A Karpenter NodeClaim (`karpenter.sh/v1`): a node launched or being launched.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeClaim {
    /// Name.
    pub name: String,
    /// Labels (at least `karpenter.sh/nodepool`).
    pub labels: Labels,
    /// Annotations (`karpenter.sh/nodepool-hash`, `karpenter.k8s.aws/ec2nodeclass-hash`, ...).
    pub annotations: Labels,
    /// `spec.requirements`.
    pub requirements: Vec<Requirement>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.startupTaints`.
    pub startup_taints: Vec<Taint>,
    /// `spec.resources.requests`.
    pub requests: Resources,
    /// `spec.nodeClassRef.name`.
    pub node_class: Option<String>,
    /// `spec.expireAfter` in seconds; `None` means Never.
    pub expire_after: Option<i64>,
    /// `status.nodeName`.
    pub node_name: Option<String>,
    /// `status.providerID`.
    pub provider_id: Option<String>,
    /// `status.capacity`.
    pub capacity: Resources,
    /// `status.allocatable`.
    pub allocatable: Resources,
    /// `status.lastPodEventTime`.
    pub last_pod_event_time: Option<Timestamp>,
    /// When it was created.
    pub creation_time: Option<Timestamp>,
    /// Set when it is being deleted.
    pub deletion_time: Option<Timestamp>,
    /// `status.imageID`: the AMI its instance runs.
    #[serde(default)]
    pub image_id: Option<String>,
}

/// NodeClaims found by their Node, as Karpenter pairs them: by `status.nodeName`, else by
/// provider ID; of several matches the first claim in the list wins. Built once per snapshot
/// so pairing every node is linear.
#[derive(Debug)]
pub struct ClaimIndex<'a> {
    claims: &'a [NodeClaim],
    by_node: std::collections::HashMap<&'a str, usize>,
    by_provider: std::collections::HashMap<&'a str, usize>,
}

impl<'a> ClaimIndex<'a> {
    /// An index over `claims`.
    pub fn new(claims: &'a [NodeClaim]) -> Self {
        let mut by_node = std::collections::HashMap::new();
        let mut by_provider = std::collections::HashMap::new();
        for (i, c) in claims.iter().enumerate() {
            if let Some(n) = c.node_name.as_deref() {
                by_node.entry(n).or_insert(i);
            }
            if let Some(p) = c.provider_id.as_deref() {
                by_provider.entry(p).or_insert(i);
            }
        }
        Self {
            claims,
            by_node,
            by_provider,
        }
    }

    /// The claim of `node`, if any.
    pub fn claim_of(&self, node: &Node) -> Option<&'a NodeClaim> {
        let named = self.by_node.get(node.name.as_str()).copied();
        let provided = node
            .provider_id
            .as_deref()
            .and_then(|p| self.by_provider.get(p).copied());
        let i = match (named, provided) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        self.claims.get(i)
    }
}
