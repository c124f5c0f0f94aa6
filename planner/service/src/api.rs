//! The gRPC edge of the planner: the `dovetail.v1.Planner` service.
//!
//! Wire types stay in this module tree: [`convert`] (the `planner-wire` crate, shared with the
//! CLI) turns requests into the model and plans into responses, [`status`] is the one place
//! where errors become gRPC statuses, [`planning`] plans a snapshot for both RPCs, [`service`]
//! is the tonic implementation (unary `Plan` and streaming `Session`), [`session`] keeps the
//! per-stream snapshot, [`actuator`] submits session plans to the actuator, and
//! [`live_catalog`] fetches the actuator's live catalog (`--catalog-from-actuator`).

pub mod actuator;
pub mod live_catalog;
pub mod planning;
pub mod service;
pub mod session;
pub mod status;

use thiserror::Error;

pub use planner_wire as convert;
pub use planner_wire::remote::RemotePlan;
pub use planning::{BuiltinCatalogs, PlanFn, PlannerService, ServiceOptions};

/// Everything that can go wrong serving a request.
#[derive(Debug, Error)]
pub enum Error {
    /// The request has a field the planner cannot use.
    #[error(transparent)]
    Convert(#[from] convert::Error),
    /// An object of a session update cannot be used; `source` names the field by its path in
    /// that update (e.g. `delta.upserts[2].pod.requests.cpu`). Found when the update arrives,
    /// or when a batch closes (validation of the whole batch), then naming the earlier update
    /// that sent the object.
    #[error("session update {sequence}: {source}")]
    SessionUpdate {
        /// Sequence number of the update that sent the object.
        sequence: u64,
        /// The field at fault, by its path in that update.
        #[source]
        source: convert::Error,
    },
    /// The request names a built-in catalog that does not exist.
    #[error("{field}: no built-in catalog for region {region:?}: {reason}")]
    UnknownCatalog {
        /// Path of the field that named it.
        field: String,
        /// The region asked for.
        region: String,
        /// Why it could not be loaded.
        reason: String,
    },
    /// A session message came before the session's snapshot.
    #[error("session update {sequence} came before any snapshot; send a snapshot first")]
    NoSnapshot {
        /// Its sequence number.
        sequence: u64,
    },
    /// A session message skipped or repeated a sequence number.
    #[error("session sequence gap: expected {expected}, got {got}; resend a snapshot")]
    SequenceGap {
        /// The number expected.
        expected: u64,
        /// The number received.
        got: u64,
    },
    /// A session snapshot used the last sequence number, so no update can follow it.
    #[error("session update {sequence} leaves no sequence number for the next update")]
    SequenceExhausted {
        /// Its sequence number.
        sequence: u64,
    },
    /// A session sent nothing for longer than the server's idle timeout.
    #[error("session idle for {seconds}s (the limit); reconnect and resend a snapshot")]
    SessionIdle {
        /// The idle timeout in seconds.
        seconds: u64,
    },
    /// A session holds more objects than this server allows.
    #[error("session holds {objects} objects, more than the limit of {limit}")]
    SessionTooLarge {
        /// Objects the session would hold.
        objects: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The open sessions together would hold more objects than this server allows.
    #[error(
        "this planner's open sessions hold {held} objects; {objects} more would pass its limit of {limit} (--max-held-objects): resend the snapshot later or to another replica"
    )]
    SessionsFull {
        /// Objects this session would add.
        objects: usize,
        /// Objects the open sessions hold now.
        held: usize,
        /// The configured limit.
        limit: usize,
    },
    /// A session message had no update in it.
    #[error("session update {sequence} is empty")]
    EmptyUpdate {
        /// Its sequence number.
        sequence: u64,
    },
    /// The server is draining: the stream must move to another replica.
    #[error("the planner is shutting down; reconnect and resend a snapshot")]
    ShuttingDown,
    /// The caller abandoned the request (deadline, cancellation, closed stream) and planning
    /// stopped.
    #[error("planning cancelled: the caller went away")]
    Cancelled,
    /// The planner task failed (a bug: the planner panicked).
    #[error("the planner failed: {0}")]
    PlannerFailed(String),
}

/// Result of serving a request.
pub type Result<T, E = Error> = std::result::Result<T, E>;
