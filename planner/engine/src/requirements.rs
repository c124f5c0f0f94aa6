//! The requirements algebra: sets of allowed label values per key, their intersection and
//! compatibility, with Karpenter's rules for well-known labels; taints and tolerations.
//!
//! Used by everything that matches labels: NodePools against pods, instance types against
//! claims, existing nodes against pods, topology domains, drift.

mod requirement;
pub mod taints;
pub mod well_known;

use std::fmt;

use thiserror::Error;

use crate::model::{Labels, NodeSelectorTerm, Operator, Requirement as InputRequirement};

pub use requirement::Requirement;

/// A requirement in the input that cannot be turned into a set.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A numeric operator (`Gt`, `Lt`, `Gte`, `Lte`) with a value that is not an integer.
    #[error("requirement {key} {operator:?}: value {value:?} is not an integer")]
    NotAnInteger {
        /// Label key.
        key: String,
        /// Operator.
        operator: Operator,
        /// The value given.
        value: String,
    },
    /// A numeric operator without exactly one value.
    #[error("requirement {key} {operator:?}: needs exactly one value, got {count}")]
    WrongValueCount {
        /// Label key.
        key: String,
        /// Operator.
        operator: Operator,
        /// How many values were given.
        count: usize,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why two requirement sets cannot hold together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incompatibility {
    /// The incoming set needs a custom label that the existing set does not define.
    Undefined {
        /// The incoming requirement.
        incoming: Box<Requirement>,
    },
    /// Both define the key and allow no common value.
    Disjoint {
        /// The existing requirement.
        existing: Box<Requirement>,
        /// The incoming requirement.
        incoming: Box<Requirement>,
    },
}

// === impl Incompatibility ===

impl Incompatibility {
    /// The label key at fault.
    pub fn key(&self) -> &str {
        match self {
            Incompatibility::Undefined { incoming } => incoming.key(),
            Incompatibility::Disjoint { incoming, .. } => incoming.key(),
        }
    }
}

impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Incompatibility::Undefined { incoming } => write!(
                f,
                "label {:?} does not have known values (requires {incoming})",
                incoming.key()
            ),
            Incompatibility::Disjoint { existing, incoming } => {
                write!(f, "{incoming} conflicts with {existing}")
            }
        }
    }
}

/// Whether labels that the existing set does not define are allowed in [`Requirements::compatible`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Undefined {
    /// Only well-known labels may be undefined (Karpenter's rule for NodePools and claims:
    /// instance types define them later).
    AllowWellKnown,
    /// Any label may be undefined.
    AllowAll,
    /// No label may be undefined (except with `NotIn` / `DoesNotExist`).
    Deny,
}

/// Requirements on several keys: at most one [`Requirement`] per key, kept sorted by key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirements {
    reqs: Vec<Requirement>,
}

// === impl Requirements ===

impl Requirements {
    /// No requirements (every node matches).
    pub fn new() -> Self {
        Self::default()
    }

    /// From input requirements (a NodePool's or NodeClaim's), intersecting repeated keys.
    ///
    /// # Errors
    /// When a numeric requirement is malformed.
    pub fn from_input(input: &[InputRequirement]) -> Result<Self> {
        let mut out = Self::new();
        for r in input {
            out.add(Requirement::from_input(r)?);
        }
        Ok(out)
    }

    /// From a node selector term (`matchExpressions`), intersecting repeated keys.
    ///
    /// # Errors
    /// When a numeric requirement is malformed.
    pub fn from_term(term: &NodeSelectorTerm) -> Result<Self> {
        Self::from_input(&term.requirements)
    }

    /// `key In [value]` for every label (a node selector, a template's labels).
    pub fn from_labels(labels: &Labels) -> Self {
        let mut out = Self::new();
        for (k, v) in labels {
            out.add(Requirement::is_in(k.clone(), [v.clone()]));
        }
        out
    }

    /// Adds a requirement, intersecting it with the one on the same key if any.
    pub fn add(&mut self, r: Requirement) {
        match self.reqs.binary_search_by(|x| x.key().cmp(r.key())) {
            Ok(i) => {
                let merged = self.reqs[i].intersect(&r);
                self.reqs[i] = merged;
            }
            Err(i) => self.reqs.insert(i, r),
        }
    }

