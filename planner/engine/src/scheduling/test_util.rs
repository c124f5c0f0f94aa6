//! Builders for hand-made snapshots, and a small stand-in scheduler that drives
//! [`Topology`](super::topology::Topology) the way the engine does (existing nodes, then open
//! claims, then a new claim per NodePool; relaxation; retries until a pass makes no progress), so
//! that topology semantics are tested without the engine.

use std::collections::{BTreeMap, BTreeSet};

use crate::labels;
use crate::model::{
    ClusterSnapshot, LabelSelector, Labels, Node, NodeInclusionPolicy, NodePool, Operator, Pod,
    PodAffinityTerm, PodPhase, Requirement as InputRequirement, Taint, TopologySpreadConstraint,
    WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use crate::requirements::taints::tolerates_all;
use crate::requirements::{Requirement, Requirements, Undefined};

use super::preferences::Preferences;
use super::topology::{Topology, TopologyInput};

/// `k=v` pairs as labels.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A selector with `matchLabels`.
pub(crate) fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: labels(pairs),
        match_expressions: Vec::new(),
    }
}

/// A pending pod in namespace `default` with `labels`.
pub(crate) fn pod(name: &str, pairs: &[(&str, &str)]) -> Pod {
    Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("default/{name}"),
        labels: labels(pairs),
        ..Pod::default()
    }
}

/// `n` pods `<prefix>-<i>` built by `f`.
pub(crate) fn pods(
    prefix: &str,
    n: usize,
    f: impl Fn(Pod) -> Pod,
    pairs: &[(&str, &str)],
) -> Vec<Pod> {
    (0..n)
        .map(|i| f(pod(&format!("{prefix}-{i}"), pairs)))
        .collect()
}

/// A bound running copy of `p` on `node`.
pub(crate) fn bound(mut p: Pod, node: &str) -> Pod {
    p.node_name = Some(node.into());
    p.phase = PodPhase::Running;
    p
}

/// A DoNotSchedule spread on `key`.
pub(crate) fn spread(key: &str, max_skew: i32, sel: &[(&str, &str)]) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: Some(selector(sel)),
        min_domains: None,
        match_label_keys: Vec::new(),
        node_affinity_policy: NodeInclusionPolicy::Honor,
        node_taints_policy: NodeInclusionPolicy::Ignore,
    }
}

/// A pod (anti-)affinity term on `key`.
pub(crate) fn term(key: &str, sel: &[(&str, &str)]) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(selector(sel)),
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: Vec::new(),
        mismatch_label_keys: Vec::new(),
    }
}

/// A weighted term.
pub(crate) fn weighted(weight: i32, t: PodAffinityTerm) -> WeightedPodAffinityTerm {
    WeightedPodAffinityTerm { weight, term: t }
}

/// A ready node in `zone` whose hostname label is its name.
pub(crate) fn node(name: &str, zone: &str) -> Node {
    Node {
        name: name.into(),
        labels: labels(&[(labels::HOSTNAME, name), (labels::ZONE, zone)]),
        ready: true,
        ..Node::default()
    }
}

/// A NodePool allowing `zones`.
pub(crate) fn pool(name: &str, zones: &[&str]) -> NodePool {
    NodePool {
        name: name.into(),
        requirements: vec![InputRequirement {
            key: labels::ZONE.into(),
            operator: Operator::In,
            values: zones.iter().map(|z| z.to_string()).collect(),
            min_values: None,
        }],
        ..NodePool::default()
    }
}

/// One node of the stand-in scheduler.
#[derive(Clone, Debug)]
pub(crate) struct SimNode {
    /// Node name or placeholder hostname of a new claim.
    pub(crate) name: String,
    /// Current requirements (labels for existing nodes).
    pub(crate) reqs: Requirements,
    /// Taints.
    pub(crate) taints: Vec<Taint>,
    /// Pending pods placed here (originals, unrelaxed).
    pub(crate) pods: Vec<Pod>,
    /// Labels of an existing node.
    pub(crate) labels: Option<Labels>,
}

