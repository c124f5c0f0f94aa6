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
//! The kinds of `designs/planner-io.md`. Rules beyond that page, chosen here:
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
//! - Karpenter defaults: NodePool `expireAfter` 720h (`Never` is `None`); a NodeClaim without
//!   `spec.expireAfter` gets its NodePool's (label `karpenter.sh/nodepool`, else its Node's),
//!   else 720h;
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
//!
//! Karpenter manifests as users have them from older APIs get one warning per object and field,
//! naming the document, the field and what v1 uses instead: v1beta1 NodePools / NodeClaims /
//! EC2NodeClasses and v1alpha5 Provisioners / Machines / AWSNodeTemplates are not read; in a v1
//! NodePool, `spec.disruption.expireAfter`, `spec.ttlSecondsUntilExpired`,
//! `spec.ttlSecondsAfterEmpty` and `spec.consolidation.enabled` are ignored (as v1 does), and
//! `consolidationPolicy: WhenUnderutilized` is read as `WhenEmptyOrUnderutilized`.

mod cluster;
mod fields;
pub use common::hash;
mod karpenter;
mod kinds;
mod object;
mod pods;
mod raw;
mod source;
mod strict;
pub mod time;
mod workloads;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use crate::labels;
use crate::model::{ClusterSnapshot, PersistentVolumeClaim, PriorityClass};
pub use common::duration::parse_go_duration;
use object::{Object, convert_object, convert_unit};
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
    /// The input would expand to more pods than the limit (checked before expanding).
    #[error(
        "{object}: {field}: the input expands to at least {count} pods, more than the limit of {limit} (--max-pods)"
    )]
    TooManyPods {
        /// The object that crosses the limit, e.g. `Deployment default/web`.
        object: String,
        /// Its field that does, e.g. `spec.replicas`.
        field: String,
        /// Pods counted when the limit was crossed.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// The snapshot the manifests make breaks a rule of [`crate::validation`] (the same rules
    /// the gRPC API applies), e.g. two pods with the same namespace and name.
    #[error("{0}")]
    Invalid(#[from] crate::validation::Error),
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

/// Default [`Limits::max_pods`]: far above any real cluster.
pub const DEFAULT_MAX_PODS: usize = 1_000_000;
/// Default [`Limits::max_input_bytes`] (1 GiB).
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 1 << 30;

/// Bounds on the work one load may do, so that hostile input ends quickly with a clear error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most pods the input may hold once workload controllers are expanded; checked before
    /// anything is allocated for them.
    pub max_pods: usize,
    /// Most bytes read from all inputs together.
    pub max_input_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_pods: DEFAULT_MAX_PODS,
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
        }
    }
}

/// Reads files, folders and `-` (standard input) into a snapshot, within the default
/// [`Limits`].
///
/// # Errors
/// When a path cannot be read or a document is malformed; see [`enum@Error`].
pub fn load_paths(paths: &[String]) -> Result<Loaded> {
    load_paths_with(paths, &Limits::default())
}

/// [`load_paths`] within `limits`.
///
/// # Errors
/// As [`load_paths`], and [`Error::Read`] for input over `max_input_bytes`,
/// [`Error::TooManyPods`] for more than `max_pods` pods.
pub fn load_paths_with(paths: &[String], limits: &Limits) -> Result<Loaded> {
    let mut builder = SnapshotBuilder::new();
    for input in source::read_paths(paths, limits.max_input_bytes)? {
        builder.add_document_text(&input.text, &input.name)?;
    }
    builder.check_pod_count(limits.max_pods)?;
    let loaded = builder.finish();
    crate::validation::snapshot(&loaded.snapshot)?;
    Ok(loaded)
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
    /// Parallel to `snapshot.node_claims`: true when `spec.expireAfter` was absent.
    claim_inherits_expiry: Vec<bool>,
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
                Object::NodePool(np, warnings) => {
                    for w in warnings {
                        self.warnings.push(format!("{location}: {w}"));
                    }
                    self.snapshot.node_pools.push(*np);
                }
                Object::Legacy(w) | Object::Warning(w) => {
                    self.warnings.push(format!("{location}: {w}"))
                }
                Object::DeletingNodePool(name) => self.warnings.push(format!(
                    "{location}: NodePool {name} is being deleted (metadata.deletionTimestamp is set); it launches no nodes"
                )),
                Object::NodeClaim(nc, inherits_expiry) => {
                    self.snapshot.node_claims.push(*nc);
                    self.claim_inherits_expiry.push(inherits_expiry);
                }
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

    /// Checks that finishing would give at most `max` pods (pods as given plus every
    /// controller's desired replicas), without allocating them.
    ///
    /// # Errors
    /// [`Error::TooManyPods`] naming the controller that crosses the limit.
    pub fn check_pod_count(&self, max: usize) -> Result<()> {
        let mut count = self.snapshot.pods.len();
        let over = |count: usize, object: String, field: &str| Error::TooManyPods {
            object,
            field: field.to_string(),
            count,
            limit: max,
        };
        if count > max {
            return Err(over(count, "Pod".to_string(), "metadata.name"));
        }
        for c in &self.controllers {
            count = count.saturating_add(c.desired);
            if count > max {
                let field = if c.kind == "Job" {
                    "spec.parallelism"
                } else {
                    "spec.replicas"
                };
                return Err(over(
                    count,
                    format!("{} {}/{}", c.kind, c.namespace, c.name),
                    field,
                ));
            }
        }
        Ok(())
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

        // NodeClaims without `spec.expireAfter`: their NodePool's template value (720h when the
        // NodePool is not in the input, Karpenter's default). The NodePool is the claim's
        // `karpenter.sh/nodepool` label, else its Node's.
        let node_pool_label: BTreeMap<&str, &str> = self
            .snapshot
            .nodes
            .iter()
            .filter_map(|n| Some((n.name.as_str(), n.labels.get(labels::NODEPOOL)?.as_str())))
            .collect();
        let pool_expiry: BTreeMap<&str, Option<i64>> = self
            .snapshot
            .node_pools
            .iter()
            .map(|p| (p.name.as_str(), p.expire_after))
            .collect();
        for (claim, inherits) in self
            .snapshot
            .node_claims
            .iter_mut()
            .zip(&self.claim_inherits_expiry)
        {
            if *inherits {
                let pool = claim
                    .labels
                    .get(labels::NODEPOOL)
                    .map(String::as_str)
                    .or_else(|| {
                        claim
                            .node_name
                            .as_deref()
                            .and_then(|n| node_pool_label.get(n).copied())
                    });
                claim.expire_after = pool
                    .and_then(|p| pool_expiry.get(p).copied())
                    .unwrap_or(Some(karpenter::DEFAULT_EXPIRE_AFTER));
            }
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
