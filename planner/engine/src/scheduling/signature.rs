//! Scheduling signatures: pods that are identical for placement (requests, requirements,
//! tolerations, host ports) share one, so that NodePool compatibility is computed once per
//! signature and a per-signature cursor skips nodes that already rejected it for good.

use std::collections::HashMap;

use crate::model::{HostPort, Pod, Toleration};
use crate::requirements::Requirements;

use super::dims::{Dims, Vector};
use super::ports::normalize_ports;
use super::topology::{Identity, Topology};
use super::volumes::VolumeTopology;

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
    /// What topology sees of the pod (when constrained): pods that share a signature share the
    /// cursor of nodes that rejected them for good, topology rejections included.
    pub(crate) topology: Option<Identity>,
    /// Where volume topology requirements (already in `reqs`, not in `strict`) come from.
    pub(crate) volume: Option<String>,
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
    pub(crate) fn intern(
        &mut self,
        pod: &Pod,
        d: &Dims,
        any_anti_affinity: bool,
        volumes: &VolumeTopology<'_>,
        topology: &Topology,
    ) -> u32 {
        let (mut reqs, strict, mut invalid) = match (
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
        // Volume topology narrows where the node may be, but is not part of the pod's own
        // requirements: topology spreads count nodes by the pod's node affinity only.
        let mut volume = None;
        if !pod.volume_claims.is_empty() && invalid.is_none() {
            match volumes.requirements(pod) {
                Ok(v) if !v.is_empty() => {
                    reqs.add_all(&v.combined());
                    volume = Some(v.source);
                }
                Ok(_) => {}
                Err(e) => invalid = Some(e.to_string()),
            }
        }
        let constrained = any_anti_affinity || super::has_topology_constraints(pod);
        let sig = Sig {
            requests: d.vector(&pod.requests),
            reqs,
            strict,
            tolerations: pod.tolerations.clone(),
            host_ports: normalize_ports(&pod.host_ports),
            constrained,
            topology: constrained.then(|| topology.identity(pod)),
            volume,
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
