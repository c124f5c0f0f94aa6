//! One Event store under both API groups, as the API server keeps it: an `events.k8s.io/v1`
//! Event is also served as the `v1` Event it converts to (Kubernetes'
//! `pkg/apis/events/v1/conversion.go`: `regarding` → `involvedObject`, `note` → `message`,
//! `reportingController` → `source.component` and `reportingComponent`, `series` and the
//! `deprecated*` fields → `count`, `firstTimestamp`, `lastTimestamp`), so that `kubectl get
//! events` and `kubectl describe` show Events written through the new API (kube-rs's
//! `Recorder`, client-go's `events` package).
//!
//! The store mirrors each write of an `events.k8s.io` Event into the core group
//! ([`super::Store`]'s commit); writes through the core group stay there.

use serde_json::{Map, Value, json};

use super::kinds::ResKey;

/// True for the `events.k8s.io` Events.
pub fn is_new_api(res: &ResKey) -> bool {
    res.group == "events.k8s.io" && res.resource == "events"
}

/// The core group's Events.
pub fn core() -> ResKey {
    ResKey::new("", "events")
}

/// The `v1` Event an `events.k8s.io/v1` Event is served as.
pub fn to_core(e: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    let mut meta = e["metadata"].clone();
    if let Some(m) = meta.as_object_mut() {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    out.insert("metadata".into(), meta);
    let mut put = |k: &str, v: &Value| {
        if !v.is_null() {
            out.insert(k.to_string(), v.clone());
        }
    };
    put("involvedObject", &e["regarding"]);
    put("related", &e["related"]);
    put("message", &e["note"]);
    put("reason", &e["reason"]);
    put("type", &e["type"]);
    put("action", &e["action"]);
    put("eventTime", &e["eventTime"]);
    put("reportingComponent", &e["reportingController"]);
    put("reportingInstance", &e["reportingInstance"]);
    put("series", &e["series"]);
    let source = if e["deprecatedSource"].is_object() {
        e["deprecatedSource"].clone()
    } else {
        let mut s = Map::new();
        if let Some(c) = e["reportingController"].as_str() {
            s.insert("component".into(), json!(c));
        }
        if let Some(h) = e["reportingInstance"].as_str() {
            s.insert("host".into(), json!(h));
        }
        Value::Object(s)
    };
    put("source", &source);
    let first = first_of(&[&e["deprecatedFirstTimestamp"], &e["eventTime"]]);
    let last = first_of(&[
        &e["series"]["lastObservedTime"],
        &e["deprecatedLastTimestamp"],
        &e["eventTime"],
    ]);
    put("firstTimestamp", &first);
    put("lastTimestamp", &last);
    let count = e["series"]["count"]
        .as_i64()
        .or_else(|| e["deprecatedCount"].as_i64())
        .unwrap_or(1);
    put("count", &json!(count));
    Value::Object(out)
}

/// The first non-null value, as a whole-second timestamp (`firstTimestamp` and
/// `lastTimestamp` have no fractions).
fn first_of(vs: &[&Value]) -> Value {
    vs.iter()
        .find_map(|v| v.as_str())
        .map(|s| match (s.split_once('.'), s.ends_with('Z')) {
            (Some((whole, _)), true) => json!(format!("{whole}Z")),
            _ => json!(s),
        })
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_k8s_io_event_converts_like_the_api_server() {
        let e = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web-1.abc", "namespace": "default", "resourceVersion": "9"},
            "regarding": {"kind": "Pod", "name": "web-1", "namespace": "default", "uid": "u1"},
            "note": "Pod should schedule on: nodeclaim/default-x2b4k",
            "reason": "Nominated", "type": "Normal", "action": "Nominate",
            "eventTime": "2026-01-01T00:00:00.123456Z",
            "reportingController": "dovetail-watcher", "reportingInstance": "w-1",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T00:01:00.5Z"}
        });
        let c = to_core(&e);
        assert_eq!(c["apiVersion"], "v1");
        assert_eq!(c["involvedObject"]["name"], "web-1");
        assert_eq!(c["message"], e["note"]);
        assert_eq!(c["source"]["component"], "dovetail-watcher");
        assert_eq!(c["reportingComponent"], "dovetail-watcher");
        assert_eq!(c["count"], 3);
        assert_eq!(c["firstTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(c["lastTimestamp"], "2026-01-01T00:01:00Z");
        assert!(c["metadata"]["resourceVersion"].is_null());
        let once = to_core(&json!({"metadata": {"name": "x"}, "note": "n"}));
        assert_eq!(once["count"], 1);
    }
}
