//! Capacity that exists: Nodes and in-flight NodeClaims (Karpenter's `existingnode.go`).
//!
//! A NodeClaim and a Node are the same machine when the claim's `status.nodeName` is the Node's
//! name or its `status.providerID` equals the Node's `spec.providerID`. A NodeClaim with no Node
//! is in flight: it counts with its `status.allocatable`, or, before launch, with the smallest
//! allocatable among the instance types its requirements allow.

use std::collections::BTreeMap;

use crate::labels;
use crate::model::{ClusterSnapshot, HostPort, Labels, Node, NodeClaim, Taint};
use crate::requirements::{Requirement, Requirements, Undefined, taints};

use super::dims::{self, Dims, Vector};
use super::node_claim::Reject;
use super::pools::{DaemonInfo, Pool};
use super::ports::{normalize_ports, port_conflict_either};
use super::signature::Sig;

/// Taints that the node lifecycle controller puts on nodes that are still starting; Karpenter
/// ignores them, the `readiness.k8s.io/` family (`labels::EPHEMERAL_TAINT_KEY_PREFIXES`) and
/// startup taints on nodes it has not initialized yet.
const EPHEMERAL_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.cloudprovider.kubernetes.io/uninitialized",
];

/// An existing node or in-flight claim as a scheduling target.
#[derive(Clone, Debug)]
pub(crate) struct ExistingNode {
    /// Node name (or claim name when it has no node yet).
    pub(crate) name: String,
    /// Its labels as requirements, plus its hostname. Shared: every simulation clones the
    /// existing nodes, and the requirements never change during one.
    pub(crate) reqs: std::sync::Arc<Requirements>,
    /// Taints pods must tolerate.
    pub(crate) taints: Vec<Taint>,
    /// What is left: allocatable minus bound pods minus DaemonSets not yet running there.
    pub(crate) available: Vector,
    /// Host ports in use by bound pods and DaemonSets.
    pub(crate) ports: Vec<HostPort>,
    /// NodePool (from `karpenter.sh/nodepool`), if any.
    pub(crate) pool: Option<String>,
    /// Capacity, for NodePool limits.
    pub(crate) capacity: Vector,
    /// Whether pods may be placed here (not cordoned, deleting or failed).
    pub(crate) schedulable: bool,
    /// Whether it is initialized (a Node not managed by Karpenter, or one Karpenter labelled
    /// `karpenter.sh/initialized`); in-flight claims are not.
    pub(crate) initialized: bool,
    /// The single value of its `kubernetes.io/hostname` requirement, registered as a topology
    /// domain by every run.
    pub(crate) hostname: Option<String>,
}

/// An existing node as one solve or simulation sees it: the scheduler's node, borrowed, and
/// what this run placed there. A run borrows the nodes instead of cloning them: a disruption
/// plan simulates thousands of times over the same nodes, and each simulation places pods on
/// few of them.
#[derive(Debug)]
pub(crate) struct Target<'s> {
    /// The node as the scheduler built it.
    pub(crate) node: &'s ExistingNode,
    /// Pods this run placed here; `None` until the first.
    placed: Option<Box<Placed>>,
}

/// What a run placed on an existing node.
#[derive(Debug)]
struct Placed {
    /// Their requests.
    used: Vector,
    /// Their host ports.
    ports: Vec<HostPort>,
    /// Their work items.
    pods: Vec<u32>,
}

// === impl Target ===

impl<'s> Target<'s> {
    /// The node with nothing placed on it yet.
    pub(crate) fn new(node: &'s ExistingNode) -> Self {
        Self { node, placed: None }
    }

    /// Pods placed here in this run (work item indices).
    pub(crate) fn pods(&self) -> &[u32] {
        self.placed.as_ref().map_or(&[], |p| &p.pods)
    }

