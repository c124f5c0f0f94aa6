//! Topology: topology spread constraints, pod affinity and anti-affinity (Karpenter v1's
//! `topology.go`).
//!
//! Every spread or (anti-)affinity term of the pods being placed becomes a *group*: a label
//! selector, the namespaces it looks in, a topology key and the number of matching pods per
//! domain (value of the key). Pods whose terms are equal share one group, so a Deployment of
//! 1,000 replicas with one zone spread is one group with 1,000 owners. Counts start from the bound
//! pods of the snapshot and grow as the scheduler records placements ([`Topology::record`]);
//! a placement counts in a domain only once the node's requirement on the key is a single value
//! (except for anti-affinity, which blocks every domain the pod might be in).
//!
//! Before placing a pod on a node the scheduler asks [`Topology::add_requirements`] which domains
//! the pod may use there; the answer is extra node requirements (`zone In [b]`) or a reason a
//! person can act on. Required anti-affinity of bound and already placed pods applies back to new
//! pods (*inverse* groups).
//!
//! Domains come from the NodePools' requirements ∩ instance-type offerings plus existing nodes
//! (computed by the caller), and from [`Topology::register`] (a new claim's placeholder hostname).
//! For hostname keys a node that could still be launched is an empty domain, so the global
//! minimum of a hostname spread is always 0.
//!
//! Where dovetail differs from Karpenter: when a pod with anti-affinity on a key could use several
//! empty domains, it is pinned to the first (by name) instead of blocking all of them, so that
//! one plan can place one replica per zone (Karpenter needs one provisioning round per replica);
//! spread, affinity and anti-affinity terms on the same key narrow each other instead of being
//! chosen independently; and groups of relaxed pods are prepared up front, so they also count the
//! pods placed earlier in the plan.
//!
//! Speed: counts are per group and per interned domain index; a placement updates only the
//! groups whose selector matches the pod, found through a cache keyed by the pod's namespace and
//! labels; a pod's own groups are found by its UID and how far it has been relaxed.

mod domains;
mod fxhash;
mod group;
mod reason;
mod registry;
mod terms;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::labels;
use crate::model::{ClusterSnapshot, Labels, NodeInclusionPolicy, Pod, PodAffinityTerm, Taint};
use crate::requirements::{Requirement, Requirements};

use super::preferences::{Preferences, strip_preferences};
use domains::KeyDomains;
use fxhash::{FxHashMap, FxHasher};
use group::{Choice, Group, GroupKey, requirement_in};
use reason::Kind;
pub(crate) use reason::Unsatisfiable;
use terms::{
    Fingerprint, add_constraint_keys, add_selector_keys, affinity_key, constraint_copy,
    fingerprint, group_keys, hash_constraints, same_constraints,
};

/// What a topology is built from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TopologyInput<'a> {
    /// Bound pods, nodes, namespaces, NodePools.
    pub(crate) snapshot: &'a ClusterSnapshot,
    /// The pods of this solve (they do not count where they are bound, if they are).
    pub(crate) pending: &'a [&'a Pod],
    /// The domain universe of new capacity per topology key: NodePool requirements ∩
    /// instance-type offerings. Existing nodes' labels are added from the snapshot (a domain
    /// only existing nodes have counts for a spread only when such a node passes its node
    /// filter); values that also appear here count as NodePool domains.
    pub(crate) domains: &'a BTreeMap<String, BTreeSet<String>>,
    /// Nodes simulated as removed (disruption): their pods and labels do not count.
    pub(crate) excluded_nodes: &'a BTreeSet<String>,
}

/// What topology sees of a pod: pods with equal identities get equal answers from
/// [`Topology::add_requirements`] on the same node, so the scheduler may share a cursor of
/// permanently rejected nodes between them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Identity {
    /// A pod the topology was built with: its constraint spec, relaxation state, and the groups
    /// that select it.
    Known {
        /// Constraint spec.
        spec: u32,
        /// Relaxation state within the spec.
        state: u32,
        /// Interned lists of groups selecting the pod.
        selection: u32,
    },
    /// Any other pod: its namespace, labels and constraints.
    Other(Box<Constraints>),
}

