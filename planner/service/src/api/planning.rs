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
    /// Most objects all open Session streams may hold together: what bounds the memory of
    /// sessions however many are open.
    pub max_held_objects: usize,
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
            max_held_objects: crate::config::DEFAULT_MAX_HELD_OBJECTS,
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
    /// One permit per object held by an open Session (`max_held_objects` in all).
    pub(crate) held: Arc<tokio::sync::Semaphore>,
}

// === impl PlannerService ===

impl PlannerService {
    /// A service planning with `planner::plan` and loading built-in catalogs with `catalogs`.
    pub fn new(catalogs: BuiltinCatalogs, metrics: Metrics, options: ServiceOptions) -> Self {
        Self {
            plan_fn: None,
            catalogs,
            cache: Arc::default(),
            metrics,
            actuator: None,
            live: None,
            sessions: Arc::default(),
            draining: None,
            permits: None,
            held: Arc::new(tokio::sync::Semaphore::new(
                options
                    .max_held_objects
                    .min(tokio::sync::Semaphore::MAX_PERMITS),
            )),
            options,
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

    /// Plans requests whose catalog is a region's (named, or the default) from `live` (the
    /// actuator's live catalog) when it holds that region's, from the region's built-in catalog
    /// otherwise. Every plan names the catalog version it used.
    pub fn with_live_catalog(mut self, live: LiveCatalog) -> Self {
        self.live = Some(live);
        self
    }

    /// Where a request's catalog comes from, checked now: an inline catalog, or a region whose
    /// built-in catalog exists (or whose live catalog is held).
    ///
    /// # Errors
    /// [`Error::UnknownCatalog`] for a region with neither.
    pub(crate) fn catalog_source(
        &self,
        choice: CatalogChoice,
        field: &str,
    ) -> Result<CatalogSource> {
        let region = match choice {
            CatalogChoice::Inline(c) => return Ok(CatalogSource::Inline(Arc::new(c))),
            CatalogChoice::Builtin { region } => region,
            CatalogChoice::Default => self.options.default_region.clone(),
        };
        let live = self.live.as_ref().and_then(LiveCatalog::current);
        if live.is_none_or(|c| c.region != region) {
            self.builtin(&region, field)?;
        }
        Ok(CatalogSource::Region(region))
    }

    /// The catalog to plan with now, its version and, when the live catalog is configured but
    /// could not be used, a note saying why: for a region, the live catalog when it holds that
    /// region's, else the built-in one (version `builtin:<region>` when a live catalog is
    /// configured, none otherwise).
    pub(crate) fn pick_catalog(&self, source: &CatalogSource) -> Result<Picked> {
        let region = match source {
            CatalogSource::Inline(c) => {
                return Ok(Picked {
                    catalog: c.clone(),
                    version: None,
                    note: None,
                    shifted_zones: Vec::new(),
                });
            }
            CatalogSource::Region(region) => region,
        };
        let live = self.live.as_ref().map(LiveCatalog::current);
        if let Some(Some(c)) = &live
            && c.region == *region
        {
            return Ok(Picked {
                catalog: c.catalog.clone(),
                version: Some(c.version.clone()),
                note: None,
                shifted_zones: c.shifted_zones.clone(),
            });
        }
        let note = match live {
            None => None,
            Some(None) => Some(format!(
                "The actuator's live catalog has not been fetched yet: planned from the built-in \
                 catalog of {region}."
            )),
            Some(Some(c)) => Some(format!(
                "The actuator's live catalog is {}'s, not {region}'s: planned from the built-in \
                 catalog of {region}.",
                c.region
            )),
        };
        // Without a live catalog the built-in one is the only source: plans stay as
        // `dovetail plan` prints them, without a version.
        let version = self
            .live
            .is_some()
            .then(|| format!("{BUILTIN_VERSION_PREFIX}{region}"));
        Ok(Picked {
            catalog: self.builtin(region, "catalog_ref.region")?,
            version,
            note,
            shifted_zones: Vec::new(),
        })
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
        self.builtin(&self.options.default_region, "catalog_ref.region")
            .map(drop)
    }

    /// The built-in catalog of `region`, loaded once.
    fn builtin(&self, region: &str, field: &str) -> Result<Arc<Catalog>> {
        if let Some(c) = self.lock_cache().get(region) {
            return Ok(c.clone());
        }
        let catalog = (self.catalogs)(region).map_err(|reason| Error::UnknownCatalog {
            field: field.to_string(),
            region: region.to_string(),
            reason,
        })?;
        let catalog = Arc::new(catalog);
        self.lock_cache()
            .insert(region.to_string(), catalog.clone());
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
            None => planner::plan_timed(snapshot, catalog, options, cancel, &self.metrics),
        };
        drop(running);
        let Ok(plan) = plan else {
            self.metrics.plan_cancelled();
            return Err(Error::Cancelled);
        };
        self.metrics
            .plan(plan.summary.pending_pods, plan.summary.cost_per_hour);
        self.metrics.consolidation_moves(&plan.consolidation_moves);
        Ok(plan)
    }

    pub(super) fn plan_blocking(
        &self,
        req: pb::PlanRequest,
        cancel: &CancelToken,
    ) -> Result<pb::PlanResponse> {
        let mut input = convert::to_model::plan_request(req)?;
        let source = self.catalog_source(input.catalog, "catalog_ref.region")?;
        let picked = self.pick_catalog(&source)?;
        picked.shift(&mut input.snapshot);
        let mut plan = self.run_plan(&input.snapshot, &picked.catalog, &input.options, cancel)?;
        planner::exclusion::explain(&mut plan, &input.snapshot, &input.excluded);
        picked.stamp(&mut plan, &input.snapshot);
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

/// The catalog version of plans made from a region's built-in catalog.
pub const BUILTIN_VERSION_PREFIX: &str = "builtin:";

/// Where a request's or a session's catalog comes from.
#[derive(Clone, Debug)]
pub(crate) enum CatalogSource {
    /// Sent with the request.
    Inline(Arc<Catalog>),
    /// A region's: live when held, built-in otherwise (chosen at each plan).
    Region(String),
}

impl Default for CatalogSource {
    fn default() -> Self {
        Self::Inline(Arc::default())
    }
}

/// The catalog one plan uses.
pub(crate) struct Picked {
    pub(crate) catalog: Arc<Catalog>,
    /// The live catalog's content hash, `builtin:<region>`, or `None` for an inline catalog.
    pub(crate) version: Option<String>,
    /// Why the live catalog was not used, when it is configured.
    pub(crate) note: Option<String>,
    /// Zones under an ARC zonal shift that came with the live catalog (empty otherwise).
    pub(crate) shifted_zones: Vec<String>,
}

impl Picked {
    /// Adds the zones the live catalog says are shifted to `snapshot`'s (a union, the
    /// snapshot's first): the snapshot is planned with every one of them shifted.
    pub(crate) fn shift(&self, snapshot: &mut ClusterSnapshot) {
        for z in &self.shifted_zones {
            if !snapshot.shifted_zones.contains(z) {
                snapshot.shifted_zones.push(z.clone());
            }
        }
    }

    /// Names the catalog version in the plan, and adds the notes: why the live catalog was not
    /// used, and, when the live catalog brought shifted zones, every zone the plan treated as
    /// shifted (`snapshot` after [`Picked::shift`]).
    pub(crate) fn stamp(self, plan: &mut Plan, snapshot: &ClusterSnapshot) {
        plan.notes.extend(self.note);
        if !self.shifted_zones.is_empty() {
            plan.notes.push(shift_note(&snapshot.shifted_zones));
        }
        plan.catalog_version = self.version;
    }
}

/// The note of a plan made with `zones` shifted.
pub fn shift_note(zones: &[String]) -> String {
    format!(
        "Zones under an ARC zonal shift (the actuator's live catalog and the snapshot): {}; no \
         capacity was planned there and their Nodes were not disrupted voluntarily.",
        zones.join(", ")
    )
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
