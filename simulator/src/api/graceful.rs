//! Graceful pod deletion, as the API server does it (the Kubernetes docs "Pod Lifecycle §
//! Termination of Pods"): deleting a pod bound to a node that is not finished only marks it,
//! `deletionTimestamp` = now + the grace period and `deletionGracePeriodSeconds` = the grace
//! period (the DeleteOptions' `gracePeriodSeconds`, else the pod's
//! `terminationGracePeriodSeconds`, else 30); the kubelet stops its containers and removes the
//! object ([`crate::controllers::termination`]). A pod not bound to a node, a finished one, or a
//! grace period of 0 is removed at once.

use serde_json::{Value, json};

use super::kinds::KindInfo;
use crate::clock::{Clock, rfc3339};

/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The pod marked for graceful deletion, or `None` when `obj` is removed at once. A pod already
/// being deleted gets the shorter of its deadline and the new one.
pub fn begin(clock: &Clock, kind: &KindInfo, obj: &Value, grace: Option<i64>) -> Option<Value> {
    if !(kind.group.is_empty() && kind.resource == "pods") {
        return None;
    }
    let bound = obj["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        obj["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    let grace = grace
        .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .max(0);
    if !bound || finished || grace == 0 {
        return None;
    }
    let deadline = clock.now() + grace;
    let mut next = obj.clone();
    if let Some(current) = obj["metadata"]["deletionGracePeriodSeconds"].as_i64()
        && !obj["metadata"]["deletionTimestamp"].is_null()
        && current <= grace
    {
        return Some(next);
    }
    next["metadata"]["deletionTimestamp"] = json!(rfc3339(deadline));
    next["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
    Some(next)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::Kinds;

    #[tokio::test(start_paused = true)]
    async fn bound_pods_are_marked_with_their_grace_period() {
        let clock = Clock::at(Duration::from_secs(1_800_000_000));
        let kinds = Kinds::new();
        let pods = kinds.find("", "v1", "pods").expect("pods");
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1",
            "terminationGracePeriodSeconds": 45}, "status": {"phase": "Running"}});
        let marked = begin(&clock, &pods, &pod, None).expect("graceful");
        assert_eq!(
            marked["metadata"]["deletionTimestamp"],
            "2027-01-15T08:00:45Z"
        );
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 45);
        let sooner = begin(&clock, &pods, &marked, Some(5)).expect("shortened");
        assert_eq!(sooner["metadata"]["deletionGracePeriodSeconds"], 5);
        assert_eq!(
            begin(&clock, &pods, &marked, Some(60)),
            Some(marked.clone()),
            "never longer"
        );
        assert!(begin(&clock, &pods, &pod, Some(0)).is_none(), "forced");
        let pending = json!({"metadata": {"name": "p"}, "spec": {}});
        assert!(begin(&clock, &pods, &pending, None).is_none());
        let default = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}});
        assert_eq!(
            begin(&clock, &pods, &default, None).expect("marked")["metadata"]["deletionGracePeriodSeconds"],
            30
        );
    }
}
