//! The one place the watcher reads the wall clock: the `now` of each `CloseBatch` (the
//! planner reads no clock). Tests fix it.

/// Where `now` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The system clock.
    System,
    /// A fixed instant, seconds since the Unix epoch (tests).
    Fixed(i64),
}

// === impl Clock ===

impl Clock {
    /// Seconds since the Unix epoch.
    pub fn now(&self) -> i64 {
        match self {
            #[allow(clippy::disallowed_methods)] // The watcher's one clock read.
            Clock::System => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
            Clock::Fixed(t) => *t,
        }
    }
}
