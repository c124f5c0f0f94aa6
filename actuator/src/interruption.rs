//! Interruptions: the loop that reads the interruption queue (SQS in production, through
//! `cloud_aws::SqsQueue`; any `cloud::InterruptionQueue`) and acts on what it says, as
//! Karpenter's interruption controller does.
//!
//! For each message: map each instance it names to the ledger's claim (by instance ID), then
//! - spot interruption warning, scheduled change (AWS Health), stopping / stopped /
//!   shutting-down / terminated: cordon the Node and taint it `karpenter.sh/disrupted:NoSchedule`
//!   (so the planners see it going: the engine schedules the pods of a node being deleted or
//!   tainted disrupted as if pending, and no new pod lands on it), record the interruption in
//!   the claim's ledger history, and delete the NodeClaim. The NodeClaim's termination (the
//!   [`crate::lifecycle`] controller, behind the `karpenter.sh/termination` finalizer) then
//!   removes the Node and terminates the instance. A claim whose NodeClaim is missing is
//!   written `terminating` directly.
//! - rebalance recommendation: an Event on the Node only (Karpenter's default).
//!
//! Every message is deleted once handled; unknown kinds and garbled bodies are logged, counted
//! and deleted. A message whose handling failed (Kubernetes or the ledger unreachable) is left
//! in the queue and comes back after its visibility timeout. Redelivery is harmless: a claim
//! that is already terminating (NodeClaim being deleted, or claim terminating or done) gets
//! nothing new, and Events have names derived from the message, so a second create is a
//! conflict that is ignored. Receive errors (the queue deleted, SQS unreachable, throttling) back
//! off: 1 s doubling to a minute, jittered, reset by a receive that works, each failure logged
//! with its reason and counted in `dovetail_actuator_loop_failures_total{loop="interruption"}`
//! (the wait in `dovetail_actuator_loop_backoff_seconds`); the loop never stops on a bad
//! message.
//!
//! Metric: `dovetail_actuator_interruption_messages_total{kind,outcome}` (kinds
//! `spot_interruption`, `rebalance_recommendation`, `scheduled_change`, `state_change`,
//! `unknown`, `garbled`; outcomes in [`Outcome::as_str`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cloud::{InstanceState, InterruptionKind, InterruptionQueue, Message, Notice, Unreadable};
use crds::NodeClaim;
use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

use crate::ledger::{ClaimRecord, ClaimState, Ledger, Transition};
use crate::lifecycle::drain::with_disrupted_taint;
use crate::lifecycle::nodeclaim::error_chain;
use crate::lifecycle::termination::Cause;
use crate::lifecycle::{Error, Result, kube_err};
use crate::metrics::Metrics;
use service_shell::backoff::Backoff;
use service_shell::clock::{Clock, millis};

/// The namespace Node Events are written to (where kubelet and Karpenter write them).
pub const EVENT_NAMESPACE: &str = "default";
/// The component named in Events.
pub const COMPONENT: &str = "dovetail-actuator";
/// The loop's name in `dovetail_actuator_loop_failures_total` and `_loop_backoff_seconds`.
pub const LOOP: &str = "interruption";

/// What handling one message came to (the metric's `outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// No claim of the ledger owns the instance (not ours, or long gone).
    NotManaged,
    /// The claim is already terminating or done: nothing new was done.
    AlreadyTerminating,
    /// An Event was recorded on the Node (rebalance recommendation).
    Recorded,
    /// The Node was cordoned and tainted and the NodeClaim deleted.
    Interrupted,
    /// An unknown kind or garbled body: logged, counted, deleted.
    Dropped,
    /// Handling failed; the message stays in the queue and comes back.
    Failed,
}

// === impl Outcome ===

impl Outcome {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::NotManaged => "not_managed",
            Outcome::AlreadyTerminating => "already_terminating",
            Outcome::Recorded => "recorded",
            Outcome::Interrupted => "interrupted",
            Outcome::Dropped => "dropped",
            Outcome::Failed => "failed",
        }
    }

    /// Whether the message is deleted from the queue (everything but a failure).
    pub fn deletes(self) -> bool {
        self != Outcome::Failed
    }
}

