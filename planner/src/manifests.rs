//! Kubernetes manifests (YAML or JSON) into a [`ClusterSnapshot`]: the edge of the planner that
//! `dovetail plan` and the simulator read their input through.
//!
//! This is an edge module: it reads files and standard input. The planner core never calls it.
//!
//! # Input
//! [`load_paths`] takes files (multi-document YAML, JSON, or a stream of JSON values), folders
//! (searched recursively for `*.yaml`, `*.yml` and `*.json`, hidden entries skipped, in sorted
//! path order) and `-` for standard input. [`SnapshotBuilder`] takes text or JSON values
//! directly. `v1 List` (and `*List`) objects contribute their `items`.
//!
//! # Kinds
//! The kinds of `../shared/docs/planner-io.md`. Rules beyond that page, chosen here:
//! - Workload controllers (Deployment, ReplicaSet, StatefulSet, Job) become pending pods named
//!   `<controller>-<index>` (index from 0) in the controller's namespace (default `default`),
//!   with the template's labels and annotations and an owner reference whose kind is the
//!   controller's own kind (so a Deployment's pods are owned by kind `Deployment`, not by a
//!   ReplicaSet). A controller contributes only the replicas that are missing: pods in the input
//!   that it already owns (directly, or through a ReplicaSet named `<deployment>-<hash>` for a
//!   Deployment) are subtracted, so a `kubectl get deploy,rs,pods -o yaml` dump does not plan
//!   its running pods twice. A ReplicaSet controlled by a Deployment that is in the input is not
//!   expanded itself. StatefulSet pods take the free ordinals (`web-2` when `web-0` and `web-1`
//!   exist) and mount `<claimTemplate>-<pod>` claims; a Job runs
//!   `min(parallelism, completions - succeeded)` pods.
//! - A pod's priority is `spec.priority`, else the value of its `priorityClassName` among the
//!   PriorityClasses of the input (plus the built-in `system-cluster-critical` and
//!   `system-node-critical`), else the `globalDefault` class, else 0. An unknown class name is a
//!   warning and gives 0.
//! - A PersistentVolumeClaim without `storageClassName` gets the StorageClass annotated
//!   `storageclass.kubernetes.io/is-default-class: "true"`, as admission would give it.
//! - Karpenter defaults: NodePool and NodeClaim `expireAfter` 720h (`Never` is `None`);
//!   `consolidationPolicy` WhenEmptyOrUnderutilized; `consolidateAfter` 0s (`Never` is `None`);
//!   budgets one `nodes: 10%` when `budgets` is absent (an explicit empty list stays empty);
//!   a budget without `nodes` is 10%. NodePool `limits` may name any resource, including
//!   `nodes` (stored like an extended resource, in milli-units).
//! - EC2NodeClass `kubelet.evictionHard`: `memory.available` maps to memory and
//!   `nodefs.available` to ephemeral-storage; absolute values land in
//!   [`KubeletConfig::eviction_hard`](crate::model::KubeletConfig), percentages in
//!   `eviction_hard_percent` (milli-percent of the node's memory capacity, respectively of its
//!   ephemeral-storage capacity, as karpenter-provider-aws computes them). Other signals do not
//!   reserve allocatable and are ignored.
//! - Durations are Go durations (`720h`, `1h30m`) in whole seconds; times are RFC 3339 in Unix
//!   seconds.
//!
//! # Errors
//! Nothing is planned from a half-read input: the first malformed document is an [`Error`]
//! naming the file, the document (numbered from 1 in the order of the file), the object and
//! the field, e.g. `deploy.yaml: document 2 (Deployment default/web):
//! spec.template.spec.containers[0].resources.requests.cpu: invalid quantity "lots": expected a
//! number`. Objects of kinds the planner does not use are skipped with a warning (returned in
//! [`Loaded::warnings`]). A document without `apiVersion` or `kind` is an error.

mod cluster;
mod duration;
pub mod hash;
mod karpenter;
mod pods;
mod raw;
mod source;
pub mod time;
mod workloads;

use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use crate::model::{ClusterSnapshot, PriorityClass};
pub use duration::parse_go_duration;
use pods::PriorityRef;
use workloads::Controller;

