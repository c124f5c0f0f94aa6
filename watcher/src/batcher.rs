//! The batch window over new pending pods: it opens on the first one, extends by the idle
//! interval on each further one, and never stays open longer than the maximum (Karpenter's
//! `BATCH_IDLE_DURATION`, default 1 s, and `BATCH_MAX_DURATION`, default 10 s).

use std::time::Duration;

use tokio::time::Instant;

/// A closed window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed {
    /// New pending pods seen while it was open.
    pub pods: usize,
    /// How long it was open.
    pub open_for: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    opened: Instant,
    deadline: Instant,
    pods: usize,
}

/// The window state machine; time is passed in, so it is driven by tokio's (pausable) clock.
#[derive(Debug, Clone)]
pub struct Batcher {
    idle: Duration,
    max: Duration,
    window: Option<Window>,
}

// === impl Batcher ===

impl Batcher {
    /// A batcher closing after `idle` without new pods, or `max` after opening.
    pub fn new(idle: Duration, max: Duration) -> Self {
        Self {
            idle,
            max: max.max(idle),
            window: None,
        }
    }

    /// Records `pods` new pending pods at `now`: opens the window or extends it.
    pub fn add(&mut self, now: Instant, pods: usize) {
        if pods == 0 {
            return;
        }
        let w = self.window.get_or_insert(Window {
            opened: now,
            deadline: now,
            pods: 0,
        });
        w.pods += pods;
        w.deadline = (now + self.idle).min(w.opened + self.max);
    }

    /// When the open window closes; `None` when no window is open.
    pub fn deadline(&self) -> Option<Instant> {
        self.window.map(|w| w.deadline)
    }

    /// True while a window is open.
    pub fn is_open(&self) -> bool {
        self.window.is_some()
    }

    /// Closes the window if its deadline has passed at `now`.
    pub fn close_if_due(&mut self, now: Instant) -> Option<Closed> {
        let w = self.window.filter(|w| w.deadline <= now)?;
        self.window = None;
        Some(Closed {
            pods: w.pods,
            open_for: now - w.opened,
        })
    }

    /// Resolves when the open window is due; never while none is open.
    pub async fn due(&self) {
        match self.deadline() {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(10);

    /// Waits for the window and closes it, as the publisher does.
    async fn next_close(b: &mut Batcher) -> Closed {
        b.due().await;
        b.close_if_due(Instant::now()).expect("due")
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_pod_closes_after_the_idle_interval() {
        let mut b = Batcher::new(IDLE, MAX);
        let start = Instant::now();
        b.add(start, 1);
        let c = next_close(&mut b).await;
        assert_eq!(
            c,
            Closed {
                pods: 1,
                open_for: IDLE
            }
        );
        assert_eq!(Instant::now() - start, IDLE);
        assert!(!b.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn each_pod_extends_the_window_by_the_idle_interval() {
        let mut b = Batcher::new(IDLE, MAX);
        let start = Instant::now();
        b.add(start, 1);
        for _ in 0..3 {
            tokio::time::advance(Duration::from_millis(600)).await;
            assert!(b.close_if_due(Instant::now()).is_none(), "still open");
            b.add(Instant::now(), 2);
        }
        let c = next_close(&mut b).await;
        assert_eq!(c.pods, 7);
        assert_eq!(Instant::now() - start, Duration::from_millis(1800) + IDLE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_of_pods_is_cut_at_the_maximum() {
        let mut b = Batcher::new(IDLE, MAX);
        let start = Instant::now();
        b.add(start, 1);
        let mut pods = 1;
        while Instant::now() - start < Duration::from_secs(12) {
            tokio::time::advance(Duration::from_millis(500)).await;
            if let Some(c) = b.close_if_due(Instant::now()) {
                assert_eq!(c.open_for, MAX);
                assert_eq!(Instant::now() - start, MAX);
                assert_eq!(c.pods, pods);
                return;
            }
            b.add(Instant::now(), 1);
            pods += 1;
        }
        panic!("the window never closed");
    }

    #[tokio::test(start_paused = true)]
    async fn no_window_without_pods() {
        let mut b = Batcher::new(IDLE, MAX);
        b.add(Instant::now(), 0);
        assert!(!b.is_open());
        let waited = tokio::time::timeout(Duration::from_secs(60), b.due()).await;
        assert!(waited.is_err(), "due() must not resolve without a window");
    }
}
