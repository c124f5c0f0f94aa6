//! Nodes, namespaces, volumes, storage classes, priority classes and PodDisruptionBudgets.

use std::collections::BTreeMap;

use serde_json::Value;

use super::pods::{label_selector, node_selector_terms, taints};
use super::raw;
use super::{FieldError, de, namespace_or_default, require_name};
use crate::model::{
    Namespace, Node, NodeSelectorTerm, Operator, PersistentVolume, PersistentVolumeClaim,
    PodDisruptionBudget, PriorityClass, Requirement, Resources, StorageClass, VolumeBindingMode,
};

/// Annotation that marks the default StorageClass.
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// A resource list as [`Resources`].
pub(super) fn resources(list: &raw::ResourceList) -> Resources {
    to_resources(&list.0)
}

fn to_resources(m: &BTreeMap<String, i64>) -> Resources {
    let mut r = Resources::default();
    for (k, v) in m {
        r.set(k, *v);
    }
    r
}

/// Converts a Node. Without `status.allocatable` the capacity is taken.
pub(super) fn node(value: &Value) -> Result<Node, FieldError> {
    node_from(de(value)?)
}

/// [`node`] from an already deserialized object.
pub(super) fn node_from(raw: raw::Node) -> Result<Node, FieldError> {
    let meta = raw.metadata;
    require_name(&meta.name)?;
    let capacity = resources(&raw.status.capacity);
    let allocatable = if raw.status.allocatable.0.is_empty() {
        capacity.clone()
    } else {
        resources(&raw.status.allocatable)
    };
    Ok(Node {
        name: meta.name,
        labels: meta.labels,
        annotations: meta.annotations,
        taints: taints(&raw.spec.taints),
        allocatable,
        capacity,
        unschedulable: raw.spec.unschedulable,
        provider_id: raw.spec.provider_id.filter(|p| !p.is_empty()),
        ready: raw
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        creation_time: meta.creation_timestamp.map(|t| t.0),
        deletion_time: meta.deletion_timestamp.map(|t| t.0),
    })
}

/// Converts a Namespace.
pub(super) fn namespace(value: &Value) -> Result<Namespace, FieldError> {
    namespace_from(de(value)?)
}

/// [`namespace`] from an already deserialized object.
pub(super) fn namespace_from(raw: raw::MetaOnly) -> Result<Namespace, FieldError> {
    require_name(&raw.metadata.name)?;
    Ok(Namespace {
        name: raw.metadata.name,
        labels: raw.metadata.labels,
    })
}

/// Converts a PersistentVolumeClaim; the flag is true when `storageClassName` is absent (the
/// default class applies), as opposed to `""` (no class).
pub(super) fn pvc(value: &Value) -> Result<(PersistentVolumeClaim, bool), FieldError> {
    pvc_from(de(value)?)
}

/// [`pvc`] from an already deserialized object.
pub(super) fn pvc_from(raw: raw::Pvc) -> Result<(PersistentVolumeClaim, bool), FieldError> {
    require_name(&raw.metadata.name)?;
    let wants_default = raw.spec.storage_class_name.is_none();
    Ok((
        PersistentVolumeClaim {
            namespace: namespace_or_default(&raw.metadata.namespace),
            name: raw.metadata.name,
            storage_class: raw.spec.storage_class_name.filter(|s| !s.is_empty()),
            volume_name: raw.spec.volume_name.filter(|s| !s.is_empty()),
        },
        wants_default,
    ))
}

/// Converts a PersistentVolume.
pub(super) fn pv(value: &Value) -> Result<PersistentVolume, FieldError> {
    pv_from(de(value)?)
}

/// [`pv`] from an already deserialized object.
pub(super) fn pv_from(raw: raw::Pv) -> Result<PersistentVolume, FieldError> {
    require_name(&raw.metadata.name)?;
    let node_affinity = match raw.spec.node_affinity.and_then(|a| a.required) {
        Some(sel) => node_selector_terms(
            &sel.node_selector_terms,
            "spec.nodeAffinity.required.nodeSelectorTerms",
        )?,
        None => Vec::new(),
    };
    Ok(PersistentVolume {
        name: raw.metadata.name,
        storage_class: raw.spec.storage_class_name.filter(|s| !s.is_empty()),
        node_affinity,
        node_local: raw.spec.local.is_some() || raw.spec.host_path.is_some(),
    })
}

/// Converts a StorageClass; the flag is true for the default class.
pub(super) fn storage_class(value: &Value) -> Result<(StorageClass, bool), FieldError> {
    storage_class_from(de(value)?)
}

/// [`storage_class`] from an already deserialized object.
pub(super) fn storage_class_from(
    raw: raw::StorageClass,
) -> Result<(StorageClass, bool), FieldError> {
    require_name(&raw.metadata.name)?;
    let mut allowed = Vec::new();
    for (i, term) in raw.allowed_topologies.iter().enumerate() {
        let mut requirements = Vec::new();
        for (j, e) in term.match_label_expressions.iter().enumerate() {
            if e.values.is_empty() {
                return Err(FieldError::new(
                    format!("allowedTopologies[{i}].matchLabelExpressions[{j}].values"),
                    "needs at least one value",
                ));
            }
            requirements.push(Requirement {
                key: e.key.clone(),
                operator: Operator::In,
                values: e.values.clone(),
                min_values: None,
            });
        }
        allowed.push(NodeSelectorTerm { requirements });
    }
    let is_default = raw
        .metadata
        .annotations
        .get(DEFAULT_CLASS_ANNOTATION)
        .is_some_and(|v| v == "true");
    Ok((
        StorageClass {
            name: raw.metadata.name,
            volume_binding_mode: raw
                .volume_binding_mode
                .unwrap_or(VolumeBindingMode::Immediate),
            allowed_topologies: allowed,
        },
        is_default,
    ))
}

/// Converts a PriorityClass.
pub(super) fn priority_class(value: &Value) -> Result<PriorityClass, FieldError> {
    priority_class_from(de(value)?)
}

/// [`priority_class`] from an already deserialized object.
pub(super) fn priority_class_from(raw: raw::PriorityClass) -> Result<PriorityClass, FieldError> {
    require_name(&raw.metadata.name)?;
    Ok(PriorityClass {
        name: raw.metadata.name,
        value: raw.value,
        global_default: raw.global_default,
    })
}

/// Converts a PodDisruptionBudget.
pub(super) fn pdb(value: &Value) -> Result<PodDisruptionBudget, FieldError> {
    pdb_from(de(value)?)
}

/// [`pdb`] from an already deserialized object.
pub(super) fn pdb_from(raw: raw::Pdb) -> Result<PodDisruptionBudget, FieldError> {
    require_name(&raw.metadata.name)?;
    if raw.spec.min_available.is_some() && raw.spec.max_unavailable.is_some() {
        return Err(FieldError::new(
            "spec.maxUnavailable",
            "minAvailable and maxUnavailable cannot both be set",
        ));
    }
    Ok(PodDisruptionBudget {
        namespace: namespace_or_default(&raw.metadata.namespace),
        name: raw.metadata.name,
        selector: raw
            .spec
            .selector
            .as_ref()
            .map(|s| label_selector(s, "spec.selector"))
            .transpose()?,
        min_available: raw.spec.min_available.map(|v| v.0),
        max_unavailable: raw.spec.max_unavailable.map(|v| v.0),
        disruptions_allowed: raw.status.disruptions_allowed,
    })
}