    /// Adds every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        for r in &other.reqs {
            self.add(r.clone());
        }
    }

    /// The requirement on `key`, if the set constrains it.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.reqs
            .binary_search_by(|x| x.key().cmp(key))
            .ok()
            .map(|i| &self.reqs[i])
    }

    /// True when `key` is constrained.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Removes the requirement on `key`.
    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        match self.reqs.binary_search_by(|x| x.key().cmp(key)) {
            Ok(i) => Some(self.reqs.remove(i)),
            Err(_) => None,
        }
    }

    /// Requirements in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.reqs.iter()
    }

    /// Number of keys constrained.
    pub fn len(&self) -> usize {
        self.reqs.len()
    }

    /// True when nothing is constrained.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Karpenter's compatibility check of `incoming` (e.g. a pod's requirements) against `self`
    /// (e.g. a NodePool's or claim's): every key `incoming` constrains must either be defined by
    /// `self` with at least one common value, or be allowed to be undefined (see [`Undefined`];
    /// `NotIn` and `DoesNotExist` are always allowed undefined). Two keys with no common value
    /// are still compatible when both allow the label to be absent.
    ///
    /// # Errors
    /// The first incompatibility in key order.
    pub fn compatible(
        &self,
        incoming: &Requirements,
        undefined: Undefined,
    ) -> Result<(), Incompatibility> {
        self.compatible_allowing(incoming, undefined, &|_| false)
    }

    /// [`Requirements::compatible`] where the keys `also` accepts may be undefined too (a
    /// NodePool's instance types define the custom labels of a catalog, as they define the
    /// well-known ones).
    ///
    /// # Errors
    /// The first incompatibility in key order.
    pub fn compatible_allowing(
        &self,
        incoming: &Requirements,
        undefined: Undefined,
        also: &dyn Fn(&str) -> bool,
    ) -> Result<(), Incompatibility> {
        for inc in &incoming.reqs {
            match self.get(inc.key()) {
                None => {
                    let allowed = match undefined {
                        Undefined::AllowAll => true,
                        Undefined::AllowWellKnown => {
                            well_known::is_well_known(inc.key()) || also(inc.key())
                        }
                        Undefined::Deny => false,
                    };
                    if !allowed && !inc.allows_absent() {
                        return Err(Incompatibility::Undefined {
                            incoming: Box::new(inc.clone()),
                        });
                    }
                }
                Some(existing) => {
                    if !(existing.intersects(inc)
                        || inc.allows_absent() && existing.allows_absent())
                    {
                        return Err(Incompatibility::Disjoint {
                            existing: Box::new(existing.clone()),
                            incoming: Box::new(inc.clone()),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Karpenter's `Intersects`: only keys both sets constrain are checked.
    ///
    /// # Errors
    /// The first key with no common value (unless both allow the label to be absent).
    pub fn intersects(&self, other: &Requirements) -> Result<(), Incompatibility> {
        self.compatible_keys(other)
    }

    fn compatible_keys(&self, other: &Requirements) -> Result<(), Incompatibility> {
        let (mut i, mut j) = (0, 0);
        while i < self.reqs.len() && j < other.reqs.len() {
            let (a, b) = (&self.reqs[i], &other.reqs[j]);
            match a.key().cmp(b.key()) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    if !(a.intersects(b) || a.allows_absent() && b.allows_absent()) {
                        return Err(Incompatibility::Disjoint {
                            existing: Box::new(a.clone()),
                            incoming: Box::new(b.clone()),
                        });
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        Ok(())
    }

    /// True when a concrete node with `labels` satisfies every requirement (a missing label
    /// satisfies only `NotIn` and `DoesNotExist`).
    pub fn matches_labels(&self, labels: &Labels) -> bool {
        self.reqs.iter().all(|r| match labels.get(r.key()) {
            Some(v) => r.has(v),
            None => r.allows_absent(),
        })
    }

    /// The first requirement a node with `labels` does not satisfy.
    pub fn first_unmatched(&self, labels: &Labels) -> Option<&Requirement> {
        self.reqs.iter().find(|r| match labels.get(r.key()) {
            Some(v) => !r.has(v),
            None => !r.allows_absent(),
        })
    }

    /// Labels implied by single-valued `In` requirements, excluding restricted labels such as
    /// `kubernetes.io/hostname`.
    pub fn labels(&self) -> Labels {
        self.reqs
            .iter()
            .filter(|r| !well_known::is_restricted(r.key()))
            .filter_map(|r| {
                r.single_value()
                    .map(|v| (r.key().to_string(), v.to_string()))
            })
            .collect()
    }

    /// True when any requirement allows no value at all and does not allow absence either
    /// (an impossible set, e.g. after intersecting disjoint `In`s).
    pub fn first_empty(&self) -> Option<&Requirement> {
        self.reqs.iter().find(|r| r.is_empty())
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.reqs.iter().map(ToString::to_string).collect();
        write!(f, "{}", parts.join(", "))
    }
}

impl FromIterator<Requirement> for Requirements {
    fn from_iter<T: IntoIterator<Item = Requirement>>(iter: T) -> Self {
        let mut out = Self::new();
        for r in iter {
            out.add(r);
        }
        out
    }
}

#[cfg(test)]
mod tests;
