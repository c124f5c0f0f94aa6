//! Karpenter conformance suite: scenarios derived from Karpenter v1's own tests, each a folder
//! under `tests/karpenter/<area>/<name>/` with `input.yaml` (manifests), optional `catalog.yaml`
//! (else the nearest one in a parent folder), optional `options.yaml` and `expect.yaml`
//! (semantic assertions; schema in `tests/karpenter/README.md`).
//!
//! One test walks every scenario, plans it through `planner_manifests` and `planner::plan`, and
//! reports every failing scenario with what differed before failing. `KARPENTER_SCENARIO=text`
//! runs only the scenarios whose path contains `text`; `KARPENTER_VERBOSE=1` prints every plan.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use planner::model::{ClusterSnapshot, PodPhase};
use planner::plan::{Plan, PlannedNodeClaim, Unschedulable};
use serde::Deserialize;

mod support;

/// Default clock of every scenario unless `options.yaml` sets `now`.
const DEFAULT_NOW: &str = "2025-06-01T12:00:00Z";

// === scenario files ===

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClaimExpect {
    node_pool: Option<String>,
    zones: Option<Vec<String>>,
    /// Zones must be a non-empty subset of these.
    zones_within: Option<Vec<String>>,
    capacity_types: Option<Vec<String>>,
    /// The cheapest (first) instance type.
    instance_type: Option<String>,
    /// Exactly these instance types (any order).
    instance_types: Option<Vec<String>>,
    instance_types_include: Option<Vec<String>>,
    instance_types_exclude: Option<Vec<String>>,
    /// Label subset.
    labels: Option<BTreeMap<String, String>>,
    /// Label keys that must be absent.
    labels_absent: Option<Vec<String>>,
    /// Taint keys, exactly (any order).
    taint_keys: Option<Vec<String>>,
    price: Option<f64>,
    price_max: Option<f64>,
    pod_count: Option<usize>,
    /// The claim is an existing node / in-flight NodeClaim of this name rather than a new claim.
    existing: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DomainCounts {
    /// Pod pattern (`ns/name`, `ns/prefix-*`).
    pods: String,
    /// Topology key (`kubernetes.io/hostname` = the node or claim).
    key: String,
    /// Exact counts per domain.
    counts: Option<BTreeMap<String, usize>>,
    /// Counts per domain sorted descending (domain names not checked).
    sorted: Option<Vec<usize>>,
    /// Largest count minus smallest count over the domains used.
    max_skew: Option<usize>,
    /// Also count bound pods of the input that match `pods` (domain from their node's labels).
    #[serde(default)]
    include_bound: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DisruptionExpect {
    reason: Option<String>,
    /// Any of these reasons.
    reason_any_of: Option<Vec<String>>,
    /// Exactly these nodes (any order).
    nodes: Option<Vec<String>>,
    /// These nodes among others.
    nodes_include: Option<Vec<String>>,
    /// Number of nodes.
    node_count: Option<usize>,
    /// Number of replacement claims.
    replacements: Option<usize>,
    /// Properties each replacement must have.
    replacement: Option<ClaimExpect>,
    savings_min: Option<f64>,
}

/// One of the plan's `consolidationMoves` (Karpenter v1.14's balanced evaluator).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MoveExpect {
    /// `approved` or `rejected`.
    decision: String,
    /// Exactly these nodes (any order).
    nodes: Vec<String>,
    /// The NodePool whose entry the fields below check (the move's only one when absent).
    node_pool: Option<String>,
    policy: Option<String>,
    /// The score as Karpenter's Event prints it (`%.2f`); only for a Balanced pool.
    score: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    /// The Karpenter test this scenario comes from: file and `It(...)` text (required at the top
    /// level, not in an `unblocked` twin).
    #[serde(default)]
    source: String,
    #[serde(default)]
    scheduled: Vec<String>,
    #[serde(default)]
    unschedulable: Vec<String>,
    #[serde(default)]
    reason_contains: BTreeMap<String, String>,
    /// No pending pod is unschedulable.
    #[serde(default)]
    all_scheduled: bool,
    scheduled_count: Option<usize>,
    unschedulable_count: Option<usize>,
    new_node_claims: Option<usize>,
    new_node_claims_max: Option<usize>,
    /// New claims per NodePool (pools not named must have none).
    node_claims_by_pool: Option<BTreeMap<String, usize>>,
    #[serde(default)]
    claims: BTreeMap<String, ClaimExpect>,
    /// Properties every new claim must have.
    every_claim: Option<ClaimExpect>,
    #[serde(default)]
    samenode: Vec<Vec<String>>,
    #[serde(default)]
    differentnodes: Vec<Vec<String>>,
    /// Pod → existing node (or in-flight NodeClaim) it must land on.
    #[serde(default)]
    existing: BTreeMap<String, String>,
    /// Pods that must land on new claims.
    #[serde(default)]
    on_new_claims: Vec<String>,
    #[serde(default)]
    domain_counts: Vec<DomainCounts>,
    #[serde(default)]
    disruptions: Vec<DisruptionExpect>,
    disruptions_count: Option<usize>,
    /// Each must match one of the plan's `consolidationMoves`.
    #[serde(default)]
    consolidation_moves: Vec<MoveExpect>,
    consolidation_moves_count: Option<usize>,
    /// Total number of nodes named by all disruptions.
    disrupted_nodes: Option<usize>,
    /// Sum of `savingsPerHour` over all disruptions, at most.
    total_savings_max: Option<f64>,
    /// Nodes that no disruption may name.
    #[serde(default)]
    not_disrupted: Vec<String>,
    /// Node → why it is kept: a plan note `node <name> is not disrupted: ...` contains the text
    /// (case-insensitive), and no disruption names the node.
    #[serde(default)]
    blocked_by: BTreeMap<String, String>,
    /// Texts some plan note contains (case-insensitive).
    #[serde(default)]
    notes_contain: Vec<String>,
    /// NodeOverlay → its `ValidationSucceeded` in the plan: `True`, or the False reason
    /// (`Conflict`, `RuntimeValidation`, or an exclusion's reason such as `Invalid`).
    #[serde(default)]
    node_overlays: BTreeMap<String, String>,
    /// CapacityBuffer (`namespace/name`) → what its status says.
    #[serde(default)]
    buffers: BTreeMap<String, BufferExpect>,
    /// The positive twin of a "nothing happens" scenario: the same input without the blocker,
    /// which must act.
    unblocked: Option<Box<Unblocked>>,
    cost_per_hour: Option<f64>,
    cost_per_hour_max: Option<f64>,
}

/// What a CapacityBuffer's status says after the plan.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BufferExpect {
    /// The `ReadyForProvisioning` reason.
    ready: Option<String>,
    /// The `Provisioning` reason.
    provisioning: Option<String>,
    /// `status.replicas`.
    replicas: Option<i32>,
    /// The existing nodes its chunks are on (exact set).
    nodes: Option<Vec<String>>,
}

