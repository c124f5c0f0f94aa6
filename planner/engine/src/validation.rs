//! The one validation of the model that every door runs after conversion and before planning
//! (manifests, the wire snapshot, the catalog file, the inline catalog, session deltas), so that
//! `dovetail plan`, `dovetail plan --server` and the gRPC API accept and refuse the same
//! snapshots.
//!
//! Pure: model in, the first error out. Its rules are Karpenter's CRD schemas and Kubernetes'
//! own validation where they exist: NodePool weight 0–100 (0 is "not set"), `minValues` 1–50,
//! budgets 0–100% or a count, a budget schedule that is a valid 5-field cron and comes with a
//! duration, no restricted label keys in NodePool requirements, non-negative quantities and
//! durations, durations within range (at most [`MAX_DURATION_SECONDS`]), unique object names
//! per kind (and namespace); for the catalog at least one instance type, unique names, positive
//! cpu and memory, a known architecture and finite non-negative prices.
//!
//! Every error names the field by its path in the contract's snapshot (the gRPC request's
//! path), e.g. `snapshot.node_pools[0].weight`, and the object (`NodePool default`), whichever
//! door the snapshot came through.

use std::collections::HashSet;
use std::fmt::Write as _;

use thiserror::Error;

use crate::labels;
use crate::model::{
    BudgetNodes, ClusterSnapshot, Node, NodeClaim, NodeClass, NodePool, Pod, Requirement, Resources,
};
use crate::requirements::well_known;
use common::catalog::Catalog;
use common::cron::Schedule;

/// The longest duration accepted anywhere (100 years in seconds): far above any real
/// `expireAfter` or `consolidateAfter`, and small enough that a timestamp plus it cannot wrap.
pub const MAX_DURATION_SECONDS: i64 = 100 * 366 * 24 * 3600;

/// Most `minValues` Karpenter's schema accepts.
pub const MAX_MIN_VALUES: u32 = 50;

/// Architectures an instance type may have (`kubernetes.io/arch`).
pub const ARCHITECTURES: &[&str] = &["amd64", "arm64"];

/// A snapshot or catalog that cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A field breaks one of the rules.
    #[error("{field}: {reason}{}", object_suffix(.object))]
    Invalid {
        /// Path of the field in the contract's snapshot, e.g. `snapshot.pods[3].requests.cpu`.
        field: String,
        /// The object at fault, e.g. `Pod default/web-0`; empty for the catalog as a whole.
        object: String,
        /// What is wrong.
        reason: String,
    },
}

fn object_suffix(object: &str) -> String {
    if object.is_empty() {
        String::new()
    } else {
        format!(" ({object})")
    }
}

// === impl Error ===

impl Error {
    /// Path of the field at fault.
    pub fn field(&self) -> &str {
        match self {
            Error::Invalid { field, .. } => field,
        }
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        match self {
            Error::Invalid { reason, .. } => reason,
        }
    }

    /// The object at fault (`Kind namespace/name`), empty when none.
    pub fn object(&self) -> &str {
        match self {
            Error::Invalid { object, .. } => object,
        }
    }
}

/// Result of a validation.
pub type Result<T = (), E = Error> = std::result::Result<T, E>;

fn invalid(field: String, object: &str, reason: impl Into<String>) -> Error {
    Error::Invalid {
        field,
        object: object.to_string(),
        reason: reason.into(),
    }
}

/// Renders `base` + a map key the way the wire paths do: `.cpu`, or `["nvidia.com/gpu"]`.
fn key_path(base: &str, key: &str) -> String {
    let mut out = base.to_string();
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        out.push('.');
        out.push_str(key);
    } else {
        let _ = write!(out, "[{key:?}]");
    }
    out
}

