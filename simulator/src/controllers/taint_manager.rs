//! The NoExecute taint manager of kube-controller-manager (the Kubernetes docs "Taints and
//! Tolerations § Taint based Evictions"): a pod on a node with a `NoExecute` taint it does not
//! tolerate is deleted (gracefully); one whose matching tolerations all carry
//! `tolerationSeconds` is deleted that long after the taint was added (its `timeAdded`, else
//! when this manager first saw it); a toleration without `tolerationSeconds` keeps it for good.
//! DaemonSet pods tolerate the `node.kubernetes.io/*` taints, as the DaemonSet controller adds
//! those tolerations to them.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{Ctx, kind, name_of, namespace_of};
use crate::api::eviction::pod_is_terminal;

/// When each `(node, taint key, taint value)` was first seen, for taints without `timeAdded`.
#[derive(Debug, Default)]
pub(crate) struct TaintManager {
    first_seen: HashMap<(String, String, String), i64>,
}

fn matches(toleration: &Value, taint: &Value) -> bool {
    let key = toleration["key"].as_str().unwrap_or("");
    let exists = toleration["operator"] == "Exists";
    let key_ok = (key.is_empty() && exists) || key == taint["key"].as_str().unwrap_or("");
    let value_ok = exists
        || toleration["value"].as_str().unwrap_or("") == taint["value"].as_str().unwrap_or("");
    let effect = toleration["effect"].as_str().unwrap_or("");
    key_ok && value_ok && (effect.is_empty() || effect == "NoExecute")
}

/// How long `pod` may stay on a node with `taint`: `Some(None)` for good, `Some(Some(s))` for
/// `s` seconds, `None` not at all.
fn tolerated_for(pod: &Value, taint: &Value) -> Option<Option<i64>> {
    let daemon = pod["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|os| os.iter().any(|o| o["kind"] == "DaemonSet"));
    if daemon
        && taint["key"]
            .as_str()
            .is_some_and(|k| k.starts_with("node.kubernetes.io/"))
    {
        return Some(None);
    }
    let mut limit: Option<Option<i64>> = None;
    for t in pod["spec"]["tolerations"].as_array().into_iter().flatten() {
        if !matches(t, taint) {
            continue;
        }
        match t["tolerationSeconds"].as_i64() {
            None => return Some(None),
            Some(s) => {
                let s = s.max(0);
                limit = Some(Some(limit.flatten().map_or(s, |l: i64| l.min(s))));
            }
        }
    }
    limit
}

// === impl TaintManager ===

impl TaintManager {
    /// Evicts the pods whose time on a NoExecute-tainted node is up; returns when the next
    /// one's will be.
    pub(crate) fn reconcile(&mut self, ctx: &Ctx) -> Option<Instant> {
        let store = &ctx.store;
        let (nodes_kind, pods_kind) = (kind(store, "", "nodes")?, kind(store, "", "pods")?);
        let now = store.clock().now();
        let mut seen = HashMap::new();
        let mut tainted: HashMap<String, Vec<(Value, i64)>> = HashMap::new();
        for n in store.all(&nodes_kind.key()) {
            for t in n["spec"]["taints"].as_array().into_iter().flatten() {
                if t["effect"] != "NoExecute" {
                    continue;
                }
                let id = (
                    name_of(&n).to_string(),
                    t["key"].as_str().unwrap_or("").to_string(),
                    t["value"].as_str().unwrap_or("").to_string(),
                );
                let first = *self.first_seen.get(&id).unwrap_or(&now);
                let added = t["timeAdded"]
                    .as_str()
                    .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                    .map_or(first, |d| d.timestamp());
                seen.insert(id, first);
                tainted
                    .entry(name_of(&n).to_string())
                    .or_default()
                    .push((t.clone(), added));
            }
        }
        self.first_seen = seen;
        if tainted.is_empty() {
            return None;
        }
        let mut wake: Option<Instant> = None;
        for p in store.all(&pods_kind.key()) {
            let Some(taints) = p["spec"]["nodeName"].as_str().and_then(|n| tainted.get(n)) else {
                continue;
            };
            if pod_is_terminal(&p) || !p["metadata"]["deletionTimestamp"].is_null() {
                continue;
            }
            let mut evict_at: Option<i64> = None;
            for (taint, added) in taints {
                let at = match tolerated_for(&p, taint) {
                    Some(None) => continue,
                    Some(Some(s)) => added + s,
                    None => now,
                };
                evict_at = Some(evict_at.map_or(at, |e| e.min(at)));
            }
            match evict_at {
                Some(at) if at <= now => {
                    tracing::info!(pod = %name_of(&p), node = %p["spec"]["nodeName"], "Evicting a pod that does not tolerate a NoExecute taint");
                    let _ = store.delete(&pods_kind, namespace_of(&p), name_of(&p), None);
                }
                Some(at) => {
                    let t = Instant::now() + Duration::from_secs((at - now) as u64);
                    wake = Some(wake.map_or(t, |w| w.min(t)));
                }
                None => {}
            }
        }
        wake
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tolerations_keep_a_pod_for_good_for_a_while_or_not_at_all() {
        let taint = json!({"key": "example.com/maintenance", "effect": "NoExecute"});
        let pod = |tolerations: Value| json!({"spec": {"tolerations": tolerations}});
        assert_eq!(tolerated_for(&pod(json!([])), &taint), None);
        assert_eq!(
            tolerated_for(
                &pod(json!([{"key": "example.com/maintenance", "operator": "Exists"}])),
                &taint
            ),
            Some(None)
        );
        assert_eq!(
            tolerated_for(
                &pod(
                    json!([{"key": "example.com/maintenance", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 60}])
                ),
                &taint
            ),
            Some(Some(60))
        );
        assert_eq!(
            tolerated_for(
                &pod(json!([{"key": "other", "operator": "Exists"}])),
                &taint
            ),
            None
        );
        let ds = json!({"metadata": {"ownerReferences": [{"kind": "DaemonSet"}]}});
        assert_eq!(
            tolerated_for(
                &ds,
                &json!({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})
            ),
            Some(None)
        );
    }
}
