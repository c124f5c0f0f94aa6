//! Prometheus metrics of the actuator, served on `/metrics` on their own port: launches,
//! failures by reason, claims by state (refreshed from the ledger), submissions by outcome and
//! submit latency, insufficient-capacity marks, live catalog refreshes and requests, drain
//! evictions by outcome, disruptions by reason and outcome, interruption messages by kind
//! and outcome, and the failures and current backoff of the background loops
//! (`dovetail_actuator_loop_failures_total{loop,reason}`,
//! `dovetail_actuator_loop_backoff_seconds{loop}`); and, by Karpenter's names and labels, the counters of the facts the actuator
//! knows (kubernetes-sigs/karpenter v1.14 `pkg/metrics/metrics.go`,
//! `pkg/controllers/disruption/metrics.go`): `karpenter_nodeclaims_created_total`,
//! `karpenter_nodeclaims_terminated_total`, `karpenter_nodeclaims_disrupted_total`,
//! `karpenter_nodeclaims_unhealthy_disrupted_total`,
//! `karpenter_nodes_created_total`, `karpenter_nodes_terminated_total`,
//! `karpenter_voluntary_disruption_decisions_total`,
//! `karpenter_voluntary_disruption_decisions_by_nodepool_total`; of node termination
//! (`pkg/controllers/node/termination`, `pkg/controllers/nodeclaim/lifecycle/metrics.go`):
//! `karpenter_pods_eviction_requests_total{code}`, `karpenter_pods_drained_total{reason}`,
//! `karpenter_nodes_drained_total{nodepool}`, `karpenter_nodes_termination_duration_seconds`
//! (a summary), `karpenter_nodes_lifetime_duration_seconds`,
//! `karpenter_nodeclaims_termination_duration_seconds`,
//! `karpenter_nodeclaims_instance_termination_duration_seconds`; of interruption
//! (aws/karpenter-provider-aws `pkg/controllers/interruption/metrics.go`):
//! `karpenter_interruption_received_messages_total{message_type}`,
//! `karpenter_interruption_deleted_messages_total`,
//! `karpenter_interruption_message_queue_duration_seconds`; and of launches
//! (`pkg/providers/instance/metrics.go`):
//! `karpenter_cloudprovider_instance_launch_failures_total{zone,zone_id,capacity_type,reason}`.
//! (The cluster-state gauges,
//! `karpenter_voluntary_disruption_eligible_nodes` among them, are the watcher's.)

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use service_shell::metrics::Render;

use crate::ledger::ClaimState;

type Labels = Vec<(String, String)>;

fn label(k: &str, v: &str) -> Labels {
    vec![(k.to_string(), v.to_string())]
}

/// The actuator's metrics. Cheap to clone (every metric is shared).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    launches: Counter,
    create_calls: Counter,
    failures: Family<Labels, Counter>,
    claims: Family<Labels, Gauge>,
    commands: Family<Labels, Counter>,
    submit_latency: Histogram,
    ledger_errors: Counter,
    ice_marks: Counter,
    catalog_refreshes: Family<Labels, Counter>,
    catalog_requests: Family<Labels, Counter>,
    evictions: Family<Labels, Counter>,
    disruptions: Family<Labels, Counter>,
    interruption_messages: Family<Labels, Counter>,
    interruption_receive_errors: Counter,
    loop_failures: Family<Labels, Counter>,
    loop_backoff: Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    karpenter: Karpenter,
}

