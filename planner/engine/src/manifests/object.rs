//! One document or `List` item into a typed [`Object`]: the fast path straight from block YAML
//! for the common kinds, else through a JSON value with errors that carry their field path.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::pods::PriorityRef;
use super::workloads::{self, Controller};
use super::{Error, FieldError, Location, Result, cluster, karpenter, kinds, raw, source};
use crate::model::{
    DaemonSet, Namespace, Node, NodeClaim, NodeClass, NodePool, PersistentVolume,
    PersistentVolumeClaim, Pod, PodDisruptionBudget, PriorityClass, StorageClass,
};

/// One converted object, ready to be added to a builder.
#[derive(Debug)]
pub(super) enum Object {
    Pod(Box<Pod>, PriorityRef),
    Controller(Box<Controller>),
    DaemonSet(Box<DaemonSet>, PriorityRef),
    Pdb(PodDisruptionBudget),
    Node(Box<Node>),
    Namespace(Namespace),
    Pvc(PersistentVolumeClaim, bool),
    Pv(PersistentVolume),
    StorageClass(StorageClass, bool),
    PriorityClass(PriorityClass),
    /// A NodePool, with warnings about fields of older Karpenter APIs that v1 does not read.
    NodePool(Box<NodePool>, Vec<String>),
    /// A NodePool being deleted: it launches nothing (Karpenter ignores it for provisioning).
    DeletingNodePool(String),
    /// A NodeClaim; true when its `spec.expireAfter` is absent (its NodePool's applies).
    NodeClaim(Box<NodeClaim>, bool),
    NodeClass(Box<NodeClass>),
    /// A Karpenter object of an apiVersion older than v1: not read, with this warning.
    Legacy(String),
    /// A kind (or apiVersion) the planner does not use, described for the warning.
    Skipped(String),
    /// A warning about the object before it (an unknown field).
    Warning(String),
}

/// `Kind namespace/name` for messages; namespaced kinds without a namespace are in `default`.
fn object_label(kind: &str, namespace: Option<&str>, name: Option<&str>) -> String {
    let namespaced = kinds::is_namespaced(kind);
    let namespace = namespace
        .filter(|ns| !ns.is_empty())
        .or(namespaced.then_some("default"));
    match (namespace, name.filter(|n| !n.is_empty())) {
        (Some(ns), Some(n)) => format!("{kind} {ns}/{n}"),
        (None, Some(n)) => format!("{kind} {n}"),
        _ => kind.to_string(),
    }
}

/// Converts one document or List item and appends the results to `out`.
pub(super) fn convert_unit(
    unit: &source::Unit<'_>,
    base: &Location,
    source: &str,
    out: &mut Vec<(Object, Location)>,
) -> Result<()> {
    if let Some(text) = unit.yaml_text()
        && let Some(converted) = direct_yaml(text, base)
    {
        let location = converted.1.clone();
        out.push(converted);
        // The fast path reads only what the planner uses: the unknown-field check needs the
        // whole document.
        if let Some((api_version, kind)) = scan_type(text)
            && let Ok(value) = serde_yaml::from_str::<Value>(text)
        {
            unknown_fields(api_version, kind, &value, &location, out);
        }
        return Ok(());
    }
    match source::parse_unit(unit, source)? {
        Some(v) => convert_object(&v, base, &unit.prefix, out),
        None => Ok(()),
    }
}

/// The `apiVersion` and `kind` of a block-style YAML document, when both are plain top-level
/// lines (`kind: Pod`); `None` otherwise.
fn scan_type(text: &str) -> Option<(&str, &str)> {
    fn plain(rest: &str) -> Option<&str> {
        let v = rest.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(v);
        let ok = !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-'));
        ok.then_some(v)
    }
    let (mut api_version, mut kind) = (None, None);
    for line in text.lines() {
        let field = match line.strip_prefix("apiVersion:") {
            Some(rest) => Some((&mut api_version, rest)),
            None => line.strip_prefix("kind:").map(|rest| (&mut kind, rest)),
        };
        // A second apiVersion or kind line is not a simple document: take the general path.
        if let Some((slot, rest)) = field
            && slot.replace(plain(rest)?).is_some()
        {
            return None;
        }
    }
    Some((api_version?, kind?))
}

