//! A NodeClaim being built in this plan (Karpenter's `nodeclaim.go`): its pods, its narrowed
//! requirements and the instance types that can still hold all of it.

use std::borrow::Cow;

use crate::labels;
use crate::model::{HostPort, MinValuesPolicy};
use crate::requirements::{Requirements, Undefined};

use super::dims::{self, Vector};
use super::pools::{Pool, distinct_values};
use super::ports::port_conflict;
use super::signature::Sig;

/// Why a pod did not go onto a node or claim.
#[derive(Clone, Debug)]
pub(crate) struct Reject {
    /// True when the rejection can only get worse as the node fills (resources, requirements,
    /// host ports, and topology rejections that only get worse as pods are placed).
    pub(crate) permanent: bool,
    /// In words (formatted only when shown).
    pub(crate) reason: Reason,
}

/// The reason of a [`Reject`]: topology reasons are formatted only when someone reads them,
/// since the scheduler collects many rejections it never shows.
#[derive(Clone, Debug)]
pub(crate) enum Reason {
    /// Already in words (most are fixed texts: borrowed, so that the many rejections the
    /// scheduler never shows allocate nothing).
    Text(Cow<'static, str>),
    /// A topology constraint.
    Topology(Box<super::topology::Unsatisfiable>),
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Text(t) => f.write_str(t),
            Reason::Topology(u) => u.fmt(f),
        }
    }
}

impl Reject {
    pub(crate) fn permanent(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            permanent: true,
            reason: Reason::Text(reason.into()),
        }
    }

    pub(crate) fn transient(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            permanent: false,
            reason: Reason::Text(reason.into()),
        }
    }

    /// A topology rejection: permanent when it can only get worse as pods are placed.
    pub(crate) fn topology(e: super::topology::Unsatisfiable) -> Self {
        Self {
            permanent: e.is_permanent(),
            reason: Reason::Topology(Box::new(e)),
        }
    }
}

/// A claim opened in this plan.
#[derive(Clone, Debug)]
pub(crate) struct Claim {
    /// Index of its pool.
    pub(crate) pool: usize,
    /// Requirements: the template's narrowed by its pods' and topology's.
    pub(crate) reqs: Requirements,
    /// Indices into the pool's types that still fit, cheapest first.
    pub(crate) types: Vec<u32>,
    /// Slot-wise max of what pods may use (allocatable minus DaemonSets) over `types`, for a
    /// quick reject.
    pub(crate) max_alloc: Vector,
    /// Sum of its pods' requests (DaemonSet overhead not included).
    pub(crate) used: Vector,
    /// Its pods (indices of work items).
    pub(crate) pods: Vec<u32>,
    /// Host ports in use (DaemonSets' and pods').
    pub(crate) ports: Vec<HostPort>,
    /// minValues relaxed under BestEffort: (key, wanted, kept).
    pub(crate) relaxed: Vec<(String, u32, usize)>,
}

// === impl Claim ===

impl Claim {
    /// An empty claim of `pool` that may use the types `types`.
    pub(crate) fn new(pool_idx: usize, pool: &Pool<'_>, types: Vec<u32>, hostname: String) -> Self {
        let mut max_alloc = vec![0; pool.daemon.len()].into_boxed_slice();
        for &t in &types {
            dims::max_in(&mut max_alloc, &pool.types[t as usize].free);
        }
        let mut reqs = pool.reqs.clone();
        reqs.add(crate::requirements::Requirement::is_in(
            labels::HOSTNAME,
            [hostname],
        ));
        Self {
            pool: pool_idx,
            reqs,
            types,
            max_alloc,
            used: vec![0; pool.daemon.len()].into_boxed_slice(),
            pods: Vec::new(),
            ports: pool.daemon_ports.clone(),
            relaxed: Vec::new(),
        }
    }

    /// Narrows the claim to `types` (a subset of its types that holds its pods).
    pub(crate) fn set_types(&mut self, pool: &Pool<'_>, types: Vec<u32>) {
        self.max_alloc.iter_mut().for_each(|x| *x = 0);
        for &t in &types {
            dims::max_in(&mut self.max_alloc, &pool.types[t as usize].free);
        }
        self.types = types;
    }

    /// Quick check that a pod of signature `sig` may still fit by resources (no rejection by
    /// this is ever undone).
    pub(crate) fn fits(&self, sig: &Sig) -> bool {
        dims::fits2(&self.used, &sig.requests, &self.max_alloc)
    }

