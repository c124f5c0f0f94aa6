//! Volume topology: the extra node requirements a pod gets from its PersistentVolumeClaims
//! (Karpenter's `volumetopology.go`).
//!
//! A claim bound to a PersistentVolume with node affinity pins the pod to where the volume is
//! (each `nodeSelectorTerm` is an alternative); an unbound claim whose StorageClass binds on
//! `WaitForFirstConsumer` is restricted by the class's `allowedTopologies`. A pod whose volumes
//! cannot be resolved (missing claim, volume or class, an unbound claim of an `Immediate` class)
//! is not schedulable, with an error that names the object at fault. Volume requirements are
//! node requirements only: they are not part of the pod's node affinity, so they do not change
//! which nodes count for its topology spreads.

use std::collections::HashMap;

use thiserror::Error;

use crate::labels;
use crate::model::{
    ClusterSnapshot, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass,
    VolumeBindingMode,
};
use crate::requirements::{self, Requirements};

/// Why a pod's volumes give no usable topology.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum Error {
    /// The pod mounts a claim that is not in the input.
    #[error("PersistentVolumeClaim {namespace}/{claim} is not in the input")]
    ClaimNotFound {
        /// Namespace of the pod and claim.
        namespace: String,
        /// Claim name.
        claim: String,
    },
    /// The claim is bound to a volume that is not in the input.
    #[error(
        "PersistentVolumeClaim {namespace}/{claim} is bound to PersistentVolume {volume}, which is not in the input"
    )]
    VolumeNotFound {
        /// Namespace of the claim.
        namespace: String,
        /// Claim name.
        claim: String,
        /// Volume name.
        volume: String,
    },
    /// The claim is unbound and names no StorageClass.
    #[error("PersistentVolumeClaim {namespace}/{claim} is unbound and has no storageClassName")]
    NoStorageClass {
        /// Namespace of the claim.
        namespace: String,
        /// Claim name.
        claim: String,
    },
    /// The claim's StorageClass is not in the input.
    #[error(
        "StorageClass {class} of PersistentVolumeClaim {namespace}/{claim} is not in the input"
    )]
    StorageClassNotFound {
        /// Namespace of the claim.
        namespace: String,
        /// Claim name.
        claim: String,
        /// Class name.
        class: String,
    },
    /// The claim is unbound but its class binds immediately: the volume controller places it,
    /// not the scheduler (Karpenter skips such pods until the claim is bound).
    #[error(
        "PersistentVolumeClaim {namespace}/{claim} is unbound and StorageClass {class} binds Immediately; wait until it is bound"
    )]
    ImmediateUnbound {
        /// Namespace of the claim.
        namespace: String,
        /// Claim name.
        claim: String,
        /// Class name.
        class: String,
    },
    /// A node selector term of the volume or class is malformed.
    #[error("{object}: {source}")]
    Malformed {
        /// `PersistentVolume <name>` or `StorageClass <name>`.
        object: String,
        /// The malformed requirement.
        #[source]
        source: requirements::Error,
    },
}

/// Result of this module.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// The volume topology of one pod: alternatives (ORed), each a set of node requirements, and a
/// short description of where they come from for unschedulable reasons.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct VolumeRequirements {
    /// Alternatives; empty when the volumes do not constrain the node.
    pub(crate) alternatives: Vec<Requirements>,
    /// E.g. `volume of PersistentVolumeClaim default/data-0 (PersistentVolume pv-1)`.
    pub(crate) source: String,
}

// === impl VolumeRequirements ===

impl VolumeRequirements {
    /// True when the volumes do not constrain the node.
    pub(crate) fn is_empty(&self) -> bool {
        self.alternatives.is_empty()
    }

    /// One set of requirements standing for all alternatives: the only one; or, when every
    /// alternative constrains the same single key with `In`, the union of their values (a volume
    /// available in zone a or zone b); otherwise the first (Karpenter tries each in turn; dovetail
    /// does not yet).
    pub(crate) fn combined(&self) -> Requirements {
        match self.alternatives.as_slice() {
            [] => Requirements::new(),
            [one] => one.clone(),
            [first, rest @ ..] => {
                fn single_key(r: &Requirements) -> Option<&requirements::Requirement> {
                    let mut it = r.iter();
                    match (it.next(), it.next()) {
                        (Some(req), None) if !req.is_complement() => Some(req),
                        _ => None,
                    }
                }
                let Some(head) = single_key(first) else {
                    return first.clone();
                };
                let mut values: Vec<String> = head.values().to_vec();
                for r in rest {
                    match single_key(r) {
                        Some(req) if req.key() == head.key() => {
                            values.extend(req.values().iter().cloned())
                        }
                        _ => return first.clone(),
                    }
                }
                Requirements::from_iter([requirements::Requirement::is_in(head.key(), values)])
            }
        }
    }
}
/// Index of the snapshot's claims, volumes and classes.
#[derive(Debug)]
pub(crate) struct VolumeTopology<'a> {
    claims: HashMap<(&'a str, &'a str), &'a PersistentVolumeClaim>,
    volumes: HashMap<&'a str, &'a PersistentVolume>,
    classes: HashMap<&'a str, &'a StorageClass>,
}

// === impl VolumeTopology ===