impl SimNode {
    /// The node's single value for `key`, if it has one.
    pub(crate) fn domain(&self, key: &str) -> Option<String> {
        if let Some(l) = &self.labels {
            return l.get(key).cloned();
        }
        self.reqs.get(key)?.single_value().map(str::to_string)
    }
}

/// Result of the stand-in scheduler.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Existing nodes first, then new claims.
    pub(crate) nodes: Vec<SimNode>,
    /// Pods that could not be placed, with reasons.
    pub(crate) unschedulable: Vec<(String, String)>,
    /// The topology after the run.
    pub(crate) topology: Topology,
}

impl Outcome {
    /// Index of the node holding pod `name`.
    pub(crate) fn node_of(&self, name: &str) -> Option<&SimNode> {
        self.nodes
            .iter()
            .find(|n| n.pods.iter().any(|p| p.name == name))
    }

    /// Domain on `key` of the node holding pod `name`.
    pub(crate) fn domain_of(&self, name: &str, key: &str) -> Option<String> {
        self.node_of(name)?.domain(key)
    }

    /// Number of pods placed.
    pub(crate) fn placed(&self) -> usize {
        self.nodes.iter().map(|n| n.pods.len()).sum()
    }

    /// Reason for pod `name`, if unschedulable.
    pub(crate) fn reason(&self, name: &str) -> Option<&str> {
        self.unschedulable
            .iter()
            .find(|(p, _)| p.ends_with(&format!("/{name}")))
            .map(|(_, r)| r.as_str())
    }
}

/// The domain universe of new capacity: NodePool zone (and other `In`) values and labels.
pub(crate) fn universe(snapshot: &ClusterSnapshot) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &snapshot.node_pools {
        for r in &p.requirements {
            if r.operator == Operator::In {
                out.entry(r.key.clone())
                    .or_default()
                    .extend(r.values.iter().cloned());
            }
        }
        for (k, v) in &p.labels {
            out.entry(k.clone()).or_default().insert(v.clone());
        }
    }
    out
}

fn pod_requirements(p: &Pod) -> Requirements {
    let mut r = Requirements::from_labels(&p.node_selector);
    if let Some(t) = p.required_node_affinity.first() {
        r.add_all(&Requirements::from_term(t).expect("well-formed test term"));
    }
    r
}

/// Runs the stand-in scheduler: every node holds at most `capacity` pending pods.
pub(crate) fn run(snapshot: &ClusterSnapshot, capacity: usize) -> Outcome {
    let pending: Vec<&Pod> = snapshot.pods.iter().filter(|p| p.is_pending()).collect();
    let domains = universe(snapshot);
    let excluded = BTreeSet::new();
    let mut topology = Topology::new(&TopologyInput {
        snapshot,
        pending: &pending,
        domains: &domains,
        excluded_nodes: &excluded,
    });
    let prefs = Preferences::new(snapshot);
    let mut nodes: Vec<SimNode> = snapshot
        .nodes
        .iter()
        .map(|n| {
            let mut reqs = Requirements::from_labels(&n.labels);
            reqs.add(Requirement::is_in(
                labels::HOSTNAME,
                [n.labels
                    .get(labels::HOSTNAME)
                    .cloned()
                    .unwrap_or(n.name.clone())],
            ));
            SimNode {
                name: n.name.clone(),
                reqs,
                taints: n.taints.clone(),
                pods: Vec::new(),
                labels: Some(n.labels.clone()),
            }
        })
        .collect();
    for n in &nodes {
        if let Some(h) = n.domain(labels::HOSTNAME) {
            topology.register(labels::HOSTNAME, &h);
        }
    }
    let mut pools: Vec<&NodePool> = snapshot.node_pools.iter().collect();
    pools.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    let mut queue: Vec<&Pod> = pending.clone();
    let mut reasons: BTreeMap<String, String> = BTreeMap::new();
    let mut next_claim = 0usize;
    loop {
        let mut failed = Vec::new();
        for original in &queue {
            let mut p = (*original).clone();
            let placed = loop {
                match try_place(
                    &mut topology,
                    &mut nodes,
                    &pools,
                    &p,
                    original,
                    capacity,
                    &mut next_claim,
                ) {
                    Ok(()) => break true,
                    Err(e) => {
                        reasons.insert(original.key(), e);
                        if !prefs.relax(&mut p) {
                            break false;
                        }
                    }
                }
            };
            if placed {
                reasons.remove(&original.key());
            } else {
                failed.push(*original);
            }
        }
        let progress = failed.len() < queue.len();
        queue = failed;
        if queue.is_empty() || !progress {
            break;
        }
    }
    Outcome {
        nodes,
        unschedulable: reasons.into_iter().collect(),
        topology,
    }
}