/// A scenario's positive twin: its `input.yaml` with the blocker edited out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Unblocked {
    /// Text edits applied in order to `input.yaml`; each `from` must occur in it (every
    /// occurrence is replaced).
    replace: Vec<Edit>,
    /// Options replacing the scenario's.
    options: Option<support::Options>,
    /// What the planner must do then (it must name a disruption, a scheduled pod or a claim).
    expect: Expect,
}

/// One text edit of an input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Edit {
    from: String,
    to: String,
}

// === placement index ===

/// Where a pod landed.
#[derive(Clone, Debug)]
enum Placement<'p> {
    New(&'p PlannedNodeClaim),
    Existing(String),
}

struct Placements<'p> {
    by_pod: BTreeMap<String, Placement<'p>>,
    unschedulable: BTreeMap<String, String>,
    all_pods: BTreeSet<String>,
}

impl<'p> Placements<'p> {
    fn new(plan: &'p Plan, pending: &BTreeSet<String>) -> Self {
        let mut by_pod = BTreeMap::new();
        for c in &plan.node_claims {
            for p in &c.pods {
                by_pod.insert(p.clone(), Placement::New(c));
            }
        }
        for e in &plan.existing_nodes {
            for p in &e.pods {
                by_pod.insert(p.clone(), Placement::Existing(e.name.clone()));
            }
        }
        let unschedulable = plan
            .unschedulable
            .iter()
            .map(|u| (u.pod.clone(), u.reason.clone()))
            .collect();
        Self {
            by_pod,
            unschedulable,
            all_pods: pending.clone(),
        }
    }

    /// Pods matching a pattern (`*` suffix = prefix match), sorted; errors if none match.
    fn matching(&self, pattern: &str, errs: &mut Vec<String>) -> Vec<String> {
        let found: Vec<String> = match pattern.strip_suffix('*') {
            Some(prefix) => self
                .all_pods
                .iter()
                .filter(|p| p.starts_with(prefix))
                .cloned()
                .collect(),
            None => self
                .all_pods
                .iter()
                .filter(|p| *p == pattern)
                .cloned()
                .collect(),
        };
        if found.is_empty() {
            errs.push(format!(
                "expect names pod {pattern:?} but no pending pod of the input matches"
            ));
        }
        found
    }

    fn node_id(&self, pod: &str) -> Option<String> {
        match self.by_pod.get(pod)? {
            Placement::New(c) => Some(format!("new:{}", c.name)),
            Placement::Existing(n) => Some(format!("existing:{n}")),
        }
    }
}