/// The fast path for the common kinds: YAML straight into the raw struct, without building a
/// JSON value. `None` sends the document down the general path, which gives the same result
/// and reports errors with their field paths (so any failure here simply falls back).
fn direct_yaml(text: &str, base: &Location) -> Option<(Object, Location)> {
    fn read<T: DeserializeOwned>(text: &str) -> Option<T> {
        serde_yaml::from_str(text).ok()
    }
    let (api_version, kind) = scan_type(text)?;
    let label = |meta: &raw::ObjectMeta| {
        object_label(kind, meta.namespace.as_deref(), Some(meta.name.as_str()))
    };
    let (object, label) = match (api_version, kind) {
        ("v1", "Pod") => {
            let raw: raw::Pod = read(text)?;
            let label = label(&raw.metadata);
            let (pod, priority) = workloads::pod_from(raw).ok()?;
            (Object::Pod(Box::new(pod), priority), label)
        }
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet") | ("batch/v1", "Job") => {
            let raw: raw::Workload = read(text)?;
            let label = label(&raw.metadata);
            let c = workloads::controller_from(kind, raw).ok()?;
            (Object::Controller(Box::new(c)), label)
        }
        ("apps/v1", "DaemonSet") => {
            let raw: raw::Workload = read(text)?;
            let label = label(&raw.metadata);
            let (ds, priority) = workloads::daemon_set_from(raw).ok()?;
            (Object::DaemonSet(Box::new(ds), priority), label)
        }
        ("v1", "Node") => {
            let raw: raw::Node = read(text)?;
            let label = label(&raw.metadata);
            (Object::Node(Box::new(cluster::node_from(raw).ok()?)), label)
        }
        ("karpenter.sh/v1", "NodeClaim") => {
            let raw: raw::NodeClaim = read(text)?;
            let label = label(&raw.metadata);
            let (claim, inherits_expiry) = karpenter::node_claim_from(raw).ok()?;
            (Object::NodeClaim(Box::new(claim), inherits_expiry), label)
        }
        ("policy/v1" | "policy/v1beta1", "PodDisruptionBudget") => {
            let raw: raw::Pdb = read(text)?;
            let label = label(&raw.metadata);
            (Object::Pdb(cluster::pdb_from(raw).ok()?), label)
        }
        ("v1", "PersistentVolumeClaim") => {
            let raw: raw::Pvc = read(text)?;
            let label = label(&raw.metadata);
            let (pvc, wants_default) = cluster::pvc_from(raw).ok()?;
            (Object::Pvc(pvc, wants_default), label)
        }
        ("v1", "PersistentVolume") => {
            let raw: raw::Pv = read(text)?;
            let label = label(&raw.metadata);
            (Object::Pv(cluster::pv_from(raw).ok()?), label)
        }
        _ => return None,
    };
    let mut location = base.clone();
    location.object = Some(label);
    Some((object, location))
}

