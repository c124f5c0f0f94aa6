//! The one retry pacing of the services' loops around fallible calls (a queue receive, a catalog
//! read, a database that is not up yet): exponential, jittered, capped, reset by a success.
//!
//! After the `n`th failure in a row the wait is `base × 2^(n-1)`, at most `max`, scaled by a
//! random factor in [1, 1.25): never sooner than the nominal doubling, and replicas that failed
//! together do not retry together. A success starts again from `base`.

use std::time::Duration;

/// The pacing of one loop.
#[derive(Clone, Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: u32,
    current: Duration,
}

// === impl Backoff ===

impl Backoff {
    /// First wait `base`, doubling up to `max` (`max` below `base` counts as `base`).
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
            failures: 0,
            current: Duration::ZERO,
        }
    }

    /// Records a failure; the wait before the next attempt.
    pub fn failed(&mut self) -> Duration {
        let nominal = self
            .base
            .saturating_mul(1u32 << self.failures.min(20))
            .min(self.max);
        self.failures = self.failures.saturating_add(1);
        self.current = jittered(nominal);
        self.current
    }

    /// Records a failure that names its own earliest retry (a throttled call's retry-after):
    /// the wait is the longer of the two.
    pub fn failed_at_least(&mut self, at_least: Duration) -> Duration {
        let wait = self.failed().max(at_least);
        self.current = wait;
        wait
    }

    /// Records a success: the next failure waits `base` again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
        self.current = Duration::ZERO;
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The wait the last failure got (zero after a success).
    pub fn current(&self) -> Duration {
        self.current
    }
}

/// `d` scaled by a random factor in [1, 1.25).
pub fn jittered(d: Duration) -> Duration {
    d.mul_f64(1.0 + unit() / 4.0)
}

/// A random number in [0, 1), from the standard library's per-process random hash keys (no
/// random number crate for this).
pub fn unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (r >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_with_jitter_up_to_the_cap_and_a_success_resets() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let within = |d: Duration, nominal: u64| {
            let n = Duration::from_secs(nominal);
            assert!(d >= n && d < n.mul_f64(1.25), "{d:?} for {n:?}");
        };
        within(b.failed(), 1);
        within(b.failed(), 2);
        within(b.failed(), 4);
        within(b.failed(), 8);
        within(b.failed(), 10);
        within(b.failed(), 10);
        assert_eq!(b.failures(), 6);
        for _ in 0..100 {
            within(b.failed(), 10);
        }
        b.succeeded();
        assert_eq!(b.current(), Duration::ZERO);
        within(b.failed(), 1);
        assert!(b.failed_at_least(Duration::from_secs(30)) == Duration::from_secs(30));
    }

    #[test]
    fn jitter_spreads_waits() {
        let d = Duration::from_secs(8);
        let waits: std::collections::BTreeSet<Duration> = (0..20).map(|_| jittered(d)).collect();
        assert!(waits.len() > 1, "{waits:?}");
    }
}