/// The domain of a pod for a topology key, from where it landed.
fn domain(p: &Placement<'_>, key: &str, snapshot: &ClusterSnapshot) -> Option<String> {
    match p {
        Placement::Existing(name) => {
            if key == "kubernetes.io/hostname" {
                return Some(name.clone());
            }
            if let Some(n) = snapshot.nodes.iter().find(|n| &n.name == name) {
                return n.labels.get(key).cloned();
            }
            let c = snapshot.node_claims.iter().find(|c| &c.name == name)?;
            c.labels.get(key).cloned().or_else(|| {
                c.requirements
                    .iter()
                    .find(|r| r.key == key && r.values.len() == 1)
                    .map(|r| r.values[0].clone())
            })
        }
        Placement::New(c) => {
            if key == "kubernetes.io/hostname" {
                return Some(c.name.clone());
            }
            if let Some(v) = c.labels.get(key) {
                return Some(v.clone());
            }
            let single = |v: &Vec<String>| (v.len() == 1).then(|| v[0].clone());
            match key {
                "topology.kubernetes.io/zone" => single(&c.zones),
                "karpenter.sh/capacity-type" => single(&c.capacity_types),
                "node.kubernetes.io/instance-type" => single(&c.instance_types),
                _ => None,
            }
        }
    }
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v.dedup();
    v
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 + 1e-6 * b.abs()
}

fn check_claim(what: &str, c: &PlannedNodeClaim, e: &ClaimExpect, errs: &mut Vec<String>) {
    if let Some(p) = &e.node_pool
        && &c.node_pool != p
    {
        errs.push(format!(
            "{what}: nodePool is {:?}, expected {p:?}",
            c.node_pool
        ));
    }
    if let Some(z) = &e.zones
        && sorted(&c.zones) != sorted(z)
    {
        errs.push(format!(
            "{what}: zones are {:?}, expected {:?}",
            c.zones,
            sorted(z)
        ));
    }
    if let Some(z) = &e.zones_within
        && (c.zones.is_empty() || c.zones.iter().any(|x| !z.contains(x)))
    {
        errs.push(format!(
            "{what}: zones are {:?}, expected a subset of {z:?}",
            c.zones
        ));
    }
    if let Some(ct) = &e.capacity_types
        && sorted(&c.capacity_types) != sorted(ct)
    {
        errs.push(format!(
            "{what}: capacityTypes are {:?}, expected {:?}",
            c.capacity_types,
            sorted(ct)
        ));
    }
    if let Some(t) = &e.instance_type
        && c.instance_types.first() != Some(t)
    {
        errs.push(format!(
            "{what}: cheapest instance type is {:?}, expected {t:?} (all: {:?})",
            c.instance_types.first(),
            c.instance_types
        ));
    }
    if let Some(ts) = &e.instance_types
        && sorted(&c.instance_types) != sorted(ts)
    {
        errs.push(format!(
            "{what}: instanceTypes are {:?}, expected exactly {:?}",
            c.instance_types,
            sorted(ts)
        ));
    }
    if let Some(ts) = &e.instance_types_include {
        let missing: Vec<_> = ts
            .iter()
            .filter(|t| !c.instance_types.contains(t))
            .collect();
        if !missing.is_empty() {
            errs.push(format!(
                "{what}: instanceTypes {:?} lack {missing:?}",
                c.instance_types
            ));
        }
    }
    if let Some(ts) = &e.instance_types_exclude {
        let present: Vec<_> = ts.iter().filter(|t| c.instance_types.contains(t)).collect();
        if !present.is_empty() {
            errs.push(format!(
                "{what}: instanceTypes {:?} must not include {present:?}",
                c.instance_types
            ));
        }
    }
    if let Some(ls) = &e.labels {
        for (k, v) in ls {
            if c.labels.get(k) != Some(v) {
                errs.push(format!(
                    "{what}: label {k} is {:?}, expected {v:?}",
                    c.labels.get(k)
                ));
            }
        }
    }
    if let Some(ks) = &e.labels_absent {
        for k in ks {
            if let Some(v) = c.labels.get(k) {
                errs.push(format!("{what}: label {k}={v:?} must be absent"));
            }
        }
    }
    if let Some(ks) = &e.taint_keys {
        let got: Vec<String> = c.taints.iter().map(|t| t.key.clone()).collect();
        if sorted(&got) != sorted(ks) {
            errs.push(format!(
                "{what}: taint keys are {got:?}, expected {:?}",
                sorted(ks)
            ));
        }
    }
    if let Some(p) = e.price
        && !close(c.price, p)
    {
        errs.push(format!("{what}: price is {}, expected {p}", c.price));
    }
    if let Some(p) = e.price_max
        && c.price > p + 1e-9
    {
        errs.push(format!(
            "{what}: price is {}, expected at most {p}",
            c.price
        ));
    }
    if let Some(n) = e.pod_count
        && c.pods.len() != n
    {
        errs.push(format!("{what}: holds {} pods, expected {n}", c.pods.len()));
    }
}

// === checks ===

