//! The cluster's ARC zonal shifts (Karpenter's `ENABLE_ZONAL_SHIFT`), read on an interval and
//! served with the live catalog ([`crate::catalog::LiveCatalog::with_zonal_shifts`]), so that
//! every planner plans with the shifted zones offering nothing and their Nodes kept from
//! voluntary disruption (the engine's `catalog/zonal_shift.rs`).
//!
//! As Karpenter's provider (aws/karpenter-provider-aws v1.14.1
//! `pkg/providers/arczonalshift/arczonalshift.go`; its controller `pkg/controllers/arczonalshift`
//! requeues every 30 s): the shifts are read with `GetManagedResource` every
//! [`DEFAULT_INTERVAL`]; a zone counts as shifted while its shift is `APPLIED` and its expiry
//! is in the future, checked against the clock when asked (a shift that expires between two
//! reads ends at its expiry). A failed read is logged and counted
//! (`dovetail_actuator_loop_failures_total{loop="zonal_shift"}`) and the last good answer
//! stays, retried sooner with a backoff. Each answer replaces the previous one, so a cancelled
//! shift ends at the next read, as the design asks (`designs/zonal-shift.md`: "If a subsequent
//! response of GetManagedResource updates the Expiry or cancels a zonal shift, Karpenter will
//! update its in memory store to match the state of the world"). With a cluster, each change is
//! announced on the NodePools it affects, as Karpenter's Events ([`events`]).

pub mod events;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud::{ZonalShift, ZonalShiftSource};
use service_shell::clock::Clock;
use tokio::sync::watch;

use crate::metrics::Metrics;

/// Default time between reads (Karpenter's zonal shift controller requeues after 30 s).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// The loop's name in `dovetail_actuator_loop_failures_total` and `_loop_backoff_seconds`.
pub const LOOP: &str = "zonal_shift";

/// The last shifts read and the zones shifted now. Cheap to share behind an `Arc`.
pub struct ZonalShifts {
    source: Arc<dyn ZonalShiftSource>,
    clock: Clock,
    metrics: Metrics,
    last: Mutex<Vec<ZonalShift>>,
    events: Option<events::Announcer>,
}

// === impl ZonalShifts ===

impl ZonalShifts {
    /// Shifts read from `source`; none until the first read.
    pub fn new(source: Arc<dyn ZonalShiftSource>, clock: Clock, metrics: Metrics) -> Self {
        Self {
            source,
            clock,
            metrics,
            last: Mutex::new(Vec::new()),
            events: None,
        }
    }

