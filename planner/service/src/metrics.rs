//! Prometheus metrics of the planner service, exposed on `/metrics` on their own port.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use service_shell::metrics::Render;

type Labels = Vec<(String, String)>;

/// The planner's metrics. Cheap to clone (every metric is shared).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram>,
    pods_planned: Counter,
    plan_cost: Histogram,
    shed: Counter,
    sessions: Gauge,
    session_objects: Gauge,
    actuator_commands: Counter,
    actuator_failures: Counter,
    plans_running: Gauge,
    plans_cancelled: Counter,
    catalog_fetches: Family<Labels, Counter>,
    evaluation: Family<Labels, Histogram>,
    consolidation_score: Family<Labels, Histogram>,
    consolidation_moves: Family<Labels, Counter>,
}

/// Karpenter's buckets of `karpenter_consolidation_score` (`pkg/controllers/disruption/metrics.go`).
pub const CONSOLIDATION_SCORE_BUCKETS: [f64; 8] = [0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0];

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
        let registry = root.sub_registry_with_prefix("dovetail_planner");
        let requests = Family::<Labels, Counter>::default();
        registry.register(
            "requests",
            "gRPC requests served, by method and status code",
            requests.clone(),
        );
        let latency = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 18))
        });
        registry.register(
            "request_duration_seconds",
            "Time to answer a request (a session batch for Session), by method",
            latency.clone(),
        );
        let pods_planned = Counter::default();
        registry.register(
            "pods_planned",
            "Pending pods in the snapshots planned",
            pods_planned.clone(),
        );
        let plan_cost = Histogram::new(exponential_buckets(0.01, 2.0, 20));
        registry.register(
            "plan_cost_per_hour_dollars",
            "Hourly cost of the new capacity of each plan (summary.costPerHour)",
            plan_cost.clone(),
        );
        let shed = Counter::default();
        registry.register(
            "requests_shed",
            "Requests refused with RESOURCE_EXHAUSTED because the concurrency limit was reached",
            shed.clone(),
        );
        let sessions = Gauge::default();
        registry.register("sessions", "Open Session streams", sessions.clone());
        let session_objects = Gauge::default();
        registry.register(
            "session_objects",
            "Objects held by open Session streams",
            session_objects.clone(),
        );
        let actuator_commands = Counter::default();
        registry.register(
            "actuator_commands_submitted",
            "Commands submitted to the actuator",
            actuator_commands.clone(),
        );
        let actuator_failures = Counter::default();
        registry.register(
            "actuator_submit_failures",
            "Submissions to the actuator that failed",
            actuator_failures.clone(),
        );
        let plans_running = Gauge::default();
        registry.register(
            "plans_running",
            "Planning runs executing now (CPU work on the blocking pool)",
            plans_running.clone(),
        );
        let plans_cancelled = Counter::default();
        registry.register(
            "plans_cancelled",
            "Planning runs stopped early because their caller went away (deadline, cancelled call, closed Session)",
            plans_cancelled.clone(),
        );
        let catalog_fetches = Family::<Labels, Counter>::default();
        registry.register(
            "catalog_fetches",
            "Live catalog checks against the actuator, by outcome (updated, unchanged, refused, error)",
            catalog_fetches.clone(),
        );
        // Karpenter's name, for the dashboards users have (`pkg/controllers/disruption/metrics.go`,
        // its `DurationBuckets()`).
        let evaluation = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(service_shell::metrics::DURATION_BUCKETS)
        });
        let karpenter = root.sub_registry_with_prefix("karpenter");
        karpenter.register(
            "voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
            evaluation.clone(),
        );
        let consolidation_score = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(CONSOLIDATION_SCORE_BUCKETS)
        });
        karpenter.register(
            "consolidation_score",
            "Score of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            consolidation_score.clone(),
        );
        let consolidation_moves = Family::<Labels, Counter>::default();
        karpenter.register(
            "consolidation_moves",
            "Number of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            consolidation_moves.clone(),
        );
        Self {
            catalog_fetches,
            evaluation,
            consolidation_score,
            consolidation_moves,
            registry: Arc::new(root),
            requests,
            latency,
            pods_planned,
            plan_cost,
            shed,
            sessions,
            session_objects,
            actuator_commands,
            actuator_failures,
            plans_running,
            plans_cancelled,
        }
    }

    /// Counts one finished request.
    pub fn request(&self, method: &str, code: tonic::Code, seconds: f64) {
        let code = format!("{code:?}");
        self.requests
            .get_or_create(&vec![
                ("method".to_string(), method.to_string()),
                ("code".to_string(), code),
            ])
            .inc();
        self.latency
            .get_or_create(&vec![("method".to_string(), method.to_string())])
            .observe(seconds);
    }

    /// Records one computed plan.
    pub fn plan(&self, pending_pods: u32, cost_per_hour: f64) {
        self.pods_planned.inc_by(u64::from(pending_pods));
        if cost_per_hour.is_finite() {
            self.plan_cost.observe(cost_per_hour);
        }
    }

    /// The gauge of planning runs executing now.
    pub fn plans_running(&self) -> &Gauge {
        &self.plans_running
    }

    /// Counts a planning run that stopped because its caller went away.
    pub fn plan_cancelled(&self) {
        self.plans_cancelled.inc();
    }

    /// Counts a request refused by load shedding.
    pub fn shed(&self) {
        self.shed.inc();
    }

    /// The gauge of open sessions.
    pub fn sessions(&self) -> &Gauge {
        &self.sessions
    }

    /// The gauge of objects held by open sessions.
    pub fn session_objects(&self) -> &Gauge {
        &self.session_objects
    }

    /// Counts a submission to the actuator.
    pub fn actuator_submitted(&self, commands: usize, ok: bool) {
        self.actuator_commands.inc_by(commands as u64);
        if !ok {
            self.actuator_failures.inc();
        }
    }

    /// Counts a plan's consolidation moves as Karpenter's balanced evaluator does
    /// (`pkg/controllers/disruption/balanced.go`, `ApproveCommand` and `EmitMultiNodeEvents`):
    /// each move once per NodePool of its nodes in `karpenter_consolidation_moves_total`,
    /// whatever the pool's policy, with the move's decision; each scored (Balanced) pool's score
    /// in `karpenter_consolidation_score`, with that pool's own verdict.
    pub fn consolidation_moves(&self, moves: &[planner::plan::ConsolidationMove]) {
        for mv in moves {
            for pool in &mv.node_pools {
                let labels = |decision: &str| {
                    vec![
                        ("decision".to_string(), decision.to_string()),
                        ("nodepool".to_string(), pool.node_pool.clone()),
                        ("policy".to_string(), pool.policy.clone()),
                    ]
                };
                self.consolidation_moves
                    .get_or_create(&labels(&mv.decision))
                    .inc();
                if pool.scored {
                    let verdict = if pool.score >= pool.threshold {
                        "approved"
                    } else {
                        "rejected"
                    };
                    self.consolidation_score
                        .get_or_create(&labels(verdict))
                        .observe(pool.score);
                }
            }
        }
    }

    /// Counts a live catalog check (`updated`, `unchanged`, `refused`, `error`).
    pub fn catalog_fetch(&self, outcome: &str) {
        self.catalog_fetches
            .get_or_create(&vec![("outcome".to_string(), outcome.to_string())])
            .inc();
    }
}

