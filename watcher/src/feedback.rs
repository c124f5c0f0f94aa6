//! What people see of the watcher's work: Events on pods (`Nominated` with the claim or node a
//! plan puts them on, `FailedScheduling` with the planner's reason, and one Event for a pod that
//! can never be planned), the status of NodePools (resources in use, node count, and the
//! conditions Ready, ValidationSucceeded and NodeClassReady), the NodeClaim conditions
//! Drifted and Consolidatable with the Events DisruptionBlocked and Unconsolidatable on Nodes
//! and NodeClaims (`claims`), ConsolidationApproved on Nodes, NodeClaims and NodePools
//! (`approved`), `PlannerValidationSucceeded=False` / `Ready=False` on the
//! EC2NodeClasses a plan left out, NodeOverlays' `ValidationSucceeded` / `Ready` (`overlays`,
//! under the `NodeOverlay` gate) and the status of CapacityBuffers (`buffers`).
//!
//! Feedback only reports; it never changes what is planned.

mod approved;
mod buffers;
mod claims;
mod conditions;
mod events;
mod node_class;
mod overlays;
mod status;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use tokio::sync::{mpsc, watch};

pub use buffers::resource as buffer_resource;
pub use claims::{ClaimStatus, Wanted, disruption_events, merged_conditions, wanted};
pub use events::{DisruptionEvent, Events, PodEvent, pod_events};
pub use node_class::NodeClassStatus;
pub use overlays::OverlayStatus;
pub use status::{NodePoolStatus, desired_status};

use crate::informers::Invalid;
use crate::metrics::Metrics;
use crate::mirror::Mirror;
use crate::publish::LatestPlan;

/// Why writing feedback failed (logged; feedback is retried on the next plan or tick).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes API refused or failed a write.
    #[error("writing {what}")]
    Kube {
        /// What was being written, e.g. `status of NodePool default`.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Runs the feedback loop until `stop` turns true.
#[allow(clippy::too_many_arguments)] // Wiring of one task; a struct would only rename these.
pub async fn run(
    client: kube::Client,
    reporter: Reporter,
    mirror: Mirror,
    metrics: Metrics,
    mut plans: LatestPlan,
    invalid: &mut mpsc::UnboundedReceiver<Invalid>,
    status_every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut events = Events::new(client.clone(), reporter);
    let mut status = NodePoolStatus::new(client.clone());
    let mut claims = ClaimStatus::new(client.clone());
    let mut overlays = OverlayStatus::new(client.clone());
    let mut classes = NodeClassStatus::new(client.clone());
    let mut buffers = buffers::BufferStatus::new(client);
    let mut left_out: Vec<proto::v1::ExcludedObject> = Vec::new();
    let mut tick = tokio::time::interval(status_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = crate::when(&mut stop, true) => return,
            changed = plans.changed() => {
                if changed.is_err() {
                    return;
                }
                let plan: Option<Arc<_>> = plans.borrow_and_update().clone();
                if let Some(plan) = plan {
                    metrics.note_excluded(&plan.excluded);
                    metrics.karpenter.note_node_status(&plan.node_status);
                    metrics.karpenter.note_budgets(&plan.node_pool_budgets);
                    metrics.karpenter.note_scheduling(&plan);
                    metrics.karpenter.pods.note_plan(
                        &plan,
                        service_shell::clock::Clock::new().since_epoch().as_secs_f64(),
                    );
                    // Logged when the set changes, not with every plan.
                    for e in plan.excluded.iter().filter(|e| !left_out.contains(e)) {
                        tracing::warn!(kind = %e.kind, namespace = %e.namespace, name = %e.name, reason = %e.reason, field = %e.field, message = %e.message, "Object left out of the plan");
                    }
                    left_out.clone_from(&plan.excluded);
                    status.note_plan(&plan);
                    classes.note_plan(&plan);
                    overlays.note_plan(&plan);
                    buffers.note_plan(&plan);
                    let todo = pod_events(&plan, &mirror);
                    events.publish_all(todo).await;
                    claims.note_plan(&plan, &mirror, &mut events).await;
                }
                status.reconcile(&mirror).await;
                claims.reconcile().await;
                classes.reconcile().await;
                overlays.reconcile().await;
                buffers.reconcile().await;
            }
            Some(bad) = invalid.recv() => {
                if bad.kind == crate::mirror::Kind::Pod {
                    metrics.invalid_pods.inc();
                }
                tracing::info!(kind = ?bad.kind, namespace = %bad.namespace, name = %bad.name, reason = %bad.reason, "Object cannot be planned");
                events.invalid(&bad).await;
                status.note_invalid(&bad);
            }
            _ = tick.tick() => {
                status.reconcile(&mirror).await;
                claims.reconcile().await;
                classes.reconcile().await;
                overlays.reconcile().await;
                buffers.reconcile().await;
            }
        }
    }
}
