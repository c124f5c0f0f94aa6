//! The network edge: `dovetail.v1.Actuator/Submit`. Proto types never leave this module.
//!
//! A submission is validated whole (a malformed command is INVALID_ARGUMENT naming the field,
//! and nothing is recorded), then its launches are recorded in one ledger transaction
//! ([`crate::ledger::Ledger::submit`]): a known key is `Duplicate`, a stale plan's new launches
//! are `Rejected` with the reason, the rest `Accepted`; the worker is then woken. Disrupt
//! commands are proposals ([`crate::ledger::Ledger::propose`]): `Accepted` when first recorded
//! (not executed yet) and again when a plan at least the confirmation delay later confirms them
//! (the executor, [`crate::disruption`], then carries them out); `Duplicate` while waiting for
//! confirmation or once executing; `Rejected` from a stale plan.
//!
//! `Catalog` serves the live catalog ([`crate::catalog::LiveCatalog`]) with its version, and
//! leaves the catalog out when the caller already holds that version.

mod catalog;
mod convert;

use std::sync::Arc;
use std::time::Duration;

use proto::v1 as pb;
use tokio::sync::Notify;
use tonic::{Request, Response, Status};

use crate::catalog::LiveCatalog;
use crate::ledger::{Ledger, Outcome, ProposalOutcome, Proposals};
use crate::metrics::Metrics;
use service_shell::clock::{Clock, millis};

pub use convert::{Invalid, submission};

/// Status of an accepted command.
pub const ACCEPTED: &str = "Accepted";
/// Status of a command whose key was already known.
pub const DUPLICATE: &str = "Duplicate";
/// Status of a refused command.
pub const REJECTED: &str = "Rejected";
/// The default delay between a disruption's first proposal and the plan that may confirm it.
pub const CONFIRM_AFTER: Duration = Duration::from_secs(15);

/// The Actuator gRPC service.
#[derive(Clone)]
pub struct ActuatorService {
    ledger: Arc<dyn Ledger>,
    clock: Clock,
    metrics: Metrics,
    wake: Arc<Notify>,
    catalog: Option<Arc<LiveCatalog>>,
    confirm_after: Duration,
}

// === impl ActuatorService ===

impl ActuatorService {
    /// A service recording into `ledger` and waking `wake` (the worker) after accepting.
    pub fn new(ledger: Arc<dyn Ledger>, clock: Clock, metrics: Metrics, wake: Arc<Notify>) -> Self {
        Self {
            ledger,
            clock,
            metrics,
            wake,
            catalog: None,
            confirm_after: CONFIRM_AFTER,
        }
    }

    /// Serves `catalog` on `Catalog` (without it, `Catalog` is FAILED_PRECONDITION).
    pub fn with_catalog(mut self, catalog: Arc<LiveCatalog>) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// A disruption executes only when a plan whose `basis.now` is at least `d` after its first
    /// proposal proposes it again (default [`CONFIRM_AFTER`]).
    pub fn with_confirm_after(mut self, d: Duration) -> Self {
        self.confirm_after = d;
        self
    }

    /// The tonic server for this service.
    pub fn into_server(self) -> pb::actuator_server::ActuatorServer<Self> {
        pb::actuator_server::ActuatorServer::new(self)
    }
}

