//! Pods as the scheduler sees them.

use serde::{Deserialize, Serialize};

use super::{
    LabelSelector, Labels, NodeSelectorTerm, PreferredTerm, Resources, Timestamp, Toleration,
};

/// `namespace/name` of a pod, the form every output uses.
pub type PodKey = String;

/// Life-cycle phase of a pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PodPhase {
    /// Not yet running (the phase of every pending pod).
    #[default]
    Pending,
    /// Running.
    Running,
    /// Terminated successfully: uses no capacity.
    Succeeded,
    /// Terminated with failure: uses no capacity.
    Failed,
    /// Unknown.
    Unknown,
}

/// The controller that owns a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OwnerRef {
    /// Kind, e.g. `ReplicaSet`, `DaemonSet`, `StatefulSet`, `Job`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Whether this reference is the managing controller.
    pub controller: bool,
}

/// A host port a container binds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostPort {
    /// Host IP; empty or `0.0.0.0` means all addresses.
    pub ip: String,
    /// Protocol: `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// Port number.
    pub port: i32,
}

/// `whenUnsatisfiable` of a topology spread constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    /// A hard constraint.
    DoNotSchedule,
    /// A preference, relaxed when it cannot be met.
    ScheduleAnyway,
}

/// Whether node affinity / taints decide which nodes count in a spread's domains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeInclusionPolicy {
    /// Only nodes that satisfy the pod's node affinity / tolerate the node's taints count.
    Honor,
    /// Every node counts.
    Ignore,
}

/// A topology spread constraint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TopologySpreadConstraint {
    /// Largest allowed difference between the fullest and emptiest domain.
    pub max_skew: i32,
    /// Node label that defines domains.
    pub topology_key: String,
    /// Hard or soft.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Pods counted; `None` counts none.
    pub label_selector: Option<LabelSelector>,
    /// Least number of domains; with fewer eligible domains the global minimum is taken as 0.
    pub min_domains: Option<i32>,
    /// Label keys whose values on the incoming pod are added to the selector.
    pub match_label_keys: Vec<String>,
    /// Default `Honor`.
    pub node_affinity_policy: NodeInclusionPolicy,
    /// Default `Ignore`.
    pub node_taints_policy: NodeInclusionPolicy,
}

/// A pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PodAffinityTerm {
    /// Pods this term is about; `None` matches none.
    pub label_selector: Option<LabelSelector>,
    /// Namespaces to look in. Empty with no `namespace_selector` means the pod's own namespace.
    pub namespaces: Vec<String>,
    /// Namespaces by label; an empty selector means all namespaces.
    pub namespace_selector: Option<LabelSelector>,
    /// Node label that defines "together" / "apart".
    pub topology_key: String,
    /// Label keys merged into the selector with the incoming pod's values (`In`).
    pub match_label_keys: Vec<String>,
    /// Label keys merged into the selector with the incoming pod's values (`NotIn`).
    pub mismatch_label_keys: Vec<String>,
}

/// A preferred pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WeightedPodAffinityTerm {
    /// Weight 1-100.
    pub weight: i32,
    /// Term.
    pub term: PodAffinityTerm,
}

/// A pod, pending or bound.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID, unique in a snapshot (synthesised from namespace/name when the input has none).
    pub uid: String,
    /// Labels.
    pub labels: Labels,
    /// Annotations (e.g. `karpenter.sh/do-not-disrupt`).
    pub annotations: Labels,
    /// Owning controller, if any.
    pub owner: Option<OwnerRef>,
    /// Effective requests as Kubernetes computes them (init containers, sidecars, overhead),
    /// with `pods` = 1.
    pub requests: Resources,
    /// `spec.nodeSelector`.
    pub node_selector: Labels,
    /// Required node affinity: terms ORed.
    pub required_node_affinity: Vec<NodeSelectorTerm>,
    /// Preferred node affinity.
    pub preferred_node_affinity: Vec<PreferredTerm>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Topology spread constraints.
    pub topology_spread: Vec<TopologySpreadConstraint>,
    /// Required pod affinity terms (ANDed).
    pub pod_affinity: Vec<PodAffinityTerm>,
    /// Preferred pod affinity terms.
    pub preferred_pod_affinity: Vec<WeightedPodAffinityTerm>,
    /// Required pod anti-affinity terms (ANDed).
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    /// Preferred pod anti-affinity terms.
    pub preferred_pod_anti_affinity: Vec<WeightedPodAffinityTerm>,
    /// Host ports of all containers.
    pub host_ports: Vec<HostPort>,
    /// Resolved priority (from `priority` or `priorityClassName`).
    pub priority: i32,
    /// Names of the PersistentVolumeClaims it mounts (in its namespace).
    pub volume_claims: Vec<String>,
    /// `spec.nodeName` when bound.
    pub node_name: Option<String>,
    /// Phase.
    pub phase: PodPhase,
    /// When it was created.
    pub creation_time: Option<Timestamp>,
    /// When it started (status.startTime).
    pub start_time: Option<Timestamp>,
    /// Set when the pod is terminating.
    pub deletion_time: Option<Timestamp>,
    /// Names of its Dynamic Resource Allocation claims (`spec.resourceClaims` and the
    /// containers' `resources.claims`); see [`Pod::has_dra_requirements`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<String>,
    /// The ResourceClaim objects (in its namespace) its `spec.resourceClaims` resolve to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claim_objects: Vec<String>,
    /// Set by [`crate::dra::apply`] for this plan: why its claims cannot be allocated anywhere.
    #[serde(skip)]
    pub dra_unsatisfiable: Option<String>,
}

// === impl Pod ===

impl Pod {
    /// `namespace/name`.
    pub fn key(&self) -> PodKey {
        common::key::namespaced(&self.namespace, &self.name)
    }

    /// True when the pod waits to be placed: no node and not terminated.
    pub fn is_pending(&self) -> bool {
        self.node_name.is_none()
            && !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
            && self.deletion_time.is_none()
    }

    /// True when the pod is bound and still uses its node's capacity.
    pub fn is_bound_active(&self) -> bool {
        self.node_name.is_some() && !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// True when a DaemonSet owns the pod.
    pub fn is_daemonset_pod(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet")
    }

    /// True when the pod references a ResourceClaim, at the pod level or from any (init)
    /// container: Karpenter's `pod.HasDRARequirements` (kubernetes-sigs/karpenter
    /// `pkg/utils/pod/scheduling.go`).
    pub fn has_dra_requirements(&self) -> bool {
        !self.resource_claims.is_empty()
    }

    /// True for a static (mirror) pod managed by the kubelet.
    pub fn is_mirror_pod(&self) -> bool {
        self.annotations.contains_key(common::labels::MIRROR_POD)
            || self.owner.as_ref().is_some_and(|o| o.kind == "Node")
    }
}
