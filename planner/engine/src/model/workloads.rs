//! DaemonSets, PodDisruptionBudgets, namespaces, volumes and priority classes.

use serde::{Deserialize, Serialize};

use super::{LabelSelector, Labels, NodeSelectorTerm, Pod};

/// A DaemonSet: a pod template that runs on every node it matches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonSet {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The pod template as a pod (requests, node selector, affinity, tolerations).
    pub template: Pod,
}

/// An integer or a percentage (`minAvailable`, `maxUnavailable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IntOrPercent {
    /// Absolute.
    Int(i32),
    /// Percent of the matching pods.
    Percent(i32),
}

/// A PodDisruptionBudget.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodDisruptionBudget {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Pods it covers; `None` covers none.
    pub selector: Option<LabelSelector>,
    /// `spec.minAvailable`.
    pub min_available: Option<IntOrPercent>,
    /// `spec.maxUnavailable`.
    pub max_unavailable: Option<IntOrPercent>,
    /// `status.disruptionsAllowed` when the input carries it.
    pub disruptions_allowed: Option<i32>,
}

/// A Namespace (its labels serve `namespaceSelector`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Namespace {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
}

/// A PersistentVolumeClaim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PersistentVolumeClaim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.storageClassName`.
    pub storage_class: Option<String>,
    /// `spec.volumeName` when bound.
    pub volume_name: Option<String>,
}

/// A PersistentVolume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PersistentVolume {
    /// Name.
    pub name: String,
    /// `spec.storageClassName`.
    pub storage_class: Option<String>,
    /// `spec.nodeAffinity.required.nodeSelectorTerms` (ORed).
    pub node_affinity: Vec<NodeSelectorTerm>,
    /// `spec.local` or `spec.hostPath` is set: the volume lives on one node's disk, and its
    /// hostname affinity is ignored when provisioning (Karpenter's rule: a pod rescheduled
    /// elsewhere cannot keep that hostname, e.g. after the node is gone).
    #[serde(default)]
    pub node_local: bool,
}

/// `volumeBindingMode` of a StorageClass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VolumeBindingMode {
    /// Volumes are provisioned when the claim is created.
    #[default]
    Immediate,
    /// Volumes are provisioned where the first consumer lands.
    WaitForFirstConsumer,
}

/// A StorageClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageClass {
    /// Name.
    pub name: String,
    /// Binding mode.
    pub volume_binding_mode: VolumeBindingMode,
    /// `allowedTopologies` as node selector terms (ORed).
    pub allowed_topologies: Vec<NodeSelectorTerm>,
}

/// A PriorityClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PriorityClass {
    /// Name.
    pub name: String,
    /// Priority value.
    pub value: i32,
    /// Whether pods without a class get this one.
    pub global_default: bool,
}

/// Labels of a namespace by name, for `namespaceSelector`.
pub type NamespaceLabels = std::collections::BTreeMap<String, Labels>;
