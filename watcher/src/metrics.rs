//! Prometheus metrics of the watcher, served on `/metrics` on their own port ([`crate::serve`]).

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use service_shell::metrics::Render;

type Labels = Vec<(String, String)>;

/// The watcher's metrics. Cheap to clone (every metric is shared).
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Arc<Registry>,
    /// The mirror and informer readiness Karpenter's metrics are computed from at each scrape
    /// (set once by `app::start`).
    source: Arc<std::sync::OnceLock<(crate::mirror::Mirror, Arc<crate::readiness::Readiness>)>>,
    excluded_seen: Arc<std::sync::Mutex<std::collections::BTreeSet<Labels>>>,
    /// Pods pending as Karpenter defines them, now.
    pub pending_pods: Gauge,
    /// Objects in the mirror, now.
    pub objects: Gauge,
    /// New pending pods per closed batch.
    pub batch_size: Histogram,
    /// Seconds from a batch window opening to its closing.
    pub batch_duration: Histogram,
    /// Seconds from a `CloseBatch` being sent to its plan arriving.
    pub plan_latency: Histogram,
    /// Seconds from a change reaching the mirror to its delta being sent.
    pub lag: Histogram,
    /// Objects in the last snapshot sent.
    pub snapshot_objects: Gauge,
    /// Encoded bytes of the last snapshot sent.
    pub snapshot_bytes: Gauge,
    /// Session streams opened again after one failed.
    pub reconnects: Counter,
    /// Plans received.
    pub plans: Counter,
    /// Watch errors, by kind (each followed by a backoff and a re-watch or relist).
    pub watch_errors: Family<Labels, Counter>,
    /// Relists completed, by kind.
    pub relists: Family<Labels, Counter>,
    /// Pods skipped because they can never be planned.
    pub invalid_pods: Counter,
    /// 1 while this replica leads.
    pub leader: Gauge,
    /// Karpenter's cluster-state metrics, by its names.
    pub karpenter: crate::karpenter_metrics::KarpenterMetrics,
    /// Objects the latest plan left out, by kind and reason (`Invalid`, `Unsupported`,
    /// `Duplicate`, `NodeClassExcluded`).
    pub excluded_objects: Family<Labels, Gauge>,
    /// Session streams that ended in failure, by why (the gRPC code, or `closed`).
    pub session_failures: Family<Labels, Counter>,
    /// Seconds the publisher waits before reopening a session, now (0 while one is open).
    pub reconnect_backoff: Gauge<f64, std::sync::atomic::AtomicU64>,
}

// === impl Metrics ===

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let r = root.sub_registry_with_prefix("dovetail_watcher");
        let m = Self {
            registry: Arc::new(Registry::default()),
            source: Default::default(),
            excluded_seen: Arc::default(),
            pending_pods: Gauge::default(),
            objects: Gauge::default(),
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 18)),
            batch_duration: Histogram::new(exponential_buckets(0.05, 2.0, 12)),
            plan_latency: Histogram::new(exponential_buckets(0.001, 2.0, 18)),
            lag: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            snapshot_objects: Gauge::default(),
            snapshot_bytes: Gauge::default(),
            reconnects: Counter::default(),
            plans: Counter::default(),
            watch_errors: Family::default(),
            relists: Family::default(),
            invalid_pods: Counter::default(),
            leader: Gauge::default(),
            karpenter: Default::default(),
            excluded_objects: Family::default(),
            session_failures: Family::default(),
            reconnect_backoff: Gauge::default(),
        };
        r.register(
            "pending_pods",
            "Pods pending as Karpenter defines them",
            m.pending_pods.clone(),
        );
        r.register(
            "objects",
            "Objects in the compact mirror",
            m.objects.clone(),
        );
        r.register(
            "batch_size_pods",
            "New pending pods per closed batch",
            m.batch_size.clone(),
        );
        r.register(
            "batch_duration_seconds",
            "Time from a batch window opening to its closing",
            m.batch_duration.clone(),
        );
        r.register(
            "plan_latency_seconds",
            "Time from CloseBatch sent to its plan received",
            m.plan_latency.clone(),
        );
        r.register(
            "lag_seconds",
            "Time from a change reaching the mirror to its delta being sent",
            m.lag.clone(),
        );
        r.register(
            "snapshot_objects",
            "Objects in the last snapshot sent",
            m.snapshot_objects.clone(),
        );
        r.register(
            "snapshot_bytes",
            "Encoded size of the last snapshot sent",
            m.snapshot_bytes.clone(),
        );
        r.register(
            "reconnects",
            "Session streams reopened after a failure",
            m.reconnects.clone(),
        );
        r.register("plans", "Plans received", m.plans.clone());
        r.register(
            "watch_errors",
            "Watch errors by kind",
            m.watch_errors.clone(),
        );
        r.register("relists", "Relists completed by kind", m.relists.clone());
        r.register(
            "invalid_pods",
            "Pending pods skipped because they can never be planned",
            m.invalid_pods.clone(),
        );
        r.register("leader", "1 while this replica leads", m.leader.clone());
        r.register(
            "excluded_objects",
            "Objects the latest plan left out, by kind and reason",
            m.excluded_objects.clone(),
        );
        r.register(
            "session_failures",
            "Session streams that failed, by gRPC code",
            m.session_failures.clone(),
        );
        r.register(
            "reconnect_backoff_seconds",
            "Wait before the session is reopened (0 while open)",
            m.reconnect_backoff.clone(),
        );
        m.karpenter.register(&mut root);
        Self {
            registry: Arc::new(root),
            ..m
        }
    }

    /// Computes Karpenter's cluster-state metrics from `mirror` at each scrape.
    pub fn attach(
        &self,
        mirror: crate::mirror::Mirror,
        readiness: Arc<crate::readiness::Readiness>,
    ) {
        let _ = self.source.set((mirror, readiness));
    }

    /// Sets the excluded-objects gauges from a plan: every (kind, reason) pair of the plan, and 0
    /// for pairs an earlier plan had and this one does not.
    pub fn note_excluded(&self, excluded: &[proto::v1::ExcludedObject]) {
        let mut counts: std::collections::BTreeMap<Labels, i64> = Default::default();
        for e in excluded {
            *counts
                .entry(vec![
                    ("kind".to_string(), e.kind.clone()),
                    ("reason".to_string(), e.reason.clone()),
                ])
                .or_default() += 1;
        }
        let mut stale = self.excluded_seen.lock().unwrap_or_else(|p| p.into_inner());
        for labels in stale.iter() {
            if !counts.contains_key(labels) {
                self.excluded_objects.get_or_create(labels).set(0);
            }
        }
        for (labels, n) in &counts {
            self.excluded_objects.get_or_create(labels).set(*n);
        }
        stale.extend(counts.into_keys());
    }

    /// Labels of a per-cause metric.
    pub fn why(why: &str) -> Labels {
        vec![("why".to_string(), why.to_string())]
    }

    /// Labels of a per-kind metric.
    pub fn kind(kind: &str) -> Labels {
        vec![("kind".to_string(), kind.to_string())]
    }
}

impl Render for Metrics {
    fn render(&self) -> String {
        if let Some((mirror, readiness)) = self.source.get() {
            let state = mirror.lock();
            let now = service_shell::clock::Clock::new()
                .since_epoch()
                .as_secs_f64();
            self.karpenter.refresh(&state, readiness.is_ready(), now);
        }
        service_shell::metrics::insert_before_eof(
            service_shell::metrics::encode(&self.registry),
            &self.karpenter.pods.render_summary(),
        )
    }
}
