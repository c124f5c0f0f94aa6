//! The ledger: every NodeClaim the actuator launches, with its state machine, the plan, command
//! and idempotency key it came from, the cloud client token, the instance, leases, and an
//! append-only event history. Each step is written here BEFORE it acts, so that after a crash
//! every unfinished claim resumes from the ledger.
//!
//! One [`Ledger`] trait, two backends sharing one sqlx implementation ([`sql::SqlLedger`]):
//! Postgres (production; several replicas share it) and SQLite (the demo's embedded default; one
//! process). [`open`] picks the backend from the URL.
//!
//! Exactly one worker per claim: a worker holds a claim only under a lease
//! ([`Ledger::acquire`]) and every write it makes is conditional on still holding that lease
//! ([`Ledger::transition`] fails with [`Error::LeaseLost`] otherwise). A dead worker's claims are
//! taken over once its lease has expired.

pub mod disruption;
pub mod sql;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::launch::LaunchSpec;
use service_shell::clock::Millis;

pub use disruption::{
    DisruptionEvent, DisruptionRecord, DisruptionState, DisruptionStep, NewDisruption,
    ProposalOutcome, Proposals,
};
pub use sql::SqlLedger;

/// Errors of the ledger.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ledger URL is not `postgres://...`, `postgresql://...` or `sqlite://PATH`.
    #[error("ledger URL {url:?} is not postgres://... or sqlite://PATH")]
    Url {
        /// The URL given.
        url: String,
    },
    /// The database failed or cannot be reached (retry later).
    #[error("ledger database error")]
    Database(#[from] sqlx::Error),
    /// Applying the schema migrations failed.
    #[error("ledger migrations failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The worker no longer holds the claim's lease, or the claim is no longer in the state the
    /// worker expected: another worker owns it now; stop touching it.
    #[error("claim {name}: lease lost or state changed (expected {expected})")]
    LeaseLost {
        /// The claim.
        name: String,
        /// The state the writer expected.
        expected: ClaimState,
    },
    /// The executor no longer holds the disruption's lease, or it is no longer in the state the
    /// executor expected.
    #[error("disruption {key}: lease lost or state changed (expected {expected})")]
    DisruptionLost {
        /// The disruption.
        key: String,
        /// The state the writer expected.
        expected: DisruptionState,
    },
    /// A row holds a value this code cannot read (a newer schema, or corruption).
    #[error("claim {name}: column {column} holds {value:?}")]
    Corrupt {
        /// The claim (or table row) at fault.
        name: String,
        /// The column.
        column: &'static str,
        /// What it holds.
        value: String,
    },
}

/// Result of a ledger call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a claim is in its life. The order is the order of the life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ClaimState {
    /// Accepted from a plan; nothing sent to the cloud yet.
    Requested,
    /// About to call, or calling, the cloud's create (an instance may exist).
    Launching,
    /// The instance exists and is recorded.
    Launched,
    /// Its Node registered ([`crate::lifecycle`]).
    Registered,
    /// Its Node is initialized ([`crate::lifecycle`]).
    Initialized,
    /// Being terminated.
    Terminating,
    /// Terminated: done.
    Terminated,
    /// Failed: done (the reason is recorded).
    Failed,
}

// === impl ClaimState ===

impl ClaimState {
    /// Every state, in life order.
    pub const ALL: [ClaimState; 8] = [
        ClaimState::Requested,
        ClaimState::Launching,
        ClaimState::Launched,
        ClaimState::Registered,
        ClaimState::Initialized,
        ClaimState::Terminating,
        ClaimState::Terminated,
        ClaimState::Failed,
    ];

    /// The name stored in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Requested => "requested",
            ClaimState::Launching => "launching",
            ClaimState::Launched => "launched",
            ClaimState::Registered => "registered",
            ClaimState::Initialized => "initialized",
            ClaimState::Terminating => "terminating",
            ClaimState::Terminated => "terminated",
            ClaimState::Failed => "failed",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// True when nothing more happens to the claim.
    pub fn is_terminal(self) -> bool {
        matches!(self, ClaimState::Terminated | ClaimState::Failed)
    }

    /// True while the claim has no Node yet: a plan must have seen these claims
    /// (`basis.in_flight_claims`) or it is stale.
    pub fn is_in_flight(self) -> bool {
        matches!(
            self,
            ClaimState::Requested | ClaimState::Launching | ClaimState::Launched
        )
    }
}

impl fmt::Display for ClaimState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a plan was computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Basis {
    /// Names of the claims the plan saw in flight.
    pub in_flight: Vec<String>,
    /// The plan's clock (seconds since the epoch).
    pub now: i64,
    /// Session sequence number.
    pub sequence: u64,
}

