//! The immutable input of one plan.

use serde::{Deserialize, Serialize};

use super::{
    DaemonSet, Namespace, Node, NodeClaim, NodeClass, NodePool, PersistentVolume,
    PersistentVolumeClaim, Pod, PodDisruptionBudget, StorageClass,
};

pub use common::Timestamp;

/// Everything a plan is computed from, apart from the catalog and the options.
///
/// Order of every list is the input order; the planner sorts where it needs an order so that the
/// same set of objects always gives the same plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterSnapshot {
    /// Pods, pending and bound.
    pub pods: Vec<Pod>,
    /// Existing nodes.
    pub nodes: Vec<Node>,
    /// NodeClaims, launched or in flight.
    pub node_claims: Vec<NodeClaim>,
    /// NodePools.
    pub node_pools: Vec<NodePool>,
    /// EC2NodeClasses.
    pub node_classes: Vec<NodeClass>,
    /// DaemonSets.
    pub daemon_sets: Vec<DaemonSet>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Namespaces.
    pub namespaces: Vec<Namespace>,
    /// PersistentVolumeClaims.
    pub pvcs: Vec<PersistentVolumeClaim>,
    /// PersistentVolumes.
    pub pvs: Vec<PersistentVolume>,
    /// StorageClasses.
    pub storage_classes: Vec<StorageClass>,
}

/// `--preference-policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PreferencePolicy {
    /// Preferred affinities and ScheduleAnyway spreads are honoured, relaxed one by one.
    #[default]
    Respect,
    /// Preferences are dropped up front.
    Ignore,
}

/// `--min-values-policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MinValuesPolicy {
    /// A claim that cannot keep `minValues` distinct values is not launched.
    #[default]
    Strict,
    /// `minValues` is relaxed to what can be met.
    BestEffort,
}

/// Options that change decisions (the flags of `dovetail plan`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PlanOptions {
    /// The clock for time-based rules.
    pub now: Timestamp,
    /// Preference policy.
    pub preference_policy: PreferencePolicy,
    /// minValues policy.
    pub min_values_policy: MinValuesPolicy,
    /// Allow replacing a spot node with a cheaper spot node.
    pub spot_to_spot_consolidation: bool,
    /// Compute only the launch plan.
    pub no_disruption: bool,
    /// Karpenter's `StaticCapacity` feature gate: static NodePools (`spec.replicas`) launch and
    /// scale. Off (Karpenter's default), a static NodePool launches nothing.
    #[serde(default)]
    pub static_capacity: bool,
}