/// What differs between `expect` and `plan`; `contract` also checks that every pending pod is
/// in exactly one place.
/// `consolidationMoves` and `consolidationMovesCount`.
fn check_moves(expect: &Expect, plan: &Plan, errs: &mut Vec<String>) {
    let got = &plan.consolidation_moves;
    for me in &expect.consolidation_moves {
        let Some(m) = got
            .iter()
            .find(|m| m.decision == me.decision && sorted(&m.nodes) == sorted(&me.nodes))
        else {
            errs.push(format!(
                "no {} consolidation move of {:?}; got {got:?}",
                me.decision, me.nodes
            ));
            continue;
        };
        let pool = match &me.node_pool {
            Some(name) => m.node_pools.iter().find(|p| p.node_pool == *name),
            None if m.node_pools.len() == 1 => m.node_pools.first(),
            None => None,
        };
        let Some(pool) = pool else {
            errs.push(format!(
                "move {:?}: no entry for NodePool {:?}: {m:?}",
                m.nodes, me.node_pool
            ));
            continue;
        };
        if let Some(p) = &me.policy
            && pool.policy != *p
        {
            errs.push(format!(
                "move {:?}: policy {}, expected {p}",
                m.nodes, pool.policy
            ));
        }
        if let Some(sc) = me.score
            && !(pool.scored && (pool.score - sc).abs() < 0.005)
        {
            errs.push(format!(
                "move {:?}: score {:.2} (scored: {}), expected {sc:.2}",
                m.nodes, pool.score, pool.scored
            ));
        }
        if me.score.is_none() && me.policy.as_deref() != Some("Balanced") && pool.scored {
            errs.push(format!(
                "move {:?}: scored, but its pool is {}",
                m.nodes, pool.policy
            ));
        }
    }
    if let Some(n) = expect.consolidation_moves_count
        && got.len() != n
    {
        errs.push(format!(
            "{} consolidation moves, expected {n}: {got:?}",
            got.len()
        ));
    }
}