    /// Checks whether a pod of signature `sig` fits, returning the narrowed state on success.
    /// `topo` are extra requirements from topology (already computed by the caller).
    pub(crate) fn check(
        &self,
        pool: &Pool<'_>,
        sig: &Sig,
        topo: Option<&Requirements>,
        min_values: MinValuesPolicy,
    ) -> Result<Narrowed, Reject> {
        if !dims::fits2(&self.used, &sig.requests, &self.max_alloc) {
            return Err(Reject::permanent("not enough resources"));
        }
        if let Some(p) = port_conflict(&self.ports, &sig.host_ports) {
            return Err(Reject::permanent(format!(
                "host port {}/{} already in use",
                p.port, p.protocol
            )));
        }
        let mut new_reqs: Option<Requirements> = None;
        if !sig.reqs.is_empty() {
            pool.compatible(&self.reqs, &sig.reqs)
                .map_err(|e| Reject::permanent(format!("incompatible requirements: {e}")))?;
            let mut r = self.reqs.clone();
            r.add_all(&sig.reqs);
            if r != self.reqs {
                new_reqs = Some(r);
            }
        }
        if let Some(topo) = topo.filter(|t| !t.is_empty()) {
            let base = new_reqs.as_ref().unwrap_or(&self.reqs);
            base.compatible(topo, Undefined::AllowWellKnown)
                .map_err(|e| Reject::transient(format!("topology: {e}")))?;
            let mut r = base.clone();
            r.add_all(topo);
            if &r != base {
                new_reqs = Some(r);
            }
        }
        let reqs = new_reqs.as_ref().unwrap_or(&self.reqs);
        let mut total = self.used.clone();
        dims::add(&mut total, &sig.requests);
        let types: Vec<u32> = self
            .types
            .iter()
            .copied()
            .filter(|&t| {
                let te = &pool.types[t as usize];
                dims::fits(&total, &te.free)
                    && (new_reqs.is_none()
                        || (te.reqs.intersects(reqs).is_ok()
                            && te.cheapest_allowed(reqs).is_some()))
            })
            .collect();
        if types.is_empty() {
            let reason = if new_reqs.is_some() {
                "no remaining instance type fits and matches the requirements"
            } else {
                "no remaining instance type fits"
            };
            return Err(if topo.is_some_and(|t| !t.is_empty()) {
                Reject::transient(reason)
            } else {
                Reject::permanent(reason)
            });
        }
        let mut relaxed = Vec::new();
        for r in reqs.iter() {
            if let Some(m) = r.min_values() {
                let n = distinct_values(types.iter().map(|&t| &pool.types[t as usize]), r.key());
                if n < m as usize {
                    match min_values {
                        MinValuesPolicy::Strict => {
                            return Err(Reject::permanent(format!(
                                "minValues {m} for {} not met: only {n} left",
                                r.key()
                            )));
                        }
                        MinValuesPolicy::BestEffort => relaxed.push((r.key().to_string(), m, n)),
                    }
                }
            }
        }
        Ok(Narrowed {
            reqs: new_reqs,
            types,
            total,
            relaxed,
        })
    }

    /// Applies a successful [`Claim::check`].
    pub(crate) fn commit(&mut self, pool: &Pool<'_>, sig: &Sig, item: u32, n: Narrowed) {
        if let Some(r) = n.reqs {
            self.reqs = r;
        }
        if n.types.len() != self.types.len() {
            self.max_alloc.iter_mut().for_each(|x| *x = 0);
            for &t in &n.types {
                dims::max_in(&mut self.max_alloc, &pool.types[t as usize].free);
            }
        }
        self.types = n.types;
        self.used = n.total;
        self.pods.push(item);
        self.ports.extend(sig.host_ports.iter().cloned());
        for r in n.relaxed {
            if let Some(e) = self.relaxed.iter_mut().find(|e| e.0 == r.0) {
                e.2 = e.2.min(r.2);
            } else {
                self.relaxed.push(r);
            }
        }
    }
}

/// The state of a claim after a pod would be added.
#[derive(Clone, Debug)]
pub(crate) struct Narrowed {
    reqs: Option<Requirements>,
    types: Vec<u32>,
    total: Vector,
    relaxed: Vec<(String, u32, usize)>,
}

// === impl Narrowed ===

impl Narrowed {
    /// The types that would remain, cheapest first as the pool orders them.
    pub(crate) fn types(&self) -> &[u32] {
        &self.types
    }

    /// The claim's price after the add: its cheapest remaining type's cheapest allowed offering.
    pub(crate) fn price(&self, pool: &Pool<'_>, claim: &Claim) -> f64 {
        pool.price_of(self.reqs.as_ref().unwrap_or(&claim.reqs), &self.types)
    }
}
