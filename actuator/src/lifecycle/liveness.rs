//! Liveness: a claim launched more than the registration timeout ago (15 minutes by default, as
//! Karpenter's `registrationTimeout`) whose Node never registered is terminated and failed
//! (reason `registration_timeout`), and its NodeClaim deleted.

use std::time::Duration;

use crate::ledger::{ClaimState, Event};
use service_shell::clock::{Millis, millis};

/// Karpenter's registration timeout.
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// When the claim was launched: the time of its history's last `launched` entry.
pub fn launched_at(events: &[Event]) -> Option<Millis> {
    events
        .iter()
        .rev()
        .find(|e| e.to == ClaimState::Launched && e.from != Some(ClaimState::Launched))
        .map(|e| e.at)
}

/// True when a claim launched at `launched_at` has had `timeout` to register by `now`.
pub fn timed_out(launched_at: Millis, now: Millis, timeout: Duration) -> bool {
    now.saturating_sub(launched_at) >= millis(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(from: Option<ClaimState>, to: ClaimState, at: Millis) -> Event {
        Event {
            claim: "c".into(),
            from,
            to,
            actor: "w".into(),
            detail: String::new(),
            at,
        }
    }

    #[test]
    fn the_clock_starts_at_the_launch() {
        let h = [
            event(None, ClaimState::Requested, 1),
            event(Some(ClaimState::Requested), ClaimState::Launching, 2),
            event(Some(ClaimState::Launching), ClaimState::Launched, 10_000),
            event(Some(ClaimState::Launched), ClaimState::Launched, 20_000),
        ];
        let at = launched_at(&h).expect("launched");
        assert_eq!(at, 10_000);
        assert!(!timed_out(at, at + 899_999, REGISTRATION_TIMEOUT));
        assert!(timed_out(at, at + 900_000, REGISTRATION_TIMEOUT));
    }
}
