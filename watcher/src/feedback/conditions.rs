//! Status conditions as Kubernetes' `meta.SetStatusCondition` writes them, shared by every
//! status the watcher writes (NodeClaims, EC2NodeClasses, CapacityBuffers).

use kube::api::DynamicObject;
use serde_json::{Value, json};

/// The condition `type_`=`status` with its reason and message. Its `lastTransitionTime` is the
/// one in `current` while the condition keeps that status, else `now`; `observedGeneration` is
/// the object's generation when known.
pub(super) fn condition(
    current: &[Value],
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &str,
) -> Value {
    let since = current
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == status)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Value::String(now.to_string()));
    let mut c = json!({
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    });
    if let Some(g) = generation {
        c["observedGeneration"] = json!(g);
    }
    c
}

/// `status.conditions` of an object (empty when it has none).
pub(super) fn conditions_of(o: &DynamicObject) -> Vec<Value> {
    o.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}
