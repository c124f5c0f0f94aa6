//! Fault injection for the Kubernetes API: drop watch connections, answer the next watches with
//! `410 Gone`, fail or slow down the next N requests (optionally only under a path prefix).
//!
//! Tests hold a [`Faults`] handle from `Simulation::faults()`; the HTTP layer asks it about
//! every request before serving it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

#[derive(Debug, Clone)]
enum Action {
    Fail(u16),
    Delay(Duration),
}

#[derive(Debug, Clone)]
struct Rule {
    prefix: Option<String>,
    remaining: u32,
    action: Action,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    expire_watches: u32,
    requests: u64,
    injected: u64,
}

/// What to do to one request.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Wait this long before serving.
    pub(crate) delay: Option<Duration>,
    /// Answer with this status code instead of serving.
    pub(crate) fail: Option<u16>,
    /// Answer a watch with a 410 ERROR event.
    pub(crate) expire: bool,
}

/// The fault-injection handle (cheap to clone; all clones control the same server).
#[derive(Debug, Clone)]
pub struct Faults {
    state: Arc<Mutex<State>>,
    drops: Arc<watch::Sender<u64>>,
}

// === impl Faults ===

impl Faults {
    /// No faults.
    pub fn new() -> Self {
        Self {
            state: Arc::default(),
            drops: Arc::new(watch::channel(0).0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cuts every watch connection open now (the client sees the stream end with an error and
    /// must re-watch from its last version).
    pub fn drop_watches(&self) {
        self.drops.send_modify(|g| *g += 1);
    }

    /// The next `n` watch requests get a `410 Gone` ERROR event instead of events, so clients
    /// relist.
    pub fn expire_next_watches(&self, n: u32) {
        self.lock().expire_watches += n;
    }

    /// The next `n` requests whose path starts with `path_prefix` (any path when `None`) fail
    /// with `code` (a `metav1.Status` body with reason `InternalError` for 5xx).
    pub fn fail_requests(&self, n: u32, code: u16, path_prefix: Option<&str>) {
        self.lock().rules.push(Rule {
            prefix: path_prefix.map(String::from),
            remaining: n,
            action: Action::Fail(code),
        });
    }

    /// The next `n` requests whose path starts with `path_prefix` wait `delay` before being
    /// served.
    pub fn slow_requests(&self, n: u32, delay: Duration, path_prefix: Option<&str>) {
        self.lock().rules.push(Rule {
            prefix: path_prefix.map(String::from),
            remaining: n,
            action: Action::Delay(delay),
        });
    }

    /// Removes every pending fault.
    pub fn clear(&self) {
        let mut s = self.lock();
        s.rules.clear();
        s.expire_watches = 0;
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.lock().requests
    }

    /// Faults injected so far (failures, delays and expired watches).
    pub fn injected(&self) -> u64 {
        self.lock().injected
    }

    /// Consulted by the server for each request.
    pub(crate) fn decide(&self, path: &str, is_watch: bool) -> Decision {
        let mut s = self.lock();
        s.requests += 1;
        let mut d = Decision::default();
        for rule in s.rules.iter_mut() {
            if rule.remaining == 0 || rule.prefix.as_deref().is_some_and(|p| !path.starts_with(p)) {
                continue;
            }
            match rule.action {
                Action::Fail(code) if d.fail.is_none() => {
                    d.fail = Some(code);
                    rule.remaining -= 1;
                }
                Action::Delay(t) if d.delay.is_none() => {
                    d.delay = Some(t);
                    rule.remaining -= 1;
                }
                _ => {}
            }
        }
        s.rules.retain(|r| r.remaining > 0);
        if is_watch && d.fail.is_none() && s.expire_watches > 0 {
            s.expire_watches -= 1;
            d.expire = true;
        }
        if d != Decision::default() {
            s.injected += 1;
        }
        d
    }

    /// Changes each time [`Faults::drop_watches`] is called.
    pub(crate) fn drops(&self) -> watch::Receiver<u64> {
        self.drops.subscribe()
    }
}

impl Default for Faults {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_count_down_and_respect_prefixes() {
        let f = Faults::new();
        f.fail_requests(2, 500, Some("/api/v1/pods"));
        assert_eq!(f.decide("/api/v1/nodes", false).fail, None);
        assert_eq!(f.decide("/api/v1/pods", false).fail, Some(500));
        assert_eq!(f.decide("/api/v1/pods", false).fail, Some(500));
        assert_eq!(f.decide("/api/v1/pods", false).fail, None);
        f.expire_next_watches(1);
        assert!(
            !f.decide("/api/v1/pods", false).expire,
            "only watches expire"
        );
        assert!(f.decide("/api/v1/pods", true).expire);
        assert!(!f.decide("/api/v1/pods", true).expire);
        assert_eq!(f.injected(), 3);
        assert_eq!(f.requests(), 7);
    }
}