/// A pod's namespace, labels and topology terms.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Constraints {
    namespace: String,
    labels: Labels,
    spreads: Vec<crate::model::TopologySpreadConstraint>,
    affinity: Vec<PodAffinityTerm>,
    anti_affinity: Vec<PodAffinityTerm>,
    preferred_affinity: Vec<crate::model::WeightedPodAffinityTerm>,
    preferred_anti_affinity: Vec<crate::model::WeightedPodAffinityTerm>,
    node_selector: Labels,
    required_node_affinity: Vec<crate::model::NodeSelectorTerm>,
    tolerations: Vec<crate::model::Toleration>,
}

/// Order in which groups narrow a node's domains: sets first (affinity, anti-affinity, other
/// pods' anti-affinity), then spreads, which pick one domain within what is left.
fn rank(kind: Kind, inverse: bool) -> u8 {
    match (kind, inverse) {
        (Kind::Affinity, _) => 0,
        (Kind::AntiAffinity, false) => 1,
        (Kind::AntiAffinity, true) => 2,
        (Kind::Spread, _) => 3,
    }
}

/// Pins every key an anti-affinity left with several domains to the first of them (see the
/// module documentation).
fn pin_first(mut extra: Requirements, pin: Vec<&str>) -> Requirements {
    for key in pin {
        let first = extra
            .get(key)
            .filter(|r| !r.is_complement())
            .and_then(|r| r.values().first().cloned());
        if let Some(v) = first {
            extra.add(Requirement::is_in(key, [v]));
        }
    }
    extra
}

/// Pods with equal constraints share their groups in every relaxation state.
#[derive(Clone, Debug)]
struct Spec {
    pod: Pod,
    states: Vec<(Fingerprint, Vec<u32>)>,
}

/// Pods with equal namespace and labels are selected by the same groups.
#[derive(Clone, Debug)]
struct LabelSig {
    namespace: String,
    labels: Labels,
    /// Regular groups whose selector matches (sorted).
    selecting: Vec<u32>,
    /// Inverse (anti-affinity of other pods) groups whose selector matches.
    selecting_inverse: Vec<u32>,
    /// Interned (`selecting`, `selecting_inverse`).
    selection: u32,
}

#[derive(Clone, Copy, Debug)]
struct PodEntry {
    spec: u32,
    sig: u32,
}

#[derive(Clone, Debug)]
struct BoundPod {
    namespace: String,
    labels: Labels,
    node: usize,
}

/// What a topology reads of the snapshot whatever the pods being placed and the nodes removed:
/// the domain universe, NodePools and namespaces, and (built when a run first needs them)
/// every node and every bound pod. Built once per scheduler ([`Shared`]) and borrowed by each
/// of its runs, which only mark which nodes and bound pods they do not count (removed nodes,
/// pods being placed).
#[derive(Debug)]
struct Base {
    universe: BTreeMap<String, BTreeSet<String>>,
    pools: Vec<Pool>,
    ns_labels: HashMap<String, Labels>,
    /// Whether any active bound pod of the snapshot has required anti-affinity.
    any_anti: bool,
    /// Nodes and bound pods, built by the first run in which groups count them.
    cluster: OnceLock<Arc<Cluster>>,
}

impl Base {
    fn new(snapshot: &ClusterSnapshot, domains: &BTreeMap<String, BTreeSet<String>>) -> Self {
        let pools = snapshot
            .node_pools
            .iter()
            .map(|p| {
                // A malformed NodePool requirement is reported by the scheduler; for domains the pool
                // is then taken as unconstrained.
                let mut reqs = Requirements::from_input(&p.requirements).unwrap_or_default();
                reqs.add_all(&Requirements::from_labels(&p.labels));
                Pool {
                    reqs,
                    taints: p.taints.clone(),
                }
            })
            .collect();
        Self {
            universe: domains.clone(),
            pools,
            ns_labels: snapshot
                .namespaces
                .iter()
                .map(|n| (n.name.clone(), n.labels.clone()))
                .collect(),
            any_anti: snapshot
                .pods
                .iter()
                .any(|p| !p.pod_anti_affinity.is_empty() && p.is_bound_active()),
            cluster: OnceLock::new(),
        }
    }
}

