//! The planner's model of a cluster: plain data with no wire, Kubernetes or AWS types.
//!
//! Everything scheduling and disruption need is here, already converted at the edge
//! (`planner-wire` for the `dovetail.v1` messages, which `dovetail plan`'s files reach through
//! `planner-manifests`). Units are fixed by
//! [`Resources`]; time is [`Timestamp`] seconds.

mod buffer;
mod dra;
pub mod named;
mod node;
mod nodepool;
mod overlay;
mod pod;
mod selectors;
mod snapshot;
mod workloads;

pub use buffer::CapacityBuffer;
pub use common::quantity;
pub use common::resources::{Resources, format_bytes, format_cpu, names};
pub use dra::{
    Device, DeviceClass, DeviceId, DeviceRequest, MatchAttribute, ResourceClaim, ResourceSlice,
};
pub use named::Named;
pub use node::{ClaimIndex, Node, NodeClaim};
pub use nodepool::{
    Budget, BudgetNodes, ConsolidationPolicy, Disruption, KubeletConfig, NodeClass, NodePool,
};
pub use overlay::{NodeOverlay, PriceChange};
pub use pod::{
    HostPort, NodeInclusionPolicy, OwnerRef, Pod, PodAffinityTerm, PodKey, PodPhase,
    TopologySpreadConstraint, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
pub use selectors::{
    LabelSelector, Labels, NodeSelectorTerm, Operator, PreferredTerm, Requirement,
    SelectorExpression, SelectorOperator, Taint, TaintEffect, Toleration, TolerationOperator,
};
pub use snapshot::{
    ClusterSnapshot, MinValuesPolicy, PlanOptions, PreferencePolicy, Timestamp, VmMemoryOverhead,
};
pub use workloads::{
    DaemonSet, IntOrPercent, Namespace, NamespaceLabels, PersistentVolume, PersistentVolumeClaim,
    PodDisruptionBudget, PriorityClass, StorageClass, VolumeBindingMode,
};