impl<'a> VolumeTopology<'a> {
    /// Indexes `snapshot`.
    pub(crate) fn new(snapshot: &'a ClusterSnapshot) -> Self {
        Self {
            claims: snapshot
                .pvcs
                .iter()
                .map(|c| ((c.namespace.as_str(), c.name.as_str()), c))
                .collect(),
            volumes: snapshot.pvs.iter().map(|v| (v.name.as_str(), v)).collect(),
            classes: snapshot
                .storage_classes
                .iter()
                .map(|c| (c.name.as_str(), c))
                .collect(),
        }
    }

    /// The node requirements `pod`'s volumes impose. Several volumes combine as the cross
    /// product of their alternatives, keeping only combinations that can hold together (all of
    /// them when none can, so that the caller reports the conflict).
    ///
    /// # Errors
    /// When a claim, volume or class the pod depends on is missing or unusable.
    pub(crate) fn requirements(&self, pod: &Pod) -> Result<VolumeRequirements> {
        let mut out = VolumeRequirements::default();
        let mut sources = Vec::new();
        for claim_name in &pod.volume_claims {
            let (alternatives, source) = self.claim_requirements(&pod.namespace, claim_name)?;
            if alternatives.is_empty() {
                continue;
            }
            sources.push(source);
            out.alternatives = merge(std::mem::take(&mut out.alternatives), alternatives);
        }
        out.source = sources.join(" and ");
        Ok(out)
    }

    fn claim_requirements(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(Vec<Requirements>, String)> {
        let claim = self
            .claims
            .get(&(namespace, name))
            .ok_or_else(|| Error::ClaimNotFound {
                namespace: namespace.to_string(),
                claim: name.to_string(),
            })?;
        if let Some(volume_name) = claim.volume_name.as_deref().filter(|v| !v.is_empty()) {
            let volume = self
                .volumes
                .get(volume_name)
                .ok_or_else(|| Error::VolumeNotFound {
                    namespace: namespace.to_string(),
                    claim: name.to_string(),
                    volume: volume_name.to_string(),
                })?;
            let object = format!("PersistentVolume {volume_name}");
            let alts = if volume.node_local {
                // A local or hostPath volume: its hostname affinity names the node it was made
                // on, which a pod rescheduled elsewhere cannot keep (that node may be gone);
                // Karpenter drops it and keeps the rest (zone, ...). A term left empty allows
                // any node, so then there is no requirement at all.
                let stripped: Vec<NodeSelectorTerm> = volume
                    .node_affinity
                    .iter()
                    .map(|t| NodeSelectorTerm {
                        requirements: t
                            .requirements
                            .iter()
                            .filter(|r| r.key != labels::HOSTNAME)
                            .cloned()
                            .collect(),
                    })
                    .collect();
                if stripped.iter().any(|t| t.requirements.is_empty()) {
                    Vec::new()
                } else {
                    terms(&stripped, &object)?
                }
            } else {
                terms(&volume.node_affinity, &object)?
            };
            return Ok((
                alts,
                format!("volume of PersistentVolumeClaim {namespace}/{name} ({object})"),
            ));
        }
        let class_name = claim
            .storage_class
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| Error::NoStorageClass {
                namespace: namespace.to_string(),
                claim: name.to_string(),
            })?;
        let class = self
            .classes
            .get(class_name)
            .ok_or_else(|| Error::StorageClassNotFound {
                namespace: namespace.to_string(),
                claim: name.to_string(),
                class: class_name.to_string(),
            })?;
        if class.volume_binding_mode == VolumeBindingMode::Immediate {
            return Err(Error::ImmediateUnbound {
                namespace: namespace.to_string(),
                claim: name.to_string(),
                class: class_name.to_string(),
            });
        }
        let object = format!("StorageClass {class_name}");
        let alts = terms(&class.allowed_topologies, &object)?;
        Ok((
            alts,
            format!("PersistentVolumeClaim {namespace}/{name} ({object} allowedTopologies)"),
        ))
    }
}

/// Each non-empty term becomes one alternative.
fn terms(terms: &[NodeSelectorTerm], object: &str) -> Result<Vec<Requirements>> {
    terms
        .iter()
        .filter(|t| !t.requirements.is_empty())
        .map(|t| {
            Requirements::from_term(t).map_err(|source| Error::Malformed {
                object: object.to_string(),
                source,
            })
        })
        .collect()
}

/// Cross product of two lists of alternatives, keeping the compatible combinations (or all of
/// them when none is compatible, so that the conflict surfaces where the node is checked).
fn merge(existing: Vec<Requirements>, incoming: Vec<Requirements>) -> Vec<Requirements> {
    if existing.is_empty() {
        return incoming;
    }
    let combine = |a: &Requirements, b: &Requirements| {
        let mut m = a.clone();
        m.add_all(b);
        m
    };
    let compatible: Vec<Requirements> = existing
        .iter()
        .flat_map(|a| incoming.iter().map(move |b| (a, b)))
        .filter(|(a, b)| a.intersects(b).is_ok())
        .map(|(a, b)| combine(a, b))
        .collect();
    if !compatible.is_empty() {
        return compatible;
    }
    existing
        .iter()
        .flat_map(|a| incoming.iter().map(move |b| combine(a, b)))
        .collect()
}

#[cfg(test)]
mod tests;