    /// Announces each change of the shifted zones on the NodePools it affects.
    pub fn with_events(mut self, announcer: events::Announcer) -> Self {
        self.events = Some(announcer);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ZonalShift>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the shifts once; the previous answer stays on failure.
    ///
    /// # Errors
    /// The source's error.
    pub async fn refresh(&self) -> cloud::Result<()> {
        let shifts = self.source.zonal_shifts().await?;
        for s in shifts.iter().filter(|s| s.zone.is_none()) {
            tracing::warn!(zone_id = %s.zone_id, "Zonal shift away from a zone ID this account has no zone for; ignored");
        }
        let before = self.current();
        *self.lock() = shifts;
        let after = self.current();
        if before != after {
            tracing::info!(shifted = ?after, was = ?before, "Zonal shifts changed");
        }
        Ok(())
    }

    /// The names of the zones under an applied, unexpired shift now, sorted.
    pub fn current(&self) -> BTreeSet<String> {
        self.current_by_id().into_values().collect()
    }

    /// The zones under an applied, unexpired shift now: zone ID → name.
    pub fn current_by_id(&self) -> events::Shifted {
        let now = self.clock.now_secs();
        self.lock()
            .iter()
            .filter(|s| s.applied && s.expiry > now)
            .filter_map(|s| Some((s.zone_id.clone(), s.zone.clone()?)))
            .collect()
    }

    /// Reads every `every` until `shutdown` turns true; after a failed read, sooner, backing
    /// off (a tenth of `every`, at least 1 s, doubling up to `every`).
    pub async fn run(&self, every: Duration, mut shutdown: watch::Receiver<bool>) {
        let mut backoff = crate::catalog::retry_backoff(every);
        loop {
            if *shutdown.borrow() {
                return;
            }
            let wait = match self.refresh().await {
                Ok(()) => {
                    if backoff.failures() > 0 {
                        tracing::info!(
                            failures = backoff.failures(),
                            "Zonal shifts read from ARC again"
                        );
                        self.metrics.loop_recovered(LOOP);
                    }
                    backoff.succeeded();
                    if let Some(a) = &self.events
                        && let Err(e) = a.announce(&self.current_by_id()).await
                    {
                        tracing::warn!(error = %e, "Cannot announce a zonal shift change on the NodePools; retrying at the next read");
                    }
                    every
                }
                Err(e) => {
                    let wait = backoff.failed_at_least(e.retry_after().unwrap_or_default());
                    self.metrics.loop_failed(LOOP, e.reason(), wait);
                    tracing::warn!(error = %e, reason = e.reason(), failures = backoff.failures(), retry_in = ?wait, "Zonal shift read failed; keeping the last answer");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A source answering what the test set.
    struct Fake(Mutex<cloud::Result<Vec<ZonalShift>>>);

    impl Fake {
        fn set(&self, r: cloud::Result<Vec<ZonalShift>>) {
            *self.0.lock().expect("lock") = r;
        }
    }

    impl Default for Fake {
        fn default() -> Self {
            Self(Mutex::new(Ok(Vec::new())))
        }
    }

    #[async_trait::async_trait]
    impl ZonalShiftSource for Fake {
        async fn zonal_shifts(&self) -> cloud::Result<Vec<ZonalShift>> {
            self.0.lock().expect("lock").clone()
        }
    }

    fn shift(id: &str, zone: Option<&str>, expiry: i64, applied: bool) -> ZonalShift {
        ZonalShift {
            zone_id: id.into(),
            zone: zone.map(str::to_string),
            expiry,
            applied,
        }
    }

    fn zones(z: &[&str]) -> BTreeSet<String> {
        z.iter().map(|s| s.to_string()).collect()
    }

    /// As Karpenter's `ShiftedZones` (aws/karpenter-provider-aws v1.14.1
    /// `pkg/providers/arczonalshift/arczonalshift.go`): applied and unexpired shifts only,
    /// expiry checked when asked; a failed read keeps the last answer; the next answer
    /// replaces it.
    #[tokio::test(start_paused = true)]
    async fn applied_unexpired_shifts_count_and_a_failed_read_keeps_the_last() {
        let fake = Arc::new(Fake::default());
        let clock = Clock::at(Duration::from_secs(1_000));
        let z = ZonalShifts::new(fake.clone(), clock, Metrics::new());
        assert!(z.current().is_empty(), "nothing before the first read");
        fake.set(Ok(vec![
            shift("use1-az1", Some("us-east-1a"), 1_060, true),
            shift("use1-az2", Some("us-east-1b"), 5_000, false),
            shift("use1-az9", None, 5_000, true),
        ]));
        z.refresh().await.expect("read");
        assert_eq!(z.current(), zones(&["us-east-1a"]));
        fake.set(Err(cloud::Error::Throttled {
            retry_after: Duration::from_secs(1),
        }));
        assert!(z.refresh().await.is_err());
        assert_eq!(z.current(), zones(&["us-east-1a"]), "the last answer stays");
        // The shift expires at its expiry, without another read.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(z.current().is_empty(), "expired");
        fake.set(Ok(vec![shift("use1-az2", Some("us-east-1b"), 5_000, true)]));
        z.refresh().await.expect("read");
        assert_eq!(z.current(), zones(&["us-east-1b"]));
        fake.set(Ok(Vec::new()));
        z.refresh().await.expect("read");
        assert!(
            z.current().is_empty(),
            "a cancelled shift ends at the next read"
        );
    }
}