/// Validates a snapshot.
///
/// # Errors
/// [`Error::Invalid`] naming the first field at fault.
pub fn snapshot(s: &ClusterSnapshot) -> Result {
    let mut seen = HashSet::new();
    for (i, p) in s.pods.iter().enumerate() {
        let at = format!("snapshot.pods[{i}]");
        let obj = format!("Pod {}/{}", p.namespace, p.name);
        unique(&mut seen, &at, &obj, "pod", &p.namespace, &p.name)?;
        pod(p, &at, &obj)?;
    }
    seen.clear();
    for (i, n) in s.nodes.iter().enumerate() {
        let at = format!("snapshot.nodes[{i}]");
        let obj = format!("Node {}", n.name);
        unique(&mut seen, &at, &obj, "node", "", &n.name)?;
        node(n, &at, &obj)?;
    }
    seen.clear();
    for (i, c) in s.node_claims.iter().enumerate() {
        let at = format!("snapshot.node_claims[{i}]");
        let obj = format!("NodeClaim {}", c.name);
        unique(&mut seen, &at, &obj, "NodeClaim", "", &c.name)?;
        node_claim(c, &at, &obj)?;
    }
    seen.clear();
    for (i, p) in s.node_pools.iter().enumerate() {
        let at = format!("snapshot.node_pools[{i}]");
        let obj = format!("NodePool {}", p.name);
        unique(&mut seen, &at, &obj, "NodePool", "", &p.name)?;
        node_pool(p, &at, &obj)?;
    }
    seen.clear();
    for (i, c) in s.node_classes.iter().enumerate() {
        let at = format!("snapshot.node_classes[{i}]");
        let obj = format!("EC2NodeClass {}", c.name);
        unique(&mut seen, &at, &obj, "EC2NodeClass", "", &c.name)?;
        node_class(c, &at, &obj)?;
    }
    seen.clear();
    for (i, d) in s.daemon_sets.iter().enumerate() {
        let at = format!("snapshot.daemon_sets[{i}]");
        let obj = format!("DaemonSet {}/{}", d.namespace, d.name);
        unique(&mut seen, &at, &obj, "DaemonSet", &d.namespace, &d.name)?;
    }
    seen.clear();
    for (i, d) in s.pdbs.iter().enumerate() {
        let at = format!("snapshot.pdbs[{i}]");
        let obj = format!("PodDisruptionBudget {}/{}", d.namespace, d.name);
        unique(
            &mut seen,
            &at,
            &obj,
            "PodDisruptionBudget",
            &d.namespace,
            &d.name,
        )?;
    }
    seen.clear();
    for (i, n) in s.namespaces.iter().enumerate() {
        let at = format!("snapshot.namespaces[{i}]");
        let obj = format!("Namespace {}", n.name);
        unique(&mut seen, &at, &obj, "Namespace", "", &n.name)?;
    }
    seen.clear();
    for (i, c) in s.pvcs.iter().enumerate() {
        let at = format!("snapshot.pvcs[{i}]");
        let obj = format!("PersistentVolumeClaim {}/{}", c.namespace, c.name);
        unique(
            &mut seen,
            &at,
            &obj,
            "PersistentVolumeClaim",
            &c.namespace,
            &c.name,
        )?;
    }
    seen.clear();
    for (i, v) in s.pvs.iter().enumerate() {
        let at = format!("snapshot.pvs[{i}]");
        let obj = format!("PersistentVolume {}", v.name);
        unique(&mut seen, &at, &obj, "PersistentVolume", "", &v.name)?;
    }
    seen.clear();
    for (i, c) in s.storage_classes.iter().enumerate() {
        let at = format!("snapshot.storage_classes[{i}]");
        let obj = format!("StorageClass {}", c.name);
        unique(&mut seen, &at, &obj, "StorageClass", "", &c.name)?;
    }
    seen.clear();
    for (i, o) in s.node_overlays.iter().enumerate() {
        let at = format!("snapshot.node_overlays[{i}]");
        let obj = format!("NodeOverlay {}", o.name);
        unique(&mut seen, &at, &obj, "NodeOverlay", "", &o.name)?;
    }
    Ok(())
}

/// The rules of one pod; `at` is its path (empty: paths relative to the pod).
pub(crate) fn pod(p: &Pod, at: &str, obj: &str) -> Result {
    resources(&p.requests, &format!("{at}.requests"), obj)?;
    for (w, t) in p.preferred_node_affinity.iter().enumerate() {
        weight_1_100(
            t.weight,
            format!("{at}.preferred_node_affinity[{w}].weight"),
            obj,
        )?;
    }
    for (w, t) in p.preferred_pod_affinity.iter().enumerate() {
        weight_1_100(
            t.weight,
            format!("{at}.preferred_pod_affinity[{w}].weight"),
            obj,
        )?;
    }
    for (w, t) in p.preferred_pod_anti_affinity.iter().enumerate() {
        weight_1_100(
            t.weight,
            format!("{at}.preferred_pod_anti_affinity[{w}].weight"),
            obj,
        )?;
    }
    Ok(())
}