fn try_place(
    topology: &mut Topology,
    nodes: &mut Vec<SimNode>,
    pools: &[&NodePool],
    p: &Pod,
    original: &Pod,
    capacity: usize,
    next_claim: &mut usize,
) -> Result<(), String> {
    let pod_reqs = pod_requirements(p);
    let mut last = "no node or NodePool fits".to_string();
    for n in nodes.iter_mut() {
        if n.pods.len() >= capacity || !tolerates_all(&n.taints, &p.tolerations) {
            continue;
        }
        let mut reqs = n.reqs.clone();
        if let Some(l) = &n.labels {
            if !pod_reqs.matches_labels(l) {
                continue;
            }
        } else if n
            .reqs
            .compatible(&pod_reqs, Undefined::AllowWellKnown)
            .is_err()
        {
            continue;
        }
        reqs.add_all(&pod_reqs);
        match topology.add_requirements(p, &pod_reqs, &reqs) {
            Ok(extra) => {
                reqs.add_all(&extra);
                if reqs.first_empty().is_some() {
                    continue;
                }
                topology.record(p, &reqs, &n.taints);
                if n.labels.is_none() {
                    n.reqs = reqs;
                }
                n.pods.push(original.clone());
                return Ok(());
            }
            Err(e) => last = e.to_string(),
        }
    }
    for pool in pools {
        if !tolerates_all(&pool.taints, &p.tolerations) {
            continue;
        }
        let mut reqs = Requirements::from_input(&pool.requirements).expect("well-formed pool");
        reqs.add_all(&Requirements::from_labels(&pool.labels));
        if let Err(e) = reqs.compatible(&pod_reqs, Undefined::AllowWellKnown) {
            last = format!("NodePool {}: {e}", pool.name);
            continue;
        }
        let host = format!("claim-{}", *next_claim);
        reqs.add(Requirement::is_in(labels::HOSTNAME, [host.clone()]));
        reqs.add_all(&pod_reqs);
        match topology.add_requirements(p, &pod_reqs, &reqs) {
            Ok(extra) => {
                reqs.add_all(&extra);
                if let Some(r) = reqs.first_empty() {
                    last = format!("NodePool {}: nothing satisfies {r}", pool.name);
                    continue;
                }
                *next_claim += 1;
                topology.register(labels::HOSTNAME, &host);
                topology.record(p, &reqs, &pool.taints);
                nodes.push(SimNode {
                    name: host,
                    reqs,
                    taints: pool.taints.clone(),
                    pods: vec![original.clone()],
                    labels: None,
                });
                return Ok(());
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

/// A snapshot with these pools, nodes and pods.
pub(crate) fn snapshot(pools: Vec<NodePool>, nodes: Vec<Node>, pods: Vec<Pod>) -> ClusterSnapshot {
    ClusterSnapshot {
        node_pools: pools,
        nodes,
        pods,
        ..ClusterSnapshot::default()
    }
}
