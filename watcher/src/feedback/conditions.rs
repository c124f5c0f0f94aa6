//! Status conditions as Kubernetes' `meta.SetStatusCondition` writes them, and the one status
//! write, shared by every status the watcher writes (NodeClaims, EC2NodeClasses, NodeOverlays,
//! CapacityBuffers).

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// Reads `name`, asks `next` for the status to merge into it (given the object as read and the
/// time now; `None`: nothing to change) and writes that to `/status` as a merge patch carrying
/// the read's `resourceVersion`, so a write that raced another is a 409 and the next reconcile
/// reads again. Returns whether it wrote.
pub(super) async fn patch_status(
    api: &Api<DynamicObject>,
    name: &str,
    next: impl FnOnce(&DynamicObject, &str) -> Option<Value>,
) -> Result<bool, kube::Error> {
    let current = api.get(name).await?;
    let Some(status) = next(&current, &super::status::jiff_now()) else {
        return Ok(false);
    };
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "status": status,
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(true)
}

/// [`patch_status`] of `status.conditions`: `merge` gets the object's conditions, its
/// generation and the time now, and returns the conditions to write (`None`: unchanged).
pub(super) async fn patch_conditions(
    api: &Api<DynamicObject>,
    name: &str,
    merge: impl FnOnce(&[Value], Option<i64>, &str) -> Option<Vec<Value>>,
) -> Result<bool, kube::Error> {
    patch_status(api, name, |current, now| {
        let conditions = merge(&conditions_of(current), current.metadata.generation, now)?;
        Some(json!({ "conditions": conditions }))
    })
    .await
}

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
