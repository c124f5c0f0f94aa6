//! The tonic implementation of `dovetail.v1.Planner`.
//!
//! `Plan` converts, plans and answers on a blocking thread (a 50k-pod snapshot is CPU work, not
//! IO) and never executes anything. `Session` is in [`super::session`].

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::Stream;
use proto::v1 as pb;
use tokio::time::Instant;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

use super::actuator::Forwarder;
use super::convert::{self, CatalogChoice};
use super::live_catalog::LiveCatalog;
use super::{Error, Result, session};
use crate::metrics::Metrics;
use planner::cancel::{CancelOnDrop, CancelToken};
use planner::catalog::Catalog;
use planner::model::{ClusterSnapshot, PlanOptions};
use planner::plan::Plan;

/// The planning function the service calls: `planner::plan` in production; tests substitute
/// slow or panicking ones.
pub type PlanFn = Arc<dyn Fn(&ClusterSnapshot, &Catalog, &PlanOptions) -> Plan + Send + Sync>;

/// Loads a built-in catalog by region name (e.g. `planner::catalog::aws::builtin`).
pub type BuiltinCatalogs = Arc<dyn Fn(&str) -> std::result::Result<Catalog, String> + Send + Sync>;

/// Settings of the service itself (the server's settings are in `crate::config`).
#[derive(Clone, Debug)]
pub struct ServiceOptions {
    /// Region of the built-in catalog used when a request names none.
    pub default_region: String,
    /// Most objects one Session stream may hold.
    pub session_max_objects: usize,
    /// Name of this replica, part of every session id.
    pub instance: String,
    /// A Session that sends nothing for this long is ended (DEADLINE_EXCEEDED), so an idle
    /// stream does not hold its snapshot forever.
    pub session_idle_timeout: std::time::Duration,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        Self {
            default_region: "us-east-1".to_string(),
            session_max_objects: 250_000,
            instance: "planner".to_string(),
            session_idle_timeout: std::time::Duration::from_secs(600),
        }
    }
}

/// The `dovetail.v1.Planner` service. Cheap to clone.
#[derive(Clone)]
pub struct PlannerService {
    /// `None`: `planner::plan_cancellable`.
    plan_fn: Option<PlanFn>,
    catalogs: BuiltinCatalogs,
    cache: Arc<Mutex<HashMap<String, Arc<Catalog>>>>,
    pub(crate) options: ServiceOptions,
    pub(crate) metrics: Metrics,
    pub(crate) actuator: Option<Forwarder>,
    live: Option<LiveCatalog>,
    sessions: Arc<AtomicU64>,
    pub(crate) draining: Option<tokio::sync::watch::Receiver<bool>>,
}

// === impl PlannerService ===

impl PlannerService {
    /// A service planning with `planner::plan` and loading built-in catalogs with `catalogs`.
    pub fn new(catalogs: BuiltinCatalogs, metrics: Metrics, options: ServiceOptions) -> Self {
        Self {
            plan_fn: None,
            catalogs,
            cache: Arc::default(),
            options,
            metrics,
            actuator: None,
            live: None,
            sessions: Arc::default(),
            draining: None,
        }
    }

    /// Replaces the planning function.
    pub fn with_plan_fn(mut self, plan_fn: PlanFn) -> Self {
        self.plan_fn = Some(plan_fn);
        self
    }

    /// Submits every session plan's commands through `forwarder`.
    pub fn with_actuator(mut self, forwarder: Forwarder) -> Self {
        self.actuator = Some(forwarder);
        self
    }

    /// Plans requests that name no catalog from `live` (the actuator's live catalog), or from
    /// the default region's built-in catalog until `live` holds one. Every such plan names the
    /// catalog version it used.
    pub fn with_live_catalog(mut self, live: LiveCatalog) -> Self {
        self.live = Some(live);
        self
    }

    /// The catalog for a request that names none, when planning from the live catalog: the one
    /// held, or the built-in one (version `builtin:<region>`) until the first fetch. `None`
    /// without `--catalog-from-actuator`.
    pub(crate) fn live_default(&self) -> Result<Option<(Arc<Catalog>, String)>> {
        let Some(live) = &self.live else {
            return Ok(None);
        };
        if let Some(c) = live.current() {
            return Ok(Some((c.catalog, c.version)));
        }
        let builtin = self.resolve_catalog(CatalogChoice::Default, "catalog_ref.region")?;
        Ok(Some((
            builtin,
            format!("{BUILTIN_VERSION_PREFIX}{}", self.options.default_region),
        )))
    }

    /// Ends open Sessions with UNAVAILABLE when `draining` turns true (server shutdown).
    pub fn with_draining(mut self, draining: tokio::sync::watch::Receiver<bool>) -> Self {
        self.draining = Some(draining);
        self
    }

    /// The tonic server wrapper of this service, with message limits for large snapshots.
    pub fn into_server(self, max_message_bytes: usize) -> pb::planner_server::PlannerServer<Self> {
        pb::planner_server::PlannerServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }

    /// Loads the default region's built-in catalog, so that the first request does not pay for
    /// it and so that readiness means "can plan".
    ///
    /// # Errors
    /// [`Error::UnknownCatalog`] when it cannot be loaded.
    pub fn preload(&self) -> Result<()> {
        self.resolve_catalog(CatalogChoice::Default, "catalog_ref.region")
            .map(drop)
    }

