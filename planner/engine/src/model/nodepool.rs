//! NodePools (`karpenter.sh/v1`) and EC2NodeClasses (`karpenter.k8s.aws/v1`).

use serde::{Deserialize, Serialize};

use super::{Labels, Requirement, Resources, Taint};

/// `spec.disruption.consolidationPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    /// Only empty nodes are consolidated.
    WhenEmpty,
    /// Empty and underutilized nodes are consolidated (the default).
    #[default]
    WhenEmptyOrUnderutilized,
    /// Karpenter v1.14's `Balanced`: empty nodes are consolidated, and an underutilized move
    /// only when its savings justify its disruption (`consolidation::balanced`).
    Balanced,
}

// === impl ConsolidationPolicy ===

impl ConsolidationPolicy {
    /// The name in NodePools (`spec.disruption.consolidationPolicy`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConsolidationPolicy::WhenEmpty => "WhenEmpty",
            ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
            ConsolidationPolicy::Balanced => "Balanced",
        }
    }
}

/// `nodes` of a disruption budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BudgetNodes {
    /// An absolute number of nodes.
    Count(u32),
    /// A percentage of the NodePool's nodes, rounded up.
    Percent(u32),
}

/// One disruption budget of a NodePool.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Budget {
    /// How many nodes may be disrupting at once.
    pub nodes: BudgetNodes,
    /// Reasons it applies to (`Empty`, `Underutilized`, `Drifted`); empty means all.
    pub reasons: Vec<String>,
    /// Cron schedule (5 fields, UTC) when the budget becomes active; `None` means always.
    pub schedule: Option<String>,
    /// How long it stays active after each schedule hit, in seconds.
    pub duration: Option<i64>,
}

/// `spec.disruption` of a NodePool.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Disruption {
    /// Policy.
    pub consolidation_policy: ConsolidationPolicy,
    /// Seconds since the last pod event before a node is considered; `None` means Never.
    pub consolidate_after: Option<i64>,
    /// Budgets; Karpenter's default is one budget of `nodes: 10%`.
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Self {
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after: Some(0),
            budgets: vec![Budget {
                nodes: BudgetNodes::Percent(10),
                reasons: Vec::new(),
                schedule: None,
                duration: None,
            }],
        }
    }
}

/// A NodePool: what may be launched and how it may be disrupted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodePool {
    /// Name.
    pub name: String,
    /// `spec.weight`: higher is tried first.
    pub weight: i32,
    /// `spec.template.metadata.labels`.
    pub labels: Labels,
    /// `spec.template.metadata.annotations`.
    pub annotations: Labels,
    /// `spec.template.spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.template.spec.startupTaints`.
    pub startup_taints: Vec<Taint>,
    /// `spec.template.spec.requirements`.
    pub requirements: Vec<Requirement>,
    /// `spec.template.spec.nodeClassRef.name`.
    pub node_class: Option<String>,
    /// `spec.template.spec.expireAfter` in seconds; `None` means Never. Karpenter's default is
    /// 720h.
    pub expire_after: Option<i64>,
    /// `spec.limits`; a resource that is absent is unlimited.
    pub limits: Option<Resources>,
    /// Names of the resources that `limits` names (absent ones are unlimited).
    pub limited_resources: Vec<String>,
    /// `spec.disruption`.
    pub disruption: Disruption,
    /// Hash of the template as dovetail computes it for drift (`karpenter.sh/nodepool-hash`).
    pub template_hash: String,
    /// `metadata.deletionTimestamp`: a NodePool being deleted launches nothing.
    #[serde(default)]
    pub deletion_time: Option<super::Timestamp>,
    /// `metadata.annotations` of the NodePool object itself (for example the
    /// `karpenter.sh/nodepool-hash` and `-hash-version` that Karpenter keeps there).
    #[serde(default)]
    pub metadata_annotations: Labels,
    /// `spec.replicas`: a static NodePool keeps exactly this many NodeClaims (within
    /// `limits.nodes`) and launches nothing for pending pods; `None` is a dynamic pool.
    #[serde(default)]
    pub replicas: Option<i64>,
}

/// Kubelet settings of an EC2NodeClass that change what a node can hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeletConfig {
    /// `maxPods`.
    pub max_pods: Option<i64>,
    /// `podsPerCore`.
    pub pods_per_core: Option<i64>,
    /// `kubeReserved`.
    pub kube_reserved: Option<Resources>,
    /// `systemReserved`.
    pub system_reserved: Option<Resources>,
    /// `evictionHard` memory.available and nodefs.available, as absolute amounts where given.
    pub eviction_hard: Option<Resources>,
    /// `evictionHard` thresholds given as percentages, by resource name (`memory` for
    /// memory.available, `ephemeral-storage` for nodefs.available), in milli-percent
    /// (`10%` is 10000) of the node's capacity of that resource (memory net of the VM overhead,
    /// the root volume's ephemeral storage), as karpenter-provider-aws computes them.
    #[serde(default)]
    pub eviction_hard_percent: std::collections::BTreeMap<String, i64>,
}

/// An EC2NodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeClass {
    /// Name.
    pub name: String,
    /// `spec.amiFamily` or the family of `spec.amiSelectorTerms[].alias`.
    pub ami_family: Option<String>,
    /// `spec.kubelet`.
    pub kubelet: KubeletConfig,
    /// Hash of the spec (`karpenter.k8s.aws/ec2nodeclass-hash`).
    pub spec_hash: String,
    /// Size in bytes of the root volume from `spec.blockDeviceMappings` (the mapping marked
    /// `rootVolume`, else the AMI family's root device), which Karpenter uses as the node's
    /// ephemeral-storage capacity; `None` when not given (Karpenter's default is 20Gi).
    #[serde(default)]
    pub root_volume_size: Option<i64>,
    /// `metadata.annotations` of the EC2NodeClass object itself.
    #[serde(default)]
    pub metadata_annotations: Labels,
    /// The AMI IDs of `status.amis` (what the actuator resolved the selectors to); `None`
    /// when the status lists none, and then AMI drift is not decided.
    #[serde(default)]
    pub resolved_amis: Option<Vec<String>>,
    /// The subnet IDs of `status.subnets`; `None` when the status lists none, and then subnet
    /// drift is not decided.
    #[serde(default)]
    pub resolved_subnets: Option<Vec<String>>,
    /// The security group IDs of `status.securityGroups`; `None` when the status lists none,
    /// and then security group drift is not decided.
    #[serde(default)]
    pub resolved_security_groups: Option<Vec<String>>,
    /// Why the actuator's status says the class cannot launch (its resolution conditions that
    /// are False); empty when it can or has no status yet. Such a class is left out of the plan.
    #[serde(default)]
    pub not_ready: String,
}
