//! The `--instance-types` catalog file: YAML or JSON, format in `shared/docs/planner-io.md`.
//!
//! ```yaml
//! instanceTypes:
//!   - name: m5.large
//!     cpu: "2"                 # Kubernetes quantities (strings or numbers)
//!     memory: 8Gi              # what the node reports as capacity
//!     pods: 29                 # max pods; default 110
//!     ephemeralStorage: 20Gi   # default 20Gi
//!     architecture: amd64      # amd64 | arm64; default amd64
//!     os: [linux]              # linux | windows; default [linux]
//!     resources: {nvidia.com/gpu: "1"}
//!     labels: {karpenter.k8s.aws/instance-family: m5}
//!     overhead:                # optional
//!       kubeReserved: {cpu: 70m, memory: 574Mi}
//!       systemReserved: {}
//!       evictionThreshold: {memory: 100Mi}
//!     offerings:
//!       - {zone: us-east-1a, capacityType: on-demand, price: 0.096, available: true}
//! ```
//!
//! Decisions:
//! - `memory` is the capacity the node reports: no VM overhead is taken off it (the file
//!   describes nodes, not EC2 sizes).
//! - Without `overhead`, Karpenter's AWS formulas are applied to the given cpu, pods and
//!   ephemeral storage (see [`super::overhead::default_overhead`]). With `overhead`, it is
//!   taken as written and a part that is left out is zero.
//! - Labels: `node.kubernetes.io/instance-type`, `kubernetes.io/arch` and (when `os` has one
//!   entry) `kubernetes.io/os` are always set. The labels Karpenter derives from an AWS-style
//!   name (`instance-family`, `-size`, `-category`, `-generation`) and `instance-cpu` (whole
//!   cores) are added unless `labels` gives them; `labels` is added as written. Zone and
//!   capacity type come from the offerings and may not be set in `labels`.
//! - Unknown fields are errors (a misspelt field would otherwise be silently ignored), and so
//!   are duplicate names, empty offerings, unknown capacity types or architectures, and prices
//!   that are not finite and positive. Every error names the file and the field path, e.g.
//!   `catalog.yaml: instanceTypes[3].cpu: invalid quantity "abc": expected a number`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde::de::Deserializer;
use thiserror::Error;

use crate::labels;
use crate::model::quantity::{parse_milli, parse_units};
use crate::model::{Labels, Resources, names};

use super::overhead::{self, DEFAULT_EPHEMERAL_STORAGE};
use super::{Catalog, InstanceType, Offering, Overhead};

/// Capacity types an offering may have.
pub const CAPACITY_TYPES: [&str; 3] = [
    labels::CAPACITY_SPOT,
    labels::CAPACITY_ON_DEMAND,
    "reserved",
];

