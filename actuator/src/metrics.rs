//! Prometheus metrics of the actuator, served on `/metrics` on their own port: launches,
//! failures by reason, claims by state (refreshed from the ledger), submissions by outcome and
//! submit latency, insufficient-capacity marks, live catalog refreshes and requests, drain
//! evictions by outcome, disruptions by reason and outcome, and interruption messages by kind
//! and outcome.

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
        let mut registry = Registry::with_prefix("dovetail_actuator");
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
        Self {
            registry: Arc::new(registry),
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
        }
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
        service_shell::metrics::encode(&self.registry)
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
