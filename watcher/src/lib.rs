//! The dovetail watcher: mirrors the cluster from the Kubernetes API and streams it to the
//! planners.
//!
//! Reflectors ([`informers`]) watch every kind the planner reads and convert each object to its
//! compact `dovetail.v1` form as it arrives ([`convert`]); the [`mirror`] holds only those
//! compact forms. Nothing is sent until every kind has been listed once. The [`publish`]er keeps
//! one `Planner.Session` stream open: a full snapshot, then deltas in order, a `CloseBatch` when
//! the [`batcher`]'s window over new [pending] pods closes or the consolidation timer fires; on
//! stream failure it reconnects to another replica and resends a snapshot. Plans come back as
//! Events on pods and NodePool status ([`feedback`]); `/metrics` also carries Karpenter's
//! cluster-state metrics by Karpenter's names ([`karpenter_metrics`]). With several replicas one [`leader`]
//! streams. [`app::start`] assembles it all; [`cli`] is the `dovetail-watcher` program, in the
//! service shell (`service-shell`: configuration source and Go durations, the planners' TLS,
//! health and `/metrics` ports, shutdown, the clock, the Kubernetes client). The watcher never
//! decides anything.

pub mod app;
pub mod batcher;
pub mod cli;
pub mod config;
pub mod convert;
pub mod feedback;
pub mod informers;
pub mod karpenter_metrics;
pub mod leader;
pub mod metrics;
pub mod mirror;
pub mod pending;
pub mod publish;
pub mod readiness;
/// The name health reports the watcher under.
pub const WATCHER_SERVICE: &str = "dovetail.v1.Watcher";

/// Resolves once `flag` is true (or its sender is gone); holds no borrow of the value across
/// an await, so it can sit in a `select!` of a spawned task.
pub(crate) async fn when(flag: &mut tokio::sync::watch::Receiver<bool>, value: bool) {
    let _ = flag.wait_for(|v| *v == value).await.map(|_| ());
}
