//! Topology spread and pod (anti-)affinity (Karpenter's `topology.go`).
//!
//! PLACEHOLDER written by the engine helper against the interface agreed in
//! SCHEDULER-INTERFACES.md so that the scheduler compiles and calls it at the right points. The
//! topology helper replaces this file: until then no topology constraint has any effect.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{ClusterSnapshot, Pod, Taint};
use crate::requirements::Requirements;

/// What [`Topology::new`] is built from.
pub(crate) struct TopologyInput<'a> {
    /// Bound pods, nodes and namespaces.
    pub(crate) snapshot: &'a ClusterSnapshot,
    /// The pods of this solve.
    pub(crate) pending: &'a [&'a Pod],
    /// Domain universe per topology key.
    pub(crate) domains: &'a BTreeMap<String, BTreeSet<String>>,
    /// Nodes simulated as removed (disruption).
    pub(crate) excluded_nodes: &'a BTreeSet<String>,
}

/// Domain counts for topology constraints (placeholder: tracks nothing).
#[derive(Clone, Debug, Default)]
pub(crate) struct Topology {}

// === impl Topology ===

impl Topology {
    /// Builds the counts for one solve.
    pub(crate) fn new(input: &TopologyInput<'_>) -> Self {
        let _ = (
            input.snapshot,
            input.pending,
            input.domains,
            input.excluded_nodes,
        );
        Self {}
    }

    /// Extra requirements a node must satisfy so that `pod` can go there.
    pub(crate) fn add_requirements(
        &self,
        pod: &Pod,
        pod_reqs: &Requirements,
        node_reqs: &Requirements,
        taints: &[Taint],
    ) -> Result<Requirements, String> {
        let _ = (pod, pod_reqs, node_reqs, taints);
        Ok(Requirements::new())
    }

    /// Counts `pod` in the domains of `node_reqs`.
    pub(crate) fn record(&mut self, pod: &Pod, node_reqs: &Requirements, taints: &[Taint]) {
        let _ = (pod, node_reqs, taints);
    }

    /// Undoes [`Topology::record`].
    #[allow(dead_code)] // For disruption simulation; the topology helper's version is used.
    pub(crate) fn unrecord(&mut self, pod: &Pod, node_reqs: &Requirements, taints: &[Taint]) {
        let _ = (pod, node_reqs, taints);
    }

    /// Adds a domain value for a key.
    pub(crate) fn register(&mut self, key: &str, value: &str) {
        let _ = (key, value);
    }
}
