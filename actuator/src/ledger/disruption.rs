//! Disruptions as the ledger holds them: each `DisruptCommand` of a plan, recorded when first
//! proposed ([`DisruptionState::Proposed`]), confirmed only by a plan whose `basis.now` is at
//! least the confirmation delay later ([`DisruptionState::Confirmed`]), then executed by
//! [`crate::disruption::Executor`] with every step written before it acts:
//!
//! ```text
//! proposed → confirmed → replacing → deleting → done
//!                │            └────→ aborting → aborted
//!                └→ rejected
//! ```
//!
//! A proposal that ended `aborted` or `rejected` and is proposed again starts a new attempt
//! (its replacements get new names), so that the planner's stable idempotency key does not
//! forbid a decision for good after one failure.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Basis, NewLaunch};
use crate::launch::LaunchSpec;
use service_shell::clock::Millis;

/// Where a disruption is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DisruptionState {
    /// Seen in one plan; waits for a later plan to propose it again.
    Proposed,
    /// Proposed again at least the confirmation delay later: to be executed.
    Confirmed,
    /// Candidates tainted, replacements launching; waits until they are initialized.
    Replacing,
    /// Replacements initialized: the candidates' NodeClaims are deleted (termination drains).
    Deleting,
    /// Every candidate terminated.
    Done,
    /// A replacement failed: the taints come off.
    Aborting,
    /// Aborted (the reason is recorded).
    Aborted,
    /// Not executed: a candidate is not disruptable or a budget forbids it now.
    Rejected,
}

// === impl DisruptionState ===

impl DisruptionState {
    /// Every state.
    pub const ALL: [DisruptionState; 8] = [
        DisruptionState::Proposed,
        DisruptionState::Confirmed,
        DisruptionState::Replacing,
        DisruptionState::Deleting,
        DisruptionState::Done,
        DisruptionState::Aborting,
        DisruptionState::Aborted,
        DisruptionState::Rejected,
    ];

    /// The name stored in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            DisruptionState::Proposed => "proposed",
            DisruptionState::Confirmed => "confirmed",
            DisruptionState::Replacing => "replacing",
            DisruptionState::Deleting => "deleting",
            DisruptionState::Done => "done",
            DisruptionState::Aborting => "aborting",
            DisruptionState::Aborted => "aborted",
            DisruptionState::Rejected => "rejected",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// True when nothing more happens to it (until it is proposed again, for the failed ones).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            DisruptionState::Done | DisruptionState::Aborted | DisruptionState::Rejected
        )
    }

    /// True while the executor has work to do on it.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            DisruptionState::Confirmed
                | DisruptionState::Replacing
                | DisruptionState::Deleting
                | DisruptionState::Aborting
        )
    }
}

impl fmt::Display for DisruptionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One disrupt command of a submission.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDisruption {
    /// The command's idempotency key (a hash of the decision: stable across replans).
    pub idempotency_key: String,
    /// The command as received (protobuf), kept for audit.
    pub payload: Vec<u8>,
    /// `Empty`, `Underutilized`, `Drifted`, `Expired` or `ScaleDown`.
    pub reason: String,
    /// The candidate Nodes, by name.
    pub nodes: Vec<String>,
    /// The replacements to launch first, as planned.
    pub replacements: Vec<LaunchSpec>,
    /// Savings per hour the planner expects.
    pub savings: f64,
}

/// A plan's disrupt commands, recorded by [`super::Ledger::propose`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Proposals {
    /// The plan's content hash.
    pub plan_id: String,
    /// The session that produced it.
    pub session_id: String,
    /// What it was computed from (`now` is the clock confirmations compare).
    pub basis: Basis,
    /// The idempotency keys of the plan's own launches (not stale claims for its basis).
    pub launch_keys: Vec<String>,
    /// Its disruptions.
    pub disruptions: Vec<NewDisruption>,
}

/// What became of one disrupt command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProposalOutcome {
    /// First seen (or seen again after a failed attempt): recorded, not executed.
    Recorded {
        /// The attempt it starts.
        attempt: i64,
    },
    /// Seen again at least the confirmation delay after the first sighting: to be executed.
    Confirmed {
        /// Seconds between the two plans' `basis.now`.
        after: i64,
    },
    /// Seen again too soon: still waiting for confirmation.
    Waiting {
        /// Seconds between the two plans' `basis.now`.
        after: i64,
    },
    /// Already confirmed, executing or done: nothing new.
    Duplicate {
        /// Its state.
        state: DisruptionState,
    },
    /// Refused (a stale plan).
    Rejected {
        /// Why.
        reason: String,
    },
}

