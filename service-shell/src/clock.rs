//! The services' one clock: tokio time (so tests can pause and advance it) anchored to the wall
//! clock once at start, or fixed. This is the one module that reads the wall clock.

use std::time::{Duration, UNIX_EPOCH};

/// Unix time in milliseconds.
pub type Millis = i64;

/// A clock. Clones share the anchor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clock {
    /// When the anchor was taken; `None`: the clock stands still.
    start: Option<tokio::time::Instant>,
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

    /// A clock whose wall time starts at `since_epoch` and advances with tokio time
    /// (deterministic times in tests).
    pub fn at(since_epoch: Duration) -> Self {
        Self {
            start: Some(tokio::time::Instant::now()),
            wall_at_start: since_epoch,
        }
    }

    /// A clock that always says `since_epoch`.
    pub fn fixed(since_epoch: Duration) -> Self {
        Self {
            start: None,
            wall_at_start: since_epoch,
        }
    }

    /// Time since the Unix epoch now.
    pub fn since_epoch(&self) -> Duration {
        self.wall_at_start + self.start.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Unix milliseconds now.
    pub fn now_ms(&self) -> Millis {
        millis(self.since_epoch())
    }

    /// Unix seconds now.
    pub fn now_secs(&self) -> i64 {
        i64::try_from(self.since_epoch().as_secs()).unwrap_or(i64::MAX)
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
    async fn advances_with_tokio_time_unless_fixed() {
        let c = Clock::at(Duration::from_secs(1_000));
        let f = Clock::fixed(Duration::from_secs(1_000));
        assert_eq!(c.now_ms(), 1_000_000);
        tokio::time::advance(Duration::from_millis(1_500)).await;
        assert_eq!(c.now_ms(), 1_001_500);
        assert_eq!(c.now_secs(), 1_001);
        assert_eq!(f.now_ms(), 1_000_000);
    }

    #[test]
    fn the_wall_clock_is_after_2020() {
        assert!(Clock::new().now_secs() > 1_577_836_800);
    }
}