/// One launch command of a submission.
#[derive(Clone, Debug, PartialEq)]
pub struct NewLaunch {
    /// The command's idempotency key.
    pub idempotency_key: String,
    /// The command as received (protobuf), kept for audit.
    pub payload: Vec<u8>,
    /// What to launch.
    pub spec: LaunchSpec,
}

/// A plan's launch commands, recorded atomically by [`Ledger::submit`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Submission {
    /// The plan's content hash.
    pub plan_id: String,
    /// The session that produced it.
    pub session_id: String,
    /// What it was computed from.
    pub basis: Basis,
    /// Its launches.
    pub launches: Vec<NewLaunch>,
}

/// What became of one launch command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Recorded as a new claim in `requested`.
    Accepted {
        /// The claim.
        claim: String,
    },
    /// The key was already known: nothing new recorded.
    Duplicate {
        /// The claim the key created earlier.
        claim: String,
    },
    /// Not recorded, and nothing will be launched for it.
    Rejected {
        /// Why.
        reason: String,
    },
}

/// The instance a claim launched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceRecord {
    /// Instance ID.
    pub instance_id: String,
    /// Provider ID (`aws:///zone/id`).
    pub provider_id: String,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
}

/// A claim as the ledger holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRecord {
    /// NodeClaim name.
    pub name: String,
    /// The command's idempotency key.
    pub idempotency_key: String,
    /// The plan it came from.
    pub plan_id: String,
    /// NodePool.
    pub node_pool: String,
    /// State.
    pub state: ClaimState,
    /// What to launch.
    pub spec: LaunchSpec,
    /// The cloud client token (derived from name and key).
    pub client_token: String,
    /// The instance, once launched.
    pub instance: Option<InstanceRecord>,
    /// Why it failed, or the last retryable error.
    pub failure_reason: Option<String>,
    /// Retryable failures so far.
    pub attempts: i64,
    /// Not before this time (after a retryable failure).
    pub retry_at: Millis,
    /// The worker holding it.
    pub lease_owner: Option<String>,
    /// Until when.
    pub lease_expires_at: Option<Millis>,
    /// Recorded at.
    pub created_at: Millis,
    /// Last written at.
    pub updated_at: Millis,
}

/// One entry of a claim's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The claim.
    pub claim: String,
    /// The state before (`None` for the first entry).
    pub from: Option<ClaimState>,
    /// The state after (equal to `from` for a retry).
    pub to: ClaimState,
    /// Who wrote it (`submit` or a worker's owner ID).
    pub actor: String,
    /// What happened.
    pub detail: String,
    /// When.
    pub at: Millis,
}

/// A step of a leased claim, written only while the lease holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// The claim.
    pub name: String,
    /// The worker holding the lease.
    pub owner: String,
    /// The state the worker saw.
    pub from: ClaimState,
    /// The new state (equal to `from` for a deferred retry).
    pub to: ClaimState,
    /// For the history.
    pub detail: String,
    /// Record this instance.
    pub instance: Option<InstanceRecord>,
    /// Record this failure reason.
    pub failure_reason: Option<String>,
    /// Count a retryable failure and wait until this time; also releases the lease.
    pub retry_at: Option<Millis>,
    /// Release the lease with the write (the worker is done with the claim for now).
    pub release: bool,
}

// === impl Transition ===

impl Transition {
    /// A plain step from `from` to `to`, keeping the lease.
    pub fn new(
        name: impl Into<String>,
        owner: impl Into<String>,
        from: ClaimState,
        to: ClaimState,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            owner: owner.into(),
            from,
            to,
            detail: detail.into(),
            instance: None,
            failure_reason: None,
            retry_at: None,
            release: false,
        }
    }
}

/// The ledger. Object-safe, so services hold an `Arc<dyn Ledger>`.
#[async_trait]
pub trait Ledger: Send + Sync {
    /// Which backend (`postgres` or `sqlite`).
    fn backend(&self) -> &'static str;

    /// Applies the embedded migrations (idempotent).
    ///
    /// # Errors
    /// [`Error::Migrate`] when the database is unreachable or a migration fails.
    async fn migrate(&self) -> Result<()>;

    /// Records a plan's launches in one transaction, serialized with every other submission:
    /// a known key is a [`Outcome::Duplicate`]; when the ledger holds an in-flight claim that
    /// the basis does not list (and that no command of this submission created), every new
    /// launch is [`Outcome::Rejected`] as stale; a claim name already in the ledger under
    /// another key is rejected; the rest become claims in `requested`.
    ///
    /// # Errors
    /// [`Error::Database`].
    async fn submit(&self, submission: &Submission, now: Millis) -> Result<Vec<(String, Outcome)>>;