/// Why a catalog file was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Error {
    /// The text is not YAML/JSON of the catalog's shape (syntax, a wrong type, an unknown or
    /// missing field).
    #[error("{file}: {}{why}", field_prefix(.field))]
    Parse {
        /// The file (as given to [`parse`]).
        file: String,
        /// Path of the field at fault, e.g. `instanceTypes[3].offerings`; empty for the document.
        field: String,
        /// What is wrong.
        why: String,
    },
    /// A field has a value the catalog cannot use.
    #[error("{file}: {field}: {why}")]
    Invalid {
        /// The file (as given to [`parse`]).
        file: String,
        /// Path of the field at fault, e.g. `instanceTypes[3].cpu`.
        field: String,
        /// What is wrong.
        why: String,
    },
    /// `instanceTypes` is empty.
    #[error("{file}: instanceTypes: the catalog has no instance types")]
    Empty {
        /// The file (as given to [`parse`]).
        file: String,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn field_prefix(field: &str) -> String {
    if field.is_empty() || field == "." {
        String::new()
    } else {
        format!("{field}: ")
    }
}

/// Parses a catalog file. `text` is YAML or JSON (JSON when it starts with `{`); `source` names
/// the file in errors and notes.
///
/// # Errors
/// [`enum@Error`] naming `source` and the field at fault, for the first problem found.
pub fn parse(text: &str, source: &str) -> Result<Catalog> {
    let raw = deserialize(text, source)?;
    let file = source;
    if raw.instance_types.is_empty() {
        return Err(Error::Empty {
            file: file.to_string(),
        });
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut instance_types = Vec::with_capacity(raw.instance_types.len());
    for (i, t) in raw.instance_types.iter().enumerate() {
        let at = Field {
            file,
            path: format!("instanceTypes[{i}]"),
        };
        if let Some(first) = seen.insert(t.name.as_str(), i) {
            return Err(at.child("name").invalid(format!(
                "duplicate instance type {:?} (also instanceTypes[{first}])",
                t.name
            )));
        }
        instance_types.push(instance_type(t, &at)?);
    }
    let catalog = Catalog {
        notes: vec![format!(
            "Instance types and prices from {source} ({} types).",
            instance_types.len()
        )],
        instance_types,
    };
    // The one validation every door runs (the checks above already name this file's fields;
    // this keeps the file and the inline catalog to the same rules).
    crate::validation::catalog(&catalog, "catalog").map_err(|e| Error::Invalid {
        file: file.to_string(),
        field: e.field().to_string(),
        why: e.reason().to_string(),
    })?;
    Ok(catalog)
}

/// A field path inside the file, for errors.
struct Field<'a> {
    file: &'a str,
    path: String,
}

// === impl Field ===

impl Field<'_> {
    fn child(&self, name: &str) -> Field<'_> {
        let path = if name.starts_with('[') {
            format!("{}{name}", self.path)
        } else {
            format!("{}.{name}", self.path)
        };
        Field {
            file: self.file,
            path,
        }
    }

    fn invalid(&self, why: impl Into<String>) -> Error {
        Error::Invalid {
            file: self.file.to_string(),
            field: self.path.clone(),
            why: why.into(),
        }
    }
}

fn deserialize(text: &str, source: &str) -> Result<RawFile> {
    let parse_error = |field: String, why: String| Error::Parse {
        file: source.to_string(),
        field,
        // The file's top level is the one place the raw struct's name would show.
        why: why.replace(
            "struct RawFile",
            "a mapping with `instanceTypes` at the top level",
        ),
    };
    if text.trim_start().starts_with('{') {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de)
            .map_err(|e| parse_error(e.path().to_string(), e.inner().to_string()))
    } else {
        let de = serde_yaml::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            parse_error(
                e.path().to_string(),
                strip_yaml_path(&e.inner().to_string()),
            )
        })
    }
}

/// serde_yaml starts its messages with its own path (`instanceTypes[0]: unknown field ...`);
/// the error already names the field, so that prefix goes.
fn strip_yaml_path(message: &str) -> String {
    match message.split_once(": ") {
        Some((prefix, rest))
            if !prefix.is_empty()
                && !prefix.contains(char::is_whitespace)
                && !prefix.contains('`') =>
        {
            rest.to_string()
        }
        _ => message.to_string(),
    }
}