#[tonic::async_trait]
impl pb::actuator_server::Actuator for ActuatorService {
    async fn submit(
        &self,
        request: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let started = tokio::time::Instant::now();
        let req = request.into_inner();
        let (submission, disruptions) =
            submission(&req).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let unavailable = |e: crate::ledger::Error| {
            self.metrics.ledger_error();
            tracing::warn!(error = %e, "Ledger unavailable; submission not recorded");
            Status::unavailable(format!("ledger unavailable: {e}"))
        };
        let outcomes = self
            .ledger
            .submit(&submission, self.clock.now_ms())
            .await
            .map_err(unavailable)?;
        let proposals = if disruptions.is_empty() {
            Vec::new()
        } else {
            let reasons: std::collections::BTreeMap<String, String> = disruptions
                .iter()
                .map(|d| (d.idempotency_key.clone(), d.reason.clone()))
                .collect();
            let p = Proposals {
                plan_id: submission.plan_id.clone(),
                session_id: submission.session_id.clone(),
                basis: submission.basis.clone(),
                launch_keys: submission
                    .launches
                    .iter()
                    .map(|l| l.idempotency_key.clone())
                    .collect(),
                disruptions,
            };
            let out = self
                .ledger
                .propose(&p, millis(self.confirm_after), self.clock.now_ms())
                .await
                .map_err(unavailable)?;
            for (key, o) in &out {
                let reason = reasons.get(key).map_or("", String::as_str);
                match o {
                    ProposalOutcome::Recorded { .. } => self.metrics.disruption(reason, "proposed"),
                    ProposalOutcome::Confirmed { .. } => {
                        self.metrics.disruption(reason, "confirmed")
                    }
                    _ => {}
                }
            }
            out
        };
        let mut results = Vec::new();
        let mut accepted = 0;
        for (key, outcome) in outcomes {
            let (status, message, claim) = match outcome {
                Outcome::Accepted { claim } => {
                    accepted += 1;
                    (ACCEPTED, format!("claim {claim}"), claim)
                }
                Outcome::Duplicate { claim } => (
                    DUPLICATE,
                    format!("already recorded as claim {claim}; nothing new done"),
                    claim,
                ),
                Outcome::Rejected { reason } => (REJECTED, reason, String::new()),
            };
            results.push(pb::CommandResult {
                idempotency_key: key,
                status: status.to_string(),
                message,
                claim,
            });
        }
        let confirm = self.confirm_after.as_secs();
        for (key, outcome) in proposals {
            let (status, message) = match outcome {
                ProposalOutcome::Recorded { attempt } => (
                    ACCEPTED,
                    format!(
                        "disruption recorded (attempt {attempt}); executed once a plan at least {confirm}s later proposes it again"
                    ),
                ),
                ProposalOutcome::Confirmed { after } => (
                    ACCEPTED,
                    format!("disruption confirmed {after}s after its first proposal; executing"),
                ),
                ProposalOutcome::Waiting { after } => (
                    DUPLICATE,
                    format!(
                        "disruption proposed {after}s after its first proposal; waiting for a plan at least {confirm}s later"
                    ),
                ),
                ProposalOutcome::Duplicate { state } => (
                    DUPLICATE,
                    format!("disruption already {state}; nothing new done"),
                ),
                ProposalOutcome::Rejected { reason } => (REJECTED, reason),
            };
            results.push(pb::CommandResult {
                idempotency_key: key,
                status: status.to_string(),
                message,
                claim: String::new(),
            });
        }
        for r in &results {
            self.metrics.command(&r.status);
        }
        if accepted > 0 {
            self.wake.notify_one();
        }
        self.metrics.submit_seconds(started.elapsed().as_secs_f64());
        tracing::info!(plan = %req.plan_id, accepted, results = results.len(), "Submission recorded");
        Ok(Response::new(pb::SubmitResponse { results }))
    }

    async fn catalog(
        &self,
        request: Request<pb::CatalogRequest>,
    ) -> Result<Response<pb::CatalogResponse>, Status> {
        let Some(live) = &self.catalog else {
            self.metrics.catalog_request("unavailable");
            return Err(Status::failed_precondition(
                "this actuator serves no live catalog (its cloud has none); plan from the built-in catalog",
            ));
        };
        let Some(served) = live.current() else {
            self.metrics.catalog_request("unavailable");
            return Err(Status::unavailable(
                "the live catalog has not been read from the cloud yet; retry",
            ));
        };
        let known = request.into_inner().known_version;
        let unchanged = known == served.version;
        self.metrics
            .catalog_request(if unchanged { "unchanged" } else { "sent" });
        Ok(Response::new(pb::CatalogResponse {
            version: served.version.clone(),
            catalog: (!unchanged).then(|| catalog::live_catalog(&served)),
        }))
    }
}