/// Every node and every bound pod of a snapshot, as groups count them (see [`Base`]).
#[derive(Debug, Default)]
struct Cluster {
    /// Every node of the snapshot, in its order.
    nodes: Vec<NodeInfo>,
    /// Indices into `nodes` by node name.
    node_ids: FxHashMap<String, Vec<u32>>,
    /// Every active bound pod that is not being deleted and whose node is in the snapshot, in
    /// the snapshot's order.
    bound: Vec<BoundPod>,
    /// Indices into `bound` by pod UID.
    bound_ids: FxHashMap<String, Vec<u32>>,
    /// Bound pods with required anti-affinity: index into the snapshot's pods and into `bound`.
    anti: Vec<(usize, u32)>,
    /// Indices into `bound` by namespace and labels (selectors look at nothing else), in
    /// order of first appearance.
    bound_by_labels: Vec<(u32, Vec<u32>)>,
    /// Per group spec, the bound pods it counts when every node is there (see
    /// [`Cluster::counted`]), filled as runs build groups.
    counted: Mutex<HashMap<GroupKey, Arc<[u32]>>>,
    /// Per topology key, every node's domain (see [`Cluster::domains`]), filled as runs add
    /// keys.
    domains: Mutex<HashMap<String, Arc<NodeDomains>>>,
}

/// The domains of every node of a [`Cluster`] on one key: its distinct values, and per node
/// the index of its value (`u32::MAX`: the node has no domain on the key).
#[derive(Debug, Default)]
struct NodeDomains {
    values: Vec<String>,
    of_node: Vec<u32>,
}