/// How the loop runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Lease owner of the ledger notes it writes (distinct from the worker's and lifecycle's).
    pub owner: String,
    /// Messages asked for per receive (SQS: at most 10).
    pub batch: usize,
    /// Pause after an empty receive (SQS long-polls already; other queues answer at once).
    pub idle: Duration,
    /// First pause after a failed receive; doubles (jittered, [`Backoff`]) up to
    /// [`Options::max_backoff`].
    pub backoff: Duration,
    /// Longest pause after failed receives.
    pub max_backoff: Duration,
    /// Lease length of a ledger note.
    pub lease: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            owner: "actuator-interruption".into(),
            batch: 10,
            idle: Duration::from_secs(1),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            lease: Duration::from_secs(30),
        }
    }
}

/// The interruption handler and its loop.
#[derive(Clone)]
pub struct Interruptions {
    client: kube::Client,
    ledger: Arc<dyn Ledger>,
    clock: Clock,
    metrics: Metrics,
    options: Options,
}

fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// Karpenter's Event reason for an interruption kind.
pub fn event_reason(kind: &InterruptionKind) -> &'static str {
    match kind {
        InterruptionKind::SpotInterruptionWarning => "SpotInterrupted",
        InterruptionKind::RebalanceRecommendation => "RebalanceRecommendation",
        InterruptionKind::ScheduledChange => "InstanceUnhealthy",
        InterruptionKind::Stopped { .. } => "InstanceStopping",
        InterruptionKind::StateChange(_) => "InstanceTerminating",
    }
}

/// Karpenter's message kind (aws/karpenter-provider-aws
/// `pkg/controllers/interruption/messages/types.go`), the `reason` of
/// `karpenter_nodeclaims_disrupted_total` for a claim deleted on an interruption.
pub fn disruption_reason(kind: &InterruptionKind) -> &'static str {
    match kind {
        InterruptionKind::SpotInterruptionWarning => "spot_interrupted",
        InterruptionKind::RebalanceRecommendation => "rebalance_recommendation",
        InterruptionKind::ScheduledChange => "scheduled_change",
        InterruptionKind::Stopped { .. } => "instance_stopped",
        InterruptionKind::StateChange(_) => "instance_terminated",
    }
}

fn describe(kind: &InterruptionKind) -> &'static str {
    match kind {
        InterruptionKind::SpotInterruptionWarning => "spot interruption warning",
        InterruptionKind::RebalanceRecommendation => "rebalance recommendation",
        InterruptionKind::ScheduledChange => "scheduled change (AWS Health)",
        InterruptionKind::Stopped { done: false } => "instance stopping",
        InterruptionKind::Stopped { done: true } => "instance stopped",
        InterruptionKind::StateChange(InstanceState::Terminated) => "instance terminated",
        InterruptionKind::StateChange(_) => "instance shutting down",
    }
}

/// A name for the Event about `object` from message `message_id`: the same message gives the
/// same name, so that a redelivery does not record a second Event.
pub fn event_name(object: &str, message_id: &str) -> String {
    let suffix: String = message_id
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(63)
        .collect();
    let base: String = object.chars().take(253 - 64 - 13).collect();
    format!("{base}.interruption-{suffix}")
}

// === impl Interruptions ===

impl Interruptions {
    /// A handler acting on the cluster behind `client` and the claims of `ledger`.
    pub fn new(
        client: kube::Client,
        ledger: Arc<dyn Ledger>,
        clock: Clock,
        metrics: Metrics,
        options: Options,
    ) -> Self {
        Self {
            client,
            ledger,
            clock,
            metrics,
            options,
        }
    }

