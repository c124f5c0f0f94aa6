//! The simulator's one clock: tokio time (so tests can pause and advance it) anchored to the
//! wall clock once at start.
//!
//! Object timestamps (`creationTimestamp`, `deletionTimestamp`, condition times) are the wall
//! time at start plus the tokio time elapsed since, so `tokio::test(start_paused = true)` gives
//! deterministic, fast-forwardable timestamps.

use std::time::{Duration, UNIX_EPOCH};

use chrono::{DateTime, SecondsFormat, Utc};
use cloud::Timestamp;

/// A clock shared by every part of a simulation.
#[derive(Clone, Debug)]
pub struct Clock {
    start: tokio::time::Instant,
    /// Wall time at `start`, as a duration since the Unix epoch.
    wall_at_start: Duration,
}

// === impl Clock ===

impl Clock {
    /// A clock anchored at the current wall time.
    #[allow(clippy::disallowed_methods)] // The one place that reads the wall clock.
    pub fn new() -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self::at(wall)
    }

    /// A clock whose wall time starts at `since_epoch` (deterministic timestamps in tests).
    pub fn at(since_epoch: Duration) -> Self {
        Self {
            start: tokio::time::Instant::now(),
            wall_at_start: since_epoch,
        }
    }

    /// Wall time now, as a duration since the Unix epoch.
    pub fn since_epoch(&self) -> Duration {
        self.wall_at_start + self.start.elapsed()
    }

    /// Seconds since the Unix epoch.
    pub fn now(&self) -> Timestamp {
        self.since_epoch().as_secs() as Timestamp
    }

    /// Now as RFC 3339 with second precision (`2026-11-30T06:50:00Z`), as Kubernetes writes
    /// `metav1.Time`.
    pub fn rfc3339(&self) -> String {
        rfc3339(self.now())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Formats seconds since the epoch as RFC 3339 UTC.
pub fn rfc3339(ts: Timestamp) -> String {
    DateTime::<Utc>::from_timestamp(ts, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn advances_with_tokio_time() {
        let c = Clock::at(Duration::from_secs(1_800_000_000));
        assert_eq!(c.rfc3339(), "2027-01-15T08:00:00Z");
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(c.now(), 1_800_000_061);
    }
}