fn check(expect: &Expect, plan: &Plan, snapshot: &ClusterSnapshot, contract: bool) -> Vec<String> {
    let mut errs = Vec::new();
    let pending = pending_pods(snapshot);
    let pl = Placements::new(plan, &pending);

    for pat in &expect.scheduled {
        for pod in pl.matching(pat, &mut errs) {
            if !pl.by_pod.contains_key(&pod) {
                let why = pl
                    .unschedulable
                    .get(&pod)
                    .map_or("missing from the plan", |r| r);
                errs.push(format!("{pod} should be scheduled, but: {why}"));
            }
        }
    }
    for pat in &expect.unschedulable {
        for pod in pl.matching(pat, &mut errs) {
            if !expect
                .reason_contains
                .keys()
                .any(|k| match k.strip_suffix('*') {
                    Some(prefix) => pod.starts_with(prefix),
                    None => *k == pod,
                })
            {
                errs.push(format!(
                    "expect.yaml: {pod} is expected unschedulable without a reasonContains entry"
                ));
            }
            if let Some(p) = pl.node_id(&pod) {
                errs.push(format!(
                    "{pod} should be unschedulable, but was placed on {p}"
                ));
            } else if !pl.unschedulable.contains_key(&pod) {
                errs.push(format!(
                    "{pod} should be unschedulable, but is missing from the plan"
                ));
            }
        }
    }
    for (pat, text) in &expect.reason_contains {
        for pod in pl.matching(pat, &mut errs) {
            match pl.unschedulable.get(&pod) {
                Some(r) if r.to_lowercase().contains(&text.to_lowercase()) => {}
                Some(r) => errs.push(format!("{pod}: reason {r:?} does not mention {text:?}")),
                None => errs.push(format!("{pod}: expected unschedulable mentioning {text:?}")),
            }
        }
    }
    for pod in pending.iter().filter(|_| expect.all_scheduled) {
        if !pl.by_pod.contains_key(pod) && !pl.unschedulable.contains_key(pod) {
            errs.push(format!(
                "every pod should be scheduled, {pod} is not placed"
            ));
        }
    }
    if expect.all_scheduled && !plan.unschedulable.is_empty() {
        let list: Vec<String> = plan
            .unschedulable
            .iter()
            .map(|u| format!("{} ({})", u.pod, u.reason))
            .collect();
        errs.push(format!(
            "every pod should be scheduled, unschedulable: {list:?}"
        ));
    }
    if let Some(n) = expect.scheduled_count
        && pl.by_pod.len() != n
    {
        errs.push(format!("{} pods scheduled, expected {n}", pl.by_pod.len()));
    }
    if let Some(n) = expect.unschedulable_count
        && plan.unschedulable.len() != n
    {
        errs.push(format!(
            "{} pods unschedulable, expected {n}",
            plan.unschedulable.len()
        ));
    }
    if let Some(n) = expect.new_node_claims
        && plan.node_claims.len() != n
    {
        errs.push(format!(
            "{} new NodeClaims, expected {n}",
            plan.node_claims.len()
        ));
    }
    if let Some(n) = expect.new_node_claims_max
        && plan.node_claims.len() > n
    {
        errs.push(format!(
            "{} new NodeClaims, expected at most {n}",
            plan.node_claims.len()
        ));
    }
    if let Some(by_pool) = &expect.node_claims_by_pool {
        let mut got: BTreeMap<String, usize> = BTreeMap::new();
        for c in &plan.node_claims {
            *got.entry(c.node_pool.clone()).or_default() += 1;
        }
        let want: BTreeMap<String, usize> = by_pool
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if got != want {
            errs.push(format!(
                "new NodeClaims per pool are {got:?}, expected {want:?}"
            ));
        }
    }
    for (pat, ce) in &expect.claims {
        for pod in pl.matching(pat, &mut errs) {
            match pl.by_pod.get(&pod) {
                Some(Placement::New(c)) => {
                    if let Some(n) = &ce.existing {
                        errs.push(format!(
                            "{pod}: landed on new claim {}, expected existing {n}",
                            c.name
                        ));
                    }
                    check_claim(&format!("claim of {pod}"), c, ce, &mut errs);
                }
                Some(Placement::Existing(n)) => match &ce.existing {
                    Some(want) if want == n => {}
                    _ => errs.push(format!(
                        "{pod}: landed on existing node {n}, expected a new claim"
                    )),
                },
                None => errs.push(format!("{pod}: not scheduled, cannot check its claim")),
            }
        }
    }
    if let Some(ce) = &expect.every_claim {
        for c in &plan.node_claims {
            check_claim(&format!("claim {}", c.name), c, ce, &mut errs);
        }
    }
    for group in &expect.samenode {
        let pods: Vec<String> = group
            .iter()
            .flat_map(|p| pl.matching(p, &mut errs))
            .collect();
        let nodes: BTreeSet<Option<String>> = pods.iter().map(|p| pl.node_id(p)).collect();
        if nodes.len() != 1 || nodes.contains(&None) {
            errs.push(format!(
                "{pods:?} should share one node, got {:?}",
                pods.iter().map(|p| pl.node_id(p)).collect::<Vec<_>>()
            ));
        }
    }
    for group in &expect.differentnodes {
        let pods: Vec<String> = group
            .iter()
            .flat_map(|p| pl.matching(p, &mut errs))
            .collect();
        let nodes: Vec<Option<String>> = pods.iter().map(|p| pl.node_id(p)).collect();
        let distinct: BTreeSet<&Option<String>> = nodes.iter().collect();
        if distinct.len() != pods.len() || distinct.contains(&None) {
            errs.push(format!(
                "{pods:?} should each be on a different node, got {nodes:?}"
            ));
        }
    }
    for (pat, node) in &expect.existing {
        for pod in pl.matching(pat, &mut errs) {
            match pl.by_pod.get(&pod) {
                Some(Placement::Existing(n)) if n == node => {}
                other => errs.push(format!(
                    "{pod} should be on existing {node}, got {:?}",
                    other.map(|p| match p {
                        Placement::New(c) => format!("new claim {}", c.name),
                        Placement::Existing(n) => format!("existing {n}"),
                    })
                )),
            }
        }
    }
    for pat in &expect.on_new_claims {
        for pod in pl.matching(pat, &mut errs) {
            if !matches!(pl.by_pod.get(&pod), Some(Placement::New(_))) {
                errs.push(format!(
                    "{pod} should be on a new claim, got {:?}",
                    pl.node_id(&pod)
                ));
            }
        }
    }
    for dc in &expect.domain_counts {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for pod in pl.matching(&dc.pods, &mut errs) {
            let Some(p) = pl.by_pod.get(&pod) else {
                continue;
            };
            match domain(p, &dc.key, snapshot) {
                Some(d) => *counts.entry(d).or_default() += 1,
                None => errs.push(format!(
                    "{pod}: its node has no single value for {} (claim not pinned)",
                    dc.key
                )),
            }
        }
        if dc.include_bound {
            let prefix = dc.pods.strip_suffix('*');
            for p in &snapshot.pods {
                let Some(node) = &p.node_name else {
                    continue;
                };
                let key = p.key();
                let hit = match prefix {
                    Some(prefix) => key.starts_with(prefix),
                    None => key == dc.pods,
                };
                if hit && !matches!(p.phase, PodPhase::Succeeded | PodPhase::Failed) {
                    match domain(&Placement::Existing(node.clone()), &dc.key, snapshot) {
                        Some(d) => *counts.entry(d).or_default() += 1,
                        None => {
                            errs.push(format!("bound pod {key}: node {node} has no {}", dc.key))
                        }
                    }
                }
            }
        }
        if let Some(want) = &dc.counts {
            let want: BTreeMap<String, usize> = want
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            if counts != want {
                errs.push(format!(
                    "{} by {}: counts are {counts:?}, expected {want:?}",
                    dc.pods, dc.key
                ));
            }
        }
        if let Some(want) = &dc.sorted {
            let mut got: Vec<usize> = counts.values().copied().collect();
            got.sort_unstable_by(|a, b| b.cmp(a));
            if &got != want {
                errs.push(format!(
                    "{} by {}: sorted counts are {got:?} ({counts:?}), expected {want:?}",
                    dc.pods, dc.key
                ));
            }
        }
        if let Some(skew) = dc.max_skew {
            let max = counts.values().max().copied().unwrap_or(0);
            let min = counts.values().min().copied().unwrap_or(0);
            if max - min > skew {
                errs.push(format!(
                    "{} by {}: skew {} ({counts:?}), expected at most {skew}",
                    dc.pods,
                    dc.key,
                    max - min
                ));
            }
        }
    }
    let described: Vec<String> = plan
        .disruptions
        .iter()
        .map(|d| {
            format!(
                "{} {:?} (+{} replacements)",
                d.reason,
                d.nodes,
                d.replacements.len()
            )
        })
        .collect();
    for de in &expect.disruptions {
        let found = plan.disruptions.iter().find(|d| {
            if de.reason.as_ref().is_some_and(|r| *r != d.reason) {
                return false;
            }
            if de
                .reason_any_of
                .as_ref()
                .is_some_and(|rs| !rs.contains(&d.reason))
            {
                return false;
            }
            if let Some(ns) = &de.nodes
                && sorted(&d.nodes) != sorted(ns)
            {
                return false;
            }
            if let Some(ns) = &de.nodes_include
                && !ns.iter().all(|n| d.nodes.contains(n))
            {
                return false;
            }
            de.node_count.is_none_or(|n| d.nodes.len() == n)
        });
        let Some(d) = found else {
            errs.push(format!(
                "no disruption {:?} nodes={:?} include={:?} count={:?}; got {described:?}",
                de.reason
                    .as_ref()
                    .or(de.reason_any_of.as_ref().and_then(|r| r.first())),
                de.nodes,
                de.nodes_include,
                de.node_count
            ));
            continue;
        };
        if let Some(n) = de.replacements
            && d.replacements.len() != n
        {
            errs.push(format!(
                "disruption {} {:?}: {} replacements, expected {n}",
                d.reason,
                d.nodes,
                d.replacements.len()
            ));
        }
        if let Some(ce) = &de.replacement {
            for r in &d.replacements {
                check_claim(&format!("replacement {}", r.name), r, ce, &mut errs);
            }
        }
        if let Some(s) = de.savings_min
            && d.savings_per_hour + 1e-9 < s
        {
            errs.push(format!(
                "disruption {} {:?}: saves {}, expected at least {s}",
                d.reason, d.nodes, d.savings_per_hour
            ));
        }
    }
    check_moves(expect, plan, &mut errs);
    if let Some(n) = expect.disruptions_count
        && plan.disruptions.len() != n
    {
        errs.push(format!(
            "{} disruptions, expected {n}: {described:?}",
            plan.disruptions.len()
        ));
    }
    if let Some(n) = expect.disrupted_nodes {
        let got: usize = plan.disruptions.iter().map(|d| d.nodes.len()).sum();
        if got != n {
            errs.push(format!(
                "{got} nodes disrupted, expected {n}: {described:?}"
            ));
        }
    }
    if let Some(max) = expect.total_savings_max {
        let got: f64 = plan.disruptions.iter().map(|d| d.savings_per_hour).sum();
        if got > max + 1e-9 {
            errs.push(format!(
                "disruptions save {got} in total, expected at most {max}: {described:?}"
            ));
        }
    }
    for node in &expect.not_disrupted {
        if let Some(d) = plan.disruptions.iter().find(|d| d.nodes.contains(node)) {
            errs.push(format!(
                "{node} must not be disrupted, got {} {:?}",
                d.reason, d.nodes
            ));
        }
    }
    if let Some(c) = expect.cost_per_hour
        && !close(plan.summary.cost_per_hour, c)
    {
        errs.push(format!(
            "costPerHour is {}, expected {c}",
            plan.summary.cost_per_hour
        ));
    }
    if let Some(c) = expect.cost_per_hour_max
        && plan.summary.cost_per_hour > c + 1e-9
    {
        errs.push(format!(
            "costPerHour is {}, expected at most {c}",
            plan.summary.cost_per_hour
        ));
    }
    for (node, text) in &expect.blocked_by {
        let head = format!("node {node} is not disrupted");
        let hit = plan
            .notes
            .iter()
            .any(|n| n.starts_with(&head) && n.to_lowercase().contains(&text.to_lowercase()));
        if !hit {
            errs.push(format!(
                "{node}: no note says it is not disrupted because of {text:?}; notes: {:?}",
                plan.notes
            ));
        }
        if let Some(d) = plan.disruptions.iter().find(|d| d.nodes.contains(node)) {
            errs.push(format!(
                "{node} is blocked, yet disrupted: {} {:?}",
                d.reason, d.nodes
            ));
        }
    }
    for (name, want) in &expect.node_overlays {
        let got = plan
            .node_overlays
            .iter()
            .find(|o| &o.name == name)
            .map(|o| {
                if o.validation_succeeded {
                    "True".to_string()
                } else {
                    o.reason.clone()
                }
            })
            .or_else(|| {
                plan.excluded
                    .iter()
                    .find(|e| e.kind == "NodeOverlay" && &e.name == name)
                    .map(|e| e.reason.clone())
            });
        if got.as_deref() != Some(want.as_str()) {
            errs.push(format!(
                "NodeOverlay {name}: ValidationSucceeded {got:?}, expected {want:?}; statuses: {:?}",
                plan.node_overlays
            ));
        }
    }
    for text in &expect.notes_contain {
        if !plan
            .notes
            .iter()
            .any(|n| n.to_lowercase().contains(&text.to_lowercase()))
        {
            errs.push(format!(
                "no note mentions {text:?}; notes: {:?}",
                plan.notes
            ));
        }
    }
    for (key, want) in &expect.buffers {
        let Some(got) = plan
            .capacity_buffers
            .iter()
            .find(|b| common::key::namespaced(&b.namespace, &b.name) == *key)
        else {
            errs.push(format!(
                "no status for CapacityBuffer {key}: {:?}",
                plan.capacity_buffers
            ));
            continue;
        };
        if let Some(r) = &want.ready
            && *r != got.ready_reason
        {
            errs.push(format!(
                "{key}: ReadyForProvisioning is {got:?}, expected {r}"
            ));
        }
        if let Some(r) = &want.provisioning
            && *r != got.provisioning_reason
        {
            errs.push(format!("{key}: Provisioning is {got:?}, expected {r}"));
        }
        if want.replicas.is_some() && want.replicas != got.replicas {
            errs.push(format!(
                "{key}: replicas {:?}, expected {:?}",
                got.replicas, want.replicas
            ));
        }
        if let Some(n) = &want.nodes {
            let (mut a, mut b) = (n.clone(), got.nodes.clone());
            a.sort();
            b.sort();
            if a != b {
                errs.push(format!("{key}: chunks on {b:?}, expected {a:?}"));
            }
        }
    }
    // Contract invariant: every pending pod in exactly one place.
    for pod in pending.iter().filter(|_| contract) {
        let n = usize::from(pl.by_pod.contains_key(pod))
            + usize::from(pl.unschedulable.contains_key(pod));
        if n != 1 {
            errs.push(format!(
                "{pod} appears {n} times among placed/unschedulable"
            ));
        }
    }
    errs
}

