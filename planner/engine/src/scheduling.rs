//! Provisioning simulation: which pending pods go where, with Karpenter v1's semantics.
//!
//! The [`Scheduler`] is built once per plan from the snapshot, the catalog and the options. It
//! precomputes per-NodePool instance-type tables (allocatable as flat arrays, sorted by price),
//! DaemonSet overhead per NodePool and per existing node, and the capacity left on existing
//! Nodes and in-flight NodeClaims. [`Scheduler::solve`] then places the pending pods:
//!
//! 1. pods are queued largest first (cpu, then memory, descending; then creation time and uid);
//! 2. each pod tries the existing Nodes and in-flight NodeClaims, then the claims opened so far
//!    in this plan, then a new claim from each NodePool in weight order;
//! 3. a claim keeps every instance type that still fits all its pods plus the DaemonSet
//!    overhead and whose labels and offerings satisfy the claim's requirements;
//! 4. a pod that fails is relaxed one preference step and retried after the others, until a
//!    full pass over the queue makes no progress;
//! 5. the packing is then made cheaper without breaking any rule (`packing`), and a proven
//!    lower bound on the cost of the new capacity is computed (`lower_bound`).
//!
//! [`Scheduler::simulate`] replays the same machinery with some nodes removed, for disruption.
//!
//! Speed comes from grouping pods by scheduling signature (requests, requirements, tolerations,
//! host ports): compatibility with a NodePool is computed once per signature, and each signature
//! keeps a cursor on the first node or claim that has not yet rejected it for a reason that can
//! only get worse (resources, requirements, host ports). Topology rejections are not permanent
//! and never move a cursor.

mod dims;
mod existing_node;
mod lower_bound;
pub mod lp;
mod node_claim;
mod packing;
mod pools;
mod ports;
pub(crate) mod preferences;
mod queue;
mod results;
mod room;
mod run;
mod scheduler;
mod signature;
mod static_pools;
mod tables;
pub(crate) mod topology;
mod volumes;

use crate::model::Pod;
use crate::requirements::{self, Requirement, Requirements};

pub use results::{MAX_INSTANCE_TYPES, Results};
pub use scheduler::Scheduler;
pub use static_pools::{static_pool_sizes, static_target};
pub use tables::SharedTables;

/// The requirements a pod puts on its node: `nodeSelector`, the first required node-affinity
/// term (later terms are tried by preference relaxation) and the heaviest preferred
/// node-affinity term (dropped by relaxation), as Karpenter's `NewPodRequirements` builds them.
///
/// # Errors
/// When a numeric requirement (`Gt`, `Lt`, ...) of the pod is malformed.
pub fn pod_requirements(pod: &Pod) -> requirements::Result<Requirements> {
    let mut reqs = pod_strict_requirements(pod)?;
    // The heaviest preferred term; on equal weights the first one, so the choice is stable.
    let mut best: Option<&crate::model::PreferredTerm> = None;
    for p in &pod.preferred_node_affinity {
        if best.is_none_or(|b| p.weight > b.weight) {
            best = Some(p);
        }
    }
    if let Some(p) = best {
        for r in &p.term.requirements {
            reqs.add(Requirement::from_input(r)?);
        }
    }
    Ok(reqs)
}

/// The pod's requirements without preferences: `nodeSelector` plus the first required
/// node-affinity term (Karpenter's `NewStrictPodRequirements`).
///
/// # Errors
/// When a numeric requirement of the pod is malformed.
pub fn pod_strict_requirements(pod: &Pod) -> requirements::Result<Requirements> {
    let mut reqs = Requirements::from_labels(&pod.node_selector);
    if let Some(term) = pod.required_node_affinity.first() {
        for r in &term.requirements {
            reqs.add(Requirement::from_input(r)?);
        }
    }
    Ok(reqs)
}

/// True when the pod has constraints whose feasibility depends on where other pods are
/// (topology spread, pod affinity or anti-affinity).
pub(crate) fn has_topology_constraints(pod: &Pod) -> bool {
    !pod.topology_spread.is_empty()
        || !pod.pod_affinity.is_empty()
        || !pod.pod_anti_affinity.is_empty()
        || !pod.preferred_pod_affinity.is_empty()
        || !pod.preferred_pod_anti_affinity.is_empty()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) mod test_util;
