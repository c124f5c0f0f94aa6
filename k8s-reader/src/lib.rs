//! dovetail's one reader of Kubernetes objects: Kubernetes objects (k8s-openapi types) and
//! Karpenter objects (as JSON) into the compact `dovetail.v1` cluster messages, one object at a
//! time.
//!
//! The watcher converts the objects it receives from the API through it, so every planner
//! reads the cluster as this crate reads it. Kubernetes' rules that shape what the planner
//! sees are written here once: a pod's effective requests, Karpenter's CRD defaults, which
//! annotations the planner reads, resource quantities parsed once where they are read (the
//! messages carry them in milli-units). No kube
//! client or runtime, no planner engine: only `proto`, `common` and k8s-openapi.
//!
//! Only what the planner reads is kept; everything else of an object is dropped as soon as it
//! arrives, which is what keeps a 100,000-pod mirror small. A conversion that fails names the
//! field at fault (e.g. `spec.containers[0].resources.requests.cpu: invalid quantity "lots"`).

pub mod buffer;
mod cluster;
pub mod dra;
mod karpenter;
mod pod;
pub mod quantity;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use proto::v1 as pb;
use thiserror::Error;

pub use cluster::{PriorityClasses, namespace, node, pdb, priority_class, pv, pvc, storage_class};
pub use karpenter::{
    DEFAULT_EXPIRE_AFTER, node_claim, node_class, node_overlay, node_pool, parse_duration,
};
pub use pod::{daemon_set, pod};

/// An object that cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A field holds a value the planner cannot use.
    #[error("{field}: {message}")]
    Field {
        /// Path of the field in the object, e.g. `spec.containers[0].resources.requests.cpu`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn field_err(field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::Field {
        field: field.into(),
        message: message.into(),
    }
}

/// Seconds since the epoch of a Kubernetes time.
fn seconds(t: &meta::Time) -> i64 {
    t.0.as_second()
}

fn uid(m: &meta::ObjectMeta) -> String {
    m.uid.clone().unwrap_or_default()
}

fn name(m: &meta::ObjectMeta) -> String {
    m.name.clone().unwrap_or_default()
}

fn labels(m: &meta::ObjectMeta) -> BTreeMap<String, String> {
    m.labels.clone().unwrap_or_default()
}

/// A resource list in milli-units, each quantity parsed once (`at` is its path).
fn quantities(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    at: &str,
) -> Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for (k, q) in list.into_iter().flatten() {
        let m = quantity::parse_milli(&q.0)
            .map_err(|e| field_err(format!("{at}.{k}"), e.to_string()))?;
        out.insert(k.clone(), m);
    }
    Ok(out)
}

/// Refuses a value that is not one of `allowed`, as a closed Kubernetes enum does.
fn one_of(value: &str, allowed: &[&str], at: impl FnOnce() -> String) -> Result<()> {
    if allowed.contains(&value) {
        return Ok(());
    }
    let names: Vec<String> = allowed.iter().map(|a| format!("`{a}`")).collect();
    let expected = match names.as_slice() {
        [a, b] => format!("{a} or {b}"),
        _ => format!("one of {}", names.join(", ")),
    };
    Err(field_err(
        at(),
        format!("unknown variant `{value}`, expected {expected}"),
    ))
}

/// An int-or-string field that takes a count or a percentage (`1`, `"50%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntOrPercent {
    /// A count.
    Int(i64),
    /// A percentage, `50` for `50%`.
    Percent(i64),
}

fn int_or_percent(text: &str, at: &str) -> Result<IntOrPercent> {
    let bad = || {
        field_err(
            at,
            format!("invalid value {text:?}: expected an integer or a percentage like \"50%\""),
        )
    };
    match text.strip_suffix('%') {
        Some(p) => p.parse().map(IntOrPercent::Percent).map_err(|_| bad()),
        None => text.parse().map(IntOrPercent::Int).map_err(|_| bad()),
    }
}

/// The effects a taint may have.
const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A taint, wherever it is written (a Node's `spec.taints`, a NodePool's or NodeClaim's
/// `taints` and `startupTaints`); `at` is its path.
fn taint(key: &str, value: &str, effect: &str, at: &str) -> Result<pb::Taint> {
    one_of(effect, &TAINT_EFFECTS, || format!("{at}.effect"))?;
    Ok(pb::Taint {
        key: key.to_string(),
        value: value.to_string(),
        effect: effect.to_string(),
    })
}

fn label_selector(s: &meta::LabelSelector, at: &str) -> Result<pb::LabelSelector> {
    let mut match_expressions = Vec::new();
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        one_of(
            &e.operator,
            &["In", "NotIn", "Exists", "DoesNotExist"],
            || format!("{at}.matchExpressions[{i}].operator"),
        )?;
        match_expressions.push(pb::SelectorExpression {
            key: e.key.clone(),
            operator: e.operator.clone(),
            values: e.values.clone().unwrap_or_default(),
        });
    }
    Ok(pb::LabelSelector {
        match_labels: s
            .match_labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        match_expressions,
    })
}

fn opt_label_selector(
    s: Option<&meta::LabelSelector>,
    at: &str,
) -> Result<Option<pb::LabelSelector>> {
    s.map(|s| label_selector(s, at)).transpose()
}

const OPERATORS: [&str; 8] = [
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Lt",
    "Gte",
    "Lte",
];

fn requirement(r: &core::NodeSelectorRequirement, at: &str) -> Result<pb::Requirement> {
    if !OPERATORS.contains(&r.operator.as_str()) {
        return Err(field_err(
            format!("{at}.operator"),
            format!("unknown operator {:?}", r.operator),
        ));
    }
    Ok(pb::Requirement {
        key: r.key.clone(),
        operator: r.operator.clone(),
        values: r.values.clone().unwrap_or_default(),
        min_values: None,
    })
}

fn node_selector_term(t: &core::NodeSelectorTerm, at: &str) -> Result<pb::NodeSelectorTerm> {
    let mut requirements = Vec::new();
    for (i, r) in t.match_expressions.iter().flatten().enumerate() {
        requirements.push(requirement(r, &format!("{at}.matchExpressions[{i}]"))?);
    }
    // matchFields (metadata.name) has no node label to match; the planner sees it as a
    // requirement on the hostname label, which is what a node name pins.
    for (i, r) in t.match_fields.iter().flatten().enumerate() {
        if r.key != "metadata.name" {
            // Kubernetes' validation: the one field a node selector may match.
            return Err(field_err(
                format!("{at}.matchFields[{i}].key"),
                format!(
                    "unsupported field {:?}: only \"metadata.name\" is supported",
                    r.key
                ),
            ));
        }
        let mut req = requirement(r, &format!("{at}.matchFields[{i}]"))?;
        req.key = common::labels::HOSTNAME.to_string();
        requirements.push(req);
    }
    Ok(pb::NodeSelectorTerm { requirements })
}

fn node_selector_terms(
    terms: &[core::NodeSelectorTerm],
    at: &str,
) -> Result<Vec<pb::NodeSelectorTerm>> {
    terms
        .iter()
        .enumerate()
        .map(|(i, t)| node_selector_term(t, &format!("{at}[{i}]")))
        .collect()
}
