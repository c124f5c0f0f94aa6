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
