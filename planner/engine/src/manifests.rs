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
//! # Speed
//! Parsing YAML dominates reading. Common kinds in block-style YAML are deserialized straight
//! into lean structs (no intermediate JSON value); anything else, and any document that fails
//! there, takes the general path (YAML → JSON value → structs with field paths), which gives
//! the same result. Texts over 1 MiB are split at their document markers (and JSON Lists at
//! their items) and read on up to 8 threads; results are added in document order.
//! `cargo bench -p planner --bench manifests_load` prints the figures.
//!
//! # Errors
//! Nothing is planned from a half-read input: the first malformed document is an [`enum@Error`]
//! naming the file, the document (numbered from 1 in the order of the file), the object and
//! the field, e.g. `deploy.yaml: document 2 (Deployment default/web):
//! spec.template.spec.containers[0].resources.requests.cpu: invalid quantity "lots": expected a
//! number`. Objects of kinds the planner does not use are skipped with a warning (returned in
//! [`Loaded::warnings`]). A document without `apiVersion` or `kind` is an error.

mod cluster;
pub use common::hash;
mod karpenter;
mod pods;
mod raw;
mod source;
pub mod time;
mod workloads;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use crate::model::{
    ClusterSnapshot, DaemonSet, Namespace, Node, NodeClaim, NodeClass, NodePool, PersistentVolume,
    PersistentVolumeClaim, Pod, PodDisruptionBudget, PriorityClass, StorageClass,
};
pub use common::duration::parse_go_duration;
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