fn instance_type(t: &RawType, at: &Field<'_>) -> Result<InstanceType> {
    if t.name.trim().is_empty() {
        return Err(at.child("name").invalid("must not be empty"));
    }
    let cpu = positive(&at.child("cpu"), parse_milli(&t.cpu.0))?;
    let memory = positive(&at.child("memory"), parse_units(&t.memory.0))?;
    let pods = match &t.pods {
        Some(p) => count(&at.child("pods"), &p.0, true)?,
        None => overhead::DEFAULT_MAX_PODS,
    };
    let ephemeral_storage = match &t.ephemeral_storage {
        Some(q) => {
            let f = at.child("ephemeralStorage");
            non_negative(&f, parse_units(&q.0))?
        }
        None => DEFAULT_EPHEMERAL_STORAGE,
    };
    let arch = t.architecture.as_deref().unwrap_or("amd64");
    if !matches!(arch, "amd64" | "arm64") {
        return Err(at.child("architecture").invalid(format!(
            "unknown architecture {arch:?} (expected amd64 or arm64)"
        )));
    }
    let os = match &t.os {
        Some(os) => {
            if os.is_empty() {
                return Err(at
                    .child("os")
                    .invalid("must list at least one of linux, windows"));
            }
            for (j, o) in os.iter().enumerate() {
                if !matches!(o.as_str(), "linux" | "windows") {
                    return Err(at.child("os").child(&format!("[{j}]")).invalid(format!(
                        "unknown operating system {o:?} (expected linux or windows)"
                    )));
                }
            }
            os.clone()
        }
        None => vec!["linux".to_string()],
    };

    let mut capacity = Resources {
        cpu,
        memory,
        ephemeral_storage,
        pods,
        extended: BTreeMap::new(),
    };
    let resources_at = at.child("resources");
    for (name, q) in &t.resources {
        let f = resources_at.child(name);
        if is_core_resource(name) {
            return Err(f.invalid(format!(
                "{name} is set by the instance type's own field, not under resources"
            )));
        }
        capacity.set(name, non_negative(&f, parse_milli(&q.0))?);
    }

    let overhead = match &t.overhead {
        Some(o) => {
            let f = at.child("overhead");
            Overhead {
                kube_reserved: resource_list(&f.child("kubeReserved"), &o.kube_reserved)?,
                system_reserved: resource_list(&f.child("systemReserved"), &o.system_reserved)?,
                eviction_threshold: resource_list(
                    &f.child("evictionThreshold"),
                    &o.eviction_threshold,
                )?,
            }
        }
        None => overhead::default_overhead(cpu, pods, ephemeral_storage),
    };

    let labels = type_labels(t, at, arch, &os, cpu)?;
    let offerings = offerings(t, at)?;
    Ok(InstanceType {
        name: t.name.clone(),
        capacity,
        overhead,
        labels,
        os,
        offerings,
    })
}

fn type_labels(t: &RawType, at: &Field<'_>, arch: &str, os: &[String], cpu: i64) -> Result<Labels> {
    let mut out = Labels::new();
    for (k, v) in super::aws::name_labels(&t.name) {
        out.insert(k.to_string(), v);
    }
    if cpu % 1000 == 0 {
        out.insert(labels::INSTANCE_CPU.to_string(), (cpu / 1000).to_string());
    }
    let labels_at = at.child("labels");
    let fixed: [(&str, Option<&str>); 3] = [
        (labels::INSTANCE_TYPE, Some(t.name.as_str())),
        (labels::ARCH, Some(arch)),
        (labels::OS, (os.len() == 1).then(|| os[0].as_str())),
    ];
    for (k, v) in &t.labels {
        let f = labels_at.child(k);
        if k.trim().is_empty() {
            return Err(labels_at.invalid("label keys must not be empty"));
        }
        if k == labels::ZONE || k == labels::CAPACITY_TYPE {
            return Err(f.invalid(format!("{k} comes from the offerings; set it there")));
        }
        if let Some((_, Some(expected))) = fixed.iter().find(|(key, _)| *key == k)
            && v.0 != *expected
        {
            return Err(f.invalid(format!(
                "{:?} contradicts the instance type ({expected:?})",
                v.0
            )));
        }
        out.insert(k.clone(), v.0.clone());
    }
    for (k, v) in fixed {
        if let Some(v) = v {
            out.insert(k.to_string(), v.to_string());
        }
    }
    Ok(out)
}