    /// Checks whether a pod fits; `topo` are extra requirements from topology.
    pub(crate) fn check(&self, sig: &Sig, topo: Option<&Requirements>) -> Result<(), Reject> {
        let node = self.node;
        if !node.schedulable {
            return Err(Reject::permanent("node is not schedulable"));
        }
        let fits = match &self.placed {
            None => dims::fits(&sig.requests, &node.available),
            Some(p) => dims::fits2(&p.used, &sig.requests, &node.available),
        };
        if !fits {
            return Err(Reject::permanent("not enough resources"));
        }
        if let Some(t) = taints::first_untolerated(&node.taints, &sig.tolerations) {
            return Err(Reject::permanent(format!(
                "did not tolerate {}",
                taints::describe(t)
            )));
        }
        let placed_ports = self.placed.as_ref().map_or(&[][..], |p| &p.ports);
        if let Some(p) = port_conflict_either(&node.ports, placed_ports, &sig.host_ports) {
            return Err(Reject::permanent(format!(
                "host port {}/{} already in use",
                p.port, p.protocol
            )));
        }
        node.reqs
            .compatible(&sig.reqs, Undefined::Deny)
            .map_err(|e| Reject::permanent(format!("incompatible requirements: {e}")))?;
        if let Some(t) = topo {
            node.reqs
                .compatible(t, Undefined::Deny)
                .map_err(|e| Reject::transient(format!("topology: {e}")))?;
        }
        Ok(())
    }

    /// The room left for pods' requests: available minus what this run placed, as
    /// [`Target::check`] compares them.
    pub(crate) fn free(&self) -> Vector {
        match &self.placed {
            None => self.node.available.clone(),
            Some(p) => self
                .node
                .available
                .iter()
                .zip(&p.used)
                .map(|(a, u)| a.saturating_sub(*u))
                .collect(),
        }
    }

    /// Records a placed pod.
    pub(crate) fn commit(&mut self, sig: &Sig, item: u32) {
        let placed = self.placed.get_or_insert_with(|| {
            Box::new(Placed {
                used: vec![0; sig.requests.len()].into_boxed_slice(),
                ports: Vec::new(),
                pods: Vec::new(),
            })
        });
        dims::add(&mut placed.used, &sig.requests);
        placed.ports.extend(sig.host_ports.iter().cloned());
        placed.pods.push(item);
    }
}

