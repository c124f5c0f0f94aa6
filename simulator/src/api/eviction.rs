//! PodDisruptionBudget arithmetic, shared by the eviction subresource and the PDB status
//! controller: how many matching pods are expected and healthy, how many must stay healthy, and
//! so how many disruptions are allowed now.

use serde_json::Value;

/// The state of one PodDisruptionBudget against the current pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Matching pods that are not terminal and not being deleted.
    pub expected: i64,
    /// Matching pods that are Running and Ready.
    pub healthy: i64,
    /// Pods that must stay healthy.
    pub desired: i64,
    /// `healthy - desired`, at least 0.
    pub allowed: i64,
}

/// True when a `metav1.LabelSelector` (as JSON) selects an object with `labels`. A null
/// selector selects nothing; an empty one selects everything (policy/v1 semantics).
pub fn selector_matches(selector: &Value, labels: &Value) -> bool {
    if !selector.is_object() {
        return false;
    }
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| get(k) == v.as_str()));
    let exprs_ok = selector["matchExpressions"].as_array().is_none_or(|es| {
        es.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let got = get(key);
            match e["operator"].as_str().unwrap_or("") {
                "In" => got.is_some_and(|g| values.contains(&g)),
                "NotIn" => got.is_none_or(|g| !values.contains(&g)),
                "Exists" => got.is_some(),
                "DoesNotExist" => got.is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}

/// True when a pod is Running, has condition Ready=True and is not being deleted.
pub fn pod_is_healthy(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
        && pod["metadata"]["deletionTimestamp"].is_null()
        && pod["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// True when a pod has finished (Succeeded or Failed).
pub fn pod_is_terminal(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// Whether `pdb` selects `pod` (same namespace, selector matches).
pub fn pdb_selects(pdb: &Value, pod: &Value) -> bool {
    pdb["metadata"]["namespace"] == pod["metadata"]["namespace"]
        && selector_matches(&pdb["spec"]["selector"], &pod["metadata"]["labels"])
}

/// Computes the budget of `pdb` over `pods` (all pods; non-matching ones are ignored).
pub fn budget(pdb: &Value, pods: &[Value]) -> Budget {
    let matching: Vec<&Value> = pods
        .iter()
        .filter(|p| pdb_selects(pdb, p))
        .filter(|p| !pod_is_terminal(p) && p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    let expected = matching.len() as i64;
    let healthy = matching.iter().filter(|p| pod_is_healthy(p)).count() as i64;
    let spec = &pdb["spec"];
    let desired = if let Some(v) = int_or_percent(&spec["minAvailable"], expected) {
        v
    } else if let Some(v) = int_or_percent(&spec["maxUnavailable"], expected) {
        (expected - v).max(0)
    } else {
        0
    };
    Budget {
        expected,
        healthy,
        desired,
        allowed: (healthy - desired).max(0),
    }
}

/// An IntOrString: an integer, or a percentage of `total` rounded up.
fn int_or_percent(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => match s.strip_suffix('%') {
            Some(p) => p.trim().parse::<i64>().ok().map(|p| (p * total + 99) / 100),
            None => s.trim().parse().ok(),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
    }

    #[test]
    fn min_available_and_max_unavailable() {
        let pods = vec![pod("a", true), pod("b", true), pod("c", false)];
        let pdb = |spec: Value| json!({"metadata": {"namespace": "default"}, "spec": spec});
        let b = budget(
            &pdb(json!({"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2})),
            &pods,
        );
        assert_eq!(
            b,
            Budget {
                expected: 3,
                healthy: 2,
                desired: 2,
                allowed: 0
            }
        );
        let b = budget(
            &pdb(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1})),
            &pods,
        );
        assert_eq!((b.desired, b.allowed), (2, 0));
        let b = budget(&pdb(json!({"selector": {}, "minAvailable": "50%"})), &pods);
        assert_eq!((b.desired, b.allowed), (2, 0));
        let b = budget(
            &pdb(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "100%"})),
            &pods,
        );
        assert_eq!((b.desired, b.allowed), (0, 2));
        let b = budget(
            &pdb(json!({"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 1})),
            &pods,
        );
        assert_eq!(b.expected, 0);
    }
}
