//! Scheduling signatures: pods that are identical for placement (requests, requirements,
//! tolerations, host ports) share one, so that NodePool compatibility is computed once per
//! signature and a per-signature cursor skips nodes that already rejected it for good.

use std::collections::HashMap;

use crate::model::{HostPort, Pod, Toleration};
use crate::requirements::Requirements;

use super::dims::{Dims, Vector};
use super::node_claim::normalize_ports;

/// What placement depends on, apart from topology.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Sig {
    /// Requests.
    pub(crate) requests: Vector,
    /// Requirements (with the heaviest preferred node-affinity term).
    pub(crate) reqs: Requirements,
    /// Requirements without preferences (for topology).
    pub(crate) strict: Requirements,
    /// Tolerations.
    pub(crate) tolerations: Vec<Toleration>,
    /// Host ports, normalized.
    pub(crate) host_ports: Vec<HostPort>,
    /// Whether topology may constrain the pod (its own constraints, or inverse anti-affinity
    /// somewhere in the cluster).
    pub(crate) constrained: bool,
    /// Malformed requirements: the pod cannot be placed.
    pub(crate) invalid: Option<String>,
}

/// Interned signatures.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sigs {
    map: HashMap<Sig, u32>,
    list: Vec<Sig>,
}

// === impl Sigs ===

impl Sigs {
    /// The signature id of a pod, interning it if new.
    pub(crate) fn intern(&mut self, pod: &Pod, d: &Dims, any_anti_affinity: bool) -> u32 {
        let (reqs, strict, invalid) = match (
            super::pod_requirements(pod),
            super::pod_strict_requirements(pod),
        ) {
            (Ok(r), Ok(s)) => (r, s, None),
            (Err(e), _) | (_, Err(e)) => (
                Requirements::new(),
                Requirements::new(),
                Some(format!("invalid node affinity: {e}")),
            ),
        };
        let sig = Sig {
            requests: d.vector(&pod.requests),
            reqs,
            strict,
            tolerations: pod.tolerations.clone(),
            host_ports: normalize_ports(&pod.host_ports),
            constrained: any_anti_affinity || super::has_topology_constraints(pod),
            invalid,
        };
        if let Some(&id) = self.map.get(&sig) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(sig.clone());
        self.map.insert(sig, id);
        id
    }

    /// The signature with this id.
    pub(crate) fn get(&self, id: u32) -> &Sig {
        &self.list[id as usize]
    }

    /// Number of signatures.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }
}