/// A disruption as the ledger holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct DisruptionRecord {
    /// Idempotency key.
    pub key: String,
    /// The plan that proposed this attempt first.
    pub plan_id: String,
    /// Why (`Empty`, `Underutilized`, `Drifted`, `Expired`, `ScaleDown`).
    pub reason: String,
    /// Candidate Node names.
    pub nodes: Vec<String>,
    /// Replacements as planned (names of attempt 1).
    pub replacements: Vec<LaunchSpec>,
    /// Expected savings per hour.
    pub savings: f64,
    /// State.
    pub state: DisruptionState,
    /// `basis.now` (seconds) of the first proposal of this attempt.
    pub first_seen: i64,
    /// `basis.now` (seconds) of the confirming plan.
    pub confirmed_seen: Option<i64>,
    /// Attempt number, from 1.
    pub attempt: i64,
    /// The ledger claims of the candidates, once resolved at execution.
    pub candidates: Vec<String>,
    /// Why it was rejected or aborted.
    pub failure_reason: Option<String>,
    /// The executor holding it.
    pub lease_owner: Option<String>,
    /// Until when.
    pub lease_expires_at: Option<Millis>,
    /// Recorded at.
    pub created_at: Millis,
    /// Last written at.
    pub updated_at: Millis,
}

// === impl DisruptionRecord ===

impl DisruptionRecord {
    /// The replacements of this attempt: the planned specs, each with its own idempotency key
    /// and a name generated from it ([`crate::launch::generated_name`]): the planner names a
    /// claim after its pods, so a replacement would otherwise take the name of the claim it
    /// replaces, and each attempt's claims keep their names in the ledger.
    pub fn launches(&self) -> Vec<NewLaunch> {
        self.replacements
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let idempotency_key = format!("{}/a{}/r{i}", self.key, self.attempt);
                let mut spec = s.clone();
                spec.name = crate::launch::generated_name(&s.node_pool, &idempotency_key);
                NewLaunch {
                    idempotency_key,
                    payload: Vec::new(),
                    spec,
                }
            })
            .collect()
    }
}

/// One entry of a disruption's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisruptionEvent {
    /// The disruption's key.
    pub key: String,
    /// The state before (`None` for the first entry).
    pub from: Option<DisruptionState>,
    /// The state after (equal to `from` for a step within a state).
    pub to: DisruptionState,
    /// Who wrote it.
    pub actor: String,
    /// What happened.
    pub detail: String,
    /// When.
    pub at: Millis,
}

/// A step of a leased disruption, written only while the lease holds and the state is `from`.
#[derive(Clone, Debug, PartialEq)]
pub struct DisruptionStep {
    /// The disruption.
    pub key: String,
    /// The executor holding the lease.
    pub owner: String,
    /// The state the executor saw.
    pub from: DisruptionState,
    /// The new state (equal to `from` for a step within a state).
    pub to: DisruptionState,
    /// For the history.
    pub detail: String,
    /// Record these candidate claims.
    pub candidates: Option<Vec<String>>,
    /// Record this failure reason.
    pub failure_reason: Option<String>,
    /// Claims to record in `requested` with the step (the replacements; a claim whose key is
    /// already recorded is skipped).
    pub launches: Vec<NewLaunch>,
    /// Release the lease with the write.
    pub release: bool,
}

// === impl DisruptionStep ===

impl DisruptionStep {
    /// A plain step, keeping the lease.
    pub fn new(
        key: impl Into<String>,
        owner: impl Into<String>,
        from: DisruptionState,
        to: DisruptionState,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            key: key.into(),
            owner: owner.into(),
            from,
            to,
            detail: detail.into(),
            candidates: None,
            failure_reason: None,
            launches: Vec::new(),
            release: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_replacements_are_renamed_per_attempt() {
        for s in DisruptionState::ALL {
            assert_eq!(DisruptionState::parse(s.as_str()), Some(s));
        }
        assert!(DisruptionState::Aborted.is_terminal());
        assert!(DisruptionState::Aborting.is_active());
        assert!(!DisruptionState::Proposed.is_active());
        let mut r = DisruptionRecord {
            key: "disrupt-1".into(),
            plan_id: "p".into(),
            reason: "Underutilized".into(),
            nodes: vec!["n1".into()],
            replacements: vec![LaunchSpec {
                name: "default-x".into(),
                ..LaunchSpec::default()
            }],
            savings: 0.1,
            state: DisruptionState::Confirmed,
            first_seen: 0,
            confirmed_seen: None,
            attempt: 1,
            candidates: Vec::new(),
            failure_reason: None,
            lease_owner: None,
            lease_expires_at: None,
            created_at: 0,
            updated_at: 0,
        };
        // Named from the replacement's key, as Karpenter's `generateName: <nodepool>-`: never
        // the planner's name for the same pods, which is the name of the claim it replaces.
        let first = r.launches()[0].spec.name.clone();
        assert_eq!(first, crate::launch::generated_name("", "disrupt-1/a1/r0"));
        assert_eq!(r.launches()[0].idempotency_key, "disrupt-1/a1/r0");
        assert_eq!(r.launches(), r.launches(), "the same every time");
        r.attempt = 2;
        assert_ne!(r.launches()[0].spec.name, first);
        assert_eq!(r.launches()[0].idempotency_key, "disrupt-1/a2/r0");
    }
}
