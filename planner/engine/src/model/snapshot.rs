//! The immutable input of one plan.

use serde::{Deserialize, Serialize};

use super::{
    CapacityBuffer, DaemonSet, DeviceClass, Namespace, Node, NodeClaim, NodeClass, NodeOverlay,
    NodePool, PersistentVolume, PersistentVolumeClaim, Pod, PodDisruptionBudget, ResourceClaim,
    ResourceSlice, StorageClass,
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
    /// Zones (by name) under an active ARC zonal shift (Karpenter's `ENABLE_ZONAL_SHIFT`): their
    /// offerings are unavailable and their Nodes are not disrupted voluntarily
    /// ([`crate::catalog::zonal_shift`]).
    #[serde(default)]
    pub shifted_zones: Vec<String>,
    /// NodeOverlays (karpenter.sh/v1alpha1), applied under the `NodeOverlay` gate
    /// ([`PlanOptions::node_overlay`], [`crate::catalog::overlay`]).
    #[serde(default)]
    pub node_overlays: Vec<NodeOverlay>,
    /// CapacityBuffers, planned as virtual pods of the lowest priority while
    /// [`PlanOptions::capacity_buffer`] is on ([`crate::buffers`]).
    #[serde(default)]
    pub capacity_buffers: Vec<CapacityBuffer>,
    /// ResourceClaims, used while [`PlanOptions::ignore_dra_requests`] is off ([`crate::dra`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<ResourceClaim>,
    /// DeviceClasses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_classes: Vec<DeviceClass>,
    /// ResourceSlices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_slices: Vec<ResourceSlice>,
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// Karpenter's `NodeOverlay` feature gate: the snapshot's NodeOverlays change the prices
    /// and capacity of the instance types they select, and price preview types. Off
    /// (Karpenter's default), overlays are ignored.
    #[serde(default)]
    pub node_overlay: bool,
    /// Karpenter's `CapacityBuffer` feature gate: CapacityBuffers reserve capacity as virtual
    /// pods. Off (Karpenter's default), buffers are ignored.
    #[serde(default)]
    pub capacity_buffer: bool,
    /// Karpenter's `reservedENIs` setting: ENIs of each type's default network card left out
    /// of its ENI-limited max pods (0, the default, leaves them all).
    #[serde(default)]
    pub reserved_enis: u32,
    /// Karpenter's `vmMemoryOverheadPercent` setting (a fraction, default 0.075).
    #[serde(default)]
    pub vm_memory_overhead_percent: VmMemoryOverhead,
    /// Karpenter's `ignoreDRARequests` setting (`IGNORE_DRA_REQUESTS`, default true): a pod
    /// with Dynamic Resource Allocation requests is not planned for ([`crate::dra`]). False:
    /// such pods are planned on their other requests, devices not simulated (Karpenter v1.13).
    #[serde(default = "ignore_dra_requests_default")]
    pub ignore_dra_requests: bool,
}

fn ignore_dra_requests_default() -> bool {
    common::dra::IGNORE_DRA_REQUESTS_DEFAULT
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            now: Timestamp::default(),
            preference_policy: PreferencePolicy::default(),
            min_values_policy: MinValuesPolicy::default(),
            spot_to_spot_consolidation: false,
            no_disruption: false,
            static_capacity: false,
            node_overlay: false,
            capacity_buffer: false,
            reserved_enis: 0,
            vm_memory_overhead_percent: VmMemoryOverhead::default(),
            ignore_dra_requests: ignore_dra_requests_default(),
        }
    }
}

/// Karpenter's `vmMemoryOverheadPercent`: the fraction of an instance type's EC2 memory taken
/// off its capacity for the hypervisor (0.075, Karpenter's default, is 7.5%). Compared and
/// hashed by its bits, so that options stay usable as a key (inputs are validated: finite, at
/// least 0, below 1).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VmMemoryOverhead(pub f64);

// === impl VmMemoryOverhead ===

impl VmMemoryOverhead {
    /// Karpenter's default, 0.075.
    pub const DEFAULT: f64 = common::ec2::overhead::VM_MEMORY_OVERHEAD_FRACTION;

    /// Whether this is Karpenter's default.
    pub fn is_default(self) -> bool {
        self.0.to_bits() == Self::DEFAULT.to_bits()
    }
}

impl Default for VmMemoryOverhead {
    fn default() -> Self {
        Self(Self::DEFAULT)
    }
}

impl PartialEq for VmMemoryOverhead {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for VmMemoryOverhead {}

impl std::hash::Hash for VmMemoryOverhead {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}
