//! Interruption events from SQS: the EventBridge messages Karpenter handles, read from the queue
//! EventBridge feeds (`deploy/aws/cloudformation.yaml` creates both).
//!
//! - [`messages`]: one parser per kind of message body (spot interruption warning, rebalance
//!   recommendation, AWS Health scheduled change, instance state change), dispatched on
//!   `source` and `detail-type`; a body that is not JSON, lacks a field or is of another kind is
//!   a [`cloud::Unreadable`] value, never a panic.
//! - [`sqs`]: [`SqsQueue`], `cloud::InterruptionQueue` over SQS: long-poll ReceiveMessage,
//!   DeleteMessage, the queue given by name (GetQueueUrl) or URL.
//! - `fixtures` (tests, feature `test-util`): the documented example bodies in
//!   `tests/fixtures/interruption/`.

pub mod messages;
pub mod sqs;

#[cfg(any(test, feature = "test-util"))]
pub mod fixtures;

pub use sqs::SqsQueue;
