//! Bootstrap user data per AMI family, merged with the node class's own `userData` the way
//! Karpenter merges it:
//! - AL2023 (`al2023.rs`): a MIME archive, Karpenter's nodeadm `NodeConfig` first, then the
//!   node class's parts (its own MIME parts, or its text as one `NodeConfig` or shell part);
//! - AL2 (`al2.rs`): a MIME archive, the node class's parts first, then a shell part calling
//!   `/etc/eks/bootstrap.sh`;
//! - Bottlerocket (`bottlerocket.rs`): the node class's TOML with the `settings.kubernetes`
//!   keys the cluster needs written over it;
//! - Custom: the node class's text unchanged.
//!
//! The output is plain text and byte-for-byte deterministic (sorted labels and keys): its hash
//! names the launch template. Golden files in `tests/golden/` pin it.

mod al2;
mod al2023;
mod bottlerocket;
pub mod mime;

use std::collections::BTreeMap;
use std::fmt;

use cloud::Taint;
use cloud::node_class::KubeletConfig;

use crate::config::Cluster;

/// Errors building user data.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The node class's `userData` is a MIME document that cannot be read.
    #[error(transparent)]
    Mime(#[from] mime::Error),
    /// The node class's `userData` is not valid TOML (Bottlerocket).
    #[error("user data: Bottlerocket userData is not valid TOML: {0}")]
    Toml(String),
    /// The AMI family is not one of AL2023, AL2, Bottlerocket, Custom.
    #[error("amiFamily {0:?} is not AL2023, AL2, Bottlerocket or Custom")]
    UnknownFamily(String),
    /// The generated configuration could not be written.
    #[error("user data: cannot write the {what}: {message}")]
    Serialize {
        /// What was being written.
        what: &'static str,
        /// The serializer's message.
        message: String,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How an AMI bootstraps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AmiFamily {
    /// Amazon Linux 2023 (nodeadm).
    Al2023,
    /// Amazon Linux 2 (bootstrap.sh).
    Al2,
    /// Bottlerocket (TOML settings).
    Bottlerocket,
    /// The node class's user data as is.
    Custom,
}

// === impl AmiFamily ===

impl AmiFamily {
    /// Parses an EC2NodeClass `amiFamily` value or an alias family (`al2023`, `al2`,
    /// `bottlerocket`), case-insensitively.
    ///
    /// # Errors
    /// [`Error::UnknownFamily`] naming the value.
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "al2023" => Ok(AmiFamily::Al2023),
            "al2" => Ok(AmiFamily::Al2),
            "bottlerocket" => Ok(AmiFamily::Bottlerocket),
            "custom" => Ok(AmiFamily::Custom),
            _ => Err(Error::UnknownFamily(s.to_string())),
        }
    }

    /// The `amiFamily` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AmiFamily::Al2023 => "AL2023",
            AmiFamily::Al2 => "AL2",
            AmiFamily::Bottlerocket => "Bottlerocket",
            AmiFamily::Custom => "Custom",
        }
    }
}

impl fmt::Display for AmiFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the bootstrap of one kind of node needs.
#[derive(Clone, Debug)]
pub struct Bootstrap<'a> {
    /// The cluster to join.
    pub cluster: &'a Cluster,
    /// Labels to register with.
    pub labels: &'a BTreeMap<String, String>,
    /// Taints to register with.
    pub taints: &'a [Taint],
    /// Kubelet settings of the node class.
    pub kubelet: Option<&'a KubeletConfig>,
    /// The kubelet's max pods for the instance types of this launch template, as the planner
    /// counted them ([`common::ec2::overhead::max_pods`]); `None` when the types' ENIs are not
    /// known (the node class's `maxPods` if any is written, else the family's default).
    pub max_pods: Option<i64>,
    /// The node class's own `userData`.
    pub custom: Option<&'a str>,
}

/// The user data (plain text, not yet base64) for `family`.
///
/// # Errors
/// [`Error::Mime`] or [`Error::Toml`] when the node class's `userData` cannot be read.
pub fn render(family: AmiFamily, b: &Bootstrap<'_>) -> Result<String> {
    match family {
        AmiFamily::Al2023 => al2023::render(b),
        AmiFamily::Al2 => al2::render(b),
        AmiFamily::Bottlerocket => bottlerocket::render(b),
        AmiFamily::Custom => Ok(b.custom.unwrap_or_default().to_string()),
    }
}

// === helpers shared by the families ===

/// The max pods to write: this launch's, else the node class's `maxPods`.
fn max_pods(b: &Bootstrap<'_>) -> Option<i64> {
    b.max_pods
        .or_else(|| b.kubelet.and_then(|k| k.max_pods).map(i64::from))
}

/// `--node-labels="a=b,c=d"` (sorted), or nothing without labels.
fn node_labels_arg(labels: &BTreeMap<String, String>) -> Option<String> {
    (!labels.is_empty()).then(|| {
        let joined = labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        format!("--node-labels=\"{joined}\"")
    })
}

/// `--register-with-taints="k=v:E,..."`, or nothing without taints.
fn taints_arg(taints: &[Taint]) -> Option<String> {
    (!taints.is_empty()).then(|| {
        let joined = taints
            .iter()
            .map(|t| format!("{}={}:{}", t.key, t.value, t.effect))
            .collect::<Vec<_>>()
            .join(",");
        format!("--register-with-taints=\"{joined}\"")
    })
}

/// `name="k<sep>v,..."` for a map, or nothing when it is empty.
fn map_arg(name: &str, m: &BTreeMap<String, String>, sep: &str) -> Option<String> {
    (!m.is_empty()).then(|| {
        let joined = m
            .iter()
            .map(|(k, v)| format!("{k}{sep}{v}"))
            .collect::<Vec<_>>()
            .join(",");
        format!("{name}=\"{joined}\"")
    })
}
