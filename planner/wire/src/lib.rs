//! `planner-wire`: conversions between the `dovetail.v1` wire messages and the planner's model,
//! shared by the planner service and the `dovetail` CLI (which thus needs no server stack).
//!
//! - [`to_model`]: wire → model, fallible; every error names the offending field.
//! - [`to_wire`]: model → wire, total.
//! - [`remote`]: `Plan` through a `planner_client::PlannerClient` in model terms.
//!
//! Wire → model is fallible and every error names the offending field by its path in the
//! request, e.g. `snapshot.pods[17].requests.cpu`. Model → wire is total. Paths are only
//! rendered when something is wrong, so a 50k-pod snapshot converts without building strings.

pub mod remote;
pub mod to_model;
pub mod to_wire;

#[cfg(any(test, feature = "test-util"))]
pub mod fixtures;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;

use thiserror::Error;

use planner::catalog::Catalog;
use planner::model::{ClusterSnapshot, PlanOptions};

/// Input that cannot be converted into the model.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A field has a value the planner cannot use.
    #[error("{field}: {reason}")]
    InvalidField {
        /// Path of the field in the request, e.g. `snapshot.pods[17].requests.cpu`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

// === impl Error ===

impl Error {
    /// Path of the field at fault.
    pub fn field(&self) -> &str {
        match self {
            Error::InvalidField { field, .. } => field,
        }
    }

    /// What is wrong with the field.
    pub fn reason(&self) -> &str {
        match self {
            Error::InvalidField { reason, .. } => reason,
        }
    }
}

impl From<planner::validation::Error> for Error {
    fn from(e: planner::validation::Error) -> Self {
        let reason = if e.object().is_empty() {
            e.reason().to_string()
        } else {
            format!("{} ({})", e.reason(), e.object())
        };
        Error::InvalidField {
            field: e.field().to_string(),
            reason,
        }
    }
}

/// Result of a conversion.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the catalog of a request comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum CatalogChoice {
    /// Sent inline with the request.
    Inline(Catalog),
    /// The built-in AWS catalog of a region.
    Builtin {
        /// Region name, e.g. `us-east-1`.
        region: String,
    },
    /// Neither: the server's default.
    Default,
}

/// A decoded `PlanRequest` (or session snapshot): everything `planner::plan` needs except the
/// resolved catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanInput {
    /// The snapshot.
    pub snapshot: ClusterSnapshot,
    /// The catalog to resolve.
    pub catalog: CatalogChoice,
    /// Options, `now` included.
    pub options: PlanOptions,
    /// Objects of the snapshot left out of it, with why.
    pub excluded: Vec<planner::exclusion::Exclusion>,
}

// === paths ===

/// A field path, rendered only on error.
#[derive(Clone, Copy)]
pub struct At<'a> {
    parent: Option<&'a At<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Root,
    Field(&'static str),
    Index(usize),
    Key(&'a str),
}

// === impl At ===

impl<'a> At<'a> {
    /// The request itself.
    pub const ROOT: At<'static> = At {
        parent: None,
        seg: Seg::Root,
    };

    /// The field `name` below this path.
    pub fn field(&'a self, name: &'static str) -> At<'a> {
        At {
            parent: Some(self),
            seg: Seg::Field(name),
        }
    }

    /// Element `i` of the list at this path.
    pub fn index(&'a self, i: usize) -> At<'a> {
        At {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }

    fn key(&'a self, k: &'a str) -> At<'a> {
        At {
            parent: Some(self),
            seg: Seg::Key(k),
        }
    }

    fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut cur = Some(self);
        while let Some(a) = cur {
            segs.push(a.seg);
            cur = a.parent;
        }
        let mut out = String::new();
        for seg in segs.into_iter().rev() {
            match seg {
                Seg::Root => {}
                Seg::Field(f) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(f);
                }
                Seg::Index(i) => {
                    let _ = write!(out, "[{i}]");
                }
                Seg::Key(k) => {
                    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        if !out.is_empty() {
                            out.push('.');
                        }
                        out.push_str(k);
                    } else {
                        let _ = write!(out, "[{k:?}]");
                    }
                }
            }
        }
        out
    }

    /// An [`Error`] naming this path.
    pub fn err(&self, reason: impl Into<String>) -> Error {
        Error::InvalidField {
            field: self.render(),
            reason: reason.into(),
        }
    }
}

fn list<T, U>(items: Vec<T>, at: At<'_>, f: impl Fn(T, At<'_>) -> Result<U>) -> Result<Vec<U>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, x)| f(x, at.index(i)))
        .collect()
}

fn required<T>(x: Option<T>, at: At<'_>) -> Result<T> {
    x.ok_or_else(|| at.err("is required"))
}

fn non_empty(s: String, at: At<'_>) -> Result<String> {
    if s.is_empty() {
        Err(at.err("must not be empty"))
    } else {
        Ok(s)
    }
}

fn non_negative(v: i64, at: At<'_>) -> Result<i64> {
    if v < 0 {
        Err(at.err(format!("must not be negative, got {v}")))
    } else {
        Ok(v)
    }
}

fn one_of<T: Copy>(s: &str, at: At<'_>, allowed: &[(&str, T)]) -> Result<T> {
    allowed
        .iter()
        .find(|(name, _)| *name == s)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
            at.err(format!("{s:?} is not one of {}", names.join(", ")))
        })
}
