//! Nodes, Namespaces, PodDisruptionBudgets, volumes, StorageClasses and PriorityClasses.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::scheduling::v1 as scheduling;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proto::v1 as pb;

use super::{
    Result, int_or_percent, labels, name, node_selector_terms, one_of, opt_label_selector,
    quantities, seconds, taint, uid,
};

/// Converts a Node.
///
/// # Errors
/// An unreadable capacity or allocatable quantity.
pub fn node(n: &core::Node) -> Result<pb::Node> {
    let m = &n.metadata;
    let spec = n.spec.as_ref();
    let status = n.status.as_ref();
    Ok(pb::Node {
        name: name(m),
        labels: labels(m).into_iter().collect(),
        annotations: m
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| {
                taint(
                    &t.key,
                    t.value.as_deref().unwrap_or_default(),
                    &t.effect,
                    &format!("spec.taints[{i}]"),
                )
            })
            .collect::<Result<_>>()?,
        allocatable_milli: quantities(
            status.and_then(|s| s.allocatable.as_ref()),
            "status.allocatable",
        )?,
        capacity_milli: quantities(status.and_then(|s| s.capacity.as_ref()), "status.capacity")?,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        provider_id: spec
            .and_then(|s| s.provider_id.clone())
            .filter(|p| !p.is_empty()),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        creation_time: m.creation_timestamp.as_ref().map(seconds),
        deletion_time: m.deletion_timestamp.as_ref().map(seconds),
        uid: uid(m),
        // Sent in milli-units only (`*_milli`).
        allocatable: BTreeMap::new(),
        capacity: BTreeMap::new(),
    })
}

/// Converts a Namespace from its metadata (its labels are all the planner reads).
pub fn namespace(m: &meta::ObjectMeta) -> pb::Namespace {
    pb::Namespace {
        name: name(m),
        labels: labels(m).into_iter().collect(),
        uid: uid(m),
    }
}

/// `minAvailable` / `maxUnavailable`: a count or a percentage, kept as written.
fn int_or_string(v: Option<&IntOrString>, at: &str) -> Result<Option<String>> {
    match v {
        None => Ok(None),
        Some(IntOrString::Int(i)) => Ok(Some(i.to_string())),
        Some(IntOrString::String(s)) => {
            int_or_percent(s, at)?;
            Ok(Some(s.clone()))
        }
    }
}

/// Converts a PodDisruptionBudget.
///
/// # Errors
/// A selector with an unknown operator, a budget that is neither a count nor a percentage.
pub fn pdb(p: &policy::PodDisruptionBudget) -> Result<pb::PodDisruptionBudget> {
    let m = &p.metadata;
    let spec = p.spec.as_ref();
    Ok(pb::PodDisruptionBudget {
        namespace: m.namespace.clone().unwrap_or_default(),
        name: name(m),
        selector: opt_label_selector(spec.and_then(|s| s.selector.as_ref()), "spec.selector")?,
        min_available: int_or_string(
            spec.and_then(|s| s.min_available.as_ref()),
            "spec.minAvailable",
        )?,
        max_unavailable: int_or_string(
            spec.and_then(|s| s.max_unavailable.as_ref()),
            "spec.maxUnavailable",
        )?,
        disruptions_allowed: p.status.as_ref().map(|s| s.disruptions_allowed),
        uid: uid(m),
    })
}

/// Converts a PersistentVolumeClaim.
pub fn pvc(c: &core::PersistentVolumeClaim) -> pb::PersistentVolumeClaim {
    let m = &c.metadata;
    let spec = c.spec.as_ref();
    pb::PersistentVolumeClaim {
        namespace: m.namespace.clone().unwrap_or_default(),
        name: name(m),
        storage_class: spec.and_then(|s| s.storage_class_name.clone()),
        volume_name: spec
            .and_then(|s| s.volume_name.clone())
            .filter(|v| !v.is_empty()),
        uid: uid(m),
    }
}

/// Converts a PersistentVolume.
///
/// # Errors
/// A node affinity with an unknown operator.
pub fn pv(v: &core::PersistentVolume) -> Result<pb::PersistentVolume> {
    let m = &v.metadata;
    let spec = v.spec.as_ref();
    let terms = spec
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    Ok(pb::PersistentVolume {
        name: name(m),
        storage_class: spec.and_then(|s| s.storage_class_name.clone()),
        node_affinity: node_selector_terms(terms, "spec.nodeAffinity.required.nodeSelectorTerms")?,
        uid: uid(m),
        node_local: spec.is_some_and(|s| s.local.is_some() || s.host_path.is_some()),
    })
}

