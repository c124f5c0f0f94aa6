//! Karpenter's pod latency metrics, by its names (kubernetes-sigs/karpenter v1.14
//! `pkg/controllers/metrics/pod/controller.go`):
//!
//! - `karpenter_pods_startup_duration_seconds` (summary, quantiles 0, 0.5, 0.9, 0.99, 1 over the
//!   last 10 minutes, as Go's default `MaxAge`): pod creation → `Ready=True`, for pods seen
//!   `Pending`;
//! - `karpenter_pods_bound_duration_seconds` (histogram): pod creation → `PodScheduled=True`, for
//!   pods seen `Pending`, observed once the pod leaves `Pending` (as Karpenter does);
//! - `karpenter_pods_provisioning_bound_duration_seconds` and
//!   `karpenter_pods_provisioning_startup_duration_seconds` (histograms): the same from the moment
//!   a plan first placed the pod (Karpenter's `PodSchedulingSuccessTime`);
//! - `karpenter_pods_scheduling_decision_duration_seconds` (histogram): from the watcher first
//!   seeing a pod pending to the first plan that placed it or called it unschedulable
//!   (`pkg/controllers/state/metrics.go`);
//! - per pod {name, namespace}, while it lasts: `karpenter_pods_unbound_time_seconds`,
//!   `karpenter_pods_unstarted_time_seconds`, `karpenter_pods_provisioning_unbound_time_seconds`,
//!   `karpenter_pods_provisioning_unstarted_time_seconds` and
//!   `karpenter_pods_provisioning_scheduling_undecided_time_seconds` (seen pending, no plan has
//!   placed it or called it unschedulable yet).
//!
//! Times of the conditions come from the pods' own `lastTransitionTime`s, so a scrape's timing
//! does not change a duration. Only pods the watcher saw `Pending` are followed, and each is
//! forgotten once it started (or finished), so the memory grows with the pending pods, not the
//! cluster. The pods followed are those the watcher mirrors (as for `karpenter_pods_state`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use proto::v1 as pb;
use service_shell::metrics::Summary;

type Labels = Vec<(String, String)>;
type FGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// What one informer event says about a pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSeen {
    /// `namespace/name`, as plans name pods.
    pub name: String,
    /// The mirror's key of the pod.
    pub key: String,
    /// Creation time, Unix seconds.
    pub created: f64,
    /// `status.phase` is `Pending` (or empty).
    pub pending: bool,
    /// `Succeeded` or `Failed`.
    pub terminal: bool,
    /// `lastTransitionTime` of `PodScheduled=True`, Unix seconds.
    pub scheduled: Option<f64>,
    /// `lastTransitionTime` of `Ready=True`, Unix seconds.
    pub ready: Option<f64>,
}

impl PodSeen {
    /// Reads a pod; `key` is its mirror key.
    pub fn of(p: &Pod, key: String) -> Self {
        let m = &p.metadata;
        let status = p.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
        let true_since = |kind: &str| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == kind && c.status == "True"))
                .map(|c| c.last_transition_time.as_ref().map_or(0.0, |t| secs(&t.0)))
        };
        Self {
            name: common::key::namespaced(
                m.namespace.as_deref().unwrap_or_default(),
                m.name.as_deref().unwrap_or_default(),
            ),
            key,
            created: m.creation_timestamp.as_ref().map_or(0.0, |t| secs(&t.0)),
            pending: phase.is_empty() || phase == "Pending",
            terminal: matches!(phase, "Succeeded" | "Failed"),
            scheduled: true_since("PodScheduled"),
            ready: true_since("Ready"),
        }
    }
}

fn secs(t: &k8s_openapi::jiff::Timestamp) -> f64 {
    t.as_millisecond() as f64 / 1000.0
}