fn offerings(t: &RawType, at: &Field<'_>) -> Result<Vec<Offering>> {
    let list_at = at.child("offerings");
    if t.offerings.is_empty() {
        return Err(list_at.invalid("must list at least one offering"));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(t.offerings.len());
    for (j, o) in t.offerings.iter().enumerate() {
        let f = list_at.child(&format!("[{j}]"));
        if o.zone.trim().is_empty() {
            return Err(f.child("zone").invalid("must not be empty"));
        }
        if !CAPACITY_TYPES.contains(&o.capacity_type.as_str()) {
            return Err(f.child("capacityType").invalid(format!(
                "unknown capacity type {:?} (expected one of {})",
                o.capacity_type,
                CAPACITY_TYPES.join(", ")
            )));
        }
        // An unpriced offering (a preview type no price source knows) has no price and is
        // unavailable unless a NodeOverlay prices it.
        let price = match (o.unpriced, o.price) {
            (true, None) => 0.0,
            (true, Some(p)) => {
                return Err(f.child("price").invalid(format!(
                    "{p}: an offering with `unpriced: true` has no price"
                )));
            }
            (false, None) => {
                return Err(f.child("price").invalid(
                    "missing (every offering has a price, or `unpriced: true` for a preview type)",
                ));
            }
            (false, Some(p)) => p,
        };
        if !(o.unpriced || price.is_finite() && price > 0.0) {
            return Err(f
                .child("price")
                .invalid(format!("{price} is not a positive, finite price")));
        }
        if !seen.insert((o.zone.as_str(), o.capacity_type.as_str())) {
            return Err(f.invalid(format!(
                "duplicate offering for zone {:?} and capacity type {:?}",
                o.zone, o.capacity_type
            )));
        }
        out.push(Offering {
            zone: o.zone.clone(),
            capacity_type: o.capacity_type.clone(),
            price,
            available: o.available && !o.unpriced,
            unpriced: o.unpriced,
        });
    }
    Ok(out)
}

fn is_core_resource(name: &str) -> bool {
    matches!(
        name,
        names::CPU | names::MEMORY | names::PODS | names::EPHEMERAL_STORAGE
    )
}

/// A map of resource name to quantity, in the units of [`Resources`].
fn resource_list(at: &Field<'_>, list: &BTreeMap<String, Scalar>) -> Result<Resources> {
    let mut out = Resources::default();
    for (name, q) in list {
        let f = at.child(name);
        let amount = match name.as_str() {
            names::MEMORY | names::EPHEMERAL_STORAGE => non_negative(&f, parse_units(&q.0))?,
            names::PODS => count(&f, &q.0, false)?,
            _ => non_negative(&f, parse_milli(&q.0))?,
        };
        out.set(name, amount);
    }
    Ok(out)
}

fn positive(
    at: &Field<'_>,
    parsed: Result<i64, crate::model::quantity::QuantityError>,
) -> Result<i64> {
    let v = parsed.map_err(|e| at.invalid(e.to_string()))?;
    if v <= 0 {
        return Err(at.invalid(format!("must be positive, got {v}")));
    }
    Ok(v)
}

fn non_negative(
    at: &Field<'_>,
    parsed: Result<i64, crate::model::quantity::QuantityError>,
) -> Result<i64> {
    let v = parsed.map_err(|e| at.invalid(e.to_string()))?;
    if v < 0 {
        return Err(at.invalid(format!("must not be negative, got {v}")));
    }
    Ok(v)
}

/// A whole number of pods.
fn count(at: &Field<'_>, text: &str, must_be_positive: bool) -> Result<i64> {
    let v: i64 = text.trim().parse().map_err(|_| {
        at.invalid(format!(
            "invalid pod count {text:?}: expected a whole number"
        ))
    })?;
    if v < 0 || (must_be_positive && v == 0) {
        return Err(at.invalid(format!("invalid pod count {v}: must be positive")));
    }
    Ok(v)
}

// === raw file ===

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawFile {
    instance_types: Vec<RawType>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawType {
    name: String,
    cpu: Scalar,
    memory: Scalar,
    #[serde(default)]
    pods: Option<Scalar>,
    #[serde(default)]
    ephemeral_storage: Option<Scalar>,
    #[serde(default)]
    architecture: Option<String>,
    #[serde(default)]
    os: Option<Vec<String>>,
    #[serde(default)]
    resources: BTreeMap<String, Scalar>,
    #[serde(default)]
    labels: BTreeMap<String, Scalar>,
    #[serde(default)]
    overhead: Option<RawOverhead>,
    offerings: Vec<RawOffering>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawOverhead {
    #[serde(default)]
    kube_reserved: BTreeMap<String, Scalar>,
    #[serde(default)]
    system_reserved: BTreeMap<String, Scalar>,
    #[serde(default)]
    eviction_threshold: BTreeMap<String, Scalar>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawOffering {
    zone: String,
    capacity_type: String,
    #[serde(default)]
    price: Option<f64>,
    #[serde(default = "available_default")]
    available: bool,
    #[serde(default)]
    unpriced: bool,
}

fn available_default() -> bool {
    true
}

/// A scalar written as a string, a number or a boolean, kept as text (YAML's `cpu: 2` and
/// `cpu: "2"` mean the same quantity).
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::scalar_text::deserialize(d, "a string or a number", true).map(Scalar)
    }
}

#[cfg(test)]
mod tests;
