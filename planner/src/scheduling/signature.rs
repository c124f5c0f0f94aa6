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
    /// Whether a topology rejection of this pod by a node is for good: every constraint that
    /// applies to it is keyed on the hostname and can only tighten as pods are added (spreads,
    /// whose global minimum on hostname is always 0 since a new node can be launched, and
    /// anti-affinity, its own or other pods'), and it has no pod affinity.
    pub(crate) topology_permanent: bool,
    /// For pods with topology constraints, what topology sees of them (namespace, labels and
    /// constraints), so that pods in different groups never share a signature (and a cursor).
    pub(crate) topology: Option<Box<TopologyKey>>,
    /// Malformed requirements: the pod cannot be placed.
    pub(crate) invalid: Option<String>,
}

/// What topology sees of a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TopologyKey {
    namespace: String,
    labels: crate::model::Labels,
    spread: Vec<crate::model::TopologySpreadConstraint>,
    affinity: Vec<crate::model::PodAffinityTerm>,
    anti_affinity: Vec<crate::model::PodAffinityTerm>,
    preferred_affinity: Vec<crate::model::WeightedPodAffinityTerm>,
    preferred_anti_affinity: Vec<crate::model::WeightedPodAffinityTerm>,
}

/// Interned signatures.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sigs {
    map: HashMap<Sig, u32>,
    list: Vec<Sig>,
    /// Whether every required anti-affinity term of every pod in the snapshot is keyed on the
    /// hostname (then other pods' anti-affinity only ever rejects a node for good).
    pub(crate) inverse_hostname_only: bool,
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
            topology_permanent: self.inverse_hostname_only && hostname_only(pod),
            topology: (any_anti_affinity || super::has_topology_constraints(pod)).then(|| {
                Box::new(TopologyKey {
                    namespace: pod.namespace.clone(),
                    labels: pod.labels.clone(),
                    spread: pod.topology_spread.clone(),
                    affinity: pod.pod_affinity.clone(),
                    anti_affinity: pod.pod_anti_affinity.clone(),
                    preferred_affinity: pod.preferred_pod_affinity.clone(),
                    preferred_anti_affinity: pod.preferred_pod_anti_affinity.clone(),
                })
            }),
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

    /// Empty, with `inverse_hostname_only` as given.
    pub(crate) fn new(inverse_hostname_only: bool) -> Self {
        Self {
            inverse_hostname_only,
            ..Self::default()
        }
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

/// True when every topology constraint of the pod (spreads, anti-affinity, required or
/// preferred) is keyed on `kubernetes.io/hostname` and it has no pod affinity.
pub(crate) fn hostname_only(pod: &Pod) -> bool {
    let host = crate::labels::HOSTNAME;
    pod.pod_affinity.is_empty()
        && pod.preferred_pod_affinity.is_empty()
        && pod.topology_spread.iter().all(|t| t.topology_key == host)
        && pod.pod_anti_affinity.iter().all(|t| t.topology_key == host)
        && pod
            .preferred_pod_anti_affinity
            .iter()
            .all(|t| t.term.topology_key == host)
}