/// A pod followed since it was seen `Pending`.
#[derive(Clone, Debug, Default)]
struct Followed {
    seen: PodSeen,
    /// In Karpenter's `pendingPods`: startup not yet observed.
    unstarted: bool,
    /// In Karpenter's `unscheduledPods`: bound duration not yet observed.
    unbound: bool,
    /// When the watcher first saw it pending and unbound (Karpenter's `PodAckTime`).
    acked: Option<f64>,
    /// When a plan first placed it (Karpenter's `PodSchedulingSuccessTime`).
    schedulable: Option<f64>,
    /// When a plan first placed it or called it unschedulable (`PodSchedulingDecisionTime`).
    decided: Option<f64>,
}

#[derive(Debug, Default)]
struct Inner {
    pods: HashMap<String, Followed>,
}

/// The pod latency metrics. Cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct PodLatency {
    inner: Arc<Mutex<Inner>>,
    startup: Summary,
    bound: Histogram,
    provisioning_bound: Histogram,
    provisioning_startup: Histogram,
    decision: Histogram,
    unbound: Family<Labels, FGauge>,
    unstarted: Family<Labels, FGauge>,
    provisioning_unbound: Family<Labels, FGauge>,
    provisioning_unstarted: Family<Labels, FGauge>,
    undecided: Family<Labels, FGauge>,
}

impl Default for PodLatency {
    fn default() -> Self {
        let h = || Histogram::new(service_shell::metrics::DURATION_BUCKETS);
        Self {
            inner: Arc::default(),
            startup: Summary::new(
                "karpenter_pods_startup_duration_seconds",
                "The time from pod creation until the pod is running.",
            ),
            bound: h(),
            provisioning_bound: h(),
            provisioning_startup: h(),
            decision: h(),
            unbound: Family::default(),
            unstarted: Family::default(),
            provisioning_unbound: Family::default(),
            provisioning_unstarted: Family::default(),
            undecided: Family::default(),
        }
    }
}

// === impl PodLatency ===

impl PodLatency {
    /// Registers the histograms and gauges under `karpenter_pods_` (`registry` itself must have
    /// no prefix); the startup summary is appended by [`PodLatency::render_summary`].
    pub fn register(&self, registry: &mut Registry) {
        let k = registry.sub_registry_with_prefix("karpenter");
        k.register(
            "pods_bound_duration_seconds",
            "The time from pod creation until the pod is bound.",
            self.bound.clone(),
        );
        k.register(
            "pods_provisioning_bound_duration_seconds",
            "The time from when Karpenter first thinks the pod can schedule until it binds. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            self.provisioning_bound.clone(),
        );
        k.register(
            "pods_provisioning_startup_duration_seconds",
            "The time from when Karpenter first thinks the pod can schedule until the pod is running. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            self.provisioning_startup.clone(),
        );
        k.register(
            "pods_scheduling_decision_duration_seconds",
            "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
            self.decision.clone(),
        );
        k.register(
            "pods_unbound_time_seconds",
            "The time from pod creation until the pod is bound.",
            self.unbound.clone(),
        );
        k.register(
            "pods_unstarted_time_seconds",
            "The time from pod creation until the pod is running.",
            self.unstarted.clone(),
        );
        k.register(
            "pods_provisioning_unbound_time_seconds",
            "The time from when Karpenter first thinks the pod can schedule until it binds. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            self.provisioning_unbound.clone(),
        );
        k.register(
            "pods_provisioning_unstarted_time_seconds",
            "The time from when Karpenter first thinks the pod can schedule until the pod is running. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            self.provisioning_unstarted.clone(),
        );
        k.register(
            "pods_provisioning_scheduling_undecided_time_seconds",
            "The time from when Karpenter has seen a pod without making a scheduling decision for the pod. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            self.undecided.clone(),
        );
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows one informer event of a pod the watcher mirrors; `now` in Unix seconds.
    pub fn observe(&self, pod: PodSeen, now: f64) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        if pod.pending {
            let f = inner.pods.entry(pod.name.clone()).or_default();
            f.unstarted = true;
            f.unbound = true;
            if pod.scheduled.is_none() && f.acked.is_none() {
                f.acked = Some(now);
            }
            f.seen = pod;
            return;
        }
        let Some(f) = inner.pods.get_mut(&pod.name) else {
            return; // never seen pending: not Karpenter's to time
        };
        if f.unbound
            && let Some(at) = pod.scheduled
        {
            self.bound.observe(at - pod.created);
            if let Some(s) = f.schedulable {
                self.provisioning_bound.observe(at - s);
            }
            f.unbound = false;
        }
        if f.unstarted {
            if let Some(at) = pod.ready {
                self.startup.observe(&[], at - pod.created);
                if let Some(s) = f.schedulable {
                    self.provisioning_startup.observe(at - s);
                }
                f.unstarted = false;
            } else if pod.terminal {
                f.unstarted = false;
            }
        }
        let done = !f.unstarted;
        if done {
            // Started (or finished): Karpenter clears its scheduling mappings here.
            inner.pods.remove(&pod.name);
        } else {
            f.seen = pod;
        }
    }

