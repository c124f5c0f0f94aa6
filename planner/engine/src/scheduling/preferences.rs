//! Preference relaxation, in Karpenter v1's order (`preferences.go`).
//!
//! The scheduler first treats every preference as required. When a pod cannot be placed it
//! relaxes one preference at a time and tries again: required node-affinity OR-terms beyond the
//! first, then the heaviest preferred pod-affinity term, then the heaviest preferred
//! anti-affinity term, then the heaviest preferred node-affinity term, then `ScheduleAnyway`
//! spreads, and last a toleration of `PreferNoSchedule` taints. With
//! `--preference-policy Ignore` the scheduler strips preferences before the first attempt
//! ([`strip_preferences`]).

use crate::model::{ClusterSnapshot, Pod, TaintEffect, WhenUnsatisfiable};
use crate::requirements::taints::prefer_no_schedule_toleration;

/// What one relaxation step removed or added, for logs and reasons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Relaxation {
    /// The first required node-affinity term was dropped (others remain, they are ORed).
    RequiredNodeAffinityTerm,
    /// The heaviest preferred pod-affinity term was dropped.
    PreferredPodAffinity,
    /// The heaviest preferred pod anti-affinity term was dropped.
    PreferredPodAntiAffinity,
    /// The heaviest preferred node-affinity term was dropped.
    PreferredNodeAffinity,
    /// A `ScheduleAnyway` topology spread constraint on this key was dropped.
    ScheduleAnywaySpread(String),
    /// A toleration of every `PreferNoSchedule` taint was added.
    ToleratePreferNoSchedule,
}

/// Relaxes pods' preferences one step at a time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Preferences {
    /// Whether the last step adds a `PreferNoSchedule` toleration. Karpenter enables it only when
    /// some NodePool or node carries such a taint, since it cannot help otherwise.
    pub(crate) tolerate_prefer_no_schedule: bool,
}

// === impl Preferences ===

impl Preferences {
    /// Preferences for a solve over `snapshot`: the toleration step is on when any NodePool or
    /// node has a `PreferNoSchedule` taint.
    pub(crate) fn new(snapshot: &ClusterSnapshot) -> Self {
        let prefer = |t: &crate::model::Taint| t.effect == TaintEffect::PreferNoSchedule;
        let tolerate_prefer_no_schedule = snapshot
            .node_pools
            .iter()
            .any(|p| p.taints.iter().any(prefer))
            || snapshot.nodes.iter().any(|n| n.taints.iter().any(prefer));
        Self {
            tolerate_prefer_no_schedule,
        }
    }

    /// One relaxation step; false when nothing is left to relax.
    pub(crate) fn relax(&self, pod: &mut Pod) -> bool {
        self.relax_step(pod).is_some()
    }

    /// One relaxation step, saying what changed; `None` when nothing is left to relax.
    pub(crate) fn relax_step(&self, pod: &mut Pod) -> Option<Relaxation> {
        if pod.required_node_affinity.len() > 1 {
            pod.required_node_affinity.remove(0);
            return Some(Relaxation::RequiredNodeAffinityTerm);
        }
        if remove_heaviest(&mut pod.preferred_pod_affinity, |t| t.weight) {
            return Some(Relaxation::PreferredPodAffinity);
        }
        if remove_heaviest(&mut pod.preferred_pod_anti_affinity, |t| t.weight) {
            return Some(Relaxation::PreferredPodAntiAffinity);
        }
        if remove_heaviest(&mut pod.preferred_node_affinity, |t| t.weight) {
            return Some(Relaxation::PreferredNodeAffinity);
        }
        if let Some(i) = pod
            .topology_spread
            .iter()
            .position(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
        {
            let c = pod.topology_spread.remove(i);
            return Some(Relaxation::ScheduleAnywaySpread(c.topology_key));
        }
        if self.tolerate_prefer_no_schedule {
            let toleration = prefer_no_schedule_toleration();
            let already = pod.tolerations.iter().any(|t| {
                t.key.is_empty()
                    && t.operator == crate::model::TolerationOperator::Exists
                    && t.effect.is_none_or(|e| e == TaintEffect::PreferNoSchedule)
            });
            if !already {
                pod.tolerations.push(toleration);
                return Some(Relaxation::ToleratePreferNoSchedule);
            }
        }
        None
    }
}

/// Removes every preference: preferred node affinity, preferred pod (anti-)affinity and
/// `ScheduleAnyway` spreads.
pub(crate) fn strip_preferences(pod: &mut Pod) {
    pod.preferred_node_affinity.clear();
    pod.preferred_pod_affinity.clear();
    pod.preferred_pod_anti_affinity.clear();
    pod.topology_spread
        .retain(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule);
}

/// Removes the heaviest term (the first of the heaviest when several tie, like Karpenter's stable
/// sort by descending weight); false when there is none.
fn remove_heaviest<T>(terms: &mut Vec<T>, weight: impl Fn(&T) -> i32) -> bool {
    let Some(max) = terms.iter().map(&weight).max() else {
        return false;
    };
    if let Some(i) = terms.iter().position(|t| weight(t) == max) {
        // Karpenter sorts the remaining terms by weight; keep that order too so that the next
        // relaxation and the pod's requirements (heaviest preferred term) read the same.
        terms.remove(i);
        terms.sort_by_key(|t| std::cmp::Reverse(weight(t)));
    }
    true
}

#[cfg(test)]
mod tests;