// === running ===

fn verbose_labels() -> bool {
    std::env::var_os("KARPENTER_LABELS").is_some()
}

fn describe(plan: &Plan) -> String {
    let mut s = String::new();
    for c in &plan.node_claims {
        let _ = writeln!(
            s,
            "    claim {} pool={} types={:?} zones={:?} ct={:?} price={} pods={:?}",
            c.name,
            c.node_pool,
            c.instance_types.iter().take(6).collect::<Vec<_>>(),
            c.zones,
            c.capacity_types,
            c.price,
            c.pods
        );
        if verbose_labels() {
            let _ = writeln!(s, "      labels={:?} taints={:?}", c.labels, c.taints);
        }
    }
    for e in &plan.existing_nodes {
        let _ = writeln!(s, "    existing {} pods={:?}", e.name, e.pods);
    }
    for u in &plan.unschedulable {
        let _ = writeln!(s, "    unschedulable {}: {}", u.pod, u.reason);
    }
    for n in &plan.notes {
        let _ = writeln!(s, "    note {n}");
    }
    for d in &plan.disruptions {
        let _ = writeln!(
            s,
            "    disruption {} nodes={:?} replacements={:?} savings={}",
            d.reason,
            d.nodes,
            d.replacements
                .iter()
                .map(|r| (r.instance_types.first().cloned(), r.pods.len()))
                .collect::<Vec<_>>(),
            d.savings_per_hour
        );
    }
    s
}