/// Converts a StorageClass.
///
/// # Errors
/// An unknown `volumeBindingMode`.
pub fn storage_class(c: &storage::StorageClass) -> Result<pb::StorageClass> {
    let m = &c.metadata;
    if let Some(mode) = &c.volume_binding_mode {
        one_of(mode, &["Immediate", "WaitForFirstConsumer"], || {
            "volumeBindingMode".to_string()
        })?;
    }
    let allowed = c
        .allowed_topologies
        .iter()
        .flatten()
        .map(|t| pb::NodeSelectorTerm {
            requirements: t
                .match_label_expressions
                .iter()
                .flatten()
                .map(|e| pb::Requirement {
                    key: e.key.clone(),
                    operator: "In".into(),
                    values: e.values.clone(),
                    min_values: None,
                })
                .collect(),
        })
        .collect();
    Ok(pb::StorageClass {
        name: name(m),
        volume_binding_mode: c.volume_binding_mode.clone().unwrap_or_default(),
        allowed_topologies: allowed,
        uid: uid(m),
    })
}

/// The PriorityClasses of the cluster, to resolve `priorityClassName` where admission has
/// not already filled `spec.priority`. The built-in `system-cluster-critical` and
/// `system-node-critical` are always known, as the API server always has them.
#[derive(Debug, Clone)]
pub struct PriorityClasses {
    values: BTreeMap<String, (i32, bool)>,
}

/// The classes every API server creates, with their values.
const BUILT_IN: [(&str, i32); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

/// One PriorityClass: its name, value and whether it is the global default.
pub fn priority_class(c: &scheduling::PriorityClass) -> (String, i32, bool) {
    (name(&c.metadata), c.value, c.global_default == Some(true))
}

// === impl PriorityClasses ===

impl Default for PriorityClasses {
    fn default() -> Self {
        Self {
            values: BUILT_IN
                .iter()
                .map(|(name, value)| ((*name).to_string(), (*value, false)))
                .collect(),
        }
    }
}

impl PriorityClasses {
    /// Records or replaces a class.
    pub fn insert(&mut self, name: String, value: i32, global_default: bool) {
        self.values.insert(name, (value, global_default));
    }

    /// Forgets a class (a built-in one keeps its value).
    pub fn remove(&mut self, name: &str) {
        match BUILT_IN.iter().find(|(n, _)| *n == name) {
            Some((_, value)) => {
                self.values.insert(name.to_string(), (*value, false));
            }
            None => {
                self.values.remove(name);
            }
        }
    }

    /// Whether a class of this name is known.
    pub fn is_known(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The value of a class; an unknown class is 0.
    pub fn value_of(&self, name: &str) -> i32 {
        self.values.get(name).map_or(0, |v| v.0)
    }

    /// The value of the global default class, else 0. Kubernetes allows one; of several, the
    /// highest value counts, so that the answer does not depend on the order they came in.
    pub fn default_value(&self) -> i32 {
        self.values
            .values()
            .filter(|v| v.1)
            .map(|v| v.0)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_resolve_with_the_built_in_classes_and_one_default() {
        let mut c = PriorityClasses::default();
        assert_eq!(c.value_of("system-node-critical"), 2_000_001_000);
        assert_eq!(c.value_of("unknown"), 0);
        assert_eq!(c.default_value(), 0);
        c.insert("b".into(), 5, true);
        c.insert("a".into(), 7, true);
        assert_eq!(c.default_value(), 7, "the highest of several defaults");
        c.remove("system-node-critical");
        assert_eq!(c.value_of("system-node-critical"), 2_000_001_000);
    }

    fn volume(local: bool, host_path: bool) -> core::PersistentVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1", "uid": "u-1"},
            "spec": {
                "storageClassName": "local-storage",
                "local": if local { serde_json::json!({"path": "/mnt/ssd0"}) } else { serde_json::Value::Null },
                "hostPath": if host_path { serde_json::json!({"path": "/var/lib/db"}) } else { serde_json::Value::Null },
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-0-1"]}
                ]}]}}
            }
        }))
        .expect("a PersistentVolume")
    }

    #[test]
    fn local_and_host_path_volumes_are_node_local() {
        assert!(pv(&volume(true, false)).expect("converts").node_local);
        assert!(pv(&volume(false, true)).expect("converts").node_local);
        let remote = pv(&volume(false, false)).expect("converts");
        assert!(!remote.node_local);
        // The affinity itself is passed on whole: the planner decides what to ignore.
        assert_eq!(remote.node_affinity.len(), 1);
        assert_eq!(
            pv(&volume(true, false)).expect("converts").node_affinity[0].requirements[0].key,
            "kubernetes.io/hostname"
        );
    }
}
