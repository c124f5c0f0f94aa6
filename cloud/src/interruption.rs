//! Interruption events: what EventBridge delivers to an SQS queue on EC2 (spot interruption
//! warnings, rebalance recommendations, scheduled changes, state changes), and the queue the
//! actuator polls.
//!
//! Delivery is at least once, as with SQS: a received event stays in the queue (and is received
//! again after its visibility timeout) until it is deleted with its receipt handle.
//!
//! Two ways to read the queue: [`InterruptionQueue::receive`] gives the events of well-formed
//! messages (with provider IDs, as the simulator knows them), and
//! [`InterruptionQueue::receive_messages`] gives every message, including those that could not
//! be read ([`Unreadable`]), so that the caller can count and delete them. SQS messages name an
//! instance by its ID only (EventBridge does not say the zone), so the actuator's loop reads
//! [`InterruptionQueue::receive_messages`] and maps [`Notice::instance_ids`] to its claims.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{InstanceState, ProviderId, Result, Timestamp};

/// What happened to an instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum InterruptionKind {
    /// EC2 will reclaim the spot instance in about two minutes.
    SpotInterruptionWarning,
    /// EC2 recommends replacing the spot instance: its risk of interruption went up.
    RebalanceRecommendation,
    /// A scheduled maintenance event (retirement, reboot).
    ScheduledChange,
    /// The instance changed state (for example it was terminated from outside): shutting down
    /// or terminated.
    StateChange(InstanceState),
    /// The instance is stopping or stopped (EC2's `stopping` / `stopped` states, which
    /// [`InstanceState`] does not model: a stopped node is as gone as a terminated one).
    Stopped {
        /// `false` while stopping, `true` once stopped.
        done: bool,
    },
}

// === impl InterruptionKind ===

impl InterruptionKind {
    /// The kind's name in metrics and logs (`spot_interruption`, `rebalance_recommendation`,
    /// `scheduled_change`, `state_change`).
    pub fn as_str(&self) -> &'static str {
        match self {
            InterruptionKind::SpotInterruptionWarning => "spot_interruption",
            InterruptionKind::RebalanceRecommendation => "rebalance_recommendation",
            InterruptionKind::ScheduledChange => "scheduled_change",
            InterruptionKind::StateChange(_) | InterruptionKind::Stopped { .. } => "state_change",
        }
    }

    /// Karpenter's message kind (aws/karpenter-provider-aws `pkg/controllers/interruption/
    /// messages/types.go`), the `message_type` of `karpenter_interruption_received_messages_total`.
    pub fn karpenter_kind(&self) -> &'static str {
        match self {
            InterruptionKind::SpotInterruptionWarning => "spot_interrupted",
            InterruptionKind::RebalanceRecommendation => "rebalance_recommendation",
            InterruptionKind::ScheduledChange => "scheduled_change",
            InterruptionKind::StateChange(
                InstanceState::ShuttingDown | InstanceState::Terminated,
            ) => "instance_terminated",
            InterruptionKind::StateChange(_) => "no_op",
            InterruptionKind::Stopped { .. } => "instance_stopped",
        }
    }

    /// True when the instance is going away (everything but a rebalance recommendation, which
    /// is only a risk).
    pub fn is_going(&self) -> bool {
        !matches!(self, InterruptionKind::RebalanceRecommendation)
    }
}

/// One event from the queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InterruptionEvent {
    /// Unique event ID.
    pub id: String,
    /// Handle to delete the event once handled.
    pub receipt_handle: String,
    /// The instance it is about.
    pub provider_id: ProviderId,
    /// What happened.
    pub kind: InterruptionKind,
    /// When the event was emitted.
    pub time: Timestamp,
}

/// A queue of interruption events (SQS in production).
#[async_trait]
pub trait InterruptionQueue: Send + Sync {
    /// Up to `max` visible events; returns an empty list when there are none.
    ///
    /// # Errors
    /// [`crate::Error::Throttled`], [`crate::Error::Unavailable`].
    async fn receive(&self, max: usize) -> Result<Vec<InterruptionEvent>>;

    /// Removes a handled event. Deleting an unknown or already deleted handle succeeds.
    ///
    /// # Errors
    /// [`crate::Error::Throttled`], [`crate::Error::Unavailable`].
    async fn delete(&self, receipt_handle: &str) -> Result<()>;

    /// Up to `max` visible messages, readable or not ([`Message::content`]). The default reads
    /// [`InterruptionQueue::receive`] (a queue of events is always readable); a queue of raw
    /// bodies (SQS) overrides it so that unreadable messages reach the caller to be counted and
    /// deleted instead of coming back forever.
    ///
    /// # Errors
    /// [`crate::Error::Throttled`], [`crate::Error::Unavailable`].
    async fn receive_messages(&self, max: usize) -> Result<Vec<Message>> {
        Ok(self
            .receive(max)
            .await?
            .into_iter()
            .map(Message::from)
            .collect())
    }
}

/// A message that was received but could not be turned into a [`Notice`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Unreadable {
    /// Well-formed, but of a kind nobody handles (its `source` / `detail-type`, or a Health
    /// event that is not an EC2 scheduled change).
    #[error("unknown message kind {kind:?}")]
    Unknown {
        /// What the message says it is, e.g. `aws.ec2/EC2 Instance Launch Successful`.
        kind: String,
    },
    /// The body could not be parsed (not JSON, or a field missing or of the wrong type).
    #[error("garbled message: {reason}")]
    Garbled {
        /// What is wrong, naming the field.
        reason: String,
    },
}

/// What a readable message says: one kind of interruption for one or more instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    /// What happened.
    pub kind: InterruptionKind,
    /// The instances it is about (`i-...`); a Health event may name several.
    pub instance_ids: Vec<String>,
    /// When the event was emitted (seconds since the epoch).
    pub time: Timestamp,
}

/// One received message: readable or not, it is deleted with its receipt handle.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The queue's message ID.
    pub id: String,
    /// Handle to delete the message once handled.
    pub receipt_handle: String,
    /// What it says.
    pub content: std::result::Result<Notice, Unreadable>,
}

// === impl Message ===

impl From<InterruptionEvent> for Message {
    fn from(e: InterruptionEvent) -> Self {
        Message {
            id: e.id,
            receipt_handle: e.receipt_handle,
            content: Ok(Notice {
                kind: e.kind,
                instance_ids: vec![e.provider_id.instance_id().to_string()],
                time: e.time,
            }),
        }
    }
}