/// The rules of one node.
pub(crate) fn node(n: &Node, at: &str, obj: &str) -> Result {
    resources(&n.allocatable, &format!("{at}.allocatable"), obj)?;
    resources(&n.capacity, &format!("{at}.capacity"), obj)
}

/// The rules of one NodeClaim.
pub(crate) fn node_claim(c: &NodeClaim, at: &str, obj: &str) -> Result {
    duration(c.expire_after, format!("{at}.expire_after"), obj)?;
    min_values(&c.requirements, &format!("{at}.requirements"), obj)?;
    resources(&c.requests, &format!("{at}.requests"), obj)?;
    resources(&c.allocatable, &format!("{at}.allocatable"), obj)?;
    resources(&c.capacity, &format!("{at}.capacity"), obj)
}

/// The rules of one EC2NodeClass.
pub(crate) fn node_class(c: &NodeClass, at: &str, obj: &str) -> Result {
    for (v, f) in [
        (c.kubelet.max_pods, "max_pods"),
        (c.kubelet.pods_per_core, "pods_per_core"),
    ] {
        if let Some(v) = v
            && v < 0
        {
            return Err(invalid(
                format!("{at}.kubelet.{f}"),
                obj,
                format!("must not be negative, got {v}"),
            ));
        }
    }
    Ok(())
}