/// Converts one object (a `List` contributes its items) and appends the results to `out`.
/// Pure: the same value gives the same objects, so documents can be converted in parallel.
pub(super) fn convert_object(
    value: &Value,
    base: &Location,
    prefix: &str,
    out: &mut Vec<(Object, Location)>,
) -> Result<()> {
    let field_err = |location: Location, path: String, message: String| Error::Field {
        location,
        path: format!("{prefix}{path}"),
        message,
    };
    let Some(obj) = value.as_object() else {
        let path = prefix.trim_end_matches('.');
        return Err(Error::Field {
            location: base.clone(),
            path: if path.is_empty() {
                "(document)".to_string()
            } else {
                path.to_string()
            },
            message: format!("expected a Kubernetes object, found {}", json_type(value)),
        });
    };
    let text_field = |name: &str| -> Result<&str> {
        match obj.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s),
            Some(other) => Err(field_err(
                base.clone(),
                name.to_string(),
                format!("expected a string, found {}", json_type(other)),
            )),
            None => Err(field_err(
                base.clone(),
                name.to_string(),
                "missing".to_string(),
            )),
        }
    };
    let api_version = text_field("apiVersion")?;
    let kind = text_field("kind")?;
    let meta = obj.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str);
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str);
    let mut location = base.clone();
    location.object = Some(object_label(kind, namespace, name));

    if kind.ends_with("List") && obj.contains_key("items") {
        let Some(items) = obj.get("items").and_then(Value::as_array) else {
            return Err(field_err(
                location,
                "items".into(),
                "expected a list".into(),
            ));
        };
        for (i, item) in items.iter().enumerate() {
            convert_object(item, base, &format!("{prefix}items[{i}]."), out)?;
        }
        return Ok(());
    }

    match convert_kind(api_version, kind, value) {
        Ok(object) => {
            let checked = !matches!(object, Object::Skipped(_) | Object::Legacy(_));
            out.push((object, location.clone()));
            if checked {
                unknown_fields(api_version, kind, value, &location, out);
            }
            Ok(())
        }
        Err(e) => Err(field_err(location, e.path, e.message)),
    }
}

fn convert_kind(api_version: &str, kind: &str, value: &Value) -> Result<Object, FieldError> {
    Ok(match (api_version, kind) {
        ("v1", "Pod") => {
            let (pod, priority) = workloads::pod(value)?;
            Object::Pod(Box::new(pod), priority)
        }
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet") | ("batch/v1", "Job") => {
            Object::Controller(Box::new(workloads::controller(kind, value)?))
        }
        ("apps/v1", "DaemonSet") => {
            let (ds, priority) = workloads::daemon_set(value)?;
            Object::DaemonSet(Box::new(ds), priority)
        }
        ("policy/v1" | "policy/v1beta1", "PodDisruptionBudget") => {
            Object::Pdb(cluster::pdb(value)?)
        }
        ("v1", "Node") => Object::Node(Box::new(cluster::node(value)?)),
        ("v1", "Namespace") => Object::Namespace(cluster::namespace(value)?),
        ("v1", "PersistentVolumeClaim") => {
            let (pvc, wants_default) = cluster::pvc(value)?;
            Object::Pvc(pvc, wants_default)
        }
        ("v1", "PersistentVolume") => Object::Pv(cluster::pv(value)?),
        ("storage.k8s.io/v1", "StorageClass") => {
            let (sc, is_default) = cluster::storage_class(value)?;
            Object::StorageClass(sc, is_default)
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            Object::PriorityClass(cluster::priority_class(value)?)
        }
        ("karpenter.sh/v1", "NodePool") => {
            let (pool, deleting, warnings) = karpenter::node_pool(value)?;
            if deleting {
                Object::DeletingNodePool(pool.name)
            } else {
                Object::NodePool(Box::new(pool), warnings)
            }
        }
        ("karpenter.sh/v1", "NodeClaim") => {
            let (claim, inherits_expiry) = karpenter::node_claim(value)?;
            Object::NodeClaim(Box::new(claim), inherits_expiry)
        }
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
            Object::NodeClass(Box::new(karpenter::node_class(value)?))
        }
        _ if let Some(warning) = karpenter::legacy_kind(api_version, kind) => {
            Object::Legacy(warning)
        }
        _ => {
            let known = kinds::is_known(kind);
            Object::Skipped(if known {
                format!("{api_version} {kind} (unsupported apiVersion)")
            } else {
                format!("{api_version} {kind}")
            })
        }
    })
}

/// Appends a warning for each field of `value` its kind's schema does not have (see
/// `manifests/fields.rs`). Fields of older Karpenter APIs have their own warnings.
fn unknown_fields(
    api_version: &str,
    kind: &str,
    value: &Value,
    location: &Location,
    out: &mut Vec<(Object, Location)>,
) {
    for u in super::fields::unknown(api_version, kind, value) {
        if kind == "NodePool" && karpenter::is_legacy_node_pool_field(&u.path) {
            continue;
        }
        out.push((
            Object::Warning(super::fields::warning(api_version, kind, &u)),
            location.clone(),
        ));
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}