/// A `Result` with this module's [`enum@Error`].
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
///
/// Path tracking allocates for every map key, so the fast untracked pass runs first and the
/// tracked one only when it fails, to find the path.
fn de<T: DeserializeOwned>(v: &Value) -> Result<T, FieldError> {
    if let Ok(t) = T::deserialize(v) {
        return Ok(t);
    }
    // Kubernetes treats a `null` member as absent: retry without them.
    let stripped;
    let v = if has_null_member(v) {
        let mut owned = v.clone();
        strip_nulls(&mut owned);
        if let Ok(t) = T::deserialize(&owned) {
            return Ok(t);
        }
        stripped = owned;
        &stripped
    } else {
        v
    };
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
/// When a path cannot be read or a document is malformed; see [`enum@Error`].
pub fn load_paths(paths: &[String]) -> Result<Loaded> {
    let mut builder = SnapshotBuilder::new();
    for input in source::read_paths(paths)? {
        builder.add_document_text(&input.text, &input.name)?;
    }
    Ok(builder.finish())
}

/// Texts at least this large are read on several threads.
const PARALLEL_MIN_BYTES: usize = 1 << 20;
/// At most this many threads read one text.
const MAX_THREADS: usize = 8;

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
    /// The first malformed document; see [`enum@Error`].
    pub fn add_document_text(&mut self, text: &str, source: &str) -> Result<()> {
        let location = |number: usize| Location {
            source: source.to_string(),
            document: Some(number),
            object: None,
        };
        let units = source::units(text, source)?;
        let threads = if text.len() >= PARALLEL_MIN_BYTES {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_THREADS)
        } else {
            1
        };
        if threads <= 1 {
            for unit in &units {
                let mut out = Vec::new();
                convert_unit(unit, &location(unit.number), source, &mut out)?;
                self.apply(out);
            }
            return Ok(());
        }
        // Parsing dominates: parse and convert contiguous ranges of documents on several
        // threads, then add the results in document order. The first error in document order
        // wins, as in the sequential path.
        let chunk = units.len().div_ceil(threads).max(1);
        let results: Vec<Result<Vec<(Object, Location)>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = units
                .chunks(chunk)
                .map(|part| {
                    let location = &location;
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        for unit in part {
                            convert_unit(unit, &location(unit.number), source, &mut out)?;
                        }
                        Ok(out)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        for r in results {
            self.apply(r?);
        }
        Ok(())
    }

    /// Adds one Kubernetes object given as JSON (a `List` adds its items). `source` names it in
    /// errors and warnings.
    ///
    /// # Errors
    /// When the object is malformed; see [`enum@Error`].
    pub fn add_value(&mut self, value: &Value, source: &str) -> Result<()> {
        let location = Location {
            source: source.to_string(),
            document: None,
            object: None,
        };
        self.add_object(value, &location, "")
    }

    fn add_object(&mut self, value: &Value, base: &Location, prefix: &str) -> Result<()> {
        let mut objects = Vec::new();
        convert_object(value, base, prefix, &mut objects)?;
        self.apply(objects);
        Ok(())
    }

    /// Adds converted objects (in input order).
    fn apply(&mut self, objects: Vec<(Object, Location)>) {
        for (object, location) in objects {
            match object {
                Object::Pod(pod, priority) => {
                    self.snapshot.pods.push(*pod);
                    self.pod_priority.push(priority);
                }
                Object::Controller(c) => {
                    if let Some(d) = &c.owner_deployment {
                        self.replica_set_owner
                            .insert((c.namespace.clone(), c.name.clone()), d.clone());
                    }
                    self.controllers.push(*c);
                }
                Object::DaemonSet(ds, priority) => {
                    self.snapshot.daemon_sets.push(*ds);
                    self.daemon_set_priority.push(priority);
                }
                Object::Pdb(pdb) => self.snapshot.pdbs.push(pdb),
                Object::Node(node) => {
                    if node.allocatable.is_zero() {
                        self.warnings.push(format!(
                            "{location}: Node {} has neither status.allocatable nor status.capacity; it can hold no pods",
                            node.name
                        ));
                    }
                    self.snapshot.nodes.push(*node);
                }
                Object::Namespace(ns) => self.snapshot.namespaces.push(ns),
                Object::Pvc(pvc, wants_default) => {
                    self.snapshot.pvcs.push(pvc);
                    self.pvc_wants_default_class.push(wants_default);
                }
                Object::Pv(pv) => self.snapshot.pvs.push(pv),
                Object::StorageClass(sc, is_default) => {
                    if is_default {
                        self.default_storage_classes.push(sc.name.clone());
                    }
                    self.snapshot.storage_classes.push(sc);
                }
                Object::PriorityClass(pc) => self.priority_classes.push(pc),
                Object::NodePool(np) => self.snapshot.node_pools.push(*np),
                Object::DeletingNodePool(name) => self.warnings.push(format!(
                    "{location}: NodePool {name} is being deleted (metadata.deletionTimestamp is set); it launches no nodes"
                )),
                Object::NodeClaim(nc) => self.snapshot.node_claims.push(*nc),
                Object::NodeClass(nc) => self.snapshot.node_classes.push(*nc),
                Object::Skipped(what) => match self.skipped.iter_mut().find(|s| s.what == what) {
                    Some(s) => s.count += 1,
                    None => self.skipped.push(Skipped {
                        what,
                        count: 1,
                        first: location,
                    }),
                },
            }
        }
    }

    /// Expands controllers, resolves priorities and default storage classes, and returns the
    /// snapshot with the warnings.
    pub fn finish(mut self) -> Loaded {
        // Workload controllers: only the replicas that are missing.
        let (expanded, templated_claims) = workloads::expand(
            &self.controllers,
            &self.snapshot.pods,
            &self.replica_set_owner,
        );
        for (pod, priority) in expanded {
            self.snapshot.pods.push(pod);
            self.pod_priority.push(priority);
        }
        // Claims the controllers would create from templates, unless the input has them: a
        // StatefulSet's pods are pinned by their volumes as soon as those exist, and until
        // then the template's storage class decides where they may go.
        let known: BTreeSet<(String, String)> = self
            .snapshot
            .pvcs
            .iter()
            .map(|p| (p.namespace.clone(), p.name.clone()))
            .collect();
        for (namespace, name, class) in templated_claims {
            if known.contains(&(namespace.clone(), name.clone())) {
                continue;
            }
            self.pvc_wants_default_class.push(class.is_none());
            self.snapshot.pvcs.push(PersistentVolumeClaim {
                namespace,
                name,
                storage_class: class,
                volume_name: None,
            });
        }

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

/// One converted object, ready to be added to a builder.
#[derive(Debug)]
enum Object {
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
    NodePool(Box<NodePool>),
    /// A NodePool being deleted: it launches nothing (Karpenter ignores it for provisioning).
    DeletingNodePool(String),
    NodeClaim(Box<NodeClaim>),
    NodeClass(Box<NodeClass>),
    /// A kind (or apiVersion) the planner does not use, described for the warning.
    Skipped(String),
}

/// `Kind namespace/name` for messages; namespaced kinds without a namespace are in `default`.
fn object_label(kind: &str, namespace: Option<&str>, name: Option<&str>) -> String {
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
fn convert_unit(
    unit: &source::Unit<'_>,
    base: &Location,
    source: &str,
    out: &mut Vec<(Object, Location)>,
) -> Result<()> {
    if let Some(converted) = unit.yaml_text().and_then(|text| direct_yaml(text, base)) {
        out.push(converted);
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
            (
                Object::NodeClaim(Box::new(karpenter::node_claim_from(raw).ok()?)),
                label,
            )
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
fn convert_object(
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
            out.push((object, location));
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
            let (pool, deleting) = karpenter::node_pool(value)?;
            if deleting {
                Object::DeletingNodePool(pool.name)
            } else {
                Object::NodePool(Box::new(pool))
            }
        }
        ("karpenter.sh/v1", "NodeClaim") => {
            Object::NodeClaim(Box::new(karpenter::node_claim(value)?))
        }
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
            Object::NodeClass(Box::new(karpenter::node_class(value)?))
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
            Object::Skipped(if known {
                format!("{api_version} {kind} (unsupported apiVersion)")
            } else {
                format!("{api_version} {kind}")
            })
        }
    })
}

/// Removes `null` members so that serde defaults apply.
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