impl Cluster {
    fn new(snapshot: &ClusterSnapshot) -> Self {
        let nodes: Vec<NodeInfo> = snapshot
            .nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name.clone(),
                labels: n.labels.clone(),
                reqs: Requirements::from_labels(&n.labels),
                taints: n.taints.clone(),
            })
            .collect();
        let mut node_ids: FxHashMap<String, Vec<u32>> = FxHashMap::default();
        for (i, n) in nodes.iter().enumerate() {
            node_ids
                .entry(n.name.clone())
                .or_default()
                .push(u32::try_from(i).unwrap_or(u32::MAX));
        }
        let mut bound = Vec::new();
        let mut bound_ids: FxHashMap<String, Vec<u32>> = FxHashMap::default();
        let mut anti = Vec::new();
        for (pi, p) in snapshot.pods.iter().enumerate() {
            if !p.is_bound_active() || p.deletion_time.is_some() {
                continue;
            }
            // The last node of that name, as a map from names collected in order keeps.
            let Some(&node) = p
                .node_name
                .as_deref()
                .and_then(|n| node_ids.get(n))
                .and_then(|ids| ids.last())
            else {
                continue;
            };
            let b = u32::try_from(bound.len()).unwrap_or(u32::MAX);
            if !p.pod_anti_affinity.is_empty() {
                anti.push((pi, b));
            }
            bound_ids.entry(p.uid.clone()).or_default().push(b);
            bound.push(BoundPod {
                namespace: p.namespace.clone(),
                labels: p.labels.clone(),
                node: node as usize,
            });
        }
        let mut by_labels: HashMap<(&str, &Labels), usize> = HashMap::new();
        let mut bound_by_labels: Vec<(u32, Vec<u32>)> = Vec::new();
        for (i, b) in bound.iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            let k = *by_labels
                .entry((b.namespace.as_str(), &b.labels))
                .or_insert_with(|| {
                    bound_by_labels.push((i, Vec::new()));
                    bound_by_labels.len() - 1
                });
            bound_by_labels[k].1.push(i);
        }
        drop(by_labels);
        Self {
            nodes,
            node_ids,
            bound,
            bound_ids,
            anti,
            bound_by_labels,
            counted: Mutex::new(HashMap::new()),
            domains: Mutex::new(HashMap::new()),
        }
    }

    /// Every node's domain on `key` ([`NodeInfo::domain`]), computed once per key: each run
    /// (thousands per disruption plan) then reads indices instead of looking labels up.
    fn domains(&self, key: &str) -> Arc<NodeDomains> {
        let mut cache = self.domains.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(d) = cache.get(key) {
            return Arc::clone(d);
        }
        let mut index: HashMap<&str, u32> = HashMap::new();
        let mut d = NodeDomains::default();
        for n in &self.nodes {
            let vi = match n.domain(key) {
                None => u32::MAX,
                Some(v) => *index.entry(v).or_insert_with(|| {
                    d.values.push(v.to_string());
                    u32::try_from(d.values.len() - 1).unwrap_or(u32::MAX)
                }),
            };
            d.of_node.push(vi);
        }
        let d = Arc::new(d);
        cache.insert(key.to_string(), Arc::clone(&d));
        d
    }

    /// The bound pods `g` counts, as indices into `bound`: those it selects, on a node that
    /// has its key and passes its node filter. Computed once per group spec; a run then skips
    /// the ones it does not count (removed nodes, pods being placed) instead of matching every
    /// bound pod of the cluster against the selector again.
    fn counted(&self, g: &Group, ns_labels: &HashMap<String, Labels>) -> Arc<[u32]> {
        let mut cache = self.counted.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = cache.get(&g.spec) {
            return Arc::clone(c);
        }
        // The selector once per distinct namespace and labels, the node filter once per node.
        let mut node_counts: Vec<Option<bool>> = vec![None; self.nodes.len()];
        let mut list: Vec<u32> = Vec::new();
        for (first, members) in &self.bound_by_labels {
            let b = &self.bound[*first as usize];
            if !g.selects(&b.namespace, &b.labels, ns_labels) {
                continue;
            }
            for &i in members {
                let n = self.bound[i as usize].node;
                let counts = *node_counts[n].get_or_insert_with(|| {
                    let node = &self.nodes[n];
                    node.domain(&g.spec.key).is_some() && g.node_counts(&node.taints, &node.reqs)
                });
                if counts {
                    list.push(i);
                }
            }
        }
        list.sort_unstable();
        let list: Arc<[u32]> = list.into();
        cache.insert(g.spec.clone(), Arc::clone(&list));
        list
    }
}

/// The [`Base`] of a scheduler's topologies, built by its first run. Every run of one
/// scheduler has the same snapshot and domain universe.
#[derive(Debug, Default)]
pub(crate) struct Shared(OnceLock<Arc<Base>>);

#[derive(Clone, Debug)]
struct NodeInfo {
    name: String,
    labels: Labels,
    reqs: Requirements,
    taints: Vec<Taint>,
}

impl NodeInfo {
    fn domain(&self, key: &str) -> Option<&str> {
        match self.labels.get(key) {
            Some(v) => Some(v),
            // The kubelet sets the hostname label; until it does, the node name stands in.
            None if key == labels::HOSTNAME => Some(&self.name),
            None => None,
        }
    }
}

/// A recorded placement, kept so that groups created later (pods the topology was not built
/// with) also count the pods placed earlier in the plan.
#[derive(Clone, Debug)]
struct Placement {
    sig: u32,
    /// The node's requirements on the keys topology may look at.
    reqs: Requirements,
    taints: Vec<Taint>,
    delta: i32,
}

#[derive(Clone, Debug)]
struct Pool {
    reqs: Requirements,
    taints: Vec<Taint>,
}