/// Karpenter's metrics (names, label names and values as Karpenter's).
#[derive(Clone)]
struct Karpenter {
    nodeclaims_created: Family<Labels, Counter>,
    nodeclaims_terminated: Family<Labels, Counter>,
    nodeclaims_disrupted: Family<Labels, Counter>,
    nodeclaims_unhealthy_disrupted: Family<Labels, Counter>,
    nodes_created: Family<Labels, Counter>,
    nodes_terminated: Family<Labels, Counter>,
    decisions: Family<Labels, Counter>,
    decisions_by_nodepool: Family<Labels, Counter>,
    eviction_requests: Family<Labels, Counter>,
    pods_drained: Family<Labels, Counter>,
    nodes_drained: Family<Labels, Counter>,
    node_lifetime: Family<Labels, Histogram, fn() -> Histogram>,
    nodeclaim_termination: Family<Labels, Histogram, fn() -> Histogram>,
    instance_termination: Family<Labels, Histogram, fn() -> Histogram>,
    interruption_received: Family<Labels, Counter>,
    interruption_deleted: Counter,
    interruption_latency: Histogram,
    launch_failures: Family<Labels, Counter>,
    failed_validations: Family<Labels, Counter>,
    queue_failures: Family<Labels, Counter>,
    /// `karpenter_nodes_termination_duration_seconds`, a summary (rendered after the registry).
    node_termination: service_shell::metrics::Summary,
}

/// `karpenter_nodes_lifetime_duration_seconds`' buckets: 15 min to 10 days.
fn lifetime_histogram() -> Histogram {
    const H: f64 = 3600.0;
    Histogram::new([
        0.25 * H,
        0.5 * H,
        0.75 * H,
        H,
        2.0 * H,
        4.0 * H,
        6.0 * H,
        8.0 * H,
        10.0 * H,
        12.0 * H,
        16.0 * H,
        20.0 * H,
        24.0 * H,
        48.0 * H,
        72.0 * H,
        120.0 * H,
        240.0 * H,
    ])
}

/// 1, 2, 4 … 2048 s (`ExponentialBuckets(1, 2, 12)`).
fn nodeclaim_termination_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 12))
}

/// 1, 2, 4 … 1024 s (`ExponentialBuckets(1, 2, 11)`).
fn instance_termination_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 11))
}

impl Default for Karpenter {
    fn default() -> Self {
        Self {
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodeclaims_unhealthy_disrupted: Family::default(),
            nodes_created: Family::default(),
            nodes_terminated: Family::default(),
            decisions: Family::default(),
            decisions_by_nodepool: Family::default(),
            eviction_requests: Family::default(),
            pods_drained: Family::default(),
            nodes_drained: Family::default(),
            node_lifetime: Family::new_with_constructor(lifetime_histogram),
            nodeclaim_termination: Family::new_with_constructor(nodeclaim_termination_histogram),
            instance_termination: Family::new_with_constructor(instance_termination_histogram),
            interruption_received: Family::default(),
            interruption_deleted: Counter::default(),
            interruption_latency: Histogram::new(service_shell::metrics::DURATION_BUCKETS),
            launch_failures: Family::default(),
            failed_validations: Family::default(),
            queue_failures: Family::default(),
            node_termination: service_shell::metrics::Summary::new(
                "karpenter_nodes_termination_duration_seconds",
                "The time taken between a node's deletion request and the removal of its finalizer",
            ),
        }
    }
}

