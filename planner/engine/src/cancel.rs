//! Cooperative cancellation: a caller that abandons a plan (a gRPC deadline, a cancelled call, a
//! closed stream) flips a [`CancelToken`]; the scheduling loop checks it once per pod and the
//! disruption simulations stop with it, so the work and its memory end within moments.
//!
//! Pure in the sense the core needs: the token is an input like the snapshot; nothing here
//! reads a clock or does IO.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use thiserror::Error;

/// A flag shared between the caller and a planning run. Cheap to clone; the default token is
/// never cancelled.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Option<Arc<AtomicBool>>);

/// The planning run was cancelled by its caller; its partial result was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("planning cancelled by its caller")]
pub struct Cancelled;

// === impl CancelToken ===

impl CancelToken {
    /// A token that [`CancelToken::cancel`] can flip.
    pub fn new() -> Self {
        Self(Some(Arc::new(AtomicBool::new(false))))
    }

    /// Asks every run holding this token to stop.
    pub fn cancel(&self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// True once [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// `Err(Cancelled)` once cancelled.
    ///
    /// # Errors
    /// [`Cancelled`] when the token was cancelled.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Cancels its token when dropped: hold one in the future that waits for a planning run, so
/// that dropping the future (deadline, cancellation, closed stream) stops the run.
#[derive(Debug)]
pub struct CancelOnDrop(pub CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClusterSnapshot, PlanOptions, Pod, Resources};

    fn pending(n: usize) -> ClusterSnapshot {
        ClusterSnapshot {
            pods: (0..n)
                .map(|i| Pod {
                    namespace: "default".into(),
                    name: format!("p{i}"),
                    requests: Resources::cpu_memory(100, 1 << 20),
                    ..Pod::default()
                })
                .collect(),
            ..ClusterSnapshot::default()
        }
    }

    #[test]
    fn a_cancelled_token_stops_the_plan() {
        let catalog = crate::catalog::Catalog::default();
        let token = CancelToken::new();
        let s = pending(50);
        assert!(crate::plan_cancellable(&s, &catalog, &PlanOptions::default(), &token).is_ok());
        token.cancel();
        assert_eq!(
            crate::plan_cancellable(&s, &catalog, &PlanOptions::default(), &token),
            Err(Cancelled)
        );
    }

    #[test]
    fn dropping_the_guard_cancels() {
        let token = CancelToken::new();
        let guard = CancelOnDrop(token.clone());
        assert!(!token.is_cancelled());
        drop(guard);
        assert!(token.is_cancelled());
        assert!(!CancelToken::default().is_cancelled());
    }
}
