//! Resource vectors as flat arrays: one slot per resource that matters in a solve.
//!
//! The solve fixes the list of resource names once (cpu, memory, ephemeral-storage, pods, then
//! every extended resource seen anywhere, sorted), so that fit checks in the hot loop are a
//! loop over a few `i64`s with no map lookups and no allocation.

use crate::model::{Resources, names};

/// Index of cpu in every vector.
pub(crate) const CPU: usize = 0;
/// Index of memory.
pub(crate) const MEMORY: usize = 1;
/// Index of ephemeral storage.
pub(crate) const EPHEMERAL: usize = 2;
/// Index of pods.
pub(crate) const PODS: usize = 3;

/// The pseudo-resource a NodePool's `spec.limits.nodes` limits: every node counts one (1000
/// milli-units) in its capacity and pods request none of it.
pub(crate) const NODES: &str = "nodes";

/// A resource vector laid out by [`Dims`].
pub(crate) type Vector = Box<[i64]>;

/// The resource names of one solve and conversions to and from [`Resources`].
#[derive(Clone, Debug)]
pub(crate) struct Dims {
    names: Vec<String>,
    /// Slot of [`NODES`], when some NodePool limits it.
    nodes: Option<usize>,
}

// === impl Dims ===

impl Dims {
    /// The four built-in resources plus `extended` (deduplicated, sorted).
    pub(crate) fn new<'a>(extended: impl IntoIterator<Item = &'a String>) -> Self {
        let mut ext: Vec<String> = extended.into_iter().cloned().collect();
        ext.sort();
        ext.dedup();
        let mut names_: Vec<String> = [
            names::CPU,
            names::MEMORY,
            names::EPHEMERAL_STORAGE,
            names::PODS,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        names_.extend(ext);
        let nodes = names_.iter().position(|n| n == NODES);
        Self {
            names: names_,
            nodes,
        }
    }

    /// A node's capacity as NodePool limits count it: [`Dims::vector`] plus one node in the
    /// [`NODES`] slot when there is one.
    pub(crate) fn node_capacity(&self, r: &Resources) -> Vector {
        let mut v = self.vector(r);
        if let Some(s) = self.nodes {
            v[s] = 1000;
        }
        v
    }

    /// Number of slots.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// Name of slot `i`.
    pub(crate) fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// All zeros.
    pub(crate) fn zero(&self) -> Vector {
        vec![0; self.len()].into_boxed_slice()
    }

    /// Requests as a vector (resources this solve does not know are dropped: nothing offers
    /// them, which [`Dims::unknown`] reports).
    pub(crate) fn vector(&self, r: &Resources) -> Vector {
        let mut v = self.zero();
        v[CPU] = r.cpu;
        v[MEMORY] = r.memory;
        v[EPHEMERAL] = r.ephemeral_storage;
        v[PODS] = r.pods;
        for (i, name) in self.names.iter().enumerate().skip(4) {
            v[i] = r.extended.get(name).copied().unwrap_or(0);
        }
        v
    }

    /// Allocatable as a vector. Ephemeral storage of zero means "not reported" and is treated
    /// as unlimited, since catalogs and nodes often omit it.
    pub(crate) fn capacity(&self, r: &Resources) -> Vector {
        let mut v = self.vector(r);
        if r.ephemeral_storage == 0 {
            v[EPHEMERAL] = i64::MAX / 4;
        }
        v
    }

    /// Back to [`Resources`].
    pub(crate) fn resources(&self, v: &[i64]) -> Resources {
        let mut r = Resources::default();
        for (i, name) in self.names.iter().enumerate() {
            if v[i] != 0 && !(i == EPHEMERAL && v[i] >= i64::MAX / 8) {
                r.set(name, v[i]);
            }
        }
        r
    }
}

/// `a ≤ cap` in every slot.
#[inline]
pub(crate) fn fits(a: &[i64], cap: &[i64]) -> bool {
    a.iter().zip(cap).all(|(x, c)| x <= c)
}

/// `a + b ≤ cap` in every slot.
#[inline]
pub(crate) fn fits2(a: &[i64], b: &[i64], cap: &[i64]) -> bool {
    a.iter()
        .zip(b)
        .zip(cap)
        .all(|((x, y), c)| x.saturating_add(*y) <= *c)
}

/// `a += b`.
#[inline]
pub(crate) fn add(a: &mut [i64], b: &[i64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}

/// `a -= b`.
#[inline]
pub(crate) fn sub(a: &mut [i64], b: &[i64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_sub(*y);
    }
}

/// `a = max(a, b)` slot by slot.
#[inline]
pub(crate) fn max_in(a: &mut [i64], b: &[i64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}