impl Karpenter {
    fn register(&self, k: &mut Registry) {
        k.register(
            "pods_eviction_requests",
            "The total number of pod eviction requests made by Karpenter, labeled by response code",
            self.eviction_requests.clone(),
        );
        k.register(
            "pods_drained",
            "The total number of pods drained during node termination by Karpenter, labeled by reason",
            self.pods_drained.clone(),
        );
        k.register(
            "nodes_drained",
            "The total number of nodes drained by Karpenter",
            self.nodes_drained.clone(),
        );
        k.register(
            "nodes_lifetime_duration_seconds",
            "The lifetime duration of the nodes since creation.",
            self.node_lifetime.clone(),
        );
        k.register(
            "nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds.",
            self.nodeclaim_termination.clone(),
        );
        k.register(
            "nodeclaims_instance_termination_duration_seconds",
            "Duration of CloudProvider Instance termination in seconds.",
            self.instance_termination.clone(),
        );
        k.register(
            "interruption_received_messages",
            "Count of messages received from the SQS queue. Broken down by message type and whether the message was actionable.",
            self.interruption_received.clone(),
        );
        k.register(
            "interruption_deleted_messages",
            "Count of messages deleted from the SQS queue.",
            self.interruption_deleted.clone(),
        );
        k.register(
            "interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by karpenter.",
            self.interruption_latency.clone(),
        );
        k.register(
            "voluntary_disruption_failed_validations",
            "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type.",
            self.failed_validations.clone(),
        );
        k.register(
            "voluntary_disruption_queue_failures",
            "The number of times that an enqueued disruption decision failed. Labeled by disruption method.",
            self.queue_failures.clone(),
        );
        k.register(
            "cloudprovider_instance_launch_failures",
            "Number of instance launch (CreateFleet offering) failures, dimensioned by availability zone, zone ID, capacity type, and launch failure reason.",
            self.launch_failures.clone(),
        );
        k.register(
            "nodeclaims_created",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
            self.nodeclaims_created.clone(),
        );
        k.register(
            "nodeclaims_terminated",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, and zone.",
            self.nodeclaims_terminated.clone(),
        );
        k.register(
            "nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode.",
            self.nodeclaims_disrupted.clone(),
        );
        k.register(
            "nodeclaims_unhealthy_disrupted",
            "Number of unhealthy nodeclaims disrupted in total by Karpenter. Labeled by condition on the node was disrupted, the owning nodepool, and the image ID.",
            self.nodeclaims_unhealthy_disrupted.clone(),
        );
        k.register(
            "nodes_created",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.",
            self.nodes_created.clone(),
        );
        k.register(
            "nodes_terminated",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.",
            self.nodes_terminated.clone(),
        );
        k.register(
            "voluntary_disruption_decisions",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
            self.decisions.clone(),
        );
        k.register(
            "voluntary_disruption_decisions_by_nodepool",
            "Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, reason, and consolidation type.",
            self.decisions_by_nodepool.clone(),
        );
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Karpenter's `pretty.ToSnakeCase` of a CamelCase word (`WhenEmptyOrUnderutilized` →
/// `when_empty_or_underutilized`).
pub fn snake_case(s: &str) -> String {
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if ch.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(ch.to_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

// === impl Metrics ===

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("dovetail_actuator");
        let launches = Counter::default();
        registry.register(
            "launches",
            "Claims that reached launched (an instance recorded)",
            launches.clone(),
        );
        let create_calls = Counter::default();
        registry.register(
            "cloud_create_calls",
            "Create calls sent to the cloud",
            create_calls.clone(),
        );
        let failures = Family::<Labels, Counter>::default();
        registry.register(
            "launch_failures",
            "Launch attempts that failed, by reason (insufficient_capacity, invalid_request, throttled, unavailable, lease_lost, ledger)",
            failures.clone(),
        );
        let claims = Family::<Labels, Gauge>::default();
        registry.register("claims", "Claims in the ledger, by state", claims.clone());
        let commands = Family::<Labels, Counter>::default();
        registry.register(
            "commands",
            "Submitted commands, by status (Accepted, Duplicate, Rejected)",
            commands.clone(),
        );
        let submit_latency = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        registry.register(
            "submit_duration_seconds",
            "Time to record a submission in the ledger",
            submit_latency.clone(),
        );
        let ledger_errors = Counter::default();
        registry.register(
            "ledger_errors",
            "Ledger calls that failed (database unreachable or failing)",
            ledger_errors.clone(),
        );
        let ice_marks = Counter::default();
        registry.register(
            "ice_marks",
            "Offerings marked unavailable after an insufficient-capacity error",
            ice_marks.clone(),
        );
        let catalog_refreshes = Family::<Labels, Counter>::default();
        registry.register(
            "catalog_refreshes",
            "Live catalog reads from the cloud, by outcome (ok, error)",
            catalog_refreshes.clone(),
        );
        let catalog_requests = Family::<Labels, Counter>::default();
        registry.register(
            "catalog_requests",
            "Catalog calls of planners, by answer (sent, unchanged, unavailable)",
            catalog_requests.clone(),
        );
        let evictions = Family::<Labels, Counter>::default();
        registry.register(
            "evictions",
            "Pod evictions of drains, by outcome (evicted, pdb_blocked, not_found, error, deleted: past terminationGracePeriod)",
            evictions.clone(),
        );
        let disruptions = Family::<Labels, Counter>::default();
        registry.register(
            "disruptions",
            "Disruptions, by reason (Empty, Underutilized, Drifted, Expired, ScaleDown) and outcome (proposed, confirmed, started, done, aborted, rejected)",
            disruptions.clone(),
        );
        let interruption_messages = Family::<Labels, Counter>::default();
        registry.register(
            "interruption_messages",
            "Interruption queue messages, by kind (spot_interruption, rebalance_recommendation, scheduled_change, state_change, unknown, garbled) and outcome (interrupted, recorded, already_terminating, not_managed, dropped, failed)",
            interruption_messages.clone(),
        );
        let interruption_receive_errors = Counter::default();
        registry.register(
            "interruption_receive_errors",
            "Receives from the interruption queue that failed (retried with backoff)",
            interruption_receive_errors.clone(),
        );
        let loop_failures = Family::<Labels, Counter>::default();
        registry.register(
            "loop_failures",
            "Failed attempts of the actuator's background loops, by loop (interruption_queue, interruption, catalog, instance_types, ledger) and reason (unavailable, throttled, invalid_request, ...); each is followed by a jittered exponential backoff",
            loop_failures.clone(),
        );
        let loop_backoff = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "loop_backoff_seconds",
            "The wait of a background loop before its next attempt after failures in a row, by loop (0 once an attempt succeeds)",
            loop_backoff.clone(),
        );
        let karpenter = Karpenter::default();
        karpenter.register(root.sub_registry_with_prefix("karpenter"));
        Self {
            registry: Arc::new(root),
            karpenter,
            ice_marks,
            catalog_refreshes,
            catalog_requests,
            launches,
            create_calls,
            failures,
            claims,
            commands,
            submit_latency,
            ledger_errors,
            evictions,
            disruptions,
            interruption_messages,
            interruption_receive_errors,
            loop_failures,
            loop_backoff,
        }
    }

    /// A background loop's attempt failed for `reason`; it waits `wait` before the next.
    pub fn loop_failed(&self, name: &str, reason: &str, wait: std::time::Duration) {
        self.loop_failures
            .get_or_create(&labels(&[("loop", name), ("reason", reason)]))
            .inc();
        self.loop_backoff
            .get_or_create(&label("loop", name))
            .set(wait.as_secs_f64());
    }

    /// A background loop's attempt succeeded: its backoff is over.
    pub fn loop_recovered(&self, name: &str) {
        self.loop_backoff
            .get_or_create(&label("loop", name))
            .set(0.0);
    }

    /// `karpenter_nodeclaims_created_total`: a NodeClaim object created (reason `provisioned`).
    pub fn nodeclaim_created(&self, reason: &str, nodepool: &str, min_values_relaxed: bool) {
        self.karpenter
            .nodeclaims_created
            .get_or_create(&labels(&[
                ("reason", reason),
                ("nodepool", nodepool),
                (
                    "min_values_relaxed",
                    if min_values_relaxed { "true" } else { "false" },
                ),
            ]))
            .inc();
    }

    /// `karpenter_nodeclaims_terminated_total`: a NodeClaim's finalizer released.
    pub fn nodeclaim_terminated(&self, nodepool: &str, capacity_type: &str, zone: &str) {
        self.karpenter
            .nodeclaims_terminated
            .get_or_create(&labels(&[
                ("nodepool", nodepool),
                ("capacity_type", capacity_type),
                ("zone", zone),
            ]))
            .inc();
    }

    /// `karpenter_nodeclaims_disrupted_total`: a NodeClaim disrupted; `reason` as Karpenter's
    /// (`underutilized`, `empty`, `drifted`, `registration_timeout`, `spot_interrupted`, ...),
    /// `consolidation_policy` snake case and only for consolidation, `termination_mode`
    /// `graceful`, `eventual` or `forceful`.
    pub fn nodeclaim_disrupted(
        &self,
        reason: &str,
        nodepool: &str,
        capacity_type: &str,
        consolidation_policy: &str,
        termination_mode: &str,
    ) {
        self.karpenter
            .nodeclaims_disrupted
            .get_or_create(&labels(&[
                ("reason", reason),
                ("nodepool", nodepool),
                ("capacity_type", capacity_type),
                ("consolidation_policy", consolidation_policy),
                ("termination_mode", termination_mode),
            ]))
            .inc();
    }

    /// A NodeClaim node repair deleted (kubernetes-sigs/karpenter
    /// `pkg/controllers/node/health/controller.go`): `karpenter_nodeclaims_disrupted_total`
    /// with reason `unhealthy` and `karpenter_nodeclaims_unhealthy_disrupted_total` {condition
    /// (snake case), nodepool, capacity_type, image_id}.
    pub fn nodeclaim_repaired(
        &self,
        condition: &str,
        nodepool: &str,
        capacity_type: &str,
        image_id: &str,
    ) {
        self.nodeclaim_disrupted("unhealthy", nodepool, capacity_type, "", "");
        self.karpenter
            .nodeclaims_unhealthy_disrupted
            .get_or_create(&labels(&[
                ("condition", &snake_case(condition)),
                ("nodepool", nodepool),
                ("capacity_type", capacity_type),
                ("image_id", image_id),
            ]))
            .inc();
    }

    /// `karpenter_nodes_created_total`: a Node registered for a NodeClaim.
    pub fn node_created(&self, nodepool: &str, zone: &str) {
        self.karpenter
            .nodes_created
            .get_or_create(&labels(&[("nodepool", nodepool), ("zone", zone)]))
            .inc();
    }

    /// `karpenter_nodes_terminated_total`: a Node's finalizer released.
    pub fn node_terminated(&self, nodepool: &str, zone: &str) {
        self.karpenter
            .nodes_terminated
            .get_or_create(&labels(&[("nodepool", nodepool), ("zone", zone)]))
            .inc();
    }

    /// `karpenter_voluntary_disruption_decisions_total` (and `_by_nodepool_total` per pool):
    /// `decision` `delete` or `replace`, `reason` lower case, `consolidation_type` `empty`,
    /// `single`, `multi` or empty (drift).
    pub fn disruption_decision(
        &self,
        nodepools: &[&str],
        decision: &str,
        reason: &str,
        consolidation_type: &str,
    ) {
        self.karpenter
            .decisions
            .get_or_create(&labels(&[
                ("decision", decision),
                ("reason", reason),
                ("consolidation_type", consolidation_type),
            ]))
            .inc();
        for pool in nodepools {
            self.karpenter
                .decisions_by_nodepool
                .get_or_create(&labels(&[
                    ("nodepool", pool),
                    ("decision", decision),
                    ("reason", reason),
                    ("consolidation_type", consolidation_type),
                ]))
                .inc();
        }
    }

    /// `karpenter_pods_eviction_requests_total{code}`: an answer of the Eviction API (200 when
    /// the pod was evicted).
    pub fn eviction_request(&self, code: u16) {
        self.karpenter
            .eviction_requests
            .get_or_create(&label("code", &code.to_string()))
            .inc();
    }

    /// `karpenter_pods_drained_total{reason}`: a pod evicted by a drain; `reason` is the
    /// NodeClaim's `DisruptionReason` condition's reason, else `Forceful Termination`.
    pub fn pod_drained(&self, reason: &str) {
        self.karpenter
            .pods_drained
            .get_or_create(&label("reason", reason))
            .inc();
    }

    /// `karpenter_nodes_drained_total{nodepool}`: a node's drain finished.
    pub fn node_drained(&self, nodepool: &str) {
        self.karpenter
            .nodes_drained
            .get_or_create(&label("nodepool", nodepool))
            .inc();
    }

    /// A Node released (its finalizer removed): seconds since its deletion was requested
    /// (`karpenter_nodes_termination_duration_seconds`) and since it was created
    /// (`karpenter_nodes_lifetime_duration_seconds`), when known.
    pub fn node_termination_times(
        &self,
        nodepool: &str,
        since_deletion: Option<f64>,
        lifetime: Option<f64>,
    ) {
        if let Some(s) = since_deletion {
            self.karpenter
                .node_termination
                .observe(&[("nodepool", nodepool)], s);
        }
        if let Some(s) = lifetime {
            self.karpenter
                .node_lifetime
                .get_or_create(&label("nodepool", nodepool))
                .observe(s);
        }
    }

    /// A NodeClaim released: seconds since its deletion was requested
    /// (`karpenter_nodeclaims_termination_duration_seconds`) and since its instance's
    /// termination began (`karpenter_nodeclaims_instance_termination_duration_seconds`).
    pub fn nodeclaim_termination_times(
        &self,
        nodepool: &str,
        since_deletion: Option<f64>,
        since_instance_terminating: Option<f64>,
    ) {
        let l = label("nodepool", nodepool);
        if let Some(s) = since_deletion {
            self.karpenter
                .nodeclaim_termination
                .get_or_create(&l)
                .observe(s);
        }
        if let Some(s) = since_instance_terminating {
            self.karpenter
                .instance_termination
                .get_or_create(&l)
                .observe(s);
        }
    }

    /// `karpenter_interruption_received_messages_total{message_type}` (Karpenter's message kinds:
    /// `spot_interrupted`, `rebalance_recommendation`, `scheduled_change`, `instance_stopped`,
    /// `instance_terminated`, `no_op`, ...), and the seconds the message waited since its event
    /// (`karpenter_interruption_message_queue_duration_seconds`), when known.
    pub fn interruption_received(&self, message_type: &str, waited: Option<f64>) {
        self.karpenter
            .interruption_received
            .get_or_create(&label("message_type", message_type))
            .inc();
        if let Some(w) = waited {
            self.karpenter.interruption_latency.observe(w.max(0.0));
        }
    }

    /// `karpenter_interruption_deleted_messages_total`.
    pub fn interruption_deleted(&self) {
        self.karpenter.interruption_deleted.inc();
    }

    /// `karpenter_cloudprovider_instance_launch_failures_total`: one offering of a create call
    /// that failed (`reason` as AWS names the error, e.g. `InsufficientInstanceCapacity`).
    pub fn instance_launch_failure(
        &self,
        zone: &str,
        zone_id: &str,
        capacity_type: &str,
        reason: &str,
    ) {
        self.karpenter
            .launch_failures
            .get_or_create(&labels(&[
                ("zone", zone),
                ("zone_id", zone_id),
                ("capacity_type", capacity_type),
                ("reason", reason),
            ]))
            .inc();
    }

    /// `karpenter_voluntary_disruption_failed_validations_total{consolidation_type}`: a decision
    /// found invalid before it ran (its candidates no longer disruptable, or a budget).
    pub fn failed_validation(&self, consolidation_type: &str) {
        self.karpenter
            .failed_validations
            .get_or_create(&label("consolidation_type", consolidation_type))
            .inc();
    }

    /// `karpenter_voluntary_disruption_queue_failures_total{decision,reason,consolidation_type}`:
    /// a decision that failed while it ran (aborted).
    pub fn queue_failure(&self, reason: &str, consolidation_type: &str, decision: &str) {
        self.karpenter
            .queue_failures
            .get_or_create(&labels(&[
                ("decision", decision),
                ("reason", reason),
                ("consolidation_type", consolidation_type),
            ]))
            .inc();
    }

    /// Counts one eviction attempt by outcome.
    pub fn eviction(&self, outcome: &str) {
        self.evictions
            .get_or_create(&label("outcome", outcome))
            .inc();
    }

    /// Counts a disruption reaching `outcome`.
    pub fn disruption(&self, reason: &str, outcome: &str) {
        self.disruptions
            .get_or_create(&vec![
                ("reason".to_string(), reason.to_string()),
                ("outcome".to_string(), outcome.to_string()),
            ])
            .inc();
    }

    /// Counts one interruption message by kind and outcome.
    pub fn interruption_message(&self, kind: &str, outcome: &str) {
        self.interruption_messages
            .get_or_create(&vec![
                ("kind".to_string(), kind.to_string()),
                ("outcome".to_string(), outcome.to_string()),
            ])
            .inc();
    }

    /// Counts a failed receive from the interruption queue.
    pub fn interruption_receive_error(&self) {
        self.interruption_receive_errors.inc();
    }

    /// Counts a claim that reached launched.
    pub fn launched(&self) {
        self.launches.inc();
    }

    /// Counts a create call sent to the cloud.
    pub fn create_call(&self) {
        self.create_calls.inc();
    }

    /// Counts a failed launch attempt.
    pub fn failure(&self, reason: &str) {
        self.failures.get_or_create(&label("reason", reason)).inc();
    }

    /// Counts a failed ledger call.
    pub fn ledger_error(&self) {
        self.ledger_errors.inc();
    }

    /// Counts one command result of a submission.
    pub fn command(&self, status: &str) {
        self.commands.get_or_create(&label("status", status)).inc();
    }

    /// Counts offerings newly marked unavailable after an insufficient-capacity error.
    pub fn ice_marks(&self, n: usize) {
        self.ice_marks.inc_by(n as u64);
    }

    /// Counts a live catalog read from the cloud (`ok` or `error`).
    pub fn catalog_refresh(&self, outcome: &str) {
        self.catalog_refreshes
            .get_or_create(&label("outcome", outcome))
            .inc();
    }

    /// Counts a planner's Catalog call (`sent`, `unchanged`, `unavailable`).
    pub fn catalog_request(&self, answer: &str) {
        self.catalog_requests
            .get_or_create(&label("answer", answer))
            .inc();
    }

    /// Records a submission's latency.
    pub fn submit_seconds(&self, seconds: f64) {
        self.submit_latency.observe(seconds);
    }

    /// Sets the claims-by-state gauges (every state, zero when absent).
    pub fn set_claims(&self, counts: &BTreeMap<ClaimState, i64>) {
        for s in ClaimState::ALL {
            self.claims
                .get_or_create(&label("state", s.as_str()))
                .set(counts.get(&s).copied().unwrap_or(0));
        }
    }
}

impl Render for Metrics {
    fn render(&self) -> String {
        service_shell::metrics::insert_before_eof(
            service_shell::metrics::encode(&self.registry),
            &self.karpenter.node_termination.render(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_recorded_values() {
        let m = Metrics::new();
        m.launched();
        m.failure("insufficient_capacity");
        m.command("Duplicate");
        m.set_claims(&BTreeMap::from([(ClaimState::Launched, 3)]));
        m.eviction("pdb_blocked");
        m.disruption("Underutilized", "done");
        let text = m.render();
        assert!(
            text.contains("dovetail_actuator_launches_total 1"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"dovetail_actuator_launch_failures_total{reason="insufficient_capacity"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"dovetail_actuator_claims{state="launched"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"dovetail_actuator_claims{state="failed"} 0"#),
            "{text}"
        );
        assert!(text.contains(r#"dovetail_actuator_commands_total{status="Duplicate"} 1"#));
        assert!(
            text.contains(r#"dovetail_actuator_evictions_total{outcome="pdb_blocked"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"dovetail_actuator_disruptions_total{reason="Underutilized",outcome="done"} 1"#
            ),
            "{text}"
        );
        m.nodeclaim_created("provisioned", "default", false);
        m.node_created("default", "us-east-1a");
        m.nodeclaim_disrupted(
            "underutilized",
            "default",
            "spot",
            &snake_case("WhenEmptyOrUnderutilized"),
            "graceful",
        );
        m.disruption_decision(&["default"], "delete", "underutilized", "single");
        m.nodeclaim_terminated("default", "spot", "us-east-1a");
        m.node_terminated("default", "us-east-1a");
        let text = m.render();
        for want in [
            r#"karpenter_nodeclaims_created_total{reason="provisioned",nodepool="default",min_values_relaxed="false"} 1"#,
            r#"karpenter_nodes_created_total{nodepool="default",zone="us-east-1a"} 1"#,
            r#"karpenter_nodeclaims_disrupted_total{reason="underutilized",nodepool="default",capacity_type="spot",consolidation_policy="when_empty_or_underutilized",termination_mode="graceful"} 1"#,
            r#"karpenter_voluntary_disruption_decisions_total{decision="delete",reason="underutilized",consolidation_type="single"} 1"#,
            r#"karpenter_voluntary_disruption_decisions_by_nodepool_total{nodepool="default",decision="delete",reason="underutilized",consolidation_type="single"} 1"#,
            r#"karpenter_nodeclaims_terminated_total{nodepool="default",capacity_type="spot",zone="us-east-1a"} 1"#,
            r#"karpenter_nodes_terminated_total{nodepool="default",zone="us-east-1a"} 1"#,
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
        m.eviction_request(200);
        m.eviction_request(429);
        m.pod_drained("Underutilized");
        m.node_drained("default");
        m.node_termination_times("default", Some(12.0), Some(7200.0));
        m.nodeclaim_termination_times("default", Some(20.0), Some(3.0));
        m.interruption_received("spot_interrupted", Some(1.5));
        m.interruption_deleted();
        m.instance_launch_failure(
            "us-east-1a",
            "use1-az1",
            "spot",
            "InsufficientInstanceCapacity",
        );
        m.failed_validation("single");
        m.queue_failure("underutilized", "multi", "replace");
        let text = m.render();
        for want in [
            r#"karpenter_pods_eviction_requests_total{code="200"} 1"#,
            r#"karpenter_pods_eviction_requests_total{code="429"} 1"#,
            r#"karpenter_pods_drained_total{reason="Underutilized"} 1"#,
            r#"karpenter_nodes_drained_total{nodepool="default"} 1"#,
            r#"karpenter_nodes_termination_duration_seconds_sum{nodepool="default"} 12"#,
            "# TYPE karpenter_nodes_termination_duration_seconds summary",
            r#"karpenter_nodes_lifetime_duration_seconds_sum{nodepool="default"} 7200.0"#,
            r#"karpenter_nodeclaims_termination_duration_seconds_sum{nodepool="default"} 20.0"#,
            r#"karpenter_nodeclaims_instance_termination_duration_seconds_sum{nodepool="default"} 3.0"#,
            r#"karpenter_interruption_received_messages_total{message_type="spot_interrupted"} 1"#,
            "karpenter_interruption_deleted_messages_total 1",
            "karpenter_interruption_message_queue_duration_seconds_sum 1.5",
            r#"karpenter_voluntary_disruption_failed_validations_total{consolidation_type="single"} 1"#,
            r#"karpenter_voluntary_disruption_queue_failures_total{decision="replace",reason="underutilized",consolidation_type="multi"} 1"#,
            r#"karpenter_cloudprovider_instance_launch_failures_total{zone="us-east-1a",zone_id="use1-az1",capacity_type="spot",reason="InsufficientInstanceCapacity"} 1"#,
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
        m.interruption_message("garbled", "dropped");
        m.interruption_message("garbled", "dropped");
        let text = m.render();
        assert!(
            text.contains(
                r#"dovetail_actuator_interruption_messages_total{kind="garbled",outcome="dropped"} 2"#
            ),
            "{text}"
        );
    }
}