/// Builds the existing targets of a snapshot, sorted by name.
pub(crate) fn build(
    snapshot: &ClusterSnapshot,
    daemons: &[DaemonInfo<'_>],
    pools: &[Pool<'_>],
    d: &Dims,
) -> Vec<ExistingNode> {
    // Bound pods by node name.
    let mut bound: BTreeMap<&str, Vec<&crate::model::Pod>> = BTreeMap::new();
    for p in &snapshot.pods {
        if p.is_bound_active()
            && let Some(n) = &p.node_name
        {
            bound.entry(n.as_str()).or_default().push(p);
        }
    }
    let mut out = Vec::new();
    let mut claimed_nodes: Vec<&NodeClaim> = Vec::new();
    for c in &snapshot.node_claims {
        let has_node = snapshot.nodes.iter().any(|n| same_machine(c, n));
        if !has_node {
            out.push(from_claim(c, &bound, daemons, pools, d));
        } else {
            claimed_nodes.push(c);
        }
    }
    for n in &snapshot.nodes {
        let claim = claimed_nodes.iter().copied().find(|c| same_machine(c, n));
        out.push(from_node(n, claim, &bound, daemons, d));
    }
    // Karpenter tries initialized nodes before ones still starting.
    out.sort_by(|a, b| {
        b.initialized
            .cmp(&a.initialized)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// The NodeClaim ↔ Node matching rule.
pub(crate) fn same_machine(c: &NodeClaim, n: &Node) -> bool {
    c.node_name.as_deref() == Some(n.name.as_str())
        || (c.provider_id.is_some() && c.provider_id == n.provider_id)
}

fn is_initialized(labels_: &Labels) -> bool {
    labels_
        .get(labels::INITIALIZED)
        .is_some_and(|v| v == "true")
}

fn from_node(
    n: &Node,
    claim: Option<&NodeClaim>,
    bound: &BTreeMap<&str, Vec<&crate::model::Pod>>,
    daemons: &[DaemonInfo<'_>],
    d: &Dims,
) -> ExistingNode {
    // Until Karpenter marks a Node registered (`karpenter.sh/registered`, after copying its
    // NodeClaim's labels onto it), the NodeClaim's labels are the node's (`StateNode.Labels`,
    // kubernetes-sigs/karpenter `pkg/controllers/state/statenode.go`): a Node that has just
    // joined is still the capacity its claim promised, not an unlabelled stranger whose pods
    // need another claim.
    let merged;
    let node_labels: &Labels = match claim {
        Some(c) if n.labels.get(labels::REGISTERED).is_none_or(|v| v != "true") => {
            let mut l = n.labels.clone();
            for (k, v) in &c.labels {
                l.entry(k.clone()).or_insert_with(|| v.clone());
            }
            merged = l;
            &merged
        }
        _ => &n.labels,
    };
    let managed = node_labels.contains_key(labels::NODEPOOL);
    let initialized = !managed || is_initialized(node_labels);
    // Karpenter ignores startup and ephemeral taints until it has initialized a node.
    let startup: &[Taint] = claim.map(|c| c.startup_taints.as_slice()).unwrap_or(&[]);
    let node_taints: Vec<Taint> = if initialized {
        n.taints.clone()
    } else {
        n.taints
            .iter()
            .filter(|t| {
                !EPHEMERAL_TAINTS.contains(&t.key.as_str())
                    && !labels::is_ephemeral_taint_family(&t.key)
                    && !startup.contains(t)
            })
            .cloned()
            .collect()
    };
    // A NotReady node that Karpenter has initialized is broken, not starting: no new pods.
    let schedulable = !n.unschedulable && n.deletion_time.is_none() && (n.ready || !initialized);
    // Until Karpenter has initialized a Node, its NodeClaim's allocatable and capacity are the
    // node's (`StateNode.Allocatable`/`Capacity` in kubernetes-sigs/karpenter
    // `pkg/controllers/state/statenode.go`): the kubelet's first report can fall short of what
    // the claim promised, and pods the plan put there must not be given a second claim.
    let (allocatable, node_capacity) = match claim {
        Some(c)
            if managed && !initialized && (c.allocatable.cpu > 0 || c.allocatable.memory > 0) =>
        {
            (&c.allocatable, &c.capacity)
        }
        _ => (&n.allocatable, &n.capacity),
    };
    let mut available = d.capacity(allocatable);
    let pods = bound.get(n.name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
    let mut ports = Vec::new();
    for p in pods {
        dims::sub(&mut available, &d.vector(&p.requests));
        ports.extend(normalize_ports(&p.host_ports));
    }
    for ds in daemons {
        let running = pods.iter().any(|p| {
            p.namespace == ds.ds.namespace
                && p.owner
                    .as_ref()
                    .is_some_and(|o| o.kind == "DaemonSet" && o.name == ds.ds.name)
        });
        if !running && ds.compatible_with_node(node_labels, &node_taints) {
            dims::sub(&mut available, &ds.requests);
            ports.extend(ds.host_ports.iter().cloned());
        }
    }
    let mut reqs = Requirements::from_labels(node_labels);
    let hostname = node_labels
        .get(labels::HOSTNAME)
        .cloned()
        .unwrap_or_else(|| n.name.clone());
    reqs.add(Requirement::is_in(labels::HOSTNAME, [hostname]));
    ExistingNode {
        name: n.name.clone(),
        hostname: single_hostname(&reqs),
        reqs: std::sync::Arc::new(reqs),
        taints: node_taints,
        available,
        ports,
        pool: node_labels.get(labels::NODEPOOL).cloned(),
        capacity: d.node_capacity(node_capacity),
        schedulable,
        initialized,
    }
}

fn from_claim(
    c: &NodeClaim,
    bound: &BTreeMap<&str, Vec<&crate::model::Pod>>,
    daemons: &[DaemonInfo<'_>],
    pools: &[Pool<'_>],
    d: &Dims,
) -> ExistingNode {
    let mut reqs = Requirements::from_input(&c.requirements).unwrap_or_default();
    for (k, v) in &c.labels {
        reqs.add(Requirement::is_in(k.clone(), [v.clone()]));
    }
    let pool_name = c.labels.get(labels::NODEPOOL).cloned();
    let pool = pool_name
        .as_deref()
        .and_then(|name| pools.iter().find(|p| p.name() == name));
    // Capacity: the status when launched, else the smallest type its requirements allow.
    let (mut available, capacity) = if c.allocatable.cpu > 0 || c.allocatable.memory > 0 {
        (d.capacity(&c.allocatable), d.node_capacity(&c.capacity))
    } else {
        let mut min: Option<(Vector, Vector)> = None;
        if let Some(pool) = pool {
            for t in &pool.types {
                if t.reqs.intersects(&reqs).is_ok() {
                    let mut a = t.alloc.clone();
                    // The pool's alloc tables already count overhead; DaemonSets are below.
                    match &mut min {
                        None => min = Some((a, t.capacity.clone())),
                        Some((m, cap)) => {
                            for (x, y) in m.iter_mut().zip(a.iter_mut()) {
                                *x = (*x).min(*y);
                            }
                            for (x, y) in cap.iter_mut().zip(t.capacity.iter()) {
                                *x = (*x).min(*y);
                            }
                        }
                    }
                }
            }
        }
        min.unwrap_or_else(|| (d.zero(), d.node_capacity(&Default::default())))
    };
    let taints_ = c.taints.clone();
    let pods = bound.get(c.name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
    let mut ports = Vec::new();
    for p in pods {
        dims::sub(&mut available, &d.vector(&p.requests));
        ports.extend(normalize_ports(&p.host_ports));
    }
    for ds in daemons {
        if ds.compatible_with_template(&reqs, &taints_, &Default::default()) {
            dims::sub(&mut available, &ds.requests);
            ports.extend(ds.host_ports.iter().cloned());
        }
    }
    reqs.add(Requirement::is_in(labels::HOSTNAME, [c.name.clone()]));
    ExistingNode {
        name: c.name.clone(),
        hostname: single_hostname(&reqs),
        reqs: std::sync::Arc::new(reqs),
        taints: taints_,
        available,
        ports,
        pool: pool_name,
        capacity,
        schedulable: c.deletion_time.is_none(),
        initialized: false,
    }
}

/// The hostname a node's requirements pin, if exactly one.
fn single_hostname(reqs: &Requirements) -> Option<String> {
    reqs.get(labels::HOSTNAME)
        .and_then(|r| r.single_value())
        .map(str::to_string)
}

#[cfg(test)]
mod registration_tests {
    use crate::model::{ClusterSnapshot, NodeClaim, PlanOptions};
    use crate::test_util::{node, node_pool, pod, small_catalog};
    use crate::{labels, plan};

    /// A Node that has just joined, before the actuator copied its NodeClaim's labels onto it
    /// (no `karpenter.sh/registered` yet), is the capacity its claim promised: a pending pod
    /// selecting the claim's labels is placed on it and no new claim is planned (Karpenter's
    /// `StateNode.Labels`, `pkg/controllers/state/statenode.go`). Before, the demo launched a
    /// claim for such pods after every registration.
    #[test]
    fn a_node_not_yet_registered_carries_its_claims_labels() {
        let mut n = node("ip-10-0-0-5", 4, 16);
        n.provider_id = Some("aws:///us-east-1a/i-5".into());
        let claim = NodeClaim {
            name: "default-abcde".into(),
            labels: [
                (labels::NODEPOOL.to_string(), "default".to_string()),
                (labels::CAPACITY_TYPE.to_string(), "spot".to_string()),
            ]
            .into_iter()
            .collect(),
            provider_id: n.provider_id.clone(),
            node_name: Some(n.name.clone()),
            ..NodeClaim::default()
        };
        let mut p = pod("worker-1", 500, 256);
        p.node_selector = [(labels::CAPACITY_TYPE.to_string(), "spot".to_string())]
            .into_iter()
            .collect();
        let snapshot = ClusterSnapshot {
            pods: vec![p],
            nodes: vec![n.clone()],
            node_claims: vec![claim.clone()],
            node_pools: vec![node_pool("default")],
            ..ClusterSnapshot::default()
        };
        let out = plan(&snapshot, &small_catalog(), &PlanOptions::default());
        assert!(out.node_claims.is_empty(), "{:?}", out.node_claims);
        assert_eq!(out.existing_nodes.len(), 1, "{out:?}");

        // Registered: the Node's own labels are the truth (here: no capacity type).
        let mut registered = n;
        registered
            .labels
            .insert(labels::REGISTERED.to_string(), "true".to_string());
        let snapshot = ClusterSnapshot {
            nodes: vec![registered],
            ..snapshot
        };
        let out = plan(&snapshot, &small_catalog(), &PlanOptions::default());
        assert!(out.existing_nodes.is_empty(), "{out:?}");
    }
}
