//! The kubelet's part of graceful pod termination (the Kubernetes docs "Pod Lifecycle §
//! Termination of Pods"): a pod marked for deletion ([`crate::api::graceful`]) has its
//! containers stopped, which takes the pod's shutdown time (the annotation
//! [`SHUTDOWN_ANNOTATION`], in seconds; 0 when absent: containers that exit on SIGTERM), cut
//! short at its grace period (SIGKILL), and then the kubelet removes the object.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::{Ctx, kind, name_of, namespace_of};

/// Seconds a simulated pod's containers take to stop after SIGTERM.
pub const SHUTDOWN_ANNOTATION: &str = "simulator.dovetail.dev/shutdown-seconds";

/// Removes the pods whose containers have stopped; returns when the next one will have.
pub(crate) fn reconcile(ctx: &Ctx) -> Option<Instant> {
    let store = &ctx.store;
    let pods_kind = kind(store, "", "pods")?;
    let now = store.clock().now();
    let mut wake: Option<Instant> = None;
    for p in store.all(&pods_kind.key()) {
        let meta = &p["metadata"];
        let Some(grace) = meta["deletionGracePeriodSeconds"]
            .as_i64()
            .filter(|g| *g > 0)
        else {
            continue;
        };
        let Some(deadline) = meta["deletionTimestamp"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp())
        else {
            continue;
        };
        let shutdown = meta["annotations"][SHUTDOWN_ANNOTATION]
            .as_str()
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0);
        let stopped_at = deadline - grace + shutdown.clamp(0, grace);
        if now >= stopped_at {
            let pre = json!({"uid": meta["uid"]});
            let _ = store.delete_with_grace(
                &pods_kind,
                namespace_of(&p),
                name_of(&p),
                Some(&pre),
                Some(0),
            );
        } else {
            let at = Instant::now() + Duration::from_secs((stopped_at - now) as u64);
            wake = Some(wake.map_or(at, |w| w.min(at)));
        }
    }
    wake
}