    /// The catalog a request asks for.
    pub(crate) fn resolve_catalog(
        &self,
        choice: CatalogChoice,
        field: &str,
    ) -> Result<Arc<Catalog>> {
        let region = match choice {
            CatalogChoice::Inline(c) => return Ok(Arc::new(c)),
            CatalogChoice::Builtin { region } => region,
            CatalogChoice::Default => self.options.default_region.clone(),
        };
        if let Some(c) = self.lock_cache().get(&region) {
            return Ok(c.clone());
        }
        let catalog = (self.catalogs)(&region).map_err(|reason| Error::UnknownCatalog {
            field: field.to_string(),
            region: region.clone(),
            reason,
        })?;
        let catalog = Arc::new(catalog);
        self.lock_cache().insert(region, catalog.clone());
        Ok(catalog)
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Catalog>>> {
        // A panic while holding this lock cannot leave the map half-updated: recover it.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs the planning function, recording metrics.
    pub(crate) fn run_plan(
        &self,
        snapshot: &ClusterSnapshot,
        catalog: &Catalog,
        options: &PlanOptions,
        cancel: &CancelToken,
    ) -> Result<Plan> {
        let running = GaugeGuard::inc(self.metrics.plans_running());
        let plan = match &self.plan_fn {
            Some(f) => Ok(f(snapshot, catalog, options)),
            None => planner::plan_cancellable(snapshot, catalog, options, cancel),
        };
        drop(running);
        let Ok(plan) = plan else {
            self.metrics.plan_cancelled();
            return Err(Error::Cancelled);
        };
        self.metrics
            .plan(plan.summary.pending_pods, plan.summary.cost_per_hour);
        Ok(plan)
    }

    fn plan_blocking(
        &self,
        req: pb::PlanRequest,
        cancel: &CancelToken,
    ) -> Result<pb::PlanResponse> {
        let input = convert::to_model::plan_request(req)?;
        let live = match input.catalog {
            CatalogChoice::Default => self.live_default()?,
            _ => None,
        };
        let (catalog, version) = match live {
            Some((c, v)) => (c, Some(v)),
            None => (
                self.resolve_catalog(input.catalog, "catalog_ref.region")?,
                None,
            ),
        };
        let mut plan = self.run_plan(&input.snapshot, &catalog, &input.options, cancel)?;
        stamp_version(&mut plan, version);
        tracing::debug!(
            pods = input.snapshot.pods.len(),
            claims = plan.node_claims.len(),
            "Planned"
        );
        Ok(convert::to_wire::plan_response(&plan))
    }

    /// A fresh session id: this replica's name and a counter.
    pub(crate) fn next_session_id(&self) -> String {
        let n = self.sessions.fetch_add(1, Ordering::Relaxed);
        format!("{}-{n}", self.options.instance)
    }
}

/// Holds a gauge one higher while it lives (a panicking plan function included).
struct GaugeGuard(prometheus_client::metrics::gauge::Gauge);

impl GaugeGuard {
    fn inc(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The catalog version of plans made from the built-in catalog while the live one is missing.
pub const BUILTIN_VERSION_PREFIX: &str = "builtin:";

/// Names the catalog version in the plan; a built-in fallback also gets a note.
pub(crate) fn stamp_version(plan: &mut Plan, version: Option<String>) {
    if let Some(v) = &version
        && v.starts_with(BUILTIN_VERSION_PREFIX)
    {
        plan.notes.push(
            "The actuator's live catalog has not been fetched yet: planned from the built-in \
             catalog."
                .to_string(),
        );
    }
    plan.catalog_version = version;
}

/// Runs `f` on the blocking pool inside the current span; a panic becomes
/// [`Error::PlannerFailed`].
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| Error::PlannerFailed(e.to_string()))?
}

type SessionStream =
    Pin<Box<dyn Stream<Item = std::result::Result<pb::PlanResponse, Status>> + Send>>;

#[tonic::async_trait]
impl pb::planner_server::Planner for PlannerService {
    async fn plan(
        &self,
        request: Request<pb::PlanRequest>,
    ) -> std::result::Result<Response<pb::PlanResponse>, Status> {
        let start = Instant::now();
        let this = self.clone();
        let req = request.into_inner();
        // Dropping this future (deadline, cancelled call, closed connection) drops the guard,
        // which stops the planning run within one pod placement.
        let cancel = CancelToken::new();
        let guard = CancelOnDrop(cancel.clone());
        let result = blocking(move || this.plan_blocking(req, &cancel))
            .instrument(tracing::debug_span!("plan"))
            .await
            .map_err(Status::from);
        drop(guard);
        let code = result
            .as_ref()
            .map_or_else(|s| s.code(), |_| tonic::Code::Ok);
        if let Err(s) = &result {
            tracing::info!(code = ?s.code(), message = s.message(), "Plan refused");
        }
        self.metrics
            .request("Plan", code, start.elapsed().as_secs_f64());
        result.map(Response::new)
    }

    type SessionStream = SessionStream;

    async fn session(
        &self,
        request: Request<Streaming<pb::ClusterUpdate>>,
    ) -> std::result::Result<Response<Self::SessionStream>, Status> {
        let rx = session::start(self.clone(), request.into_inner());
        Ok(Response::new(Box::pin(rx)))
    }
}
