//! The live catalog the actuator serves planners (`dovetail.v1.Actuator/Catalog`), and the
//! offerings marked unavailable after insufficient-capacity errors ([`unavailable`]).
//!
//! The actuator holds the cloud credentials, so it reads the catalog (instance types, offerings,
//! prices: `CloudProvider::catalog_facts`) on an interval ([`LiveCatalog::run`]) and serves it
//! minus the offerings marked now. What it serves is raw facts; planners compute capacity and
//! allocatable (`common::ec2::instance_type`). Each served catalog has a version, the content
//! hash of what is served, so planners download it only when it changed: a new read with new
//! prices, a new mark, or a mark that expired. With ARC zonal shifts read
//! ([`LiveCatalog::with_zonal_shifts`]), the zones shifted now are served with it and are part
//! of its version, so a shift that starts, ends or expires reaches every planner at its next
//! check; while none is, the version is the facts' alone.

pub mod unavailable;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud::{CatalogFacts, CloudProvider, OfferingKey};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::zonal_shift::ZonalShifts;
use service_shell::backoff::Backoff;

pub use unavailable::{DEFAULT_TTL, MarkingCloud, UnavailableOfferings};

/// Default interval between reads of the catalog from the cloud (spot prices change).
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(300);

/// A served catalog: the facts minus the marked offerings, the zones shifted away from, and
/// its version.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    /// Content hash of `facts` and `shifted_zones` (32 hex digits).
    pub version: String,
    /// What planners get.
    pub facts: CatalogFacts,
    /// Zones under an ARC zonal shift now (names, sorted); empty without one.
    pub shifted_zones: Vec<String>,
}

/// The catalog read from the cloud and the view served from it. Cheap to share behind an `Arc`.
pub struct LiveCatalog {
    cloud: Arc<dyn CloudProvider>,
    marks: Arc<UnavailableOfferings>,
    shifts: Option<Arc<ZonalShifts>>,
    metrics: Metrics,
    state: Mutex<State>,
}

/// The served catalog and what it was made from: the read's generation, the marks, the shifted
/// zones.
type ServedFrom = (u64, BTreeSet<OfferingKey>, BTreeSet<String>, Arc<Served>);

#[derive(Default)]
struct State {
    read: Option<Arc<CatalogFacts>>,
    generation: u64,
    served: Option<ServedFrom>,
}

// === impl LiveCatalog ===

impl LiveCatalog {
    /// A catalog read from `cloud` (the provider itself, not a [`MarkingCloud`]: marks are
    /// applied when serving, so an expired mark shows at once) and served minus `marks`.
    pub fn new(
        cloud: Arc<dyn CloudProvider>,
        marks: Arc<UnavailableOfferings>,
        metrics: Metrics,
    ) -> Self {
        Self {
            cloud,
            marks,
            shifts: None,
            metrics,
            state: Mutex::new(State::default()),
        }
    }

    /// Serves the zones `shifts` says are shifted now with the catalog.
    pub fn with_zonal_shifts(mut self, shifts: Arc<ZonalShifts>) -> Self {
        self.shifts = Some(shifts);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Each update replaces whole fields: recover from a poisoned lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the catalog from the cloud once; the previous read stays served on failure.
    ///
    /// # Errors
    /// The cloud's error.
    pub async fn refresh(&self) -> cloud::Result<()> {
        match self.cloud.catalog_facts().await {
            Ok(facts) => {
                self.metrics.catalog_refresh("ok");
                tracing::debug!(
                    types = facts.instance_types.len(),
                    "Catalog read from the cloud"
                );
                let mut s = self.lock();
                s.read = Some(Arc::new(facts));
                s.generation += 1;
                Ok(())
            }
            Err(e) => {
                self.metrics.catalog_refresh("error");
                Err(e)
            }
        }
    }

    /// The last read as the cloud gave it (no offering left out) and its generation (one more
    /// per successful read), `None` before the first successful read.
    pub fn read(&self) -> Option<(u64, Arc<CatalogFacts>)> {
        let s = self.lock();
        s.read.clone().map(|r| (s.generation, r))
    }

    /// The catalog to serve now, `None` before the first successful read.
    pub fn current(&self) -> Option<Arc<Served>> {
        let marked = self.marks.current();
        let shifted = self
            .shifts
            .as_ref()
            .map(|z| z.current())
            .unwrap_or_default();
        let mut s = self.lock();
        let read = s.read.clone()?;
        if let Some((generation, m, z, served)) = &s.served
            && *generation == s.generation
            && *m == marked
            && *z == shifted
        {
            return Some(served.clone());
        }
        let facts = self.marks.filter_facts(&read);
        let shifted_zones: Vec<String> = shifted.iter().cloned().collect();
        let served = Arc::new(Served {
            version: version_with_shifts(&facts, &shifted_zones),
            facts,
            shifted_zones,
        });
        s.served = Some((s.generation, marked, shifted, served.clone()));
        Some(served)
    }

    /// Reads the catalog every `every` until `shutdown` turns true. After failed reads it retries
    /// sooner, backing off ([`retry_backoff`]): a tenth of the interval (1 s to 30 s) doubling,
    /// jittered, up to the interval; a read that works ends the backoff. Each failure is logged
    /// with its reason and counted (`dovetail_actuator_loop_failures_total{loop="catalog"}`).
    pub async fn run(&self, every: Duration, mut shutdown: watch::Receiver<bool>) {
        let mut backoff = retry_backoff(every);
        loop {
            if *shutdown.borrow() {
                return;
            }
            let wait = match self.refresh().await {
                Ok(()) => {
                    if backoff.failures() > 0 {
                        tracing::info!(
                            failures = backoff.failures(),
                            "Catalog read from the cloud again"
                        );
                        self.metrics.loop_recovered(LOOP);
                    }
                    backoff.succeeded();
                    every
                }
                Err(e) => {
                    let wait = backoff.failed_at_least(e.retry_after().unwrap_or_default());
                    self.metrics.loop_failed(LOOP, e.reason(), wait);
                    tracing::warn!(error = %e, reason = e.reason(), failures = backoff.failures(), retry_in = ?wait, "Catalog read failed; serving the previous one");
                    wait
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => {}
            }
        }
    }
}

/// The loop's name in `dovetail_actuator_loop_failures_total` and `_loop_backoff_seconds`.
pub const LOOP: &str = "catalog";

/// The retry pacing of a catalog read every `every`: first a tenth of it (at least 1 s, at most
/// 30 s), doubling up to `every`.
pub fn retry_backoff(every: Duration) -> Backoff {
    let base = (every / 10).clamp(Duration::from_secs(1), Duration::from_secs(30));
    Backoff::new(base, every)
}

/// The version of a catalog served with `shifted` zones: [`version`] when none is shifted, else
/// a SHA-256 of the catalog's and the zones' canonical JSON.
pub fn version_with_shifts(facts: &CatalogFacts, shifted: &[String]) -> String {
    if shifted.is_empty() {
        return version(facts);
    }
    // Serializing plain structs to a Vec cannot fail.
    let bytes = serde_json::to_vec(&(facts, shifted)).unwrap_or_default();
    hex16(&bytes)
}

/// The version of a catalog: a SHA-256 of its canonical JSON (types and offerings in their
/// sorted order), 32 hex digits.
pub fn version(facts: &CatalogFacts) -> String {
    // Serializing plain structs to a Vec cannot fail.
    let bytes = serde_json::to_vec(facts).unwrap_or_default();
    hex16(&bytes)
}

fn hex16(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}