    /// Leases up to `limit` claims in one of `states` whose lease is free or expired (or
    /// already `owner`'s) and whose retry time has come, to `owner` until `now + lease_ms`.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn acquire(
        &self,
        owner: &str,
        states: &[ClaimState],
        now: Millis,
        lease_ms: Millis,
        limit: u32,
    ) -> Result<Vec<ClaimRecord>>;

    /// Leases the one claim `name`, whatever its state, to `owner` until `now + lease_ms` when
    /// its lease is free, expired or already `owner`'s (the NodeClaim lifecycle and garbage
    /// collection act on single claims). `None` when there is no such claim or another worker
    /// holds it.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn acquire_claim(
        &self,
        owner: &str,
        name: &str,
        now: Millis,
        lease_ms: Millis,
    ) -> Result<Option<ClaimRecord>>;

    /// Extends `owner`'s lease on `name` to `until`.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when `owner` no longer holds a live lease; [`Error::Database`].
    async fn renew(&self, name: &str, owner: &str, now: Millis, until: Millis) -> Result<()>;

    /// Writes one step with its event, only while `t.owner` holds a live lease and the claim
    /// is still in `t.from`.
    ///
    /// # Errors
    /// [`Error::LeaseLost`]; [`Error::Database`].
    async fn transition(&self, t: &Transition, now: Millis) -> Result<()>;

    /// Releases every lease `owner` holds (graceful shutdown).
    ///
    /// # Errors
    /// [`Error::Database`].
    async fn release_all(&self, owner: &str) -> Result<u64>;

    /// One claim.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn claim(&self, name: &str) -> Result<Option<ClaimRecord>>;

    /// Every claim, oldest first.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn claims(&self) -> Result<Vec<ClaimRecord>>;

    /// A claim's history, oldest first.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn events(&self, name: &str) -> Result<Vec<Event>>;

    /// Claims per state.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn counts(&self) -> Result<BTreeMap<ClaimState, i64>>;

    /// Records a plan's disrupt commands in one transaction, serialized with submissions: a
    /// new key is [`ProposalOutcome::Recorded`] with the plan's `basis.now`; a key still
    /// `proposed` is [`ProposalOutcome::Confirmed`] when this plan's `basis.now` is at least
    /// `confirm_after_ms` after the first sighting, else [`ProposalOutcome::Waiting`]; an
    /// `aborted` or `rejected` key starts a new attempt; any other is a
    /// [`ProposalOutcome::Duplicate`]. A stale plan (the ledger holds an in-flight claim its
    /// basis does not list) records and confirms nothing.
    ///
    /// # Errors
    /// [`Error::Database`].
    async fn propose(
        &self,
        proposals: &Proposals,
        confirm_after_ms: Millis,
        now: Millis,
    ) -> Result<Vec<(String, ProposalOutcome)>>;

    /// Every disruption (`active_only`: those the executor has work on), oldest first.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn disruptions(&self, active_only: bool) -> Result<Vec<DisruptionRecord>>;

    /// One disruption.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn disruption(&self, key: &str) -> Result<Option<DisruptionRecord>>;

    /// Leases disruption `key` to `owner` until `now + lease_ms` when its lease is free, expired
    /// or already `owner`'s; `None` when another executor holds it (or there is no such key).
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn acquire_disruption(
        &self,
        owner: &str,
        key: &str,
        now: Millis,
        lease_ms: Millis,
    ) -> Result<Option<DisruptionRecord>>;

    /// Writes one step of a disruption with its event (and the step's replacement claims), only
    /// while `step.owner` holds a live lease and the disruption is still in `step.from`.
    ///
    /// # Errors
    /// [`Error::DisruptionLost`]; [`Error::Database`].
    async fn advance_disruption(&self, step: &DisruptionStep, now: Millis) -> Result<()>;

    /// A disruption's history, oldest first.
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Corrupt`].
    async fn disruption_events(&self, key: &str) -> Result<Vec<DisruptionEvent>>;

    /// Write statements executed by this handle so far (for the bench's writes per claim).
    fn writes(&self) -> u64;

    /// Closes the pool, waiting for open connections to finish.
    async fn close(&self);
}

/// Opens the ledger at `url` (`postgres://...`, `postgresql://...`, `sqlite://PATH`, the file
/// created when missing). Connections are made lazily: call [`Ledger::migrate`] next (it waits
/// for the database).
///
/// # Errors
/// [`Error::Url`] for another scheme; [`Error::Database`] for options sqlx rejects.
pub fn open(url: &str) -> Result<Arc<dyn Ledger>> {
    Ok(Arc::new(SqlLedger::open(url)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_classify() {
        for s in ClaimState::ALL {
            assert_eq!(ClaimState::parse(s.as_str()), Some(s));
        }
        assert_eq!(ClaimState::parse("flying"), None);
        assert!(ClaimState::Launched.is_in_flight());
        assert!(!ClaimState::Registered.is_in_flight());
        assert!(ClaimState::Failed.is_terminal());
        assert!(!ClaimState::Terminating.is_terminal());
    }
}
