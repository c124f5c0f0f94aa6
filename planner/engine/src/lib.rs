//! The dovetail planner.
//!
//! From a [`model::ClusterSnapshot`], a [`catalog::Catalog`] and [`model::PlanOptions`] it computes
//! a [`plan::Plan`]: which NodeClaims to launch for pending pods (scheduling simulation, bin
//! packing, instance-type choice) and which nodes to disrupt (consolidation, drift, expiry).
//!
//! The crate does no IO, reads no clock and sees no wire or Kubernetes types: its inputs are
//! converted into the model outside it (`planner-wire` decodes `dovetail.v1` messages, which
//! `k8s-reader` makes from Kubernetes objects; `planner-manifests` reads `dovetail plan`'s
//! files through both). The one text format it reads is the catalog file
//! (`catalog::file`).
//!
//! The crate has no gRPC, HTTP, CLI or metrics dependency: the wire conversions are in
//! `planner-wire`, the service in `planner-service`, the client in `planner-client`. Types
//! several services share (resources, catalog data, well-known keys, drift hashes) live in
//! `common` and are re-exported here.

pub mod buffers;
pub mod cancel;
pub mod catalog;
pub mod consolidation;
pub mod dra;
pub mod exclusion;
pub use common::labels;
pub mod model;
pub mod plan;
pub mod requirements;
mod scalar_text;
pub mod scheduling;
pub mod stopwatch;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub mod validation;

pub use cancel::CancelToken;
use catalog::Catalog;
use model::{ClusterSnapshot, PlanOptions};
use plan::Plan;

/// Computes the plan for a snapshot. Pure: the same arguments give the same plan.
pub fn plan(snapshot: &ClusterSnapshot, catalog: &Catalog, options: &PlanOptions) -> Plan {
    // The default token is never cancelled, so this is always the whole plan.
    plan_cancellable(snapshot, catalog, options, &CancelToken::default()).unwrap_or_default()
}

/// [`plan`] that stops soon after `cancel` is cancelled (checked once per pod placed, in the
/// launch plan and in every disruption simulation).
///
/// # Errors
/// [`cancel::Cancelled`] when `cancel` was cancelled before the plan was complete.
pub fn plan_cancellable(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    options: &PlanOptions,
    cancel: &CancelToken,
) -> Result<Plan, cancel::Cancelled> {
    plan_timed(snapshot, catalog, options, cancel, &stopwatch::Untimed)
}

/// [`plan_cancellable`] with each disruption method's evaluation run through `watch` (which
/// may time it: the engine reads no clock).
///
/// # Errors
/// [`cancel::Cancelled`] when `cancel` was cancelled before the plan was complete.
pub fn plan_timed(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    options: &PlanOptions,
    cancel: &CancelToken,
    watch: &dyn stopwatch::Stopwatch,
) -> Result<Plan, cancel::Cancelled> {
    // Karpenter's reservedENIs and vmMemoryOverheadPercent, for this plan.
    // Zones under an ARC zonal shift offer nothing.
    let adjusted = catalog::zonal_shift::apply(
        catalog::settings::for_options(catalog, options),
        &snapshot.shifted_zones,
    );
    // NodeOverlays (gate `NodeOverlay`): preview types priced by an overlay become available;
    // the per-NodePool changes are applied by the scheduler.
    let overlays = catalog::overlay::Evaluation::of(snapshot, &adjusted, options);
    let adjusted = overlays.price_previews(adjusted);
    let catalog: &Catalog = &adjusted;
    // CapacityBuffers' virtual pods join the pending pods (after every real pod).
    let buffered = buffers::with_virtual_pods(snapshot, options);
    let snapshot: &ClusterSnapshot = buffered.as_ref().map_or(snapshot, |b| &b.snapshot);
    // With `ignoreDRARequests` off, pods' ResourceClaims are allocated against the published
    // devices: pods pinned to where their devices are, or told why none can be had.
    let allocated = dra::apply(snapshot, options);
    let snapshot: &ClusterSnapshot = allocated.as_ref().unwrap_or(snapshot);
    // The NodePool tables are built once for the launch plan and every state of the
    // disruption search (they all have the input's NodePools).
    let shared = scheduling::SharedTables::new(snapshot, catalog);
    let scheduler = scheduling::Scheduler::with_shared(snapshot, catalog, options, &shared)
        .with_cancel(cancel.clone());
    let results = scheduler.solve();
    cancel.check()?;
    let mut plan = Plan::default();
    plan.summary.pending_pods = u32::try_from(scheduler.pending_count()).unwrap_or(u32::MAX);
    plan.summary.scheduled_pods = u32::try_from(results.scheduled()).unwrap_or(u32::MAX);
    plan.summary.new_node_claims = u32::try_from(results.new_claims.len()).unwrap_or(u32::MAX);
    plan.summary.cost_per_hour = results.cost();
    plan.summary.lower_bound_cost_per_hour = results.lower_bound;
    plan.node_claims = results.new_claims;
    let statics = scheduler.static_claims();
    if !statics.new_claims.is_empty() {
        plan.summary.new_node_claims = plan
            .summary
            .new_node_claims
            .saturating_add(u32::try_from(statics.new_claims.len()).unwrap_or(u32::MAX));
        plan.summary.cost_per_hour += statics.cost();
        plan.summary.lower_bound_cost_per_hour += statics.lower_bound;
        plan.node_claims.extend(statics.new_claims);
    }
    plan.existing_nodes = results
        .existing
        .into_iter()
        .map(|(name, pods)| plan::ExistingNodePlacement { name, pods })
        .collect();
    plan.unschedulable = results
        .unschedulable
        .into_iter()
        .map(|(pod, reason)| plan::Unschedulable { pod, reason })
        .collect();
    plan.options = Some(plan::OptionsUsed::of(options));
    plan.node_overlays = overlays.statuses;
    plan.notes = results.notes;
    plan.notes.extend(statics.notes);
    // What Karpenter writes on the candidates (conditions, Events), whether or not disruption
    // is planned: its NodeClaim disruption controller runs regardless.
    // One set of candidates serves the status, the budgets and the disruption search.
    let candidates = consolidation::Candidates::new(snapshot, catalog, options.now);
    plan.node_status = candidates.node_status();
    plan.node_pool_budgets = candidates.budget_status();
    if !options.no_disruption {
        let launch: Vec<(String, Vec<model::PodKey>)> = plan
            .existing_nodes
            .iter()
            .map(|e| (e.name.clone(), e.pods.clone()))
            .collect();
        let token = cancel.clone();
        let shared = &shared;
        let build = consolidation::builder(move |s, c, o| {
            Box::new(scheduling::Scheduler::with_shared(s, c, o, shared).with_cancel(token.clone()))
        });
        let outcome =
            consolidation::disrupt_candidates(candidates, catalog, options, &build, &launch, watch);
        cancel.check()?;
        match outcome {
            Ok(outcome) => {
                plan.disruptions = outcome.decisions;
                plan.consolidation_moves = outcome.moves;
                plan.notes.extend(outcome.notes);
            }
            Err(e) => plan.notes.push(format!("disruption not planned: {e}")),
        }
    }
    if let Some(b) = &buffered {
        let placed = b.finish(&mut plan, snapshot);
        let less = |n: u32, by: usize| n.saturating_sub(u32::try_from(by).unwrap_or(u32::MAX));
        plan.summary.pending_pods = less(plan.summary.pending_pods, b.virtual_count());
        plan.summary.scheduled_pods = less(plan.summary.scheduled_pods, placed);
    }
    Ok(plan)
}
