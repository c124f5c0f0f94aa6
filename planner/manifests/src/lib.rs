//! `dovetail plan`'s reader: Kubernetes manifests (YAML or JSON files, folders, standard input)
//! into the planner's model, through the same conversion the running system reads the cluster
//! with.
//!
//! Text → typed Kubernetes objects (k8s-openapi types; Karpenter objects as JSON, as the
//! watcher receives them) → what an API server would complete (namespaces, a claim's default
//! StorageClass, a NodeClaim's `expireAfter`) and what the controllers would create (the pods
//! of Deployments, ReplicaSets, StatefulSets and Jobs, their templated claims) → `k8s-reader`
//! (the watcher's reader: objects → `dovetail.v1` messages) → `planner-wire` (messages → model,
//! as a planner decodes a request) → the model's validation. `dovetail plan` and the running
//! system therefore read the same objects the same way by construction; only the steps an API
//! server and the controllers take in a cluster are done here.
//!
//! # Input
//! [`load_paths`] takes files (multi-document YAML, JSON, or a stream of JSON values), folders
//! (searched recursively for `*.yaml`, `*.yml` and `*.json`, hidden entries skipped, in sorted
//! path order, each real path once, so symlink loops end) and `-` for standard input.
//! [`Reader`] takes text or JSON values directly. `v1 List` (and `*List`) objects contribute
//! their `items`.
//!
//! # Rules beyond the conversion
//! - Workload controllers (Deployment, ReplicaSet, StatefulSet, Job) become pending pods named
//!   `<controller>-<index>` (index from 0) in the controller's namespace, with the template's
//!   labels and annotations and an owner reference whose kind is the controller's own kind. A
//!   controller contributes only the replicas that are missing: pods in the input that it
//!   already owns (directly, or through a ReplicaSet named `<deployment>-<hash>` for a
//!   Deployment) are subtracted. A ReplicaSet controlled by a Deployment that is in the input is
//!   not expanded itself. StatefulSet pods take the free ordinals and mount
//!   `<claimTemplate>-<pod>` claims; a Job runs `min(parallelism, completions - succeeded)` pods.
//!   Two controllers of one kind with the same namespace and name are refused, as two pods are.
//! - A pod's priority is resolved by `k8s-reader` against the PriorityClasses of the input; an
//!   unknown class name is a warning.
//! - A PersistentVolumeClaim without `storageClassName` gets the StorageClass annotated
//!   `storageclass.kubernetes.io/is-default-class: "true"`, as admission would give it.
//! - A NodeClaim without `spec.expireAfter` gets its NodePool's (label `karpenter.sh/nodepool`,
//!   else its Node's), else 720h, as Karpenter sets it. A NodePool without
//!   `spec.template.spec.nodeClassRef` is refused, as the CRD's schema refuses it.
//!
//! # Limits
//! [`Limits`]: bytes read from all inputs, pods (counted as documents are read, workload
//! replicas before any is created, so memory stays proportional to the limit), nesting depth.
//!
//! # Errors
//! Nothing is planned from a half-read input: the first malformed document is an [`enum@Error`]
//! naming the file, the document (numbered from 1 in the order of the file), the object and
//! the field, e.g. `deploy.yaml: document 2 (Deployment default/web):
//! spec.template.spec.containers[0].resources.requests.cpu: invalid quantity "lots": expected a
//! number`. A rule the wire decoding or the model's validation applies is reported the same way:
//! [`Origins::locate`] maps a path of the wire snapshot (`snapshot.pods[3].host_ports[0].port`)
//! back to the object and its Kubernetes field. Objects of kinds the planner does not use are
//! skipped with a warning; Karpenter objects of older APIs get one warning each.

mod fields;
mod legacy;
mod objects;
mod origins;
mod snapshot;
mod source;
mod strict;
pub mod time;
mod typed;
mod workloads;

use std::fmt;

use planner::model::ClusterSnapshot;
use serde_json::Value;
use thiserror::Error;

pub use origins::Origins;

/// Where an object came from: the input name, the document number and the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The file as given (a path, `<stdin>`, or the caller's own name).
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
    /// A field of an object is missing or invalid, by the conversion's rules, the wire's or the
    /// model's validation.
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
        "{location}: {field}: the input expands to at least {count} pods, more than the limit of {limit} (--max-pods)"
    )]
    TooManyPods {
        /// The document and object that cross the limit.
        location: Location,
        /// Its field that does, e.g. `spec.replicas`.
        field: String,
        /// Pods counted when the limit was crossed.
        count: usize,
        /// The limit.
        limit: usize,
    },
}

/// A `Result` with this crate's [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a load produced.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The snapshot, with workload controllers expanded and priorities resolved.
    pub snapshot: ClusterSnapshot,
    /// Things a person should know (skipped kinds, unknown priority classes, ...).
    pub warnings: Vec<String>,
    /// Where each object of the snapshot came from, to name it in messages about it.
    pub origins: Origins,
}

/// Default [`Limits::max_pods`]: far above any real cluster.
pub const DEFAULT_MAX_PODS: usize = 1_000_000;
/// Default [`Limits::max_input_bytes`] (1 GiB).
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 1 << 30;

/// Bounds on the work one load may do, so that hostile input ends quickly with a clear error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most pods the input may hold once workload controllers are expanded; checked as
    /// documents are read and before anything is allocated for the replicas.
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
    let mut reader = Reader::with_limits(*limits);
    for input in source::read_paths(paths, limits.max_input_bytes)? {
        reader.add_document_text(&input.text, &input.name)?;
    }
    reader.finish()
}

/// Reads Kubernetes objects added one by one into a snapshot.
///
/// Objects may come in any order: controllers are expanded, defaults filled and the snapshot
/// converted in [`Reader::finish`].
#[derive(Debug, Default)]
pub struct Reader {
    limits: Limits,
    objects: objects::Objects,
}

// === impl Reader ===

impl Reader {
    /// An empty reader with the default [`Limits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty reader within `limits`.
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            limits,
            objects: objects::Objects::default(),
        }
    }

    /// Adds every document of a YAML (multi-document) or JSON text. `source` names the input in
    /// errors and warnings (a file path, `<stdin>`, ...).
    ///
    /// # Errors
    /// The first malformed document; see [`enum@Error`].
    pub fn add_document_text(&mut self, text: &str, source: &str) -> Result<()> {
        for unit in source::units(text, source)? {
            if let Some(value) = source::parse_unit(&unit, source)? {
                let base = Location {
                    source: source.to_string(),
                    document: Some(unit.number),
                    object: None,
                };
                self.objects
                    .add(&value, &base, &unit.prefix, self.limits.max_pods)?;
            }
        }
        Ok(())
    }

    /// Adds one Kubernetes object given as JSON (a `List` adds its items). `source` names it in
    /// errors and warnings.
    ///
    /// # Errors
    /// When the object is malformed; see [`enum@Error`].
    pub fn add_value(&mut self, value: &Value, source: &str) -> Result<()> {
        let base = Location {
            source: source.to_string(),
            document: None,
            object: None,
        };
        self.objects.add(value, &base, "", self.limits.max_pods)
    }

    /// Completes the objects as an API server and the controllers would, converts them and
    /// validates the snapshot.
    ///
    /// # Errors
    /// A duplicate controller, or a rule of the conversion, the wire or the model's validation,
    /// named by file, document, object and field.
    pub fn finish(self) -> Result<Loaded> {
        snapshot::finish(self.objects, self.limits.max_pods)
    }
}