/// Who answers a scenario: the real planner, or a trivial one that every scenario must reject
/// (proof that no scenario can pass for the wrong reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Planner {
    /// `planner::plan`.
    Real,
    /// An empty plan: no claim, no placement, no disruption, no note (its missing pods are not
    /// reported: a scenario must fail on one of its own expectations).
    DoNothing,
    /// Every pending pod unschedulable with an empty reason; nothing else.
    UnschedulableEverything,
}

/// The plan `planner` gives for `snapshot`.
fn plan_by(
    planner: Planner,
    snapshot: &ClusterSnapshot,
    pending: &BTreeSet<String>,
    plan: impl FnOnce() -> Plan,
) -> Plan {
    match planner {
        Planner::Real => plan(),
        Planner::DoNothing => Plan::default(),
        Planner::UnschedulableEverything => Plan {
            unschedulable: pending
                .iter()
                .map(|p| Unschedulable {
                    pod: p.clone(),
                    reason: String::new(),
                })
                .collect(),
            summary: planner::plan::Summary {
                pending_pods: u32::try_from(snapshot.pods.len()).unwrap_or(u32::MAX),
                ..Default::default()
            },
            ..Plan::default()
        },
    }
}

/// Pending pods of a snapshot (keys).
fn pending_pods(snapshot: &ClusterSnapshot) -> BTreeSet<String> {
    snapshot
        .pods
        .iter()
        .filter(|p| {
            p.node_name.is_none() && !matches!(p.phase, PodPhase::Succeeded | PodPhase::Failed)
        })
        .map(|p| p.key())
        .collect()
}

