//! The planner behind both RPCs: [`PlannerService`] holds the built-in catalog cache, the live
//! catalog, the planning function, metrics and the actuator forwarder, and plans one snapshot
//! on the blocking pool. The tonic methods are in [`super::service`], the per-stream state of
//! `Session` in [`super::session`]; both use this module, neither uses the other's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use proto::v1 as pb;

use super::actuator::Forwarder;
use super::convert::{self, CatalogChoice};
use super::live_catalog::LiveCatalog;
use super::{Error, Result};
use crate::metrics::Metrics;
use planner::cancel::CancelToken;
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
    /// The server's concurrency limit, which each Session plan waits for (unary Plans take
    /// theirs in the server's guard).
    pub(crate) permits: Option<Arc<tokio::sync::Semaphore>>,
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
            permits: None,
        }
    }

    /// Session plans wait for one of `permits` (the server's limit on concurrent requests).
    pub fn with_permits(mut self, permits: Arc<tokio::sync::Semaphore>) -> Self {
        self.permits = Some(permits);
        self
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

    pub(super) fn plan_blocking(
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
        planner::exclusion::explain(&mut plan, &input.snapshot, &input.excluded);
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