/// Times each disruption method of a plan into
/// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds`.
impl planner::stopwatch::Stopwatch for Metrics {
    fn time(&self, method: planner::stopwatch::Method, evaluate: &mut dyn FnMut()) {
        let start = tokio::time::Instant::now();
        evaluate();
        self.evaluation
            .get_or_create(&vec![
                ("reason".to_string(), method.reason.to_string()),
                (
                    "consolidation_type".to_string(),
                    method.consolidation_type.to_string(),
                ),
            ])
            .observe(start.elapsed().as_secs_f64());
    }
}

impl Render for Metrics {
    fn render(&self) -> String {
        service_shell::metrics::encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_recorded_values() {
        let m = Metrics::new();
        m.request("Plan", tonic::Code::Ok, 0.002);
        m.plan(7, 1.5);
        let text = m.render();
        assert!(
            text.contains(r#"dovetail_planner_requests_total{method="Plan",code="Ok"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("dovetail_planner_pods_planned_total 7"),
            "{text}"
        );
        assert!(text.contains("dovetail_planner_plan_cost_per_hour_dollars_count 1"));
    }

    fn pool(name: &str, policy: &str, score: f64) -> planner::plan::ConsolidationPoolScore {
        planner::plan::ConsolidationPoolScore {
            node_pool: name.into(),
            policy: policy.into(),
            scored: policy == "Balanced",
            score,
            threshold: 0.5,
            k: 2,
            ..Default::default()
        }
    }

    // kubernetes-sigs/karpenter v1.14 pkg/controllers/disruption/balanced.go: ApproveCommand
    // (single node) and EmitMultiNodeEvents (per NodePool of a multi-node command).
    #[test]
    fn counts_consolidation_moves_and_scores_as_karpenter() {
        use planner::plan::ConsolidationMove;
        let m = Metrics::new();
        m.consolidation_moves(&[
            // A single-node Balanced move, approved at 0.75.
            ConsolidationMove {
                decision: "approved".into(),
                nodes: vec!["n0".into()],
                node_claims: vec!["c0".into()],
                node_pools: vec![pool("bal", "Balanced", 0.75)],
            },
            // A multi-node move over a Balanced pool and a WhenEmptyOrUnderutilized one: one
            // count per pool, one score (the Balanced pool's).
            ConsolidationMove {
                decision: "approved".into(),
                nodes: vec!["n1".into(), "n2".into()],
                node_claims: vec![String::new(), String::new()],
                node_pools: vec![
                    pool("bal", "Balanced", 3.0),
                    pool("default", "WhenEmptyOrUnderutilized", 0.0),
                ],
            },
            // A refused single-node move.
            ConsolidationMove {
                decision: "rejected".into(),
                nodes: vec!["n3".into()],
                node_claims: vec![String::new()],
                node_pools: vec![pool("bal", "Balanced", 0.39)],
            },
        ]);
        let text = m.render();
        for line in [
            r#"karpenter_consolidation_moves_total{decision="approved",nodepool="bal",policy="Balanced"} 2"#,
            r#"karpenter_consolidation_moves_total{decision="approved",nodepool="default",policy="WhenEmptyOrUnderutilized"} 1"#,
            r#"karpenter_consolidation_moves_total{decision="rejected",nodepool="bal",policy="Balanced"} 1"#,
            r#"karpenter_consolidation_score_count{decision="approved",nodepool="bal",policy="Balanced"} 2"#,
            r#"karpenter_consolidation_score_sum{decision="approved",nodepool="bal",policy="Balanced"} 3.75"#,
            r#"karpenter_consolidation_score_bucket{le="0.33",decision="approved",nodepool="bal",policy="Balanced"} 0"#,
            r#"karpenter_consolidation_score_bucket{le="1.0",decision="approved",nodepool="bal",policy="Balanced"} 1"#,
            r#"karpenter_consolidation_score_bucket{le="5.0",decision="approved",nodepool="bal",policy="Balanced"} 2"#,
            r#"karpenter_consolidation_score_bucket{le="0.5",decision="rejected",nodepool="bal",policy="Balanced"} 1"#,
            r#"karpenter_consolidation_score_bucket{le="0.33",decision="rejected",nodepool="bal",policy="Balanced"} 0"#,
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        // Pools of other policies are counted, never scored.
        assert!(!text.contains(
            r#"karpenter_consolidation_score_count{decision="approved",nodepool="default""#
        ));
        assert!(
            text.contains("# TYPE karpenter_consolidation_score histogram"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE karpenter_consolidation_moves counter"),
            "{text}"
        );
    }

    #[test]
    fn times_disruption_methods_by_karpenters_name_and_labels() {
        use planner::stopwatch::{DRIFT, Stopwatch};
        let m = Metrics::new();
        let mut ran = false;
        m.time(DRIFT, &mut || ran = true);
        assert!(ran);
        let text = m.render();
        assert!(
            text.contains(
                r#"karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count{reason="drifted",consolidation_type=""} 1"#
            ),
            "{text}"
        );
    }
}
