//! Disruption candidates (Karpenter's `disruption.Candidate` / `NewCandidate`).
//!
//! A candidate is an initialized Node owned by a NodePool (label `karpenter.sh/nodepool`) that
//! is not already being deleted. Each carries its price (the catalog offering of its instance
//! type, zone and capacity type), whether it is consolidatable at `now`, its drift and expiry
//! state, and the blocker that keeps graceful disruption away from it, in words.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::{Catalog, InstanceType};
use crate::labels;
use crate::model::{
    ClaimIndex, ClusterSnapshot, ConsolidationPolicy, IntOrPercent, Node, NodeClaim, NodePool, Pod,
    PodDisruptionBudget, Timestamp,
};
use crate::requirements::Requirements;
use common::duration::parse_go_duration;

/// Annotation carrying Kubernetes' pod deletion cost (ReplicaSet scale-down order).
pub use common::labels::POD_DELETION_COST;

/// Annotation with the NodePool hash version (`designs/drift-hash.md`).
pub const NODEPOOL_HASH_VERSION: &str = common::hash::NODEPOOL_HASH_VERSION_ANNOTATION;
/// Annotation with the EC2NodeClass hash version.
pub const NODECLASS_HASH_VERSION: &str = common::hash::NODECLASS_HASH_VERSION_ANNOTATION;
/// The hash version dovetail writes next to its hashes.
pub const HASH_VERSION: &str = common::hash::HASH_VERSION;

/// One existing node that disruption may act on.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Node name.
    pub name: String,
    /// Name of the NodeClaim that launched it, when known.
    pub claim: Option<String>,
    /// Its NodePool.
    pub node_pool: String,
    /// `node.kubernetes.io/instance-type`.
    pub instance_type: Option<String>,
    /// `topology.kubernetes.io/zone`.
    pub zone: Option<String>,
    /// `karpenter.sh/capacity-type`.
    pub capacity_type: Option<String>,
    /// Hourly price of its offering; `None` when the catalog does not sell it.
    pub price: Option<f64>,
    /// Creation time of its NodeClaim, else of the node.
    pub created: Option<Timestamp>,
    /// `expireAfter` that applies (seconds); `None` is Never.
    pub expire_after: Option<i64>,
    /// The last pod event: claim `status.lastPodEventTime`, else the newest bound pod start,
    /// else creation.
    pub last_pod_event: Option<Timestamp>,
    /// The pool's consolidation policy.
    pub policy: ConsolidationPolicy,
    /// Its pool is static (`spec.replicas`): never consolidated, scaled down to its replicas.
    pub static_pool: bool,
    /// Whether `consolidateAfter` has elapsed since the last pod event (false when `Never`).
    pub consolidatable: bool,
    /// Why graceful disruption (Empty, Underutilized, Drifted) may not touch it.
    pub blocker: Option<String>,
    /// Why it is drifted.
    pub drift: Option<String>,
    /// Whether `expireAfter` has elapsed since creation.
    pub expired: bool,
}

/// Node name → indices (into `snapshot.pods`) of the pods bound to it that still use it.
pub(crate) type PodsByNode = BTreeMap<String, Vec<usize>>;

/// Indexes bound, active pods by node.
pub(crate) fn pods_by_node(snapshot: &ClusterSnapshot) -> PodsByNode {
    let mut out: PodsByNode = BTreeMap::new();
    for (i, p) in snapshot.pods.iter().enumerate() {
        if let Some(n) = &p.node_name
            && p.is_bound_active()
        {
            out.entry(n.clone()).or_default().push(i);
        }
    }
    out
}

/// A pod that has to move when its node goes: bound, running or pending, not terminating, not a
/// DaemonSet or mirror pod (Karpenter's `IsReschedulable`).
pub fn is_reschedulable(pod: &Pod) -> bool {
    pod.is_bound_active()
        && pod.deletion_time.is_none()
        && !pod.is_daemonset_pod()
        && !pod.is_mirror_pod()
}

