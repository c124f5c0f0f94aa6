//! Interruption events: what EventBridge delivers to an SQS queue on EC2 (spot interruption
//! warnings, rebalance recommendations, scheduled changes, state changes), and the queue the
//! actuator polls.
//!
//! Delivery is at least once, as with SQS: a received event stays in the queue (and is received
//! again after its visibility timeout) until it is deleted with its receipt handle.

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
    /// The instance changed state (for example it was stopped or terminated from outside).
    StateChange(InstanceState),
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
}
