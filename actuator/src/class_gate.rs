//! The launch gate of EC2NodeClasses that cannot launch: after a create fails because the
//! class itself does not resolve (its subnets, security groups, AMIs or instance profile match
//! nothing), no claim of that class is sent to the cloud until the class changes or its backoff
//! ends; the backoff doubles with each class-level failure (10 s, 20 s, ... capped at 5
//! minutes). A gated claim waits in `launching`, so the planner counts it as capacity in flight
//! and plans no more claims for the same pods: a broken class costs a handful of claims, not a
//! launch storm.
//!
//! Karpenter gets the same effect from readiness: an EC2NodeClass whose subnets match nothing is
//! `Ready=False`, its NodePools are `NodeClassReady=False` (`pkg/controllers/nodepool/readiness/
//! controller.go`) and the provisioner skips NodePools that are not Ready (`NewScheduler` in
//! `pkg/controllers/provisioning/provisioner.go`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use cloud::{NodeClassResolution, NodeClassSpec};

/// First wait after a class-level failure.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(10);
/// Longest wait.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// One class under backoff.
#[derive(Clone, Debug)]
struct Held {
    /// The spec that failed: a changed spec opens the gate.
    spec: NodeClassSpec,
    /// Class-level failures in a row.
    failures: u32,
    /// Unix milliseconds until which nothing of the class is launched.
    until_ms: i64,
    /// Why.
    reason: String,
}

/// Why a claim's class is not launched from now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Closed {
    /// Unix milliseconds when a launch may be tried again.
    pub until_ms: i64,
    /// The class-level failure, naming the class and the field.
    pub reason: String,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct ClassGate {
    held: Mutex<HashMap<String, Held>>,
}

// === impl ClassGate ===

impl ClassGate {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Some` while `class` (as specified now) is backing off at `now_ms`.
    pub fn check(&self, class: &NodeClassSpec, now_ms: i64) -> Option<Closed> {
        let mut held = self.lock();
        let h = held.get(&class.name)?;
        if h.spec != *class {
            // The class changed: try it again at once.
            held.remove(&class.name);
            return None;
        }
        (now_ms < h.until_ms).then(|| Closed {
            until_ms: h.until_ms,
            reason: h.reason.clone(),
        })
    }

    /// Records a class-level failure of `class` at `now_ms`; returns the wait it starts.
    pub fn failed(&self, class: &NodeClassSpec, reason: String, now_ms: i64) -> Duration {
        let mut held = self.lock();
        let failures = held
            .get(&class.name)
            .filter(|h| h.spec == *class)
            .map_or(0, |h| h.failures)
            .saturating_add(1);
        let wait = FIRST_BACKOFF
            .saturating_mul(1u32 << (failures - 1).min(16))
            .min(MAX_BACKOFF);
        let until_ms = now_ms.saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX));
        held.insert(
            class.name.clone(),
            Held {
                spec: class.clone(),
                failures,
                until_ms,
                reason,
            },
        );
        wait
    }

    /// A launch of `class` succeeded: its backoff ends.
    pub fn succeeded(&self, class: &str) {
        self.lock().remove(class);
    }
}

/// The first part of a resolution that failed (subnets, security groups, AMIs, instance
/// profile), as the resolver said it; `None` when the class resolves.
pub fn class_failure(r: &NodeClassResolution) -> Option<String> {
    [
        r.subnets.as_ref().err(),
        r.security_groups.as_ref().err(),
        r.amis.as_ref().err(),
        r.instance_profile.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    .next()
    .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(subnet_tag: &str) -> NodeClassSpec {
        let mut c = NodeClassSpec {
            name: "broken".into(),
            ..NodeClassSpec::default()
        };
        c.role = Some(subnet_tag.into());
        c
    }

    #[test]
    fn backs_off_doubling_to_a_cap_and_opens_when_the_class_changes() {
        let gate = ClassGate::default();
        let c = class("a");
        assert_eq!(gate.check(&c, 0), None);
        let mut waits = Vec::new();
        for _ in 0..8 {
            waits.push(gate.failed(&c, "no subnet".into(), 0).as_secs());
        }
        assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300, 300]);
        let closed = gate.check(&c, 1_000).expect("closed");
        assert_eq!(closed.reason, "no subnet");
        assert_eq!(gate.check(&c, 300_000), None, "open once the wait is over");
        assert!(
            gate.check(&class("b"), 1_000).is_none(),
            "a changed class is tried at once"
        );
        gate.failed(&c, "no subnet".into(), 0);
        gate.succeeded("broken");
        assert_eq!(gate.check(&c, 1), None);
    }
}