/// Whether `karpenter.sh/do-not-disrupt` on a pod blocks disruption at `now`: `"true"` blocks;
/// a Go duration (`"4h"`) blocks until the pod's start time plus that duration (and blocks when
/// the start time is unknown); any other value, or a duration that is not positive, is ignored,
/// as Karpenter does.
pub fn pod_do_not_disrupt(pod: &Pod, now: Timestamp) -> Option<String> {
    let v = pod.annotations.get(labels::DO_NOT_DISRUPT)?;
    if v == "true" {
        return Some(format!(
            "pod {} has {}=true",
            pod.key(),
            labels::DO_NOT_DISRUPT
        ));
    }
    let d = parse_go_duration(v.trim()).ok()?;
    if d <= 0 {
        return None;
    }
    match pod.start_time {
        None => Some(format!(
            "pod {} has {}={v} and no start time",
            pod.key(),
            labels::DO_NOT_DISRUPT
        )),
        Some(start) if now < start.saturating_add(d) => Some(format!(
            "pod {} has {}={v} (until {}s after its start)",
            pod.key(),
            labels::DO_NOT_DISRUPT,
            d
        )),
        Some(_) => None,
    }
}

/// Eviction cost of one pod (Karpenter's `EvictionCost`): 1, plus the deletion-cost annotation
/// scaled by 2^-27, plus the priority scaled by 2^-25, clamped to [-10, 10].
pub fn eviction_cost(pod: &Pod) -> f64 {
    let mut cost = 1.0;
    if let Some(v) = pod.annotations.get(POD_DELETION_COST)
        && let Ok(c) = v.trim().parse::<f64>()
    {
        cost += c / 2f64.powi(27);
    }
    cost += f64::from(pod.priority) / 2f64.powi(25);
    cost.clamp(-10.0, 10.0)
}

/// Fraction of the node's lifetime left before `expireAfter` (1 when it never expires).
pub fn lifetime_remaining(c: &Candidate, now: Timestamp) -> f64 {
    match (c.expire_after, c.created) {
        (Some(e), Some(created)) if e > 0 => {
            (1.0 - now.saturating_sub(created) as f64 / e as f64).clamp(0.0, 1.0)
        }
        _ => 1.0,
    }
}

/// The offering price of an instance type in a zone and capacity type.
pub fn offering_price(it: &InstanceType, zone: Option<&str>, ct: Option<&str>) -> Option<f64> {
    it.offerings
        .iter()
        .filter(|o| zone.is_none_or(|z| o.zone == z))
        .filter(|o| ct.is_none_or(|c| o.capacity_type == c))
        .map(|o| o.price)
        .filter(|p| p.is_finite())
        .reduce(f64::min)
}

/// A PodDisruptionBudget with the evictions it allows now.
#[derive(Debug, Clone)]
pub(crate) struct PdbState<'a> {
    pub(crate) pdb: &'a PodDisruptionBudget,
    pub(crate) allowed: i64,
}

/// Evictions each PDB allows: `status.disruptionsAllowed`, else computed from the spec against
/// the pods of the input (expected: matching pods not terminated; healthy: matching running
/// bound pods).
pub(crate) fn pdb_states(snapshot: &ClusterSnapshot) -> Vec<PdbState<'_>> {
    snapshot
        .pdbs
        .iter()
        .map(|pdb| {
            let allowed = match pdb.disruptions_allowed {
                Some(a) => i64::from(a),
                None => {
                    let matching = snapshot.pods.iter().filter(|p| {
                        p.namespace == pdb.namespace
                            && p.deletion_time.is_none()
                            && !matches!(
                                p.phase,
                                crate::model::PodPhase::Succeeded | crate::model::PodPhase::Failed
                            )
                            && pdb.selector.as_ref().is_some_and(|s| s.matches(&p.labels))
                    });
                    let (mut expected, mut healthy) = (0i64, 0i64);
                    for p in matching {
                        expected += 1;
                        if p.node_name.is_some() && p.phase == crate::model::PodPhase::Running {
                            healthy += 1;
                        }
                    }
                    let scaled = |v: IntOrPercent| match v {
                        IntOrPercent::Int(n) => i64::from(n),
                        IntOrPercent::Percent(p) => (expected * i64::from(p) + 99) / 100,
                    };
                    let desired = match (pdb.min_available, pdb.max_unavailable) {
                        (Some(m), _) => scaled(m),
                        (None, Some(u)) => expected - scaled(u),
                        (None, None) => 0,
                    };
                    (healthy - desired).max(0)
                }
            };
            PdbState { pdb, allowed }
        })
        .collect()
}