fn run_one(dir: &Path, root: &Path, planner: Planner) -> Result<(Vec<String>, String), String> {
    let options = support::options(dir)?;
    let expect: Expect = support::read_yaml(&dir.join("expect.yaml"))?
        .ok_or_else(|| format!("{}: no expect.yaml", dir.display()))?;
    if expect.source.trim().is_empty() {
        return Err("expect.yaml: source is empty".into());
    }
    let loaded = support::load_input(dir).map_err(|e| format!("input: {e}"))?;
    let catalog = support::load_catalog(dir, root, &options)?;
    let opts = support::plan_options(&options, DEFAULT_NOW)?;
    let pending = pending_pods(&loaded.snapshot);
    let plan = plan_by(planner, &loaded.snapshot, &pending, || {
        planner::plan(&loaded.snapshot, &catalog, &opts)
    });
    let mut errs = check(&expect, &plan, &loaded.snapshot, planner == Planner::Real);
    if let Some(twin) = &expect.unblocked {
        let acts = !twin.expect.disruptions.is_empty()
            || !twin.expect.scheduled.is_empty()
            || twin.expect.new_node_claims.is_some_and(|n| n > 0);
        if !acts {
            errs.push(
                "expect.yaml: unblocked.expect names no disruption, scheduled pod or claim".into(),
            );
        }
        let path = dir.join("input.yaml");
        let mut text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for edit in &twin.replace {
            if !text.contains(&edit.from) {
                return Err(format!("unblocked: input.yaml has no {:?}", edit.from));
            }
            text = text.replace(&edit.from, &edit.to);
        }
        let mut reader = planner_manifests::Reader::new();
        let loaded = reader
            .add_document_text(&text, "input.yaml (unblocked)")
            .and_then(|()| reader.finish())
            .map_err(|e| format!("unblocked input: {e}"))?;
        let opts = match &twin.options {
            Some(o) => support::plan_options(o, DEFAULT_NOW)?,
            None => opts.clone(),
        };
        let pending = pending_pods(&loaded.snapshot);
        let plan = plan_by(planner, &loaded.snapshot, &pending, || {
            planner::plan(&loaded.snapshot, &catalog, &opts)
        });
        for e in check(
            &twin.expect,
            &plan,
            &loaded.snapshot,
            planner == Planner::Real,
        ) {
            errs.push(format!("unblocked twin: {e}"));
        }
    }
    if planner == Planner::Real {
        // Contract: the same input gives the same output, byte for byte.
        let again = planner::plan(&loaded.snapshot, &catalog, &opts);
        if serde_json::to_string(&plan).ok() != serde_json::to_string(&again).ok() {
            errs.push("planning the same input twice gave different plans".to_string());
        }
    }
    Ok((errs, describe(&plan)))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/karpenter")
}

/// The scenarios `KARPENTER_SCENARIO` selects (all by default), by path relative to the root.
fn selected() -> Vec<(String, PathBuf)> {
    let root = root();
    let filter = std::env::var("KARPENTER_SCENARIO").unwrap_or_default();
    let dirs: Vec<(String, PathBuf)> = support::scenario_dirs(&root, "expect.yaml")
        .into_iter()
        .map(|d| (d.strip_prefix(&root).unwrap_or(&d).display().to_string(), d))
        .filter(|(name, _)| name.contains(&filter))
        .collect();
    assert!(!dirs.is_empty(), "no scenarios under {}", root.display());
    dirs
}

#[test]
fn karpenter_conformance() {
    let root = root();
    let verbose = std::env::var_os("KARPENTER_VERBOSE").is_some();
    let dirs = selected();
    let mut failed = Vec::new();
    for (name, dir) in &dirs {
        match run_one(dir, &root, Planner::Real) {
            Ok((errs, plan)) if errs.is_empty() => {
                if verbose {
                    println!("ok   {name}\n{plan}");
                }
            }
            Ok((errs, plan)) => failed.push(format!(
                "FAIL {name}\n{}\n  plan:\n{plan}",
                errs.iter()
                    .map(|e| format!("  - {e}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )),
            Err(e) => failed.push(format!("ERROR {name}: {e}")),
        }
    }
    println!(
        "karpenter conformance: {} passed, {} failed of {}",
        dirs.len() - failed.len(),
        failed.len(),
        dirs.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {} Karpenter scenarios failed:\n{}",
        failed.len(),
        dirs.len(),
        failed.join("\n")
    );
}

/// Every scenario fails under a planner that does nothing and under one that marks every pod
/// unschedulable: no scenario passes for the wrong reason ("nothing happened" expectations
/// also say why nothing happened, unschedulable pods say why they are).
#[test]
fn karpenter_scenarios_reject_trivial_planners() {
    let root = root();
    let dirs = selected();
    let mut passed = Vec::new();
    for planner in [Planner::DoNothing, Planner::UnschedulableEverything] {
        for (name, dir) in &dirs {
            match run_one(dir, &root, planner) {
                Ok((errs, _)) if errs.is_empty() => passed.push(format!("{planner:?} {name}")),
                Ok(_) => {}
                Err(e) => passed.push(format!("{planner:?} {name}: ERROR {e}")),
            }
        }
    }
    assert!(
        passed.is_empty(),
        "{} scenario runs pass under a trivial planner:\n{}",
        passed.len(),
        passed.join("\n")
    );
}
