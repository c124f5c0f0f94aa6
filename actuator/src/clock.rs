//! The actuator's one clock: tokio time (so tests can pause and advance it) anchored to the wall
//! clock once at start. Ledger timestamps and leases are Unix milliseconds read from here.

use std::time::{Duration, UNIX_EPOCH};

/// Unix time in milliseconds, as the ledger stores it.
pub type Millis = i64;

/// A clock shared by every part of the actuator. Clones share the anchor.
#[derive(Clone, Debug)]
pub struct Clock {
    start: tokio::time::Instant,
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

    /// A clock whose wall time starts at `since_epoch` (deterministic times in tests).
    pub fn at(since_epoch: Duration) -> Self {
        Self {
            start: tokio::time::Instant::now(),
            wall_at_start: since_epoch,
        }
    }

    /// Unix milliseconds now.
    pub fn now_ms(&self) -> Millis {
        let d = self.wall_at_start + self.start.elapsed();
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// `d` in milliseconds, saturating.
pub fn millis(d: Duration) -> Millis {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn advances_with_tokio_time() {
        let c = Clock::at(Duration::from_secs(1_000));
        assert_eq!(c.now_ms(), 1_000_000);
        tokio::time::advance(Duration::from_millis(1_500)).await;
        assert_eq!(c.now_ms(), 1_001_500);
    }
}