/// Indices of the PDBs covering a pod.
pub(crate) fn pdbs_of(pod: &Pod, pdbs: &[PdbState<'_>]) -> Vec<usize> {
    pdbs.iter()
        .enumerate()
        .filter(|(_, s)| {
            s.pdb.namespace == pod.namespace
                && s.pdb
                    .selector
                    .as_ref()
                    .is_some_and(|sel| sel.matches(&pod.labels))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Whether a NodePool's node is initialized: label `karpenter.sh/initialized=true` (Karpenter
/// sets it once the node is ready and its startup taints are gone).
pub(crate) fn is_initialized(node: &Node) -> bool {
    node.labels.get(labels::INITIALIZED).map(String::as_str) == Some("true")
}

/// Existing capacity that pods of a disrupted node must not be counted on, with the reason
/// (Karpenter's `SimulateScheduling` refuses results that rely on them): NodePool nodes not yet
/// initialized, nodes not Ready, in-flight NodeClaims, and NodePool nodes whose
/// `consolidateAfter` window is still running (they just had pod events).
pub(crate) fn unusable_destinations(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let claims = ClaimIndex::new(&snapshot.node_claims);
    for node in &snapshot.nodes {
        let claim = claims.claim_of(node);
        let managed = pool_name(node, claim).is_some();
        if !node.ready {
            out.insert(
                node.name.clone(),
                format!("node {} is not Ready", node.name),
            );
        } else if managed && !is_initialized(node) {
            out.insert(
                node.name.clone(),
                format!("node {} is not initialized", node.name),
            );
        }
    }
    for c in &snapshot.node_claims {
        let has_node = snapshot.nodes.iter().any(|n| {
            c.node_name.as_deref() == Some(n.name.as_str())
                || (c.provider_id.is_some() && c.provider_id == n.provider_id)
        });
        if !has_node {
            out.insert(
                c.name.clone(),
                format!("NodeClaim {} is still launching", c.name),
            );
        }
    }
    let pools: BTreeMap<&str, &NodePool> = snapshot
        .node_pools
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    for c in candidates {
        if let (Some(pool), Some(last)) = (pools.get(c.node_pool.as_str()), c.last_pod_event)
            && let Some(after) = pool.disruption.consolidate_after
            && now < last.saturating_add(after)
        {
            out.entry(c.name.clone()).or_insert_with(|| {
                format!("node {} is within its consolidateAfter window", c.name)
            });
        }
    }
    out
}

/// Whether a node already counts as disrupting: deleting, tainted `karpenter.sh/disrupted`,
/// or NotReady.
pub(crate) fn is_disrupting(node: &Node) -> bool {
    node.deletion_time.is_some()
        || !node.ready
        || node.taints.iter().any(|t| t.key == labels::DISRUPTED_TAINT)
}

/// The NodePool that owns a node, from its label or its claim's.
pub(crate) fn pool_name<'a>(node: &'a Node, claim: Option<&'a NodeClaim>) -> Option<&'a str> {
    node.labels
        .get(labels::NODEPOOL)
        .or_else(|| claim.and_then(|c| c.labels.get(labels::NODEPOOL)))
        .map(String::as_str)
}

/// Builds the candidates of a snapshot, sorted by node name, plus per-pool counts of
/// (managed initialized nodes, disrupting nodes) for budgets.
pub(crate) fn build(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: Timestamp,
    pods: &PodsByNode,
) -> (Vec<Candidate>, BTreeMap<String, (u32, u32)>) {
    let pools: BTreeMap<&str, &NodePool> = snapshot
        .node_pools
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let classes: BTreeMap<&str, &crate::model::NodeClass> = snapshot
        .node_classes
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let types: BTreeMap<&str, &InstanceType> = catalog
        .instance_types
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let mut counts: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut out = Vec::new();
    let mut nodes: Vec<&Node> = snapshot.nodes.iter().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let claims = ClaimIndex::new(&snapshot.node_claims);
    for node in nodes {
        let claim = claims.claim_of(node);
        let Some(pool_name) = pool_name(node, claim) else {
            continue;
        };
        let Some(pool) = pools.get(pool_name) else {
            continue;
        };
        if !is_initialized(node) {
            continue;
        }
        let entry = counts.entry(pool.name.clone()).or_default();
        entry.0 += 1;
        if is_disrupting(node) {
            entry.1 += 1;
        }
        if node.deletion_time.is_some() || claim.is_some_and(|c| c.deletion_time.is_some()) {
            continue;
        }
        let instance_type = node.labels.get(labels::INSTANCE_TYPE).cloned();
        let zone = node.labels.get(labels::ZONE).cloned();
        let capacity_type = node.labels.get(labels::CAPACITY_TYPE).cloned();
        let it = instance_type.as_deref().and_then(|n| types.get(n).copied());
        let price = it.and_then(|t| offering_price(t, zone.as_deref(), capacity_type.as_deref()));
        // The NodeClaim is created before its Node registers; Karpenter counts expiry from the
        // NodeClaim's creation.
        let created = claim.and_then(|c| c.creation_time).or(node.creation_time);
        let expire_after = match claim {
            Some(c) => c.expire_after,
            None => pool.expire_after,
        };
        let node_pods: Vec<&Pod> = pods
            .get(&node.name)
            .map(|v| v.iter().map(|&i| &snapshot.pods[i]).collect())
            .unwrap_or_default();
        let last_pod_event = claim
            .and_then(|c| c.last_pod_event_time)
            .or_else(|| node_pods.iter().filter_map(|p| p.start_time).max())
            .or(created);
        let consolidatable = match pool.disruption.consolidate_after {
            None => false,
            Some(after) => last_pod_event.is_none_or(|t| now >= t.saturating_add(after)),
        };
        let blocker =
            crate::catalog::zonal_shift::blocker(zone.as_deref(), &snapshot.shifted_zones)
                .or_else(|| blocker(node, &node_pods, now));
        let drift = drift(node, claim, pool, it, &classes);
        let expired = match (expire_after, created) {
            (Some(e), Some(c)) => now >= c.saturating_add(e),
            _ => false,
        };
        out.push(Candidate {
            name: node.name.clone(),
            claim: claim.map(|c| c.name.clone()),
            node_pool: pool.name.clone(),
            instance_type,
            zone,
            capacity_type,
            price,
            created,
            expire_after,
            last_pod_event,
            policy: pool.disruption.consolidation_policy,
            static_pool: pool.replicas.is_some(),
            consolidatable,
            blocker,
            drift,
            expired,
        });
    }
    (out, counts)
}

/// The static blockers of graceful disruption: the node's do-not-disrupt annotation, a pod's
/// do-not-disrupt (active at `now`), a reschedulable pod without a controller. PDBs are checked
/// when a decision is evaluated, against what earlier decisions of the plan already evict.
fn blocker(node: &Node, pods: &[&Pod], now: Timestamp) -> Option<String> {
    if node
        .annotations
        .get(labels::DO_NOT_DISRUPT)
        .map(String::as_str)
        == Some("true")
    {
        return Some(format!(
            "node {} has {}=true",
            node.name,
            labels::DO_NOT_DISRUPT
        ));
    }
    let mut sorted: Vec<&&Pod> = pods.iter().collect();
    sorted.sort_by_key(|p| p.key());
    for p in &sorted {
        if p.deletion_time.is_none()
            && let Some(why) = pod_do_not_disrupt(p, now)
        {
            return Some(why);
        }
    }
    for p in sorted {
        if is_reschedulable(p) && !p.owner.as_ref().is_some_and(|o| o.controller) {
            return Some(format!(
                "pod {} is not owned by a controller (it would not come back)",
                p.key()
            ));
        }
    }
    None
}

/// Why a node is drifted: its NodePool's requirements no longer admit its labels, its instance
/// type left the catalog, or its NodePool / EC2NodeClass hash annotation is stale. Hashes are
/// compared only when the node (or its claim) carries dovetail's hash version.
fn drift(
    node: &Node,
    claim: Option<&NodeClaim>,
    pool: &NodePool,
    it: Option<&InstanceType>,
    classes: &BTreeMap<&str, &crate::model::NodeClass>,
) -> Option<String> {
    let Some(it) = it else {
        return Some(match node.labels.get(labels::INSTANCE_TYPE) {
            Some(t) => format!("instance type {t} is not in the catalog"),
            None => format!("node has no {} label", labels::INSTANCE_TYPE),
        });
    };
    // Labels the instance type defines count as the node's when the node omits them.
    let mut node_labels = it.labels.clone();
    node_labels.insert(labels::INSTANCE_TYPE.to_string(), it.name.clone());
    if let Some(os) = it.os.first() {
        node_labels.insert(labels::OS.to_string(), os.clone());
    }
    for (k, v) in &node.labels {
        node_labels.insert(k.clone(), v.clone());
    }
    match Requirements::from_input(&pool.requirements) {
        Ok(reqs) => {
            if let Some(r) = reqs.first_unmatched(&node_labels) {
                return Some(format!(
                    "NodePool {} requirement {r} no longer admits the node",
                    pool.name
                ));
            }
        }
        Err(e) => {
            return Some(format!(
                "NodePool {} requirements are invalid: {e}",
                pool.name
            ));
        }
    }
    let annotation = |key: &str| {
        node.annotations
            .get(key)
            .or_else(|| claim.and_then(|c| c.annotations.get(key)))
    };
    let class = pool.node_class.as_deref().and_then(|n| classes.get(n));
    let checks = [
        (
            labels::NODEPOOL_HASH,
            NODEPOOL_HASH_VERSION,
            format!("NodePool {}", pool.name),
            pool.template_hash.as_str(),
            &pool.metadata_annotations,
        ),
        (
            labels::NODECLASS_HASH,
            NODECLASS_HASH_VERSION,
            format!("EC2NodeClass {}", class.map_or("", |c| c.name.as_str())),
            class.map_or("", |c| c.spec_hash.as_str()),
            class.map_or(&pool.metadata_annotations, |c| &c.metadata_annotations),
        ),
    ];
    for (hash_key, version_key, owner, ours, owner_annotations) in checks {
        let (Some(hash), Some(version)) = (annotation(hash_key), annotation(version_key)) else {
            continue;
        };
        // dovetail's own hash, or Karpenter's when the owner object carries Karpenter's hash
        // of the same version (exactly Karpenter's check); otherwise not comparable.
        let current = if version == HASH_VERSION {
            Some(ours)
        } else if owner_annotations.get(version_key) == Some(version) {
            owner_annotations.get(hash_key).map(String::as_str)
        } else {
            None
        };
        if let Some(current) = current
            && !current.is_empty()
            && hash != current
            && (hash_key == labels::NODEPOOL_HASH || class.is_some())
        {
            return Some(format!(
                "{hash_key} {hash} (version {version}) differs from {owner}'s {current}"
            ));
        }
    }
    // AMIDrift, as Karpenter decides it: the claim's image is no longer among the AMIs its
    // EC2NodeClass resolves to (the status the actuator writes). No status, no decision.
    if let (Some(class), Some(image)) = (class, claim.and_then(|c| c.image_id.as_deref()))
        && let Some(amis) = class.resolved_amis.as_ref().filter(|a| !a.is_empty())
        && !amis.iter().any(|a| a == image)
    {
        return Some(format!(
            "AMIDrift: image {image} is not among EC2NodeClass {}'s resolved AMIs ({})",
            class.name,
            amis.join(", ")
        ));
    }
    if let (Some(class), Some(claim)) = (class, claim) {
        return network_drift(class, claim);
    }
    None
}

/// SubnetDrift and SecurityGroupDrift, as Karpenter decides them from the instance: its subnet
/// is no longer among the EC2NodeClass's resolved subnets, or its security groups are not
/// exactly the resolved ones. The instance's side comes from the annotations the actuator
/// keeps on the NodeClaim ([`labels::INSTANCE_SUBNET`], [`labels::INSTANCE_SECURITY_GROUPS`]);
/// either side missing (no status, no annotation) decides nothing.
fn network_drift(class: &crate::model::NodeClass, claim: &NodeClaim) -> Option<String> {
    let annotation = |key: &str| {
        claim
            .annotations
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    };
    let resolved = |ids: &Option<Vec<String>>| ids.clone().filter(|v| !v.is_empty());
    if let Some(subnet) = annotation(labels::INSTANCE_SUBNET)
        && let Some(subnets) = resolved(&class.resolved_subnets)
        && !subnets.iter().any(|s| s == subnet)
    {
        return Some(format!(
            "SubnetDrift: subnet {subnet} is not among EC2NodeClass {}'s resolved subnets ({})",
            class.name,
            subnets.join(", ")
        ));
    }
    if let Some(groups) = annotation(labels::INSTANCE_SECURITY_GROUPS)
        && let Some(resolved) = resolved(&class.resolved_security_groups)
    {
        let set = |it: &mut dyn Iterator<Item = &str>| -> BTreeSet<String> {
            it.map(str::trim)
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect()
        };
        let instance = set(&mut groups.split(','));
        let wanted = set(&mut resolved.iter().map(String::as_str));
        if instance != wanted {
            let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
            return Some(format!(
                "SecurityGroupDrift: security groups ({}) differ from EC2NodeClass {}'s resolved security groups ({})",
                list(&instance),
                class.name,
                list(&wanted)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeClass;

    fn class(subnets: &[&str], groups: &[&str]) -> NodeClass {
        let ids = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        NodeClass {
            name: "default".into(),
            resolved_subnets: ids(subnets),
            resolved_security_groups: ids(groups),
            ..NodeClass::default()
        }
    }

    fn claim(subnet: &str, groups: &str) -> NodeClaim {
        NodeClaim {
            name: "c0".into(),
            annotations: [
                (labels::INSTANCE_SUBNET.to_string(), subnet.to_string()),
                (
                    labels::INSTANCE_SECURITY_GROUPS.to_string(),
                    groups.to_string(),
                ),
            ]
            .into(),
            ..NodeClaim::default()
        }
    }

    #[test]
    fn network_drift_names_karpenters_reason_and_both_sides() {
        let c = class(&["subnet-a", "subnet-b"], &["sg-1", "sg-2"]);
        assert_eq!(network_drift(&c, &claim("subnet-b", "sg-2, sg-1")), None);
        let subnet = network_drift(&c, &claim("subnet-z", "sg-1,sg-2")).expect("subnet drift");
        assert!(
            subnet.starts_with("SubnetDrift: subnet subnet-z "),
            "{subnet}"
        );
        assert!(subnet.contains("(subnet-a, subnet-b)"), "{subnet}");
        // A group fewer on the instance is drift as much as one more (set equality).
        let fewer = network_drift(&c, &claim("subnet-a", "sg-1")).expect("group drift");
        assert!(
            fewer.starts_with("SecurityGroupDrift: security groups (sg-1) "),
            "{fewer}"
        );
        assert!(fewer.ends_with("(sg-1, sg-2)"), "{fewer}");
        assert!(network_drift(&c, &claim("subnet-a", "sg-1,sg-2,sg-3")).is_some());
        // Either side unknown decides nothing: an empty status, an empty annotation.
        assert_eq!(
            network_drift(&class(&[], &[]), &claim("subnet-z", "sg-9")),
            None
        );
        assert_eq!(network_drift(&c, &claim("", "")), None);
    }
}