    /// Forgets a pod the watcher stopped mirroring.
    pub fn forget(&self, name: &str) {
        self.lock().pods.remove(name);
    }

    /// Notes a plan's decisions: pods placed on claims or nodes are schedulable (the first such
    /// plan counts), and every pod placed or unschedulable is decided.
    pub fn note_plan(&self, plan: &pb::PlanResponse, now: f64) {
        let mut inner = self.lock();
        let placed = plan
            .node_claims
            .iter()
            .flat_map(|c| &c.pods)
            .chain(plan.existing_nodes.iter().flat_map(|n| &n.pods));
        let decide = |f: &mut Followed| {
            if f.decided.is_none() {
                f.decided = Some(now);
                if let Some(acked) = f.acked {
                    self.decision.observe(now - acked);
                }
            }
        };
        for p in placed {
            if let Some(f) = inner.pods.get_mut(p) {
                f.schedulable.get_or_insert(now);
                decide(f);
            }
        }
        for u in &plan.unschedulable {
            if let Some(f) = inner.pods.get_mut(&u.pod) {
                decide(f);
            }
        }
    }

    /// Sets the per-pod gauges at `now`, forgetting pods `mirrored` says the watcher no longer
    /// holds (by mirror key).
    pub fn refresh(&self, now: f64, mirrored: impl Fn(&str) -> bool) {
        let mut inner = self.lock();
        inner.pods.retain(|_, f| mirrored(&f.seen.key));
        for g in [
            &self.unbound,
            &self.unstarted,
            &self.provisioning_unbound,
            &self.provisioning_unstarted,
            &self.undecided,
        ] {
            g.clear();
        }
        for f in inner.pods.values() {
            let s = &f.seen;
            let (namespace, name) = s.name.split_once('/').unwrap_or(("", &s.name));
            let labels = vec![
                ("name".to_string(), name.to_string()),
                ("namespace".to_string(), namespace.to_string()),
            ];
            if f.unstarted {
                self.unstarted.get_or_create(&labels).set(now - s.created);
                if let Some(at) = f.schedulable {
                    self.provisioning_unstarted
                        .get_or_create(&labels)
                        .set(now - at);
                }
            }
            if s.pending && s.scheduled.is_none() {
                self.unbound.get_or_create(&labels).set(now - s.created);
                if let Some(at) = f.schedulable {
                    self.provisioning_unbound
                        .get_or_create(&labels)
                        .set(now - at);
                }
                if f.decided.is_none()
                    && let Some(at) = f.acked
                {
                    self.undecided.get_or_create(&labels).set(now - at);
                }
            }
        }
    }

