//! The dovetail planner.
//!
//! From a [`model::ClusterSnapshot`], a [`catalog::Catalog`] and [`model::PlanOptions`] it computes
//! a [`plan::Plan`]: which NodeClaims to launch for pending pods (scheduling simulation, bin
//! packing, instance-type choice) and which nodes to disrupt (consolidation, drift, expiry).
//!
//! The core (`model`, `requirements`, `catalog` types, `scheduling`, `consolidation`) does no IO,
//! reads no clock and sees no wire types. Edge modules convert inputs into the model:
//! `manifests` reads Kubernetes YAML/JSON.

pub mod catalog;
pub mod consolidation;
pub mod labels;
pub mod model;
pub mod plan;
pub mod requirements;

use catalog::Catalog;
use model::{ClusterSnapshot, PlanOptions};
use plan::Plan;

/// Computes the plan for a snapshot. Pure: the same arguments give the same plan.
pub fn plan(snapshot: &ClusterSnapshot, catalog: &Catalog, options: &PlanOptions) -> Plan {
    let _ = (snapshot, catalog, options);
    Plan::default()
}
