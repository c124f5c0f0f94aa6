//! Decoding object by object: an object that cannot be decoded is left out with why
//! ([`Exclusion`]), and the others are decoded. Each object is decoded from its own root, so
//! the field an exclusion names is its path inside the object (`requests.cpu`).

// An exclusion is what a bad object decodes to, one per object at most, and it is kept: boxing
// it would only add an allocation.
#![allow(clippy::result_large_err)]

use proto::v1 as pb;

use planner::exclusion::{self, Exclusion};
use planner::model::{self, ClusterSnapshot};

use crate::{At, Error, Result};

/// The exclusion of an object that cannot be decoded.
pub fn exclusion(kind: &str, namespace: &str, name: &str, e: &Error) -> Exclusion {
    Exclusion::new(
        kind,
        namespace,
        name,
        exclusion::INVALID,
        e.to_string(),
        e.field(),
    )
}

/// Decodes one object; one that cannot be decoded comes back as its exclusion.
///
/// # Errors
/// The [`Exclusion`] of an object that cannot be decoded.
pub fn decode<T, U>(
    raw: T,
    kind: &str,
    namespace: &str,
    name: &str,
    f: fn(T, At<'_>) -> Result<U>,
) -> std::result::Result<U, Exclusion> {
    f(raw, At::ROOT).map_err(|e| exclusion(kind, namespace, name, &e))
}

/// Decodes a NodePool; one that cannot be decoded comes back as its exclusion, with what of it
/// could be read (requirements, labels, taints) to tell which pods needed it. A
/// `consolidationPolicy` this planner does not know (one newer than Karpenter v1.14) is
/// `Unsupported`.
///
/// # Errors
/// The [`Exclusion`] of a NodePool that cannot be decoded.
pub fn node_pool(p: pb::NodePool) -> std::result::Result<model::NodePool, Exclusion> {
    let outline = outline(&p);
    let policy = p
        .disruption
        .as_ref()
        .map(|d| d.consolidation_policy.clone())
        .unwrap_or_default();
    let name = p.name.clone();
    super::node_pool(p, At::ROOT).map_err(|e| {
        let mut x = exclusion("NodePool", "", &name, &e);
        if !matches!(
            policy.as_str(),
            "" | "WhenEmpty" | "WhenEmptyOrUnderutilized" | "Balanced"
        ) {
            x.object.reason = exclusion::UNSUPPORTED.to_string();
            x.object.message = format!(
                "consolidationPolicy {policy} is newer than this planner knows (Karpenter v1.14); \
                 the NodePool is left out of every plan"
            );
        }
        x.with_node_pool(outline)
    })
}

/// What of a NodePool scheduling reads: its name, template labels, taints and requirements.
fn outline(p: &pb::NodePool) -> Option<model::NodePool> {
    Some(model::NodePool {
        name: p.name.clone(),
        labels: p.labels.clone(),
        taints: super::taints(p.taints.clone(), At::ROOT).ok()?,
        requirements: super::requirements(p.requirements.clone(), At::ROOT).ok()?,
        node_class: p.node_class.clone(),
        ..model::NodePool::default()
    })
}

/// Decodes a snapshot object by object, then runs the rules of every door
/// ([`planner::exclusion::partition`]): what is left can be planned, and every object left out
/// is in the list with why.
pub fn snapshot(s: pb::ClusterSnapshot) -> (ClusterSnapshot, Vec<Exclusion>) {
    let mut out = Vec::new();
    let mut snap = ClusterSnapshot::default();
    fn each<T, U>(
        items: Vec<T>,
        out: &mut Vec<Exclusion>,
        into: &mut Vec<U>,
        id: impl Fn(&T) -> (&'static str, String, String),
        f: impl Fn(T) -> std::result::Result<U, Exclusion>,
    ) {
        for x in items {
            let (kind, ns, name) = id(&x);
            match f(x) {
                Ok(v) => into.push(v),
                Err(mut e) => {
                    e.object.kind = kind.to_string();
                    e.object.namespace = ns;
                    e.object.name = name;
                    out.push(e);
                }
            }
        }
    }
    // Empty names mean nothing; the rest are zones.
    snap.shifted_zones = s
        .shifted_zones
        .into_iter()
        .filter(|z| !z.trim().is_empty())
        .collect();
    let o = &mut out;
    for p in s.pods {
        let stand_in = pod_placeholder(&p);
        let (ns, name) = (p.namespace.clone(), p.name.clone());
        match decode(p, "Pod", &ns, &name, super::pod) {
            Ok(v) => snap.pods.push(v),
            Err(e) => {
                snap.pods.extend(stand_in);
                o.push(e);
            }
        }
    }
    each(
        s.nodes,
        o,
        &mut snap.nodes,
        |n| ("Node", String::new(), n.name.clone()),
        |n| decode(n, "Node", "", "", super::node),
    );
    each(
        s.node_claims,
        o,
        &mut snap.node_claims,
        |c| ("NodeClaim", String::new(), c.name.clone()),
        |c| decode(c, "NodeClaim", "", "", super::node_claim),
    );
    each(
        s.node_pools,
        o,
        &mut snap.node_pools,
        |p| ("NodePool", String::new(), p.name.clone()),
        node_pool,
    );
    each(
        s.node_classes,
        o,
        &mut snap.node_classes,
        |c| ("EC2NodeClass", String::new(), c.name.clone()),
        |c| decode(c, "EC2NodeClass", "", "", super::node_class),
    );
    each(
        s.daemon_sets,
        o,
        &mut snap.daemon_sets,
        |d| ("DaemonSet", d.namespace.clone(), d.name.clone()),
        |d| decode(d, "DaemonSet", "", "", super::daemon_set),
    );
    each(
        s.pdbs,
        o,
        &mut snap.pdbs,
        |d| ("PodDisruptionBudget", d.namespace.clone(), d.name.clone()),
        |d| decode(d, "PodDisruptionBudget", "", "", super::pdb),
    );
    each(
        s.namespaces,
        o,
        &mut snap.namespaces,
        |n| ("Namespace", String::new(), n.name.clone()),
        |n| decode(n, "Namespace", "", "", super::namespace),
    );
    each(
        s.pvcs,
        o,
        &mut snap.pvcs,
        |c| ("PersistentVolumeClaim", c.namespace.clone(), c.name.clone()),
        |c| decode(c, "PersistentVolumeClaim", "", "", super::pvc),
    );
    each(
        s.pvs,
        o,
        &mut snap.pvs,
        |v| ("PersistentVolume", String::new(), v.name.clone()),
        |v| decode(v, "PersistentVolume", "", "", super::pv),
    );
    each(
        s.storage_classes,
        o,
        &mut snap.storage_classes,
        |c| ("StorageClass", String::new(), c.name.clone()),
        |c| decode(c, "StorageClass", "", "", super::storage_class),
    );
    each(
        s.node_overlays,
        o,
        &mut snap.node_overlays,
        |v| ("NodeOverlay", String::new(), v.name.clone()),
        |v| decode(v, "NodeOverlay", "", "", super::node_overlay),
    );
    each(
        s.capacity_buffers,
        o,
        &mut snap.capacity_buffers,
        |b| ("CapacityBuffer", b.namespace.clone(), b.name.clone()),
        |b| decode(b, "CapacityBuffer", "", "", super::capacity_buffer),
    );
    each(
        s.resource_claims,
        o,
        &mut snap.resource_claims,
        |c| ("ResourceClaim", c.namespace.clone(), c.name.clone()),
        |c| decode(c, "ResourceClaim", "", "", super::resource_claim),
    );
    each(
        s.device_classes,
        o,
        &mut snap.device_classes,
        |c| ("DeviceClass", String::new(), c.name.clone()),
        |c| decode(c, "DeviceClass", "", "", super::device_class),
    );
    each(
        s.resource_slices,
        o,
        &mut snap.resource_slices,
        |c| ("ResourceSlice", String::new(), c.name.clone()),
        |c| decode(c, "ResourceSlice", "", "", super::resource_slice),
    );
    let out = finish(&mut snap, out);
    (snap, out)
}

/// The placeholder of a bound pod whose spec cannot be decoded: its identity, labels, owner
/// and node, one pod slot, `karpenter.sh/do-not-disrupt` ([`planner::exclusion::placeholder`]).
pub fn pod_placeholder(p: &pb::Pod) -> Option<model::Pod> {
    p.node_name.as_ref().filter(|n| !n.is_empty())?;
    let identity = |phase: String| pb::Pod {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
        labels: p.labels.clone(),
        owner: p.owner.clone(),
        node_name: p.node_name.clone(),
        phase,
        priority: p.priority,
        creation_time: p.creation_time,
        start_time: p.start_time,
        deletion_time: p.deletion_time,
        ..pb::Pod::default()
    };
    let pod = super::pod(identity(p.phase.clone()), At::ROOT)
        .or_else(|_| super::pod(identity("Running".into()), At::ROOT))
        .ok()?;
    exclusion::placeholder(&pod)
}

/// Runs the rules object by object on what decoded, adding their exclusions to `decoded`'s.
/// A pod bound to a node that could not be decoded stays as a placeholder that protects its
/// node (see [`planner::exclusion::placeholder`]).
pub fn finish(snap: &mut ClusterSnapshot, mut decoded: Vec<Exclusion>) -> Vec<Exclusion> {
    decoded.extend(exclusion::partition(snap));
    decoded
}
