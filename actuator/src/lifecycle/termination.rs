//! Termination: why a claim is being terminated ([`Cause`], recorded in its `terminating` entry
//! before anything is deleted) and how it ends: `terminated` when its NodeClaim was deleted (by
//! a user) or a confirmed disruption removes it ([`crate::disruption`]), `failed` for a
//! registration timeout or a vanished instance.
//!
//! The steps, each safe to repeat after a crash: drain the claim's Node through the eviction
//! API ([`super::drain`], each step in the history); delete the claim's Nodes; terminate the
//! instance until the cloud reports it gone (Karpenter retries the delete until NotFound); delete
//! the NodeClaim if it is not being deleted yet and remove the `karpenter.sh/termination`
//! finalizer; write the final state.

use crate::ledger::{ClaimState, Event};

/// Why a claim is terminated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Its NodeClaim was deleted (its deletionTimestamp is set).
    Deleted,
    /// No Node registered within the registration timeout.
    RegistrationTimeout,
    /// The instance vanished from the cloud (garbage collection).
    InstanceVanished,
    /// A confirmed disruption (consolidation, drift, expiry) removes it.
    Disrupted,
}

// === impl Cause ===

impl Cause {
    /// Every cause.
    pub const ALL: [Cause; 4] = [
        Cause::Deleted,
        Cause::RegistrationTimeout,
        Cause::InstanceVanished,
        Cause::Disrupted,
    ];

    /// Its name, which starts the detail of the `terminating` history entry (and is the metric
    /// reason, as Karpenter's `nodeclaims_disrupted_total` reasons).
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Deleted => "nodeclaim_deleted",
            Cause::RegistrationTimeout => "registration_timeout",
            Cause::InstanceVanished => "instance_vanished",
            Cause::Disrupted => "disrupted",
        }
    }

    /// The state the claim ends in.
    pub fn end_state(self) -> ClaimState {
        match self {
            Cause::Deleted | Cause::Disrupted => ClaimState::Terminated,
            Cause::RegistrationTimeout | Cause::InstanceVanished => ClaimState::Failed,
        }
    }

    /// The history detail for the `terminating` entry.
    pub fn detail(self, message: &str) -> String {
        format!("{}: {message}", self.as_str())
    }

    /// The cause recorded in the claim's last `terminating` entry (`Deleted` when none is
    /// readable: ending as terminated never hides a failure that was recorded).
    pub fn of(events: &[Event]) -> Cause {
        events
            .iter()
            .rev()
            .find(|e| e.to == ClaimState::Terminating && e.from != Some(ClaimState::Terminating))
            .and_then(|e| {
                Cause::ALL
                    .into_iter()
                    .find(|c| e.detail.starts_with(&format!("{}:", c.as_str())))
            })
            .unwrap_or(Cause::Deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_read_back_from_the_history() {
        for c in Cause::ALL {
            let e = Event {
                claim: "c".into(),
                from: Some(ClaimState::Launched),
                to: ClaimState::Terminating,
                actor: "a".into(),
                detail: c.detail("why"),
                at: 1,
            };
            assert_eq!(Cause::of(&[e]), c);
        }
        assert_eq!(Cause::of(&[]), Cause::Deleted);
        assert_eq!(Cause::RegistrationTimeout.end_state(), ClaimState::Failed);
    }
}
