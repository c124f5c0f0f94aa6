//! Server-side printing: `meta.k8s.io/v1` Tables for clients that ask for them
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), which is how `kubectl get` prints.
//!
//! The columns are the API server's: pods, nodes and deployments as its built-in printers lay
//! them out (columns with `priority: 1` show only with `-o wide`), custom resources from their
//! CRD's `additionalPrinterColumns`, everything else NAME and AGE.

pub mod jsonpath;

use std::time::Duration;

use serde_json::{Value, json};

use super::kinds::KindInfo;
use super::store::Store;

/// Whether an `Accept` header asks for a `meta.k8s.io` Table (v1 or v1beta1).
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    })
}

/// Which object each row carries (`includeObject`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// A PartialObjectMetadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

// === impl IncludeObject ===

impl IncludeObject {
    /// Parses the query parameter's value; unknown values mean the default.
    pub fn parse(v: &str) -> Self {
        match v {
            "None" => Self::None,
            "Object" => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// Makes the cells of one row from an object.
type RowFn = Box<dyn Fn(&Value) -> Vec<Value>>;

struct Column {
    name: String,
    kind: &'static str,
    format: &'static str,
    description: String,
    priority: i64,
}

fn col(name: &str, kind: &'static str, priority: i64, description: &str) -> Column {
    Column {
        name: name.into(),
        kind,
        format: if name == "Name" { "name" } else { "" },
        description: description.into(),
        priority,
    }
}

/// Go's `duration.HumanDuration`, which the API server prints ages with.
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of an RFC 3339 timestamp at `now` (seconds since the epoch), as the API server
/// prints it; `<unknown>` without a timestamp, `<invalid>` for one in the future.
fn age(timestamp: &Value, now: Duration) -> Value {
    let Some(ts) = timestamp
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    else {
        return json!("<unknown>");
    };
    let now = now.as_secs() as i64;
    let diff = now - ts.timestamp();
    if diff < -1 {
        return json!("<invalid>");
    }
    json!(human_duration(Duration::from_secs(diff.max(0) as u64)))
}

fn str_or_none(v: &Value) -> Value {
    match v.as_str() {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!("<none>"),
    }
}

/// The STATUS column of a pod, as `kubectl get pods` prints it (the kubelet's reason, a
/// waiting or terminated container's reason, `Terminating`, else the phase).
fn pod_status(pod: &Value) -> String {
    let status = &pod["status"];
    let mut reason = status["phase"].as_str().unwrap_or("Pending").to_string();
    if let Some(r) = status["reason"].as_str().filter(|r| !r.is_empty()) {
        reason = r.to_string();
    }
    let gated = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["type"] == "PodScheduled"
                && c["status"] == "False"
                && c["reason"] == "SchedulingGated"
        });
    if gated {
        reason = "SchedulingGated".into();
    }
    let mut has_running = false;
    for c in status["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
    {
        let state = &c["state"];
        if let Some(r) = state["waiting"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            reason = r.to_string();
        } else if state["terminated"].is_object() {
            reason = match state["terminated"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                Some(r) => r.to_string(),
                None => match state["terminated"]["signal"].as_i64().filter(|s| *s != 0) {
                    Some(s) => format!("Signal:{s}"),
                    None => format!(
                        "ExitCode:{}",
                        state["terminated"]["exitCode"].as_i64().unwrap_or(0)
                    ),
                },
            };
        } else if state["running"].is_object() && c["ready"] == true {
            has_running = true;
        }
    }
    if reason == "Completed" && has_running {
        reason = "Running".into();
    }
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        reason = if status["reason"] == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

fn pod_row(pod: &Value, now: Duration) -> Vec<Value> {
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let statuses = pod["status"]["containerStatuses"].as_array();
    let ready = statuses
        .into_iter()
        .flatten()
        .filter(|c| c["ready"] == true)
        .count();
    let restarts: i64 = statuses
        .into_iter()
        .flatten()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let gates = pod["spec"]["readinessGates"].as_array().map_or(0, Vec::len);
    let gates = if gates == 0 {
        json!("<none>")
    } else {
        let conds = pod["status"]["conditions"].as_array();
        let met = pod["spec"]["readinessGates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|g| {
                conds
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        json!(format!("{met}/{gates}"))
    };
    vec![
        pod["metadata"]["name"].clone(),
        json!(format!("{ready}/{total}")),
        json!(pod_status(pod)),
        json!(restarts.to_string()),
        age(&pod["metadata"]["creationTimestamp"], now),
        str_or_none(&pod["status"]["podIP"]),
        str_or_none(&pod["spec"]["nodeName"]),
        str_or_none(&pod["status"]["nominatedNodeName"]),
        gates,
    ]
}

fn node_row(node: &Value, now: Duration) -> Vec<Value> {
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    let mut status = match ready.and_then(|c| c["status"].as_str()) {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if node["spec"]["unschedulable"] == true {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                Some(role.to_string()).filter(|r| !r.is_empty())
            } else if k == "kubernetes.io/role" {
                v.as_str().map(String::from).filter(|r| !r.is_empty())
            } else {
                None
            }
        })
        .collect();
    roles.sort();
    roles.dedup();
    let address = |t: &str| {
        node["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == t)
            .map_or(json!("<none>"), |a| str_or_none(&a["address"]))
    };
    let info = &node["status"]["nodeInfo"];
    vec![
        node["metadata"]["name"].clone(),
        json!(status),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        age(&node["metadata"]["creationTimestamp"], now),
        json!(info["kubeletVersion"].as_str().unwrap_or("")),
        address("InternalIP"),
        address("ExternalIP"),
        str_or_none(&info["osImage"]),
        str_or_none(&info["kernelVersion"]),
        str_or_none(&info["containerRuntimeVersion"]),
    ]
}

/// A core Event's row as the API server's printer makes it (`kubectl get events`).
fn event_row(e: &Value, now: Duration) -> Vec<Value> {
    let last = [&e["lastTimestamp"], &e["eventTime"], &e["firstTimestamp"]]
        .into_iter()
        .find(|v| v.is_string())
        .cloned()
        .unwrap_or(Value::Null);
    let o = &e["involvedObject"];
    let object = format!(
        "{}/{}",
        o["kind"].as_str().unwrap_or_default().to_lowercase(),
        o["name"].as_str().unwrap_or_default()
    );
    vec![
        age(&last, now),
        str_or_none(&e["type"]),
        str_or_none(&e["reason"]),
        json!(object),
        str_or_none(&e["message"]),
    ]
}

fn deployment_row(d: &Value, now: Duration) -> Vec<Value> {
    let int = |v: &Value| json!(v.as_i64().unwrap_or(0));
    let containers = d["spec"]["template"]["spec"]["containers"].as_array();
    let join = |field: &str| {
        json!(
            containers
                .into_iter()
                .flatten()
                .filter_map(|c| c[field].as_str())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let selector = d["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    vec![
        d["metadata"]["name"].clone(),
        json!(format!(
            "{}/{}",
            d["status"]["readyReplicas"].as_i64().unwrap_or(0),
            d["spec"]["replicas"].as_i64().unwrap_or(1)
        )),
        int(&d["status"]["updatedReplicas"]),
        int(&d["status"]["availableReplicas"]),
        age(&d["metadata"]["creationTimestamp"], now),
        join("name"),
        join("image"),
        json!(if selector.is_empty() {
            "<none>".to_string()
        } else {
            selector
        }),
    ]
}

/// A printer column of a CRD: a JSONPath into the object and the cell type.
struct CrdColumn {
    path: Option<jsonpath::Path>,
    kind: &'static str,
}

fn crd_columns(store: &Store, kind: &KindInfo) -> Option<(Vec<Column>, Vec<CrdColumn>)> {
    let crds = store
        .kinds()
        .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    let crd = store.get(&crds, "", &kind.qualified()).ok()?;
    let version = crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == kind.version.as_str())?;
    let mut cols = vec![col(
        "Name",
        "string",
        0,
        "Name must be unique within a namespace.",
    )];
    let mut paths = Vec::new();
    let printer = version["additionalPrinterColumns"].as_array();
    if printer.is_none_or(Vec::is_empty) {
        cols.push(col("Age", "date", 0, "Creation timestamp of the object."));
        paths.push(CrdColumn {
            path: jsonpath::Path::parse(".metadata.creationTimestamp").ok(),
            kind: "date",
        });
        return Some((cols, paths));
    }
    for c in printer.into_iter().flatten() {
        let kind = match c["type"].as_str() {
            Some("integer") => "integer",
            Some("number") => "number",
            Some("boolean") => "boolean",
            Some("date") => "date",
            _ => "string",
        };
        cols.push(Column {
            name: c["name"].as_str().unwrap_or_default().to_string(),
            kind,
            format: "",
            description: c["description"].as_str().unwrap_or_default().to_string(),
            priority: c["priority"].as_i64().unwrap_or(0),
        });
        paths.push(CrdColumn {
            path: c["jsonPath"]
                .as_str()
                .and_then(|p| jsonpath::Path::parse(p).ok()),
            kind,
        });
    }
    Some((cols, paths))
}

/// A cell of a CRD printer column, as the API server's CRD table convertor makes it: strings
/// printed as text, numbers and booleans typed, dates as ages, missing values null.
fn crd_cell(obj: &Value, c: &CrdColumn, now: Duration) -> Value {
    let Some(v) = c.path.as_ref().and_then(|p| p.first(obj)) else {
        return Value::Null;
    };
    match c.kind {
        "string" => match v {
            Value::String(s) => json!(s),
            Value::Null => Value::Null,
            other => json!(other.to_string()),
        },
        "integer" => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        "number" => v.as_f64().map_or(Value::Null, |f| json!(f)),
        "boolean" => v.as_bool().map_or(Value::Null, |b| json!(b)),
        "date" => age(v, now),
        _ => Value::Null,
    }
}

fn row_object(obj: &Value, include: IncludeObject) -> Option<Value> {
    match include {
        IncludeObject::None => None,
        IncludeObject::Object => Some(obj.clone()),
        IncludeObject::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        })),
    }
}

/// The Table of `objects` of `kind` (a list's items, or one object).
pub fn table(
    store: &Store,
    kind: &KindInfo,
    objects: &[Value],
    list_meta: Value,
    include: IncludeObject,
) -> Value {
    let now = store.clock().since_epoch();
    let name_col = || {
        col(
            "Name",
            "string",
            0,
            "Name must be unique within a namespace.",
        )
    };
    let age_col = || {
        col(
            "Age",
            "string",
            0,
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        )
    };
    let builtin = kind.group.is_empty()
        || kind.group.ends_with(".k8s.io")
        || matches!(kind.group.as_str(), "apps" | "policy");
    let (columns, cells): (Vec<Column>, RowFn) = match (kind.group.as_str(), kind.resource.as_str())
    {
        ("", "pods") => (
            vec![
                name_col(),
                col(
                    "Ready",
                    "string",
                    0,
                    "The aggregate readiness state of this pod for accepting traffic.",
                ),
                col(
                    "Status",
                    "string",
                    0,
                    "The aggregate status of the containers in this pod.",
                ),
                col(
                    "Restarts",
                    "string",
                    0,
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                ),
                age_col(),
                col(
                    "IP",
                    "string",
                    1,
                    "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                ),
                col(
                    "Node",
                    "string",
                    1,
                    "NodeName is a request to schedule this pod onto a specific node.",
                ),
                col(
                    "Nominated Node",
                    "string",
                    1,
                    "nominatedNodeName is set only when this pod preempts other pods on the node.",
                ),
                col(
                    "Readiness Gates",
                    "string",
                    1,
                    "If specified, all readiness gates will be evaluated for pod readiness.",
                ),
            ],
            Box::new(move |o| pod_row(o, now)),
        ),
        ("", "events") => (
            vec![
                col(
                    "Last Seen",
                    "string",
                    0,
                    "Time the event was last observed.",
                ),
                col("Type", "string", 0, "Type of this event (Normal, Warning)."),
                col("Reason", "string", 0, "Why the action was taken."),
                col("Object", "string", 0, "The object this Event is about."),
                col(
                    "Message",
                    "string",
                    0,
                    "A human-readable description of the status of this operation.",
                ),
            ],
            Box::new(move |o| event_row(o, now)),
        ),
        ("", "nodes") => (
            vec![
                name_col(),
                col("Status", "string", 0, "The status of the node"),
                col("Roles", "string", 0, "The roles of the node"),
                age_col(),
                col(
                    "Version",
                    "string",
                    0,
                    "Kubelet Version reported by the node.",
                ),
                col(
                    "Internal-IP",
                    "string",
                    1,
                    "List of addresses reachable to the node. Queried from cloud provider, if available.",
                ),
                col(
                    "External-IP",
                    "string",
                    1,
                    "List of addresses reachable to the node. Queried from cloud provider, if available.",
                ),
                col(
                    "OS-Image",
                    "string",
                    1,
                    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
                ),
                col(
                    "Kernel-Version",
                    "string",
                    1,
                    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
                ),
                col(
                    "Container-Runtime",
                    "string",
                    1,
                    "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
                ),
            ],
            Box::new(move |o| node_row(o, now)),
        ),
        ("apps", "deployments") => (
            vec![
                name_col(),
                col("Ready", "string", 0, "Number of the pod with ready state"),
                col(
                    "Up-to-date",
                    "integer",
                    0,
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                ),
                col(
                    "Available",
                    "integer",
                    0,
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                ),
                age_col(),
                col(
                    "Containers",
                    "string",
                    1,
                    "Names of each container in the template.",
                ),
                col(
                    "Images",
                    "string",
                    1,
                    "Images referenced by each container in the template.",
                ),
                col(
                    "Selector",
                    "string",
                    1,
                    "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
                ),
            ],
            Box::new(move |o| deployment_row(o, now)),
        ),
        _ => match crd_columns(store, kind).filter(|_| !builtin) {
            Some((cols, paths)) => (
                cols,
                Box::new(move |o| {
                    let mut row = vec![o["metadata"]["name"].clone()];
                    row.extend(paths.iter().map(|c| crd_cell(o, c, now)));
                    row
                }),
            ),
            None => (
                vec![name_col(), age_col()],
                Box::new(move |o| {
                    vec![
                        o["metadata"]["name"].clone(),
                        age(&o["metadata"]["creationTimestamp"], now),
                    ]
                }),
            ),
        },
    };
    let column_definitions: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(o)});
            if let Some(obj) = row_object(o, include) {
                row["object"] = obj;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_print_as_kubectl_prints_them() {
        let cases = [
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 300, "3h5m"),
            (30 * 3600, "30h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::from_secs(secs)), want, "{secs}s");
        }
    }

    #[test]
    fn accept_headers_asking_for_tables_are_recognised() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
        assert!(!wants_table(
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        ));
    }

    #[test]
    fn pod_status_names_the_reason_kubectl_shows() {
        let running = json!({"status": {"phase": "Running", "containerStatuses": [{"ready": true, "state": {"running": {}}}]}});
        assert_eq!(pod_status(&running), "Running");
        let waiting = json!({"status": {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        assert_eq!(pod_status(&waiting), "ContainerCreating");
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}});
        assert_eq!(pod_status(&deleting), "Terminating");
        let failed = json!({"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}});
        assert_eq!(pod_status(&failed), "ExitCode:3");
    }
}
