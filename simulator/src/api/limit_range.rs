//! LimitRange admission, as the API server's `LimitRanger` plugin applies it to a pod being
//! created (the Kubernetes docs "Limit Ranges" and "Configure Default CPU/Memory Requests and
//! Limits for a Namespace"): after the pod's own defaulting (a request missing where the
//! container sets a limit is that limit), for each `type: Container` limit of the namespace's
//! LimitRanges, a container without a limit for a resource gets the `default` one, and one
//! without a request gets the `defaultRequest` (which itself defaults to `default`, and
//! `default` to `max`). Validation against `min`/`max` is not simulated.

use serde_json::{Map, Value};

/// Defaults the containers of `pod` from `ranges` (the LimitRange objects of its namespace).
pub fn admit(pod: &mut Value, ranges: &[Value]) {
    let mut defaults = Map::new();
    let mut default_requests = Map::new();
    for r in ranges {
        for l in r["spec"]["limits"].as_array().into_iter().flatten() {
            if l["type"].as_str().unwrap_or("Container") != "Container" {
                continue;
            }
            let default = merged(&l["default"], &l["max"]);
            let request = merged(&l["defaultRequest"], &Value::Object(default.clone()));
            for (k, v) in default {
                defaults.entry(k).or_insert(v);
            }
            for (k, v) in request {
                default_requests.entry(k).or_insert(v);
            }
        }
    }
    for list in ["initContainers", "containers"] {
        let Some(cs) = pod
            .get_mut("spec")
            .and_then(|s| s.get_mut(list))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in cs {
            let resources = &mut c["resources"];
            // The pod's own defaulting (a request missing where a limit is set is the limit)
            // comes before admission; then the namespace's defaults fill what is left.
            let own = resources["limits"].clone();
            if let Some(l) = own.as_object() {
                fill(&mut resources["requests"], l);
            }
            fill(&mut resources["limits"], &defaults);
            fill(&mut resources["requests"], &default_requests);
            let limits = resources["limits"].clone();
            if let Some(l) = limits.as_object() {
                fill(&mut resources["requests"], l);
            }
            if let Some(m) = resources.as_object_mut() {
                m.retain(|k, v| {
                    !matches!(k.as_str(), "limits" | "requests")
                        || v.as_object().is_some_and(|o| !o.is_empty())
                });
            }
            if c["resources"].as_object().is_some_and(Map::is_empty)
                && let Some(m) = c.as_object_mut()
            {
                m.remove("resources");
            }
        }
    }
}

/// `a`'s entries plus `b`'s for keys `a` lacks.
fn merged(a: &Value, b: &Value) -> Map<String, Value> {
    let mut out = a.as_object().cloned().unwrap_or_default();
    for (k, v) in b.as_object().into_iter().flatten() {
        out.entry(k.clone()).or_insert_with(|| v.clone());
    }
    out
}

/// Adds `from`'s entries missing in `target` (an object, created when null).
fn fill(target: &mut Value, from: &Map<String, Value>) {
    if from.is_empty() {
        return;
    }
    if target.is_null() {
        *target = Value::Object(Map::new());
    }
    if let Some(t) = target.as_object_mut() {
        for (k, v) in from {
            t.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The docs' example: a default of 512Mi and a default request of 256Mi for memory.
    #[test]
    fn containers_get_the_namespace_defaults() {
        let range = json!({"spec": {"limits": [{
            "type": "Container",
            "default": {"memory": "512Mi", "cpu": "1"},
            "defaultRequest": {"memory": "256Mi"}
        }]}});
        let mut pod = json!({"spec": {"containers": [
            {"name": "none"},
            {"name": "own", "resources": {"requests": {"memory": "1Gi"}}},
            {"name": "limit-only", "resources": {"limits": {"cpu": "2"}}}
        ]}});
        admit(&mut pod, std::slice::from_ref(&range));
        let c = &pod["spec"]["containers"];
        assert_eq!(
            c[0]["resources"]["limits"],
            json!({"memory": "512Mi", "cpu": "1"})
        );
        assert_eq!(
            c[0]["resources"]["requests"],
            json!({"memory": "256Mi", "cpu": "1"}),
            "defaultRequest defaults to default"
        );
        assert_eq!(c[1]["resources"]["requests"]["memory"], "1Gi");
        assert_eq!(c[2]["resources"]["limits"]["cpu"], "2");
        assert_eq!(
            c[2]["resources"]["requests"]["cpu"], "2",
            "a request defaults to its limit"
        );
        let mut untouched = json!({"spec": {"containers": [{"name": "c"}]}});
        admit(&mut untouched, &[]);
        assert_eq!(untouched, json!({"spec": {"containers": [{"name": "c"}]}}));
    }
}