/// Where an object came from: the input name, the document number and the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The file as given (a path, `<stdin>`, or the simulator's own name).
    pub source: String,
    /// Document number in the file, from 1; `None` for objects added as values.
    pub document: Option<usize>,
    /// `Kind namespace/name` (or `Kind name`) when known.
    pub object: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(d) = self.document {
            write!(f, ": document {d}")?;
        }
        if let Some(o) = &self.object {
            write!(f, " ({o})")?;
        }
        Ok(())
    }
}

/// Why manifests could not be read.
#[derive(Debug, Error)]
pub enum Error {
    /// A file or folder could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The path as given.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A document is not valid YAML or JSON.
    #[error("{location}: {message}")]
    Syntax {
        /// Where.
        location: Location,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field of an object is missing or invalid.
    #[error("{location}: {path}: {message}")]
    Field {
        /// Where.
        location: Location,
        /// The field path in the document, e.g. `spec.template.spec.containers[0].resources`.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// A `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A field error before its location is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    path: String,
    message: String,
}

impl FieldError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Deserializes a raw object from a JSON value, keeping the path of the first bad field.
fn de<T: DeserializeOwned>(v: &Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        FieldError::new(if path == "." { String::new() } else { path }, message)
    })
}

/// What a load produced.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The snapshot, with workload controllers expanded and priorities resolved.
    pub snapshot: ClusterSnapshot,
    /// Things a person should know (skipped kinds, unknown priority classes, ...).
    pub warnings: Vec<String>,
    /// The PriorityClasses of the input (priorities are already resolved on the pods).
    pub priority_classes: Vec<PriorityClass>,
}

/// Reads files, folders and `-` (standard input) into a snapshot.
///
/// # Errors
/// When a path cannot be read or a document is malformed; see [`Error`].
pub fn load_paths(paths: &[String]) -> Result<Loaded> {
    let mut builder = SnapshotBuilder::new();
    for input in source::read_paths(paths)? {
        builder.add_document_text(&input.text, &input.name)?;
    }
    Ok(builder.finish())
}

/// A count of skipped objects of one kind.
#[derive(Debug)]
struct Skipped {
    what: String,
    count: usize,
    first: Location,
}

/// Builds a [`ClusterSnapshot`] from Kubernetes objects added one by one.
///
/// Objects may come in any order: controllers are expanded and priorities resolved in
/// [`SnapshotBuilder::finish`]. After an `Err` the builder may hold part of the failing list;
/// drop it rather than finishing.
#[derive(Debug, Default)]
pub struct SnapshotBuilder {
    snapshot: ClusterSnapshot,
    /// Parallel to `snapshot.pods`.
    pod_priority: Vec<PriorityRef>,
    /// Parallel to `snapshot.daemon_sets`.
    daemon_set_priority: Vec<PriorityRef>,
    /// Parallel to `snapshot.pvcs`: true when `storageClassName` was absent.
    pvc_wants_default_class: Vec<bool>,
    default_storage_classes: Vec<String>,
    controllers: Vec<Controller>,
    /// ReplicaSets controlled by a Deployment: (namespace, replicaset) → deployment.
    replica_set_owner: BTreeMap<(String, String), String>,
    priority_classes: Vec<PriorityClass>,
    skipped: Vec<Skipped>,
    warnings: Vec<String>,
}

// === impl SnapshotBuilder ===