/// Topology state of one solve. See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Topology {
    /// Universe, NodePools and namespaces, shared by the runs of one scheduler.
    base: Arc<Base>,
    /// Nodes and bound pods, shared likewise; empty when neither the pods being placed nor
    /// bound pods make groups (then no node or bound pod counts).
    cluster: Arc<Cluster>,
    /// Per node of `cluster`: whether it counts (not simulated as removed).
    node_live: Vec<bool>,
    /// Per bound pod of `cluster`: whether it counts (on a live node and not being placed).
    bound_live: Vec<bool>,

    keys: Vec<KeyDomains>,
    key_ids: FxHashMap<String, u32>,
    /// Per key: every node's domain, and per distinct value its index in `keys` (`u32::MAX`
    /// for values only nodes that do not count carry).
    key_nodes: Vec<(Arc<NodeDomains>, Vec<u32>)>,
    /// Regular and inverse groups per key, to register new domains.
    key_groups: Vec<(Vec<u32>, Vec<u32>)>,

    groups: Vec<Group>,
    group_ids: HashMap<GroupKey, u32>,
    inverse: Vec<Group>,
    inverse_ids: HashMap<GroupKey, u32>,
    /// Inverse groups per owner UID (pods with required anti-affinity).
    inverse_owned: HashMap<String, Vec<u32>>,

    specs: Vec<Spec>,
    spec_ids: FxHashMap<u64, Vec<u32>>,
    sigs: Vec<LabelSig>,
    sig_ids: FxHashMap<u64, Vec<u32>>,
    /// Interned selection lists of label signatures (for [`Identity`]).
    selections: FxHashMap<(Vec<u32>, Vec<u32>), u32>,
    pods: FxHashMap<String, PodEntry>,

    placements: Vec<Placement>,
    /// Label keys some group's selector looks at.
    selector_keys: BTreeSet<String>,
    /// Topology keys and node-selector keys of the pods: what a placement keeps.
    placement_keys: BTreeSet<String>,
}

// === impl Topology ===

impl Topology {
    /// Builds the groups of every pending pod (in every relaxation state), counts the bound pods
    /// that match them and the inverse anti-affinity of bound pods. (Runs of a scheduler use
    /// [`Topology::with_shared`].)
    #[cfg(test)]
    pub(crate) fn new(input: &TopologyInput<'_>) -> Self {
        Self::with_shared(input, &Shared::default())
    }

    /// [`Topology::new`] over the snapshot view in `shared`, built by the first topology of
    /// that snapshot and domain universe that needs it (`input` must have the same ones).
    pub(crate) fn with_shared(input: &TopologyInput<'_>, shared: &Shared) -> Self {
        let snapshot = input.snapshot;
        let base = Arc::clone(
            shared
                .0
                .get_or_init(|| Arc::new(Base::new(snapshot, input.domains))),
        );
        // Node and bound-pod views only serve groups, and groups only come from constrained
        // pods being placed or from bound pods' anti-affinity. Without either (the common case
        // of a disruption simulation, run thousands of times per plan) nothing counts.
        let needed = base.any_anti
            || input
                .pending
                .iter()
                .any(|p| super::has_topology_constraints(p));
        let cluster = if needed {
            Arc::clone(
                base.cluster
                    .get_or_init(|| Arc::new(Cluster::new(snapshot))),
            )
        } else {
            Arc::default()
        };
        let mut node_live = vec![true; cluster.nodes.len()];
        for name in input.excluded_nodes {
            for &i in cluster.node_ids.get(name).map_or(&[][..], Vec::as_slice) {
                node_live[i as usize] = false;
            }
        }
        let mut bound_live: Vec<bool> = cluster.bound.iter().map(|b| node_live[b.node]).collect();
        for p in input.pending {
            for &b in cluster.bound_ids.get(&p.uid).map_or(&[][..], Vec::as_slice) {
                bound_live[b as usize] = false;
            }
        }
        let bound_anti: Vec<(&Pod, usize)> = cluster
            .anti
            .iter()
            .filter(|(_, b)| bound_live[*b as usize])
            .map(|&(pi, b)| (&snapshot.pods[pi], cluster.bound[b as usize].node))
            .collect();
        let mut t = Self {
            base,
            cluster,
            node_live,
            bound_live,
            keys: Vec::new(),
            key_ids: FxHashMap::default(),
            key_nodes: Vec::new(),
            key_groups: Vec::new(),
            groups: Vec::new(),
            group_ids: HashMap::new(),
            inverse: Vec::new(),
            inverse_ids: HashMap::new(),
            inverse_owned: HashMap::new(),
            specs: Vec::new(),
            spec_ids: FxHashMap::default(),
            sigs: Vec::new(),
            sig_ids: FxHashMap::default(),
            selections: FxHashMap::default(),
            pods: FxHashMap::default(),
            placements: Vec::new(),
            selector_keys: BTreeSet::new(),
            placement_keys: [labels::HOSTNAME, labels::ZONE, labels::CAPACITY_TYPE]
                .into_iter()
                .map(str::to_string)
                .collect(),
        };
        for p in input.pending {
            add_constraint_keys(&mut t.placement_keys, p);
            add_selector_keys(&mut t.selector_keys, p);
        }
        for (p, _) in &bound_anti {
            add_selector_keys(&mut t.selector_keys, p);
        }
        // Anti-affinity of bound pods applies back to the pods being placed.
        for (p, node) in bound_anti {
            for term in &p.pod_anti_affinity {
                let key = affinity_key(Kind::AntiAffinity, p, term);
                let gid = t.add_inverse(key);
                let g = &t.inverse[gid as usize];
                let key_id = g.key as usize;
                if let Some(v) = t.cluster.nodes[node].domain(&g.spec.key) {
                    let v = v.to_string();
                    let id = t.keys[key_id].intern(&v);
                    t.inverse[gid as usize].add(id, 1);
                }
            }
        }
        for p in input.pending {
            t.register_pod(p);
        }
        t
    }