    /// Reads `queue` until `shutdown` turns true (see the module docs); never returns early.
    pub async fn run(
        &self,
        queue: Arc<dyn InterruptionQueue>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut backoff = Backoff::new(self.options.backoff, self.options.max_backoff);
        loop {
            if *shutdown.borrow() {
                break;
            }
            let received = tokio::select! {
                r = queue.receive_messages(self.options.batch) => r,
                // A dropped sender means shutdown too.
                r = shutdown.changed() => if r.is_err() { break } else { continue },
            };
            let pause = match received {
                Ok(messages) => {
                    if backoff.failures() > 0 {
                        tracing::info!(
                            failures = backoff.failures(),
                            "Receiving interruption messages works again"
                        );
                        self.metrics.loop_recovered(LOOP);
                    }
                    backoff.succeeded();
                    let empty = messages.is_empty();
                    for m in &messages {
                        self.process(queue.as_ref(), m).await;
                    }
                    if empty {
                        self.options.idle
                    } else {
                        Duration::ZERO
                    }
                }
                Err(e) => {
                    let wait = match e.retry_after() {
                        Some(at_least) => backoff.failed_at_least(at_least),
                        None => backoff.failed(),
                    };
                    self.metrics.interruption_receive_error();
                    self.metrics.loop_failed(LOOP, e.reason(), wait);
                    tracing::warn!(error = %error_chain(&e), reason = e.reason(), failures = backoff.failures(), retry_in = ?wait, "Receiving interruption messages failed; backing off");
                    wait
                }
            };
            if !pause.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    r = shutdown.changed() => if r.is_err() { break },
                }
            }
        }
    }

    /// Receives one batch from `queue` and processes it (tests drive the loop step by step).
    ///
    /// # Errors
    /// When the receive fails.
    pub async fn poll_once(
        &self,
        queue: &dyn InterruptionQueue,
    ) -> cloud::Result<Vec<(Message, Outcome)>> {
        let messages = queue.receive_messages(self.options.batch).await?;
        let mut out = Vec::with_capacity(messages.len());
        for m in messages {
            let o = self.process(queue, &m).await;
            out.push((m, o));
        }
        Ok(out)
    }

    /// Handles one message, counts it, and deletes it unless handling failed.
    pub async fn process(&self, queue: &dyn InterruptionQueue, m: &Message) -> Outcome {
        let (kind, outcome) = self.handle(m).await;
        self.metrics.interruption_message(kind, outcome.as_str());
        // Karpenter's names: a message it can parse is received (an unknown kind is its
        // `no_op`); how long it waited counts once it was handled.
        match &m.content {
            Ok(n) => {
                let waited = (outcome != Outcome::Failed)
                    .then(|| self.clock.since_epoch().as_secs_f64() - n.time as f64);
                self.metrics
                    .interruption_received(n.kind.karpenter_kind(), waited);
            }
            Err(Unreadable::Unknown { .. }) => self.metrics.interruption_received("no_op", None),
            Err(Unreadable::Garbled { .. }) => {}
        }
        if outcome.deletes() {
            match queue.delete(&m.receipt_handle).await {
                Ok(()) => self.metrics.interruption_deleted(),
                // It comes back after its visibility timeout and is handled again, harmlessly.
                Err(e) => {
                    tracing::warn!(message = %m.id, error = %error_chain(&e), "Deleting an interruption message failed")
                }
            }
        }
        outcome
    }

    /// What one message comes to, with its metric kind; acts on the cluster and the ledger.
    pub async fn handle(&self, m: &Message) -> (&'static str, Outcome) {
        let notice = match &m.content {
            Ok(n) => n,
            Err(Unreadable::Unknown { kind }) => {
                tracing::info!(message = %m.id, %kind, "Interruption message of an unknown kind; deleting it");
                return ("unknown", Outcome::Dropped);
            }
            Err(Unreadable::Garbled { reason }) => {
                tracing::warn!(message = %m.id, %reason, "Garbled interruption message; deleting it");
                return ("garbled", Outcome::Dropped);
            }
        };
        let kind = notice.kind.as_str();
        match self.act(&m.id, notice).await {
            Ok(o) => (kind, o),
            Err(e) => {
                tracing::warn!(message = %m.id, kind, error = %error_chain(&e), "Handling an interruption failed; it comes back");
                (kind, Outcome::Failed)
            }
        }
    }

    async fn act(&self, message_id: &str, notice: &Notice) -> Result<Outcome> {
        let claims = self.ledger.claims().await?;
        let by_instance: BTreeMap<&str, &ClaimRecord> = claims
            .iter()
            .filter_map(|c| Some((c.instance.as_ref()?.instance_id.as_str(), c)))
            .collect();
        let mut outcome = Outcome::NotManaged;
        let mut failure = None;
        for id in &notice.instance_ids {
            let r = match by_instance.get(id.as_str()) {
                None => {
                    tracing::debug!(instance = %id, "No claim owns the instance");
                    Ok(Outcome::NotManaged)
                }
                Some(claim) => self.act_on(message_id, &notice.kind, claim).await,
            };
            match r {
                Ok(o) => outcome = outcome.max(o),
                // Go on with the other instances; the message comes back for the failed one.
                Err(e) => failure = Some(e),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    }

    async fn act_on(
        &self,
        message_id: &str,
        kind: &InterruptionKind,
        claim: &ClaimRecord,
    ) -> Result<Outcome> {
        if claim.state == ClaimState::Terminating || claim.state.is_terminal() {
            return Ok(Outcome::AlreadyTerminating);
        }
        let node = self.node_of(claim).await?;
        if !kind.is_going() {
            let (name, object) = match &node {
                Some(n) => (node_name(n), "Node"),
                None => (claim.name.clone(), "NodeClaim"),
            };
            self.record_event(message_id, kind, object, &name).await?;
            tracing::info!(claim = %claim.name, node = %name, "Rebalance recommendation recorded");
            return Ok(Outcome::Recorded);
        }
        let nodeclaims: Api<NodeClaim> = Api::all(self.client.clone());
        let nc = nodeclaims
            .get_opt(&claim.name)
            .await
            .map_err(kube_err(format!("reading NodeClaim {}", claim.name)))?;
        if nc
            .as_ref()
            .is_some_and(|nc| nc.metadata.deletion_timestamp.is_some())
        {
            return Ok(Outcome::AlreadyTerminating);
        }
        let what = format!("interrupted: {}: message {message_id}", describe(kind));
        if let Some(n) = &node {
            self.cordon_and_taint(n).await?;
            self.record_event(message_id, kind, "Node", &node_name(n))
                .await?;
        }
        match nc {
            Some(nc) => {
                self.note(claim, claim.state, what.clone()).await?;
                match nodeclaims
                    .delete(&claim.name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {
                        let label = |k: &str| crate::lifecycle::nodeclaim::label(&nc, k);
                        // As Karpenter's interruption controller counts it: no policy or mode.
                        self.metrics.nodeclaim_disrupted(
                            disruption_reason(kind),
                            &label(common::labels::NODEPOOL),
                            &label("karpenter.sh/capacity-type"),
                            "",
                            "",
                        );
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        return Err(kube_err(format!("deleting NodeClaim {}", claim.name))(e));
                    }
                }
            }
            None => {
                // Without a NodeClaim the lifecycle would recreate one; terminate directly.
                self.note(claim, ClaimState::Terminating, Cause::Deleted.detail(&what))
                    .await?;
            }
        }
        tracing::info!(claim = %claim.name, node = ?node.as_ref().map(node_name), kind = describe(kind), "Interrupted: Node tainted, NodeClaim deleted");
        Ok(Outcome::Interrupted)
    }

    async fn node_of(&self, claim: &ClaimRecord) -> Result<Option<Node>> {
        let Some(inst) = &claim.instance else {
            return Ok(None);
        };
        let nodes: Api<Node> = Api::all(self.client.clone());
        Ok(nodes
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing Nodes".into()))?
            .items
            .into_iter()
            .find(|n| {
                n.spec.as_ref().and_then(|s| s.provider_id.as_deref())
                    == Some(inst.provider_id.as_str())
            }))
    }

    /// `spec.unschedulable` and the `karpenter.sh/disrupted:NoSchedule` taint, written with the
    /// Node's resourceVersion (the taint list is replaced whole) and retried on conflict.
    async fn cordon_and_taint(&self, node: &Node) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let name = node_name(node);
        let mut current = node.clone();
        let mut attempts = 0;
        loop {
            let cordoned = current
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false);
            let taints = with_disrupted_taint(&current);
            if cordoned && taints.is_none() {
                return Ok(());
            }
            let mut spec = json!({"unschedulable": true});
            if let Some(t) = taints {
                spec["taints"] = json!(t);
            }
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": spec,
            });
            attempts += 1;
            match nodes
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(node = %name, "Cordoned and tainted karpenter.sh/disrupted:NoSchedule");
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempts < 5 => {
                    current = nodes
                        .get(&name)
                        .await
                        .map_err(kube_err(format!("reading Node {name}")))?;
                }
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(kube_err(format!("tainting Node {name}"))(e)),
            }
        }
    }

    /// Writes `from → to` (the claim's own state for a note) with `detail` under this loop's
    /// lease, released at once.
    async fn note(&self, claim: &ClaimRecord, to: ClaimState, detail: String) -> Result<()> {
        let owner = &self.options.owner;
        let Some(held) = self
            .ledger
            .acquire_claim(
                owner,
                &claim.name,
                self.clock.now_ms(),
                millis(self.options.lease),
            )
            .await?
        else {
            return Err(Error::Ledger(crate::ledger::Error::LeaseLost {
                name: claim.name.clone(),
                expected: claim.state,
            }));
        };
        let mut t = Transition::new(&claim.name, owner, held.state, to, detail);
        t.release = true;
        self.ledger.transition(&t, self.clock.now_ms()).await?;
        Ok(())
    }

    async fn record_event(
        &self,
        message_id: &str,
        kind: &InterruptionKind,
        object_kind: &str,
        object: &str,
    ) -> Result<()> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), EVENT_NAMESPACE);
        let now = k8s_openapi::jiff::Timestamp::from_millisecond(self.clock.now_ms())
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let (type_, message) = if kind.is_going() {
            (
                "Warning",
                format!("{}: the node is being replaced", describe(kind)),
            )
        } else {
            (
                "Normal",
                "EC2 recommends replacing this spot instance (elevated interruption risk)"
                    .to_string(),
            )
        };
        let api_version = if object_kind == "Node" {
            "v1"
        } else {
            "karpenter.sh/v1"
        };
        let event = Event {
            metadata: ObjectMeta {
                name: Some(event_name(object, message_id)),
                namespace: Some(EVENT_NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(api_version.into()),
                kind: Some(object_kind.into()),
                name: Some(object.into()),
                ..ObjectReference::default()
            },
            reason: Some(event_reason(kind).into()),
            message: Some(message),
            type_: Some(type_.into()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            source: Some(EventSource {
                component: Some(COMPONENT.into()),
                host: None,
            }),
            reporting_component: Some(COMPONENT.into()),
            ..Event::default()
        };
        match events.create(&PostParams::default(), &event).await {
            Ok(_) => Ok(()),
            // The same message, redelivered: its Event exists already.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(kube_err(format!(
                "recording an Event on {object_kind} {object}"
            ))(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use common::labels::DISRUPTED_TAINT;

    use super::*;

    #[test]
    fn event_names_are_stable_and_valid() {
        let a = event_name("ip-10-0-1-2.ec2.internal", "12345678-ABCD-1234");
        assert_eq!(
            a,
            "ip-10-0-1-2.ec2.internal.interruption-12345678-abcd-1234"
        );
        assert_eq!(
            a,
            event_name("ip-10-0-1-2.ec2.internal", "12345678-ABCD-1234")
        );
        let long = event_name(&"n".repeat(400), &"x".repeat(400));
        assert!(long.len() <= 253, "{}", long.len());
    }

    #[test]
    fn only_a_missing_taint_is_added() {
        let mut node = Node::default();
        let t = with_disrupted_taint(&node).expect("added");
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].key, DISRUPTED_TAINT);
        assert_eq!(t[0].effect, "NoSchedule");
        node.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            taints: Some(t),
            ..Default::default()
        });
        assert!(with_disrupted_taint(&node).is_none());
    }

    #[test]
    fn outcomes_order_from_nothing_to_interrupted_and_failures_are_kept() {
        assert!(Outcome::Interrupted > Outcome::Recorded);
        assert!(Outcome::Recorded > Outcome::AlreadyTerminating);
        assert!(Outcome::AlreadyTerminating > Outcome::NotManaged);
        assert!(!Outcome::Failed.deletes());
        assert!(Outcome::Dropped.deletes());
    }

    #[test]
    fn reasons_follow_karpenter() {
        assert_eq!(
            event_reason(&InterruptionKind::SpotInterruptionWarning),
            "SpotInterrupted"
        );
        assert_eq!(
            event_reason(&InterruptionKind::Stopped { done: true }),
            "InstanceStopping"
        );
    }
}
