//! The demo's services supervised as a Deployment's pods are: a process that ends (a crash, a
//! SIGKILL from outside, or the story's own kill of a planner) is reported at once on the
//! board (its name, pid and exit status, and its log) and started again after a backoff, as
//! the kubelet restarts a container: 1 s doubling to 30 s while it keeps ending within a
//! minute of its start (`CrashLoopBackOff`), from 1 s again once it ran longer. A restarted
//! process binds the addresses the first one bound, so the other services find it, and is
//! reported once it is ready. A process that ended without the demo stopping it is also
//! recorded: during the story that fails the demo.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, watch};
// The runtime's monotonic clock (clippy.toml keeps std's for clock modules).
use tokio::time::Instant;

use super::services::{Service, tail};
use super::view::{self, SharedBoard};

/// A supervised service, shared by its supervisor and the story.
pub(crate) type Shared = Arc<Mutex<Service>>;

/// The first restart's wait.
const FIRST: Duration = Duration::from_secs(1);
/// The longest wait between restarts.
const MOST: Duration = Duration::from_secs(30);
/// A process that ran this long before it ended restarts after [`FIRST`] again.
const STABLE: Duration = Duration::from_secs(60);

/// The wait before the restart that follows `quick` ends in a row, each within [`STABLE`] of
/// its start.
pub(crate) fn restart_backoff(quick: u32) -> Duration {
    FIRST.saturating_mul(1 << quick.min(8)).min(MOST)
}

/// The services that ended on their own, described (name, pid, status, log tail).
#[derive(Debug, Default)]
pub(crate) struct Crashes(std::sync::Mutex<Vec<String>>);

impl Crashes {
    fn push(&self, what: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(what);
    }

    /// Every crash so far.
    pub(crate) fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn act(board: &SharedBoard, started: Instant, text: String) {
    view::lock(board).act(started.elapsed().as_secs_f64(), text);
}

/// Watches `service` until `stop` turns true, restarting it whenever it ends (see the module
/// docs).
pub(crate) async fn supervise(
    service: Shared,
    board: SharedBoard,
    started: Instant,
    crashes: Arc<Crashes>,
    mut stop: watch::Receiver<bool>,
) {
    let mut quick = 0u32;
    // The pid whose end was reported already (a restart that failed leaves it in place).
    let mut reported = None;
    loop {
        let (name, pid, status, killed, ran, log) = loop {
            if *stop.borrow() {
                return;
            }
            {
                let mut s = service.lock().await;
                if let Some((status, killed, ran)) = s.ended() {
                    break (s.name.clone(), s.pid, status, killed, ran, s.log.clone());
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                _ = stop.changed() => {}
            }
        };
        if ran >= STABLE {
            quick = 0;
        }
        let wait = restart_backoff(quick);
        quick = quick.saturating_add(1);
        if reported != Some(pid) {
            reported = Some(pid);
            let what = if killed {
                format!("{name} (pid {pid}) was killed by the demo ({status})")
            } else {
                format!("{name} (pid {pid}) exited ({status})")
            };
            if !killed {
                crashes.push(describe(&what, &log));
            }
            act(
                &board,
                started,
                format!(
                    "! {what}; restarting it in {} as its Deployment would; log: {}",
                    seconds(wait),
                    log.display()
                ),
            );
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        let restarted = {
            let mut s = service.lock().await;
            if *stop.borrow() {
                return;
            }
            s.restart().await.map(|()| s.pid)
        };
        match restarted {
            Ok(new) => act(
                &board,
                started,
                format!("{name} restarted (pid {new}), serving again"),
            ),
            Err(e) => act(
                &board,
                started,
                format!("! {name} did not start again: {e:#}"),
            ),
        }
    }
}

fn describe(what: &str, log: &Path) -> String {
    format!("{what}; its log: {}\n{}", log.display(), tail(log, 15))
}

fn seconds(d: Duration) -> String {
    format!("{:.0}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_as_a_crash_loop_does() {
        let waits: Vec<u64> = (0..8).map(|n| restart_backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(restart_backoff(u32::MAX), MOST);
    }
}