    /// `node` narrowed by `pod` (both requirement sets) on the keys some group looks at: all
    /// that [`Topology::add_requirements`] reads of its `node_reqs`. Cheaper than intersecting
    /// whole sets, as a node's requirements carry every one of its labels and this runs for every
    /// candidate node of every constrained pod.
    pub(crate) fn node_requirements(
        &self,
        node: &Requirements,
        pod: &Requirements,
    ) -> Requirements {
        self.narrowed_by_pod(self.node_key_requirements(node), pod)
    }

    /// The node half of [`Topology::node_requirements`]: `node` on the keys some group looks
    /// at. Valid while [`Topology::key_count`] is unchanged, so a caller trying many pods on
    /// the same nodes may keep it per node.
    pub(crate) fn node_key_requirements(&self, node: &Requirements) -> Requirements {
        let mut out = Requirements::new();
        for key in self.key_ids.keys() {
            if let Some(r) = node.get(key) {
                out.add(r.clone());
            }
        }
        out
    }

    /// [`Topology::node_requirements`] from its node half ([`Topology::node_key_requirements`]).
    pub(crate) fn narrowed_by_pod(
        &self,
        mut node: Requirements,
        pod: &Requirements,
    ) -> Requirements {
        if pod.is_empty() {
            return node;
        }
        for key in self.key_ids.keys() {
            if let Some(r) = pod.get(key) {
                node.add(r.clone());
            }
        }
        node
    }

