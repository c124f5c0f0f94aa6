//! One document or `List` item into a typed Kubernetes object: k8s-openapi types for
//! Kubernetes' kinds, JSON for Karpenter's (as the watcher receives them). Kinds the planner
//! does not use are counted for one warning per kind.

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::scheduling::v1 as scheduling;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use crate::origins::Origin;
use crate::typed::{FieldError, strip_nulls, typed};
use crate::workloads::Controller;
use crate::{Error, Location, Result, fields, legacy};

/// Every kind the reader converts, with whether it lives in a namespace.
const KINDS: &[(&str, bool)] = &[
    ("Pod", true),
    ("Deployment", true),
    ("ReplicaSet", true),
    ("StatefulSet", true),
    ("Job", true),
    ("DaemonSet", true),
    ("PodDisruptionBudget", true),
    ("PersistentVolumeClaim", true),
    ("Node", false),
    ("Namespace", false),
    ("PersistentVolume", false),
    ("StorageClass", false),
    ("PriorityClass", false),
    ("NodePool", false),
    ("NodeClaim", false),
    ("EC2NodeClass", false),
    ("NodeOverlay", false),
    ("PodTemplate", true),
    ("CapacityBuffer", true),
    ("ResourceClaim", true),
    ("DeviceClass", false),
    ("ResourceSlice", false),
];

fn is_known(kind: &str) -> bool {
    KINDS.iter().any(|(k, _)| *k == kind)
}

fn is_namespaced(kind: &str) -> bool {
    KINDS.iter().any(|(k, ns)| *k == kind && *ns)
}

/// An object with where it came from.
pub(crate) type At<T> = (T, Origin);

/// The objects read so far, by kind, in input order.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    pub(crate) pods: Vec<At<core::Pod>>,
    pub(crate) controllers: Vec<At<Controller>>,
    pub(crate) daemon_sets: Vec<At<apps::DaemonSet>>,
    pub(crate) pdbs: Vec<At<policy::PodDisruptionBudget>>,
    pub(crate) nodes: Vec<At<core::Node>>,
    pub(crate) namespaces: Vec<At<core::Namespace>>,
    pub(crate) pvcs: Vec<At<core::PersistentVolumeClaim>>,
    pub(crate) pvs: Vec<At<core::PersistentVolume>>,
    pub(crate) storage_classes: Vec<At<storage::StorageClass>>,
    pub(crate) priority_classes: Vec<At<scheduling::PriorityClass>>,
    pub(crate) node_pools: Vec<At<Value>>,
    pub(crate) node_claims: Vec<At<Value>>,
    pub(crate) node_classes: Vec<At<Value>>,
    pub(crate) node_overlays: Vec<At<Value>>,
    pub(crate) pod_templates: Vec<At<core::PodTemplate>>,
    pub(crate) capacity_buffers: Vec<At<Value>>,
    pub(crate) resource_claims: Vec<At<Value>>,
    pub(crate) device_classes: Vec<At<Value>>,
    pub(crate) resource_slices: Vec<At<Value>>,
    pub(crate) warnings: Vec<String>,
    pub(crate) skipped: Vec<Skipped>,
    /// Pods so far: pods as given plus every controller's desired replicas.
    pub(crate) pod_count: usize,
}

/// A count of skipped objects of one kind.
#[derive(Debug)]
pub(crate) struct Skipped {
    pub(crate) what: String,
    pub(crate) count: usize,
    pub(crate) first: Location,
}

