//! Dynamic Resource Allocation objects (resource.k8s.io/v1) as the planner reads them while
//! `ignoreDRARequests` is off ([`crate::dra`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::NodeSelectorTerm;

/// One device request of a ResourceClaim (`spec.devices.requests[]`, its `exactly` form).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRequest {
    /// Request name.
    pub name: String,
    /// `deviceClassName`.
    pub device_class_name: String,
    /// allocationMode `ExactCount`: how many devices.
    pub count: i64,
    /// allocationMode `All`: every matching device.
    pub all: bool,
    /// CEL expressions of the request's selectors.
    pub selectors: Vec<String>,
    /// The request uses `firstAvailable`, which Karpenter v1.14 does not allocate.
    pub first_available: bool,
}

/// A device: driver, pool and name.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceId {
    /// Driver.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device name.
    pub device: String,
}

/// A `matchAttribute` constraint: the devices of the named requests (all when empty) share the
/// attribute's value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchAttribute {
    /// Qualified attribute name.
    pub attribute: String,
    /// Requests it applies to; empty: all.
    pub requests: Vec<String>,
}

/// A ResourceClaim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceClaim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Device requests.
    pub requests: Vec<DeviceRequest>,
    /// `matchAttribute` constraints.
    pub match_attributes: Vec<MatchAttribute>,
    /// A constraint Karpenter v1.14 does not allocate (`distinctAttribute`).
    pub unsupported_constraint: bool,
    /// `status.allocation` is set.
    pub allocated: bool,
    /// `status.allocation.nodeSelector` (matchExpressions).
    pub allocation_node_selector: Vec<NodeSelectorTerm>,
    /// Devices of `status.allocation.devices.results`.
    pub allocated_devices: Vec<DeviceId>,
    /// UIDs of the pods in `status.reservedFor`.
    pub reserved_for_pods: Vec<String>,
    /// `status.reservedFor` names a consumer that is not a pod.
    pub reserved_by_other: bool,
}

/// A DeviceClass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceClass {
    /// Name.
    pub name: String,
    /// CEL expressions of its selectors.
    pub selectors: Vec<String>,
    /// A selector that is not CEL.
    pub unsupported_selector: bool,
}

/// A device of a ResourceSlice.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Name, unique in its pool.
    pub name: String,
    /// Attributes by qualified name (`domain/name`), each a literal: a JSON string (string and
    /// version attributes), digits (int), `true`/`false` (bool).
    pub attributes: BTreeMap<String, String>,
}

/// A ResourceSlice.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSlice {
    /// Name.
    pub name: String,
    /// Driver.
    pub driver: String,
    /// Pool name.
    pub pool: String,
    /// Pool generation.
    pub pool_generation: i64,
    /// Slices in the pool at this generation.
    pub resource_slice_count: i64,
    /// `spec.nodeName`: reachable from that Node only.
    pub node_name: String,
    /// `spec.allNodes`.
    pub all_nodes: bool,
    /// `spec.nodeSelector` (matchExpressions).
    pub node_selector: Vec<NodeSelectorTerm>,
    /// The Node of an ownerReference of kind Node.
    pub owner_node: String,
    /// Devices.
    pub devices: Vec<Device>,
    /// `spec.sharedCounters` is set.
    pub shared_counters: bool,
}