    /// The startup summary's OpenMetrics text (see [`Summary`]).
    pub fn render_summary(&self) -> String {
        self.startup.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(pending: bool, scheduled: Option<f64>, ready: Option<f64>) -> PodSeen {
        PodSeen {
            name: "default/web-1".into(),
            key: "uid-1".into(),
            created: 100.0,
            pending,
            terminal: false,
            scheduled,
            ready,
        }
    }

    fn text(m: &PodLatency, now: f64) -> String {
        let mut r = Registry::default();
        m.register(&mut r);
        m.refresh(now, |k| k == "uid-1");
        service_shell::metrics::insert_before_eof(
            service_shell::metrics::encode(&r),
            &m.render_summary(),
        )
    }

    #[test]
    fn a_pod_seen_pending_is_timed_to_bound_and_started() {
        let m = PodLatency::default();
        m.observe(seen(true, None, None), 101.0);
        let t = text(&m, 103.0);
        for want in [
            r#"karpenter_pods_unbound_time_seconds{name="web-1",namespace="default"} 3.0"#,
            r#"karpenter_pods_unstarted_time_seconds{name="web-1",namespace="default"} 3.0"#,
            r#"karpenter_pods_provisioning_scheduling_undecided_time_seconds{name="web-1",namespace="default"} 2.0"#,
        ] {
            assert!(t.contains(want), "{want} missing from:\n{t}");
        }
        // A plan places it at 104: decided, schedulable.
        m.note_plan(
            &pb::PlanResponse {
                node_claims: vec![pb::PlannedNodeClaim {
                    pods: vec!["default/web-1".into()],
                    ..Default::default()
                }],
                ..Default::default()
            },
            104.0,
        );
        let t = text(&m, 106.0);
        assert!(!t.contains("undecided_time_seconds{"), "{t}");
        assert!(
            t.contains("karpenter_pods_scheduling_decision_duration_seconds_sum 3.0"),
            "{t}"
        );
        assert!(
            t.contains(
                r#"karpenter_pods_provisioning_unbound_time_seconds{name="web-1",namespace="default"} 2.0"#
            ),
            "{t}"
        );
        // Bound at 110 (still Pending while its containers start), Running and Ready at 112.
        m.observe(seen(true, Some(110.0), None), 110.5);
        m.observe(seen(false, Some(110.0), Some(112.0)), 112.5);
        let t = text(&m, 113.0);
        for want in [
            "karpenter_pods_bound_duration_seconds_sum 10.0",
            "karpenter_pods_bound_duration_seconds_count 1",
            "karpenter_pods_provisioning_bound_duration_seconds_sum 6.0",
            "karpenter_pods_provisioning_startup_duration_seconds_sum 8.0",
            "karpenter_pods_startup_duration_seconds{quantile=\"0.5\"} 12",
            "karpenter_pods_startup_duration_seconds_sum 12",
            "karpenter_pods_startup_duration_seconds_count 1",
            "# TYPE karpenter_pods_startup_duration_seconds summary",
        ] {
            assert!(t.contains(want), "{want} missing from:\n{t}");
        }
        assert!(!t.contains("unbound_time_seconds{"), "{t}");
        assert!(!t.contains("unstarted_time_seconds{"), "{t}");
        assert!(t.trim_end().ends_with("# EOF"), "{t}");
        // The pod is forgotten once started: nothing grows with running pods.
        assert!(m.lock().pods.is_empty());
    }

    #[test]
    fn pods_never_pending_are_not_timed_and_gone_pods_are_forgotten() {
        let m = PodLatency::default();
        m.observe(seen(false, Some(101.0), Some(102.0)), 103.0);
        let t = text(&m, 104.0);
        assert!(
            t.contains("karpenter_pods_bound_duration_seconds_count 0"),
            "{t}"
        );
        assert!(
            t.contains("karpenter_pods_startup_duration_seconds_count 0"),
            "{t}"
        );
        assert!(
            t.contains("karpenter_pods_startup_duration_seconds{quantile=\"0.5\"} NaN"),
            "{t}"
        );
        m.observe(seen(true, None, None), 105.0);
        m.refresh(106.0, |_| false);
        assert!(m.lock().pods.is_empty());
    }
}