/// `Kind namespace/name` for messages; namespaced kinds without a namespace are in `default`.
pub(crate) fn object_label(kind: &str, namespace: Option<&str>, name: Option<&str>) -> String {
    let namespace = namespace
        .filter(|ns| !ns.is_empty())
        .or(is_namespaced(kind).then_some("default"));
    match (namespace, name.filter(|n| !n.is_empty())) {
        (Some(ns), Some(n)) => format!("{kind} {}", common::key::namespaced(ns, n)),
        (None, Some(n)) => format!("{kind} {n}"),
        _ => kind.to_string(),
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

/// Sets an absent namespace to `default`, as the API server does for namespaced objects.
fn default_namespace(m: &mut meta::ObjectMeta) {
    if m.namespace.as_deref().is_none_or(str::is_empty) {
        m.namespace = Some("default".into());
    }
}

fn require_name(m: &meta::ObjectMeta) -> Result<(), FieldError> {
    if m.name.as_deref().is_none_or(str::is_empty) {
        return Err(("metadata.name".into(), "missing".into()));
    }
    Ok(())
}

// === impl Objects ===

impl Objects {
    /// Adds one object (a `List` adds its items); `prefix` is its path in the document.
    pub(crate) fn add(
        &mut self,
        value: &Value,
        base: &Location,
        prefix: &str,
        max_pods: usize,
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
        let metadata = obj.get("metadata");
        let name = metadata.and_then(|m| m.get("name")).and_then(Value::as_str);
        let namespace = metadata
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
                self.add(item, base, &format!("{prefix}items[{i}]."), max_pods)?;
            }
            return Ok(());
        }
        let before = self.warnings.len();
        match self.add_kind(api_version, kind, value, &location, prefix) {
            Ok(Added::Checked) => {
                for u in fields::unknown(api_version, kind, value) {
                    if kind == "NodePool" && legacy::is_legacy_node_pool_field(&u.path) {
                        continue;
                    }
                    self.warnings.push(format!(
                        "{location}: {}",
                        fields::warning(api_version, kind, &u)
                    ));
                }
            }
            Ok(Added::Unchecked) => {}
            Err((path, message)) => {
                self.warnings.truncate(before);
                return Err(field_err(location, path, message));
            }
        }
        self.check_pod_count(kind, &location, max_pods)
    }

    /// Refuses as soon as the pods counted so far pass `max`, naming the object that crosses it.
    fn check_pod_count(&self, kind: &str, location: &Location, max: usize) -> Result<()> {
        if self.pod_count <= max {
            return Ok(());
        }
        let field = match kind {
            "Pod" => "metadata.name",
            "Job" => "spec.parallelism",
            _ => "spec.replicas",
        };
        Err(Error::TooManyPods {
            location: location.clone(),
            field: field.to_string(),
            count: self.pod_count,
            limit: max,
        })
    }

    fn add_kind(
        &mut self,
        api_version: &str,
        kind: &str,
        value: &Value,
        location: &Location,
        prefix: &str,
    ) -> Result<Added, FieldError> {
        let here = || Origin {
            location: location.clone(),
            prefix: prefix.to_string(),
            from_template: false,
        };
        match (api_version, kind) {
            ("v1", "Pod") => {
                let mut p: core::Pod = typed(value, "v1")?;
                require_name(&p.metadata)?;
                if p.spec.is_none() {
                    return Err(("spec".into(), "missing".into()));
                }
                default_namespace(&mut p.metadata);
                self.pod_count = self.pod_count.saturating_add(1);
                self.pods.push((p, here()));
            }
            ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet") | ("batch/v1", "Job") => {
                let c = Controller::read(api_version, kind, value)?;
                self.pod_count = self.pod_count.saturating_add(c.desired);
                self.controllers.push((c, here()));
            }
            ("apps/v1", "DaemonSet") => {
                let mut d: apps::DaemonSet = typed(value, api_version)?;
                require_name(&d.metadata)?;
                default_namespace(&mut d.metadata);
                self.daemon_sets.push((d, here()));
            }
            ("policy/v1" | "policy/v1beta1", "PodDisruptionBudget") => {
                let mut p: policy::PodDisruptionBudget = typed(value, "policy/v1")?;
                require_name(&p.metadata)?;
                default_namespace(&mut p.metadata);
                self.pdbs.push((p, here()));
            }
            ("v1", "Node") => {
                let n: core::Node = typed(value, api_version)?;
                require_name(&n.metadata)?;
                let status = n.status.as_ref();
                if status.and_then(|s| s.allocatable.as_ref()).is_none()
                    && status.and_then(|s| s.capacity.as_ref()).is_none()
                {
                    self.warnings.push(format!(
                        "{location}: Node {} has neither status.allocatable nor status.capacity; it can hold no pods",
                        n.metadata.name.as_deref().unwrap_or_default()
                    ));
                }
                self.nodes.push((n, here()));
            }
            ("v1", "Namespace") => {
                let n: core::Namespace = typed(value, api_version)?;
                require_name(&n.metadata)?;
                self.namespaces.push((n, here()));
            }
            ("v1", "PersistentVolumeClaim") => {
                let mut c: core::PersistentVolumeClaim = typed(value, api_version)?;
                require_name(&c.metadata)?;
                default_namespace(&mut c.metadata);
                self.pvcs.push((c, here()));
            }
            ("v1", "PersistentVolume") => {
                let v: core::PersistentVolume = typed(value, api_version)?;
                require_name(&v.metadata)?;
                self.pvs.push((v, here()));
            }
            ("storage.k8s.io/v1", "StorageClass") => {
                let c: storage::StorageClass = typed(value, api_version)?;
                require_name(&c.metadata)?;
                self.storage_classes.push((c, here()));
            }
            ("scheduling.k8s.io/v1", "PriorityClass") => {
                let c: scheduling::PriorityClass = typed(value, api_version)?;
                require_name(&c.metadata)?;
                self.priority_classes.push((c, here()));
            }
            ("karpenter.sh/v1", "NodePool") => {
                karpenter_meta(value)?;
                // The CRD's schema requires a class (`nodeClassRef` and its `group`, `kind`,
                // `name`); an API server refuses a NodePool without one.
                for f in ["group", "kind", "name"] {
                    let at = format!("/spec/template/spec/nodeClassRef/{f}");
                    if value
                        .pointer(&at)
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        return Err((
                            format!("spec.template.spec.nodeClassRef.{f}"),
                            "Required value: a NodePool names the EC2NodeClass its nodes are launched with".into(),
                        ));
                    }
                }
                for w in legacy::node_pool_fields(value) {
                    self.warnings.push(format!("{location}: {w}"));
                }
                if value
                    .pointer("/metadata/deletionTimestamp")
                    .is_some_and(|t| !t.is_null())
                {
                    self.warnings.push(format!(
                        "{location}: NodePool {} is being deleted (metadata.deletionTimestamp is set); it launches no nodes",
                        value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
                    ));
                }
                self.node_pools.push((value.clone(), here()));
            }
            ("karpenter.sh/v1", "NodeClaim") => {
                karpenter_meta(value)?;
                self.node_claims.push((value.clone(), here()));
            }
            ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                karpenter_meta(value)?;
                self.node_classes.push((value.clone(), here()));
            }
            ("karpenter.sh/v1alpha1", "NodeOverlay") => {
                karpenter_meta(value)?;
                self.node_overlays.push((value.clone(), here()));
            }
            ("v1", "PodTemplate") => {
                let mut t: core::PodTemplate = typed(value, api_version)?;
                require_name(&t.metadata)?;
                default_namespace(&mut t.metadata);
                self.pod_templates.push((t, here()));
            }
            ("autoscaling.x-k8s.io/v1beta1", "CapacityBuffer") => {
                karpenter_meta(value)?;
                let mut v = value.clone();
                if v.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                    && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
                {
                    m.insert("namespace".into(), Value::String("default".into()));
                }
                self.capacity_buffers.push((v, here()));
            }
            ("resource.k8s.io/v1", "ResourceClaim") => {
                karpenter_meta(value)?;
                let mut v = value.clone();
                if v.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                    && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
                {
                    m.insert("namespace".into(), Value::String("default".into()));
                }
                self.resource_claims.push((v, here()));
            }
            ("resource.k8s.io/v1", "DeviceClass") => {
                karpenter_meta(value)?;
                self.device_classes.push((value.clone(), here()));
            }
            ("resource.k8s.io/v1", "ResourceSlice") => {
                karpenter_meta(value)?;
                self.resource_slices.push((value.clone(), here()));
            }
            _ => {
                if let Some(warning) = legacy::legacy_kind(api_version, kind) {
                    self.warnings.push(format!("{location}: {warning}"));
                    return Ok(Added::Unchecked);
                }
                let what = if is_known(kind) {
                    format!("{api_version} {kind} (unsupported apiVersion)")
                } else {
                    format!("{api_version} {kind}")
                };
                match self.skipped.iter_mut().find(|s| s.what == what) {
                    Some(s) => s.count += 1,
                    None => self.skipped.push(Skipped {
                        what,
                        count: 1,
                        first: location.clone(),
                    }),
                }
                return Ok(Added::Unchecked);
            }
        }
        Ok(Added::Checked)
    }
}

/// Whether an added object's fields are checked against its schema.
enum Added {
    Checked,
    Unchecked,
}

/// A Karpenter object's metadata, as the watcher's JSON: typed, with a name.
fn karpenter_meta(value: &Value) -> Result<(), FieldError> {
    let m: meta::ObjectMeta = match value.get("metadata") {
        Some(m) => {
            let mut m = m.clone();
            strip_nulls(&mut m);
            serde_path_to_error::deserialize(&m)
                .map_err(|e| (format!("metadata.{}", e.path()), e.into_inner().to_string()))?
        }
        None => meta::ObjectMeta::default(),
    };
    require_name(&m)
}