impl SnapshotBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every document of a YAML (multi-document) or JSON text. `source` names the input in
    /// errors and warnings (a file path, `<stdin>`, ...).
    ///
    /// # Errors
    /// The first malformed document; see [`Error`].
    pub fn add_document_text(&mut self, text: &str, source: &str) -> Result<()> {
        for (index, doc) in source::documents(text, source)?.into_iter().enumerate() {
            let location = Location {
                source: source.to_string(),
                document: Some(index + 1),
                object: None,
            };
            let Some(mut value) = doc else { continue };
            strip_nulls(&mut value);
            self.add_object(&value, &location, "")?;
        }
        Ok(())
    }

    /// Adds one Kubernetes object given as JSON (a `List` adds its items). `source` names it in
    /// errors and warnings.
    ///
    /// # Errors
    /// When the object is malformed; see [`Error`].
    pub fn add_value(&mut self, value: &Value, source: &str) -> Result<()> {
        let location = Location {
            source: source.to_string(),
            document: None,
            object: None,
        };
        if has_null_member(value) {
            let mut owned = value.clone();
            strip_nulls(&mut owned);
            self.add_object(&owned, &location, "")
        } else {
            self.add_object(value, &location, "")
        }
    }

    fn add_object(&mut self, value: &Value, base: &Location, prefix: &str) -> Result<()> {
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
        let namespaced = matches!(
            kind,
            "Pod"
                | "Deployment"
                | "ReplicaSet"
                | "StatefulSet"
                | "Job"
                | "DaemonSet"
                | "PodDisruptionBudget"
                | "PersistentVolumeClaim"
        );
        let namespace = meta
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .or(namespaced.then_some("default"));
        let mut location = base.clone();
        location.object = Some(match (namespace, name) {
            (Some(ns), Some(n)) => format!("{kind} {ns}/{n}"),
            (None, Some(n)) => format!("{kind} {n}"),
            _ => kind.to_string(),
        });

        if kind.ends_with("List") && obj.contains_key("items") {
            let Some(items) = obj.get("items").and_then(Value::as_array) else {
                return Err(field_err(
                    location,
                    "items".into(),
                    "expected a list".into(),
                ));
            };
            for (i, item) in items.iter().enumerate() {
                self.add_object(item, base, &format!("{prefix}items[{i}]."))?;
            }
            return Ok(());
        }

        let result = self.add_kind(api_version, kind, value, &location);
        result.map_err(|e| field_err(location, e.path, e.message))
    }

    fn add_kind(
        &mut self,
        api_version: &str,
        kind: &str,
        value: &Value,
        location: &Location,
    ) -> Result<(), FieldError> {
        match (api_version, kind) {
            ("v1", "Pod") => {
                let (pod, priority) = workloads::pod(value)?;
                self.snapshot.pods.push(pod);
                self.pod_priority.push(priority);
            }
            ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet") | ("batch/v1", "Job") => {
                let c = workloads::controller(kind, value)?;
                if let Some(d) = &c.owner_deployment {
                    self.replica_set_owner
                        .insert((c.namespace.clone(), c.name.clone()), d.clone());
                }
                self.controllers.push(c);
            }
            ("apps/v1", "DaemonSet") => {
                let (ds, priority) = workloads::daemon_set(value)?;
                self.snapshot.daemon_sets.push(ds);
                self.daemon_set_priority.push(priority);
            }
            ("policy/v1" | "policy/v1beta1", "PodDisruptionBudget") => {
                self.snapshot.pdbs.push(cluster::pdb(value)?);
            }
            ("v1", "Node") => {
                let node = cluster::node(value)?;
                if node.allocatable.is_zero() {
                    self.warnings.push(format!(
                        "{location}: Node {} has neither status.allocatable nor status.capacity; it can hold no pods",
                        node.name
                    ));
                }
                self.snapshot.nodes.push(node);
            }
            ("v1", "Namespace") => self.snapshot.namespaces.push(cluster::namespace(value)?),
            ("v1", "PersistentVolumeClaim") => {
                let (pvc, wants_default) = cluster::pvc(value)?;
                self.snapshot.pvcs.push(pvc);
                self.pvc_wants_default_class.push(wants_default);
            }
            ("v1", "PersistentVolume") => self.snapshot.pvs.push(cluster::pv(value)?),
            ("storage.k8s.io/v1", "StorageClass") => {
                let (sc, is_default) = cluster::storage_class(value)?;
                if is_default {
                    self.default_storage_classes.push(sc.name.clone());
                }
                self.snapshot.storage_classes.push(sc);
            }
            ("scheduling.k8s.io/v1", "PriorityClass") => {
                self.priority_classes.push(cluster::priority_class(value)?);
            }
            ("karpenter.sh/v1", "NodePool") => {
                self.snapshot.node_pools.push(karpenter::node_pool(value)?);
            }
            ("karpenter.sh/v1", "NodeClaim") => {
                self.snapshot
                    .node_claims
                    .push(karpenter::node_claim(value)?);
            }
            ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                self.snapshot
                    .node_classes
                    .push(karpenter::node_class(value)?);
            }
            _ => {
                let known = matches!(
                    kind,
                    "Pod"
                        | "Deployment"
                        | "ReplicaSet"
                        | "StatefulSet"
                        | "Job"
                        | "DaemonSet"
                        | "PodDisruptionBudget"
                        | "Node"
                        | "Namespace"
                        | "PersistentVolumeClaim"
                        | "PersistentVolume"
                        | "StorageClass"
                        | "PriorityClass"
                        | "NodePool"
                        | "NodeClaim"
                        | "EC2NodeClass"
                );
                let what = if known {
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
            }
        }
        Ok(())
    }

    /// Expands controllers, resolves priorities and default storage classes, and returns the
    /// snapshot with the warnings.
    pub fn finish(mut self) -> Loaded {
        // Default storage class for claims that named none.
        if let Some(default) = self.default_storage_classes.first().cloned() {
            for (pvc, wants) in self
                .snapshot
                .pvcs
                .iter_mut()
                .zip(&self.pvc_wants_default_class)
            {
                if *wants {
                    pvc.storage_class = Some(default.clone());
                }
            }
        }
        if self.default_storage_classes.len() > 1 {
            self.warnings.push(format!(
                "several default StorageClasses ({}); using {}",
                self.default_storage_classes.join(", "),
                self.default_storage_classes[0]
            ));
        }

        // Workload controllers: only the replicas that are missing.
        let expanded = workloads::expand(
            &self.controllers,
            &self.snapshot.pods,
            &self.replica_set_owner,
        );
        for (pod, priority) in expanded {
            self.snapshot.pods.push(pod);
            self.pod_priority.push(priority);
        }

        // Priorities.
        let mut classes: BTreeMap<String, i32> = BTreeMap::from([
            ("system-cluster-critical".to_string(), 2_000_000_000),
            ("system-node-critical".to_string(), 2_000_001_000),
        ]);
        let mut global_default: Option<(i32, String)> = None;
        for pc in &self.priority_classes {
            classes.insert(pc.name.clone(), pc.value);
            if pc.global_default {
                // Kubernetes allows one globalDefault class; if a dump has several, take the
                // highest value (then the first name) so the choice does not depend on order.
                let better = match &global_default {
                    None => true,
                    Some((v, n)) => pc.value > *v || (pc.value == *v && pc.name < *n),
                };
                if better {
                    global_default = Some((pc.value, pc.name.clone()));
                }
            }
        }
        let default_value = global_default.map(|(v, _)| v).unwrap_or(0);
        let mut unknown: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut resolve = |p: &PriorityRef, who: String| -> i32 {
            match p {
                PriorityRef::Value(v) => *v,
                PriorityRef::Default => default_value,
                PriorityRef::Class(c) => classes.get(c).copied().unwrap_or_else(|| {
                    unknown.entry(c.clone()).or_default().push(who);
                    0
                }),
            }
        };
        for (pod, p) in self.snapshot.pods.iter_mut().zip(&self.pod_priority) {
            pod.priority = resolve(p, pod.key());
        }
        for (ds, p) in self
            .snapshot
            .daemon_sets
            .iter_mut()
            .zip(&self.daemon_set_priority)
        {
            ds.template.priority = resolve(p, format!("DaemonSet {}/{}", ds.namespace, ds.name));
        }
        for (class, who) in unknown {
            let more = if who.len() > 3 {
                format!(" and {} more", who.len() - 3)
            } else {
                String::new()
            };
            self.warnings.push(format!(
                "PriorityClass {class:?} is not in the input; priority 0 for {}{more}",
                who.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            ));
        }

        for s in &self.skipped {
            let objects = if s.count == 1 { "object" } else { "objects" };
            self.warnings.push(format!(
                "skipped {} {objects} of kind {} not used for planning (first: {})",
                s.count, s.what, s.first
            ));
        }
        Loaded {
            snapshot: self.snapshot,
            warnings: self.warnings,
            priority_classes: self.priority_classes,
        }
    }
}

/// Kubernetes treats a `null` member as absent; remove them so that serde defaults apply.
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn has_null_member(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.values().any(|v| v.is_null() || has_null_member(v)),
        Value::Array(a) => a.iter().any(has_null_member),
        _ => false,
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

/// The namespace of an object, `default` when absent or empty.
fn namespace_or_default(ns: &Option<String>) -> String {
    match ns.as_deref() {
        None | Some("") => "default".to_string(),
        Some(ns) => ns.to_string(),
    }
}

/// Requires a non-empty `metadata.name`.
fn require_name(name: &str) -> Result<(), FieldError> {
    if name.is_empty() {
        return Err(FieldError::new("metadata.name", "missing"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