fn unique(
    seen: &mut HashSet<(String, String)>,
    at: &str,
    obj: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result {
    if seen.insert((namespace.to_string(), name.to_string())) {
        return Ok(());
    }
    let what = common::key::object("", (!namespace.is_empty()).then_some(namespace), name);
    Err(invalid(
        format!("{at}.name"),
        obj,
        format!("duplicate {kind} {what}: names are unique per kind and namespace"),
    ))
}

fn resources(r: &Resources, at: &str, obj: &str) -> Result {
    for (name, v) in [
        ("cpu", r.cpu),
        ("memory", r.memory),
        ("ephemeral-storage", r.ephemeral_storage),
        ("pods", r.pods),
    ]
    .into_iter()
    .chain(r.extended.iter().map(|(k, v)| (k.as_str(), *v)))
    {
        if v < 0 {
            return Err(invalid(
                key_path(at, name),
                obj,
                format!("quantities must not be negative, got {v}"),
            ));
        }
    }
    Ok(())
}

fn weight_1_100(w: i32, field: String, obj: &str) -> Result {
    if (1..=100).contains(&w) {
        Ok(())
    } else {
        Err(invalid(field, obj, format!("must be 1-100, got {w}")))
    }
}

fn duration(d: Option<i64>, field: String, obj: &str) -> Result {
    match d {
        Some(v) if v < 0 => Err(invalid(
            field,
            obj,
            format!("durations must not be negative, got {v}s"),
        )),
        Some(v) if v > MAX_DURATION_SECONDS => Err(invalid(
            field,
            obj,
            format!("duration {v}s is out of range (at most {MAX_DURATION_SECONDS}s, 100 years)"),
        )),
        _ => Ok(()),
    }
}

fn min_values(reqs: &[Requirement], at: &str, obj: &str) -> Result {
    for (j, r) in reqs.iter().enumerate() {
        if let Some(m) = r.min_values
            && !(1..=MAX_MIN_VALUES).contains(&m)
        {
            return Err(invalid(
                format!("{at}[{j}].min_values"),
                obj,
                format!("must be 1-{MAX_MIN_VALUES}, got {m}"),
            ));
        }
    }
    Ok(())
}

/// True for a requirement key a NodePool may not use (Karpenter's CEL rules on
/// `spec.template.spec.requirements[].key`).
pub fn is_restricted_requirement_key(key: &str) -> bool {
    if key == labels::NODEPOOL || key == labels::HOSTNAME || well_known::is_restricted(key) {
        return true;
    }
    let domain = key.split_once('/').map_or("", |(d, _)| d);
    key != labels::CAPACITY_TYPE && domain.ends_with("karpenter.sh")
}

/// The rules of one NodePool.
pub(crate) fn node_pool(p: &NodePool, at: &str, obj: &str) -> Result {
    if !(0..=100).contains(&p.weight) {
        return Err(invalid(
            format!("{at}.weight"),
            obj,
            format!("must be 1-100, got {}", p.weight),
        ));
    }
    for (j, r) in p.requirements.iter().enumerate() {
        if is_restricted_requirement_key(&r.key) {
            return Err(invalid(
                format!("{at}.requirements[{j}].key"),
                obj,
                format!("label {:?} is restricted", r.key),
            ));
        }
    }
    min_values(&p.requirements, &format!("{at}.requirements"), obj)?;
    static_pool(p, at, obj)?;
    duration(p.expire_after, format!("{at}.expire_after"), obj)?;
    if let Some(l) = &p.limits {
        resources(l, &format!("{at}.limits.quantities"), obj)?;
    }
    let d = format!("{at}.disruption");
    duration(
        p.disruption.consolidate_after,
        format!("{d}.consolidate_after"),
        obj,
    )?;
    for (b, budget) in p.disruption.budgets.iter().enumerate() {
        let ba = format!("{d}.budgets[{b}]");
        if let BudgetNodes::Percent(n) = budget.nodes
            && n > 100
        {
            return Err(invalid(
                format!("{ba}.nodes"),
                obj,
                format!("a percentage must be 0-100%, got {n}%"),
            ));
        }
        duration(budget.duration, format!("{ba}.duration"), obj)?;
        match (&budget.schedule, budget.duration) {
            (Some(s), Some(_)) => {
                if let Err(e) = Schedule::parse(s) {
                    return Err(invalid(
                        format!("{ba}.schedule"),
                        obj,
                        format!("invalid cron schedule {s:?}: {e}"),
                    ));
                }
            }
            (Some(_), None) => {
                return Err(invalid(
                    format!("{ba}.duration"),
                    obj,
                    "a budget with a schedule needs a duration",
                ));
            }
            (None, Some(_)) => {
                return Err(invalid(
                    format!("{ba}.schedule"),
                    obj,
                    "a budget with a duration needs a schedule",
                ));
            }
            (None, None) => {}
        }
    }
    Ok(())
}

/// `spec.replicas` and the rules the v1.14 CRD puts on a static NodePool: at least 0, no
/// `weight`, no limit but `nodes`.
fn static_pool(p: &NodePool, at: &str, obj: &str) -> Result {
    let Some(r) = p.replicas else {
        return Ok(());
    };
    if r < 0 {
        return Err(invalid(
            format!("{at}.replicas"),
            obj,
            format!("must be at least 0, got {r}"),
        ));
    }
    if p.weight != 0 {
        return Err(invalid(
            format!("{at}.weight"),
            obj,
            "'weight' is not supported on static NodePools",
        ));
    }
    if let Some(other) = p.limited_resources.iter().find(|r| r.as_str() != "nodes") {
        return Err(invalid(
            format!("{at}.limits.{other}"),
            obj,
            "only 'limits.nodes' is supported on static NodePools",
        ));
    }
    Ok(())
}

/// Validates a catalog. `at` is the path of the catalog in the request (`catalog` for the
/// wire's inline catalog; the catalog file's errors use its own field names).
///
/// # Errors
/// [`Error::Invalid`] naming the first field at fault.
pub fn catalog(c: &Catalog, at: &str) -> Result {
    if c.instance_types.is_empty() {
        return Err(invalid(
            format!("{at}.instance_types"),
            "",
            "the catalog has no instance types",
        ));
    }
    let mut seen = HashSet::new();
    for (i, t) in c.instance_types.iter().enumerate() {
        let ta = format!("{at}.instance_types[{i}]");
        let obj = format!("instance type {}", t.name);
        if !seen.insert(t.name.as_str()) {
            return Err(invalid(
                format!("{ta}.name"),
                &obj,
                format!("duplicate instance type {}", t.name),
            ));
        }
        resources(&t.capacity, &format!("{ta}.capacity"), &obj)?;
        for (v, f) in [(t.capacity.cpu, "cpu"), (t.capacity.memory, "memory")] {
            if v <= 0 {
                return Err(invalid(
                    format!("{ta}.capacity.{f}"),
                    &obj,
                    format!("must be positive, got {v}"),
                ));
            }
        }
        if let Some(arch) = t.labels.get(labels::ARCH)
            && !ARCHITECTURES.contains(&arch.as_str())
        {
            return Err(invalid(
                key_path(&format!("{ta}.labels"), labels::ARCH),
                &obj,
                format!("unknown architecture {arch:?} (expected one of amd64, arm64)"),
            ));
        }
        for (o, off) in t.offerings.iter().enumerate() {
            if !off.price.is_finite() || off.price < 0.0 {
                return Err(invalid(
                    format!("{ta}.offerings[{o}].price"),
                    &obj,
                    format!("must be a finite, non-negative number, got {}", off.price),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
