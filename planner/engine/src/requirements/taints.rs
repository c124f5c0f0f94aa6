//! Taints against tolerations, by Kubernetes' matching rules and Karpenter's strictness:
//! every taint, PreferNoSchedule included, must be tolerated (the scheduler relaxes
//! PreferNoSchedule last by adding a toleration).

use crate::model::{Taint, TaintEffect, Toleration, TolerationOperator};

/// The first taint in `taints` that `tolerations` do not tolerate.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// True when every taint is tolerated.
pub fn tolerates_all(taints: &[Taint], tolerations: &[Toleration]) -> bool {
    first_untolerated(taints, tolerations).is_none()
}

/// The toleration the last relaxation step adds: tolerate every PreferNoSchedule taint.
pub fn prefer_no_schedule_toleration() -> Toleration {
    Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(TaintEffect::PreferNoSchedule),
    }
}

/// Formats a taint as `key=value:Effect`.
pub fn describe(t: &Taint) -> String {
    if t.value.is_empty() {
        format!("{}:{:?}", t.key, t.effect)
    } else {
        format!("{}={}:{:?}", t.key, t.value, t.effect)
    }
}