    /// The keys groups look at, sorted.
    pub(crate) fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.key_ids.keys().cloned().collect();
        keys.sort_unstable();
        keys
    }

    /// Number of keys groups look at (it grows as groups on new keys are added).
    pub(crate) fn key_count(&self) -> usize {
        self.key_ids.len()
    }

    /// Extra requirements a node must satisfy so that `pod` can go there without breaking any
    /// required spread, affinity or anti-affinity (its own, or other pods' anti-affinity that
    /// selects it): e.g. `zone In [us-east-1b]`. `pod_reqs` are the pod's requirements (node
    /// selector and node affinity), `node_reqs` the node's (for a new claim including its
    /// placeholder hostname). Taints play no part here: they decide which nodes *count* for a
    /// spread ([`Topology::record`]), while where a pod may go by tolerations the scheduler
    /// checks itself.
    ///
    /// # Errors
    /// When no domain is possible on this node, with the reason.
    pub(crate) fn add_requirements(
        &self,
        pod: &Pod,
        pod_reqs: &Requirements,
        node_reqs: &Requirements,
    ) -> Result<Requirements, Unsatisfiable> {
        self.requirements(pod, pod_reqs, node_reqs, true)
    }

    /// [`Topology::add_requirements`] for a caller that only asks a rejection whether it
    /// [`Unsatisfiable::is_permanent`]: the rejection leaves out the per-domain counts its text
    /// lists (collecting and sorting them was a good part of trying a pod on every candidate
    /// node). The requirements, and whether it rejects, are the same.
    pub(crate) fn add_requirements_brief(
        &self,
        pod: &Pod,
        pod_reqs: &Requirements,
        node_reqs: &Requirements,
    ) -> Result<Requirements, Unsatisfiable> {
        self.requirements(pod, pod_reqs, node_reqs, false)
    }

    /// [`Topology::add_requirements`]; rejections list per-domain counts only with `detail`.
    fn requirements(
        &self,
        pod: &Pod,
        pod_reqs: &Requirements,
        node_reqs: &Requirements,
        detail: bool,
    ) -> Result<Requirements, Unsatisfiable> {
        let entry = self.pods.get(&pod.uid).and_then(|e| {
            let fp = fingerprint(pod);
            self.specs[e.spec as usize]
                .states
                .iter()
                .find(|(f, _)| *f == fp)
                .map(|(_, ids)| (ids, &self.sigs[e.sig as usize]))
        });
        match entry {
            Some((owned, sig)) => {
                if owned.is_empty() && sig.selecting_inverse.is_empty() {
                    return Ok(Requirements::new());
                }
                // In rank order (see `rank`) without collecting: this runs for every candidate
                // node of every pod.
                let mut extra = Requirements::new();
                let mut pin = Vec::new();
                for pass in 0..4 {
                    for &gid in owned {
                        let g = &self.groups[gid as usize];
                        if rank(g.spec.kind, false) == pass {
                            let selects = sig.selecting.binary_search(&gid).is_ok();
                            self.step(
                                g, false, selects, pod_reqs, node_reqs, &mut extra, &mut pin,
                                detail,
                            )?;
                        }
                    }
                    if pass == rank(Kind::AntiAffinity, true) {
                        for &gid in &sig.selecting_inverse {
                            let g = &self.inverse[gid as usize];
                            self.step(
                                g, true, false, pod_reqs, node_reqs, &mut extra, &mut pin, detail,
                            )?;
                        }
                    }
                }
                Ok(pin_first(extra, pin))
            }
            None => {
                // A pod the topology was not built with (or relaxed in an unexpected way): use the
                // shared groups where they exist and temporary ones (counting bound pods only)
                // where they do not.
                let mut temp = Vec::new();
                let mut owned = Vec::new();
                for key in group_keys(pod) {
                    match self.group_ids.get(&key) {
                        Some(&gid) => owned.push(Ok(gid)),
                        None => {
                            temp.push(self.build_group(key));
                            owned.push(Err(temp.len() - 1));
                        }
                    }
                }
                let mut refs = Vec::new();
                for o in owned {
                    let g = match o {
                        Ok(gid) => &self.groups[gid as usize],
                        Err(i) => &temp[i],
                    };
                    let selects = g.selects(&pod.namespace, &pod.labels, &self.base.ns_labels);
                    refs.push((g, false, selects));
                }
                for g in &self.inverse {
                    if g.selects(&pod.namespace, &pod.labels, &self.base.ns_labels) {
                        refs.push((g, true, false));
                    }
                }
                self.evaluate(refs, pod_reqs, node_reqs, detail)
            }
        }
    }

    fn evaluate(
        &self,
        mut refs: Vec<(&Group, bool, bool)>,
        pod_reqs: &Requirements,
        node_reqs: &Requirements,
        detail: bool,
    ) -> Result<Requirements, Unsatisfiable> {
        refs.sort_by_key(|(g, inverse, _)| rank(g.spec.kind, *inverse));
        let mut extra = Requirements::new();
        let mut pin = Vec::new();
        for (g, inverse, selects) in refs {
            self.step(
                g, inverse, selects, pod_reqs, node_reqs, &mut extra, &mut pin, detail,
            )?;
        }
        Ok(pin_first(extra, pin))
    }

    /// Narrows `extra` by one group's choice of domains.
    #[allow(clippy::too_many_arguments)] // The state of one evaluation, kept off the heap.
    fn step<'g>(
        &self,
        g: &'g Group,
        inverse: bool,
        selects: bool,
        pod_reqs: &Requirements,
        node_reqs: &Requirements,
        extra: &mut Requirements,
        pin: &mut Vec<&'g str>,
        detail: bool,
    ) -> Result<(), Unsatisfiable> {
        let kd = &self.keys[g.key as usize];
        let key = g.spec.key.as_str();
        let pod_dom = pod_reqs.get(key);
        let node_dom = extra.get(key).or_else(|| node_reqs.get(key));
        let host = if g.is_hostname {
            node_dom.and_then(Requirement::single_value)
        } else {
            None
        };
        match g.choose(kd, selects, pod_dom, node_dom, host, detail) {
            Ok(Choice::Host) => Ok(()),
            Ok(Choice::In(ids)) => {
                if g.spec.kind == Kind::AntiAffinity && ids.len() > 1 && !pin.contains(&key) {
                    pin.push(key);
                }
                extra.add(requirement_in(key, kd, &ids));
                Ok(())
            }
            Err(mut e) => {
                e.inverse = inverse;
                Err(e)
            }
        }
    }

    /// Counts `pod` as placed on a node with `node_reqs` and `taints`: in every group that selects
    /// it (where the node's requirement on the group's key is a single value; every value for
    /// anti-affinity), and in the inverse groups of its own required anti-affinity.
    pub(crate) fn record(&mut self, pod: &Pod, node_reqs: &Requirements, taints: &[Taint]) {
        self.apply(pod, node_reqs, taints, 1);
    }

    /// Undoes [`Topology::record`] with the same arguments.
    #[cfg(test)]
    pub(crate) fn unrecord(&mut self, pod: &Pod, node_reqs: &Requirements, taints: &[Taint]) {
        self.apply(pod, node_reqs, taints, -1);
    }

    fn apply(&mut self, pod: &Pod, node_reqs: &Requirements, taints: &[Taint], delta: i32) {
        if !self.pods.contains_key(&pod.uid) {
            self.register_pod(pod);
        }
        let sig = self.pods[&pod.uid].sig as usize;
        let kept: Requirements = node_reqs
            .iter()
            .filter(|r| self.placement_keys.contains(r.key()))
            .cloned()
            .collect();
        for r in kept.iter() {
            if let (Some(&k), false) = (self.key_ids.get(r.key()), r.is_complement()) {
                for v in r.values() {
                    self.keys[k as usize].intern(v);
                }
            }
        }
        self.placements.push(Placement {
            sig: sig as u32,
            reqs: kept,
            taints: taints.to_vec(),
            delta,
        });
        let Self {
            groups,
            inverse,
            keys,
            sigs,
            inverse_owned,
            ..
        } = self;
        for &gid in &sigs[sig].selecting {
            let g = &mut groups[gid as usize];
            if !g.node_counts(taints, node_reqs) {
                continue;
            }
            let Some(r) = node_reqs.get(&g.spec.key) else {
                continue;
            };
            let kd = &mut keys[g.key as usize];
            if g.spec.kind == Kind::AntiAffinity {
                if !r.is_complement() {
                    for v in r.values() {
                        let id = kd.intern(v);
                        g.add(id, delta);
                    }
                }
            } else if let Some(v) = r.single_value() {
                let id = kd.intern(v);
                g.add(id, delta);
            }
        }
        if let Some(owned) = inverse_owned.get(&pod.uid) {
            for &gid in owned {
                let g = &mut inverse[gid as usize];
                let Some(r) = node_reqs.get(&g.spec.key) else {
                    continue;
                };
                if r.is_complement() {
                    continue;
                }
                let kd = &mut keys[g.key as usize];
                for v in r.values() {
                    let id = kd.intern(v);
                    g.add(id, delta);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
