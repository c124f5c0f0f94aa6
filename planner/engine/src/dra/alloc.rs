//! Device allocation for pods with ResourceClaims while `ignoreDRARequests` is off, as
//! Karpenter v1.14's allocator (kubernetes-sigs/karpenter `pkg/scheduling/dynamicresources`)
//! does it with the AWS provider, which publishes no `ResourceSliceTemplates`.
//!
//! What Karpenter does, and what [`apply`] does with it:
//!
//! - The published universe (`provisioning/dra.go` `gatherResourceSlices`): every ResourceSlice,
//!   except those owned (ownerReference kind `Node`) by a Node that is not an initialized,
//!   present, undeleted Node. Pools group slices by driver and pool, the highest generation wins;
//!   a pool with fewer slices than its `resourceSliceCount` is incomplete (skipped; an `All`
//!   request on it fails) and a pool with a duplicate device name is invalid (`pool.go`).
//! - Reachability (`pool.go` `sliceMatchesRequirements`): `allNodes` slices from anywhere;
//!   `nodeName` slices from that Node only (never from a new NodeClaim); `nodeSelector` slices
//!   where a term is compatible with the node, and a device taken from one adds all its terms'
//!   requirements to the NodeClaim (`sliceTopologyRequirements`; Karpenter reads
//!   `matchExpressions` only).
//! - Devices already allocated (`gatherAllocatedDevices`): the devices of every allocated
//!   claim, unless every pod it is reserved for is being deleted (the device is then free and
//!   the claim is allocated again, `ClassifyClaims`).
//! - Each pod's claims (`scheduling/dra.go` `resolvePodClaims`): a claim that does not exist
//!   fails the pod ("resourceclaim \"ns/name\" not found"); an allocated claim adds its
//!   `status.allocation.nodeSelector` (`matchExpressions`) to the node's requirements; a claim
//!   an earlier pod of this plan allocated adds what that allocation added; the others are
//!   allocated together by a depth-first search over request slots (ExactCount: `count`
//!   devices; All: every matching device), each device matching its DeviceClass's and the
//!   request's CEL selectors ([`super::cel`]), `matchAttribute` constraints holding, devices
//!   never shared. A request with `firstAvailable` or a `distinctAttribute` constraint is
//!   refused as Karpenter refuses it (`request.go` `ValidateClaimRequest`).
//! - Targets (`scheduler.go` `add`): existing nodes first, then a new NodeClaim. Karpenter runs
//!   the allocator inside each target's `CanAdd`; dovetail runs it once per pod before
//!   scheduling, in the scheduler's order (priority, then input order): the pod is pinned
//!   (`kubernetes.io/hostname`) to the first initialized existing node, by name, that its
//!   selectors and tolerations allow, has room for its requests and can allocate its claims, and
//!   those devices are taken; otherwise, if devices reachable from a new NodeClaim satisfy them,
//!   the pod gets their requirements and those devices are taken; otherwise it is
//!   unschedulable with Karpenter's error, "allocating dynamic resources, no instance type can
//!   satisfy the allocation".
//! - Consolidation (`disruption/consolidation_dra_test.go`): a bound pod whose claims hold
//!   devices of its own node's slices needs the same devices elsewhere to move: it may go to
//!   another existing node that can allocate them or to a new NodeClaim that can, and when
//!   none can, it cannot move and its node is no candidate.
//!
//! Not modelled (the AWS provider has no templates, so these reach only published devices):
//! shared counters (partitionable devices), consumable capacity and multi-allocatable devices
//! (such a slice's devices are used as plain exclusive devices), CEL outside the subset of
//! [`super::cel`] (refused naming the expression), the `karpenter.sh/dra-drivers` annotation.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::model::{
    ClusterSnapshot, DeviceClass, DeviceId, Node, NodeSelectorTerm, Operator, PlanOptions, Pod,
    Requirement as InputRequirement, ResourceClaim, ResourceSlice, Resources,
};
use crate::requirements::{Requirements, taints};

use super::cel::Selector;

/// Karpenter's error when no target can allocate a pod's claims (`allocator.go`, wrapped by
/// `nodeclaim.go`/`existingnode.go`).
pub const UNSATISFIABLE: &str =
    "allocating dynamic resources, no instance type can satisfy the allocation";

/// The depth-first search gives up after this many device trials per target (Karpenter bounds
/// it by a 5 s timeout per pod; the engine reads no clock).
const MAX_TRIALS: usize = 200_000;

/// The snapshot with every pod's DRA claims resolved for this plan: pods pinned or constrained
/// to where their devices are, and [`Pod::dra_unsatisfiable`] set on those that cannot be
/// placed. `None` when there is nothing to do (the setting on, or no pod names a claim).
pub fn apply(snapshot: &ClusterSnapshot, options: &PlanOptions) -> Option<ClusterSnapshot> {
    if options.ignore_dra_requests
        || !snapshot
            .pods
            .iter()
            .any(|p| !p.resource_claim_objects.is_empty())
    {
        return None;
    }
    let mut out = snapshot.clone();
    let universe = Universe::new(snapshot);
    let mut state = State {
        taken: universe.allocated.clone(),
        in_plan: HashMap::new(),
        used: HashMap::new(),
    };
    // Pending pods, in the scheduler's order: priority, then input order.
    let mut pending: Vec<usize> = (0..out.pods.len())
        .filter(|&i| out.pods[i].is_pending() && !out.pods[i].resource_claim_objects.is_empty())
        .collect();
    pending.sort_by_key(|&i| std::cmp::Reverse(out.pods[i].priority));
    for i in pending {
        let outcome = universe.place_pending(&out.pods[i], &mut state);
        apply_outcome(&mut out.pods[i], outcome);
    }
    // Bound pods whose devices are their own node's: where they could go in a consolidation.
    for i in 0..out.pods.len() {
        let pod = &out.pods[i];
        if !pod.is_bound_active() || pod.resource_claim_objects.is_empty() {
            continue;
        }
        if let Some(outcome) = universe.place_bound(pod, &state) {
            apply_outcome(&mut out.pods[i], outcome);
        }
    }
    Some(out)
}

/// Where a pod may go.
#[derive(Debug)]
enum Outcome {
    /// Anywhere its other constraints allow, with these requirements added.
    Requirements(Vec<InputRequirement>),
    /// One of these alternatives (terms ORed).
    Alternatives(Vec<Vec<InputRequirement>>),
    /// Nowhere, for this reason.
    Unsatisfiable(String),
}

fn apply_outcome(pod: &mut Pod, outcome: Outcome) {
    let alternatives = match outcome {
        Outcome::Unsatisfiable(reason) => {
            pod.dra_unsatisfiable = Some(reason);
            return;
        }
        Outcome::Requirements(reqs) if reqs.is_empty() => return,
        Outcome::Requirements(reqs) => vec![reqs],
        Outcome::Alternatives(alts) => alts,
    };
    let existing = if pod.required_node_affinity.is_empty() {
        vec![NodeSelectorTerm::default()]
    } else {
        std::mem::take(&mut pod.required_node_affinity)
    };
    let mut terms = Vec::new();
    for t in &existing {
        for alt in &alternatives {
            let mut term = t.clone();
            term.requirements.extend(alt.iter().cloned());
            terms.push(term);
        }
    }
    pod.required_node_affinity = terms;
}

/// How a device can be reached.
#[derive(Clone, Debug)]
enum Reach {
    /// `allNodes`.
    All,
    /// `nodeName`: this Node only.
    Node(String),
    /// `nodeSelector`: where a term is compatible; taking it adds every term's requirements.
    Selector(Vec<Requirements>, Vec<InputRequirement>),
}

/// A published device.
#[derive(Debug)]
struct Dev<'a> {
    id: DeviceId,
    attributes: &'a BTreeMap<String, String>,
    reach: Reach,
    /// The Node owning its slice, if any.
    owner: &'a str,
    /// Its pool is incomplete (ExactCount skips it; All fails).
    incomplete: bool,
}

/// What is published, taken and schedulable, read once per plan.
struct Universe<'a> {
    devices: Vec<Dev<'a>>,
    /// Devices allocated in the cluster (held by a live consumer).
    allocated: HashSet<DeviceId>,
    claims: HashMap<(&'a str, &'a str), &'a ResourceClaim>,
    classes: HashMap<&'a str, &'a DeviceClass>,
    /// Initialized, schedulable, undeleted Nodes by name, with what is left on them.
    nodes: Vec<(&'a Node, Resources)>,
    /// Pods being deleted, by UID (their claims' devices are free).
    deleting: HashSet<&'a str>,
}

/// What this plan's pre-pass has taken so far.
struct State {
    taken: HashSet<DeviceId>,
    /// Claims this plan allocated, by namespace/name, with the requirements they add.
    in_plan: HashMap<(String, String), Vec<InputRequirement>>,
    /// Requests of the pods pinned to each node so far.
    used: HashMap<String, Resources>,
}

/// A successful allocation on one target.
struct Allocation {
    devices: Vec<DeviceId>,
    requirements: Vec<InputRequirement>,
}

impl<'a> Universe<'a> {
    fn new(s: &'a ClusterSnapshot) -> Self {
        let deleting_nodes: HashSet<&str> = s
            .nodes
            .iter()
            .filter(|n| n.deletion_time.is_some())
            .map(|n| n.name.as_str())
            .collect();
        let deleting: HashSet<&str> = s
            .pods
            .iter()
            .filter(|p| {
                p.deletion_time.is_some()
                    || p.node_name
                        .as_deref()
                        .is_some_and(|n| deleting_nodes.contains(n))
            })
            .map(|p| p.uid.as_str())
            .collect();
        let initialized = |n: &Node| {
            !n.labels.contains_key(common::labels::NODEPOOL)
                || n.labels
                    .get(common::labels::INITIALIZED)
                    .is_some_and(|v| v == "true")
        };
        let included: HashSet<&str> = s
            .nodes
            .iter()
            .filter(|n| n.deletion_time.is_none() && initialized(n))
            .map(|n| n.name.as_str())
            .collect();
        let mut used: HashMap<&str, Resources> = HashMap::new();
        for p in &s.pods {
            if let Some(n) = p.node_name.as_deref().filter(|_| p.is_bound_active()) {
                used.entry(n).or_default().add(&p.requests);
            }
        }
        let mut nodes: Vec<(&Node, Resources)> = s
            .nodes
            .iter()
            .filter(|n| included.contains(n.name.as_str()) && !n.unschedulable)
            .map(|n| {
                let mut left = n.allocatable.clone();
                if let Some(u) = used.get(n.name.as_str()) {
                    left.sub(u);
                }
                (n, left)
            })
            .collect();
        nodes.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let claims = s
            .resource_claims
            .iter()
            .map(|c| ((c.namespace.as_str(), c.name.as_str()), c))
            .collect();
        let classes = s
            .device_classes
            .iter()
            .map(|c| (c.name.as_str(), c))
            .collect();
        let mut allocated = HashSet::new();
        for c in &s.resource_claims {
            let all_deleting = !c.reserved_for_pods.is_empty()
                && !c.reserved_by_other
                && c.reserved_for_pods
                    .iter()
                    .all(|u| deleting.contains(u.as_str()));
            if c.allocated && !all_deleting {
                allocated.extend(c.allocated_devices.iter().cloned());
            }
        }
        Self {
            devices: published(&s.resource_slices, &included),
            allocated,
            claims,
            classes,
            nodes,
            deleting,
        }
    }

    /// Where a pending pod goes, taking its devices.
    fn place_pending(&self, pod: &Pod, state: &mut State) -> Outcome {
        let (mut requirements, open) = match self.classify(pod, state, false) {
            Ok(x) => x,
            Err(e) => return Outcome::Unsatisfiable(e),
        };
        if open.is_empty() {
            return Outcome::Requirements(requirements);
        }
        let requests = match self.validate(&open) {
            Ok(r) => r,
            Err(e) => return Outcome::Unsatisfiable(e),
        };
        // Existing nodes first (Karpenter's addToExistingNode), then a new NodeClaim.
        for (node, left) in &self.nodes {
            if !self.node_allows(pod, node) {
                continue;
            }
            let mut room = left.clone();
            if let Some(u) = state.used.get(&node.name) {
                room.sub(u);
            }
            if !pod.requests.fits_in(&room) {
                continue;
            }
            if let Some(a) = self.allocate(&requests, Some(node), &state.taken, pod, None) {
                state.taken.extend(a.devices);
                state
                    .used
                    .entry(node.name.clone())
                    .or_default()
                    .add(&pod.requests);
                // Devices of a node's own slices add no requirement (no nodeSelector), so a pod
                // sharing the claim later is not held to this node (as Karpenter records it).
                for (ns, name) in open.iter().map(|c| (&c.namespace, &c.name)) {
                    state
                        .in_plan
                        .insert((ns.clone(), name.clone()), a.requirements.clone());
                }
                requirements.push(hostname_in([node.name.clone()]));
                return Outcome::Requirements(requirements);
            }
        }
        match self.allocate(&requests, None, &state.taken, pod, None) {
            Some(a) => {
                state.taken.extend(a.devices);
                for c in &open {
                    state.in_plan.insert(
                        (c.namespace.clone(), c.name.clone()),
                        a.requirements.clone(),
                    );
                }
                requirements.extend(a.requirements);
                Outcome::Requirements(requirements)
            }
            None => Outcome::Unsatisfiable(UNSATISFIABLE.to_string()),
        }
    }

    /// Where a bound pod could go if its node were removed, when its claims hold devices of
    /// its own node; `None` when nothing holds it.
    fn place_bound(&self, pod: &Pod, state: &State) -> Option<Outcome> {
        let own = pod.node_name.as_deref()?;
        let (requirements, open) = match self.classify(pod, state, true) {
            Ok(x) => x,
            Err(e) => return Some(Outcome::Unsatisfiable(e)),
        };
        // Its node's slices (pinned to it or owned by it) are out of a simulation that removes
        // the node (gatherResourceSlices excludes candidates' slices).
        let holds_own_devices = open.iter().any(|c| {
            c.allocated_devices.iter().any(|d| {
                self.devices.iter().any(|x| {
                    x.id == *d && (x.owner == own || matches!(&x.reach, Reach::Node(n) if n == own))
                })
            })
        });
        if !holds_own_devices {
            return None;
        }
        let requests = match self.validate(&open) {
            Ok(r) => r,
            Err(e) => return Some(Outcome::Unsatisfiable(e)),
        };
        // Its own devices are free once it moves (gatherAllocatedDevices).
        let mut taken = state.taken.clone();
        for c in &open {
            for d in &c.allocated_devices {
                taken.remove(d);
            }
        }
        let mut alternatives = Vec::new();
        let others: Vec<String> = self
            .nodes
            .iter()
            .filter(|(n, _)| n.name != own && self.node_allows(pod, n))
            .filter(|(n, _)| {
                self.allocate(&requests, Some(n), &taken, pod, Some(own))
                    .is_some()
            })
            .map(|(n, _)| n.name.clone())
            .collect();
        if !others.is_empty() {
            let mut alt = requirements.clone();
            alt.push(hostname_in(others));
            alternatives.push(alt);
        }
        if let Some(a) = self.allocate(&requests, None, &taken, pod, Some(own)) {
            let mut alt = requirements;
            alt.extend(a.requirements);
            alternatives.push(alt);
        }
        Some(if alternatives.is_empty() {
            Outcome::Unsatisfiable(UNSATISFIABLE.to_string())
        } else {
            Outcome::Alternatives(alternatives)
        })
    }

    /// The pod's claims: the requirements of those already allocated, and those to allocate
    /// (Karpenter's `ClassifyClaims`). `moving`: the pod is bound and leaves its node, so the
    /// claims reserved only by it are allocated again.
    #[allow(clippy::type_complexity)]
    fn classify(
        &self,
        pod: &Pod,
        state: &State,
        moving: bool,
    ) -> Result<(Vec<InputRequirement>, Vec<&'a ResourceClaim>), String> {
        let mut requirements = Vec::new();
        let mut open = Vec::new();
        for name in &pod.resource_claim_objects {
            let Some(claim) = self.claims.get(&(pod.namespace.as_str(), name.as_str())) else {
                return Err(format!(
                    "resourceclaim \"{}\" not found",
                    common::key::namespaced(&pod.namespace, name)
                ));
            };
            let reserved_only_by_leaving = !claim.reserved_for_pods.is_empty()
                && !claim.reserved_by_other
                && claim
                    .reserved_for_pods
                    .iter()
                    .all(|u| self.deleting.contains(u.as_str()) || (moving && *u == pod.uid));
            if claim.allocated && !reserved_only_by_leaving {
                for t in &claim.allocation_node_selector {
                    requirements.extend(t.requirements.iter().cloned());
                }
                continue;
            }
            if claim.allocated && moving {
                open.push(*claim);
                continue;
            }
            if let Some(reqs) = state
                .in_plan
                .get(&(claim.namespace.clone(), claim.name.clone()))
            {
                requirements.extend(reqs.iter().cloned());
                continue;
            }
            open.push(*claim);
        }
        Ok((requirements, open))
    }

    /// Each claim's requests with their compiled selectors (Karpenter's
    /// `ValidateClaimRequest`, in its words).
    fn validate(&self, claims: &[&'a ResourceClaim]) -> Result<Vec<ClaimRequests<'a>>, String> {
        let wrap = |claim: &str, e: String| {
            format!("allocating dynamic resources, validating claim \"{claim}\": {e}")
        };
        let mut out = Vec::new();
        for c in claims {
            if c.unsupported_constraint {
                return Err(wrap(
                    &c.name,
                    format!(
                        "claim \"{}\": DistinctAttribute constraints not done yet",
                        c.name
                    ),
                ));
            }
            let mut requests = Vec::new();
            for r in &c.requests {
                if r.first_available {
                    return Err(wrap(
                        &c.name,
                        format!(
                            "claim \"{}\" request \"{}\": only Exactly requests are supported",
                            c.name, r.name
                        ),
                    ));
                }
                let Some(class) = self.classes.get(r.device_class_name.as_str()) else {
                    return Err(wrap(
                        &c.name,
                        format!(
                            "claim \"{}\" request \"{}\": DeviceClass \"{}\" not found: deviceclasses.resource.k8s.io \"{}\" not found",
                            c.name, r.name, r.device_class_name, r.device_class_name
                        ),
                    ));
                };
                if class.unsupported_selector {
                    return Err(wrap(
                        &c.name,
                        format!(
                            "claim \"{}\" request \"{}\": DeviceClass \"{}\" has unsupported selector type (only CEL is supported)",
                            c.name, r.name, r.device_class_name
                        ),
                    ));
                }
                let mut selectors = Vec::new();
                for e in class.selectors.iter().chain(&r.selectors) {
                    let Some(s) = Selector::compile(e) else {
                        return Err(wrap(
                            &c.name,
                            format!(
                                "claim \"{}\" request \"{}\": CEL expression {e:?} is outside the subset dovetail evaluates",
                                c.name, r.name
                            ),
                        ));
                    };
                    selectors.push(s);
                }
                requests.push(Request {
                    name: &r.name,
                    count: if r.all {
                        None
                    } else {
                        Some(usize::try_from(r.count.max(1)).unwrap_or(usize::MAX))
                    },
                    selectors,
                });
            }
            out.push(ClaimRequests {
                requests,
                constraints: &c.match_attributes,
            });
        }
        Ok(out)
    }

    /// True when the pod's node selector, required affinity and tolerations allow `node`.
    fn node_allows(&self, pod: &Pod, node: &Node) -> bool {
        if !pod
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
        {
            return false;
        }
        let affinity_ok = pod.required_node_affinity.is_empty()
            || pod
                .required_node_affinity
                .iter()
                .any(|t| Requirements::from_term(t).is_ok_and(|r| r.matches_labels(&node.labels)));
        affinity_ok && taints::tolerates_all(&node.taints, &pod.tolerations)
    }

    /// Allocates every request of `claims` from devices reachable from `node` (a new NodeClaim
    /// when `None`) and not in `taken`.
    fn allocate(
        &self,
        claims: &[ClaimRequests<'_>],
        node: Option<&Node>,
        taken: &HashSet<DeviceId>,
        pod: &Pod,
        away: Option<&str>,
    ) -> Option<Allocation> {
        let reachable: Vec<&Dev<'_>> = self
            .devices
            .iter()
            .filter(|d| can_reach(d, node) && away.is_none_or(|a| a != d.owner))
            .collect();
        // Slots: (claim, request, candidates); All requests name every matching device.
        let mut slots: Vec<Slot<'_, '_>> = Vec::new();
        for (ci, c) in claims.iter().enumerate() {
            for (ri, r) in c.requests.iter().enumerate() {
                let candidates: Vec<&Dev<'_>> = reachable
                    .iter()
                    .copied()
                    .filter(|d| {
                        r.selectors
                            .iter()
                            .all(|s| s.matches(&d.id.driver, d.attributes))
                    })
                    .collect();
                match r.count {
                    Some(n) => {
                        let complete: Vec<&Dev<'_>> =
                            candidates.into_iter().filter(|d| !d.incomplete).collect();
                        for _ in 0..n {
                            slots.push(Slot {
                                claim: ci,
                                request: ri,
                                candidates: complete.clone(),
                            });
                        }
                    }
                    None => {
                        if candidates.iter().any(|d| d.incomplete) {
                            return None;
                        }
                        for d in candidates {
                            slots.push(Slot {
                                claim: ci,
                                request: ri,
                                candidates: vec![d],
                            });
                        }
                    }
                }
            }
        }
        let mut search = Search {
            claims,
            slots: &slots,
            taken,
            chosen: Vec::new(),
            chosen_set: HashSet::new(),
            requirements: node.map_or_else(
                || pod_requirements(pod),
                |n| Requirements::from_labels(&n.labels),
            ),
            added: Vec::new(),
            trials: 0,
        };
        if !search.dfs(0) {
            return None;
        }
        Some(Allocation {
            devices: search.chosen.iter().map(|d| d.id.clone()).collect(),
            requirements: if node.is_some() {
                Vec::new()
            } else {
                search.added
            },
        })
    }
}

/// A claim's requests, ready to allocate.
struct ClaimRequests<'a> {
    requests: Vec<Request<'a>>,
    constraints: &'a [crate::model::MatchAttribute],
}

/// A request: how many devices (`None`: All) matching every selector.
struct Request<'a> {
    name: &'a str,
    count: Option<usize>,
    selectors: Vec<Selector>,
}

/// One device to choose.
struct Slot<'d, 'a> {
    claim: usize,
    request: usize,
    candidates: Vec<&'d Dev<'a>>,
}

/// The depth-first search over slots, backtracking on taken devices, incompatible topology
/// and `matchAttribute` constraints (Karpenter's `allocator.dfs`/`tryDevice`).
struct Search<'s, 'd, 'a> {
    claims: &'s [ClaimRequests<'s>],
    slots: &'s [Slot<'d, 'a>],
    taken: &'s HashSet<DeviceId>,
    chosen: Vec<&'d Dev<'a>>,
    chosen_set: HashSet<&'d DeviceId>,
    requirements: Requirements,
    added: Vec<InputRequirement>,
    trials: usize,
}

impl<'d> Search<'_, 'd, '_> {
    fn dfs(&mut self, k: usize) -> bool {
        let Some(slot) = self.slots.get(k) else {
            return true;
        };
        for &d in &slot.candidates {
            self.trials += 1;
            if self.trials > MAX_TRIALS {
                return false;
            }
            if self.taken.contains(&d.id) || self.chosen_set.contains(&d.id) {
                continue;
            }
            if !self.constraints_hold(slot, d) {
                continue;
            }
            let saved = (self.requirements.clone(), self.added.len());
            if let Reach::Selector(terms, all) = &d.reach {
                let Ok(adds) = Requirements::from_input(all) else {
                    continue;
                };
                let reachable_here = terms
                    .iter()
                    .any(|t| self.requirements.intersects(t).is_ok());
                let mut next = self.requirements.clone();
                next.add_all(&adds);
                if !reachable_here
                    || self.requirements.intersects(&adds).is_err()
                    || next.first_empty().is_some()
                {
                    continue;
                }
                self.requirements = next;
                self.added.extend(all.iter().cloned());
            }
            self.chosen.push(d);
            self.chosen_set.insert(&d.id);
            if self.dfs(k + 1) {
                return true;
            }
            self.chosen_set.remove(&d.id);
            self.chosen.pop();
            self.requirements = saved.0;
            self.added.truncate(saved.1);
        }
        false
    }

    /// The claim's `matchAttribute` constraints with `d` added for the slot's request.
    fn constraints_hold(&self, slot: &Slot<'d, '_>, d: &Dev<'_>) -> bool {
        let claim = &self.claims[slot.claim];
        let request = claim.requests[slot.request].name;
        for c in claim.constraints {
            if !c.requests.is_empty() && !c.requests.iter().any(|r| r == request) {
                continue;
            }
            let Some(value) = d.attributes.get(&c.attribute) else {
                return false;
            };
            let mut chosen_same = self
                .slots
                .iter()
                .zip(&self.chosen)
                .filter(|(s, _)| s.claim == slot.claim)
                .filter(|(s, _)| {
                    c.requests.is_empty()
                        || c.requests
                            .iter()
                            .any(|r| r == claim.requests[s.request].name)
                });
            if chosen_same.any(|(_, other)| other.attributes.get(&c.attribute) != Some(value)) {
                return false;
            }
        }
        true
    }
}

/// True when `d` can be reached from `node` (a new NodeClaim when `None`).
fn can_reach(d: &Dev<'_>, node: Option<&Node>) -> bool {
    match (&d.reach, node) {
        (Reach::All, _) => true,
        (Reach::Node(n), Some(node)) => *n == node.name,
        (Reach::Node(_), None) => false,
        (Reach::Selector(terms, _), Some(node)) => {
            terms.iter().any(|t| t.matches_labels(&node.labels))
        }
        (Reach::Selector(..), None) => true,
    }
}

/// The published devices: slices of excluded Nodes dropped, pools at their highest generation,
/// invalid pools (a device name twice) dropped.
fn published<'a>(slices: &'a [ResourceSlice], included: &HashSet<&str>) -> Vec<Dev<'a>> {
    let mut pools: BTreeMap<(&str, &str), Vec<&ResourceSlice>> = BTreeMap::new();
    for s in slices {
        if !s.owner_node.is_empty() && !included.contains(s.owner_node.as_str()) {
            continue;
        }
        pools
            .entry((s.driver.as_str(), s.pool.as_str()))
            .or_default()
            .push(s);
    }
    let mut out = Vec::new();
    for ((driver, pool), slices) in pools {
        let generation = slices.iter().map(|s| s.pool_generation).max().unwrap_or(0);
        let current: Vec<&ResourceSlice> = slices
            .into_iter()
            .filter(|s| s.pool_generation == generation)
            .collect();
        let expected = current.first().map_or(0, |s| s.resource_slice_count);
        let incomplete = i64::try_from(current.len()).unwrap_or(i64::MAX) != expected.max(1);
        let mut names = BTreeSet::new();
        if current
            .iter()
            .flat_map(|s| &s.devices)
            .any(|d| !names.insert(d.name.as_str()))
        {
            continue;
        }
        for s in current {
            let reach = if s.all_nodes {
                Reach::All
            } else if !s.node_name.is_empty() {
                Reach::Node(s.node_name.clone())
            } else if !s.node_selector.is_empty() {
                let terms: Vec<Requirements> = s
                    .node_selector
                    .iter()
                    .filter_map(|t| Requirements::from_term(t).ok())
                    .collect();
                let all = s
                    .node_selector
                    .iter()
                    .flat_map(|t| t.requirements.iter().cloned())
                    .collect();
                Reach::Selector(terms, all)
            } else {
                continue;
            };
            for d in &s.devices {
                out.push(Dev {
                    id: DeviceId {
                        driver: driver.to_string(),
                        pool: pool.to_string(),
                        device: d.name.clone(),
                    },
                    attributes: &d.attributes,
                    reach: reach.clone(),
                    owner: s.owner_node.as_str(),
                    incomplete,
                });
            }
        }
    }
    out
}

/// What a new NodeClaim for `pod` is held to before devices: its node selector and, when it
/// has one, its only required node-affinity term.
fn pod_requirements(pod: &Pod) -> Requirements {
    let mut r = Requirements::from_labels(&pod.node_selector);
    if let [term] = pod.required_node_affinity.as_slice()
        && let Ok(t) = Requirements::from_term(term)
    {
        r.add_all(&t);
    }
    r
}

/// `kubernetes.io/hostname In [names]`.
fn hostname_in(names: impl IntoIterator<Item = String>) -> InputRequirement {
    InputRequirement {
        key: common::labels::HOSTNAME.to_string(),
        operator: Operator::In,
        values: names.into_iter().collect(),
        min_values: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Device, DeviceRequest};
    use crate::test_util::{bound_pod, node, pod};

    fn options() -> PlanOptions {
        PlanOptions {
            ignore_dra_requests: false,
            ..PlanOptions::default()
        }
    }

    fn claim(name: &str) -> ResourceClaim {
        ResourceClaim {
            namespace: "default".into(),
            name: name.into(),
            requests: vec![DeviceRequest {
                name: "req".into(),
                device_class_name: "gpu".into(),
                count: 1,
                ..DeviceRequest::default()
            }],
            ..ResourceClaim::default()
        }
    }

    fn slice(name: &str, node_name: &str, devices: &[&str]) -> ResourceSlice {
        ResourceSlice {
            name: name.into(),
            driver: "gpu.example.com".into(),
            pool: name.into(),
            pool_generation: 1,
            resource_slice_count: 1,
            node_name: node_name.into(),
            all_nodes: node_name.is_empty(),
            devices: devices
                .iter()
                .map(|d| Device {
                    name: (*d).into(),
                    ..Device::default()
                })
                .collect(),
            ..ResourceSlice::default()
        }
    }

    fn with_claim(mut p: Pod, claim: &str) -> Pod {
        p.resource_claims = vec!["gpu".into()];
        p.resource_claim_objects = vec![claim.into()];
        p
    }

    fn snapshot(
        pods: Vec<Pod>,
        claims: Vec<ResourceClaim>,
        slices: Vec<ResourceSlice>,
    ) -> ClusterSnapshot {
        ClusterSnapshot {
            pods,
            nodes: vec![node("n1", 4, 16)],
            resource_claims: claims,
            device_classes: vec![DeviceClass {
                name: "gpu".into(),
                selectors: vec!["device.driver == \"gpu.example.com\"".into()],
                unsupported_selector: false,
            }],
            resource_slices: slices,
            ..ClusterSnapshot::default()
        }
    }

    fn hostname_terms(p: &Pod) -> Vec<Vec<String>> {
        p.required_node_affinity
            .iter()
            .map(|t| {
                t.requirements
                    .iter()
                    .filter(|r| r.key == common::labels::HOSTNAME)
                    .flat_map(|r| r.values.clone())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn nothing_to_do_with_the_setting_on_or_without_claims() {
        let s = snapshot(vec![with_claim(pod("a", 100, 64), "c")], vec![], vec![]);
        assert!(apply(&s, &PlanOptions::default()).is_none());
        let plain = snapshot(vec![pod("a", 100, 64)], vec![], vec![]);
        assert!(apply(&plain, &options()).is_none());
    }

    #[test]
    fn one_node_device_goes_to_one_pod_and_the_other_is_refused() {
        let s = snapshot(
            vec![
                with_claim(pod("a", 100, 64), "ca"),
                with_claim(pod("b", 100, 64), "cb"),
            ],
            vec![claim("ca"), claim("cb")],
            vec![slice("n1-gpu", "n1", &["gpu-0"])],
        );
        let out = apply(&s, &options()).expect("applied");
        assert_eq!(hostname_terms(&out.pods[0]), [vec!["n1".to_string()]]);
        assert_eq!(
            out.pods[1].dra_unsatisfiable.as_deref(),
            Some(UNSATISFIABLE)
        );
    }

    #[test]
    fn a_missing_claim_and_a_missing_class_say_so() {
        let mut c = claim("c");
        c.requests[0].device_class_name = "nope".into();
        let s = snapshot(
            vec![
                with_claim(pod("a", 100, 64), "absent"),
                with_claim(pod("b", 100, 64), "c"),
            ],
            vec![c],
            vec![slice("shared", "", &["gpu-0"])],
        );
        let out = apply(&s, &options()).expect("applied");
        assert_eq!(
            out.pods[0].dra_unsatisfiable.as_deref(),
            Some("resourceclaim \"default/absent\" not found")
        );
        let b = out.pods[1].dra_unsatisfiable.as_deref().unwrap_or_default();
        assert!(b.contains("DeviceClass \"nope\" not found"), "{b}");
    }

    #[test]
    fn a_bound_pod_holding_its_nodes_device_moves_only_where_one_is_free() {
        let mut held = claim("held");
        held.allocated = true;
        held.allocated_devices = vec![DeviceId {
            driver: "gpu.example.com".into(),
            pool: "n1-gpu".into(),
            device: "gpu-0".into(),
        }];
        held.reserved_for_pods = vec!["uid-a".into()];
        let a = with_claim(bound_pod("a", 100, 64, "n1"), "held");
        let s = snapshot(
            vec![a.clone()],
            vec![held.clone()],
            vec![slice("n1-gpu", "n1", &["gpu-0"])],
        );
        let out = apply(&s, &options()).expect("applied");
        assert_eq!(
            out.pods[0].dra_unsatisfiable.as_deref(),
            Some(UNSATISFIABLE)
        );
        // A second node with a free device: the pod may move there only.
        let mut s = snapshot(
            vec![a],
            vec![held],
            vec![
                slice("n1-gpu", "n1", &["gpu-0"]),
                slice("n2-gpu", "n2", &["gpu-1"]),
            ],
        );
        s.nodes.push(node("n2", 4, 16));
        let out = apply(&s, &options()).expect("applied");
        assert_eq!(out.pods[0].dra_unsatisfiable, None);
        assert_eq!(hostname_terms(&out.pods[0]), [vec!["n2".to_string()]]);
    }

    #[test]
    fn match_attribute_holds_across_requests() {
        let mut c = claim("pair");
        c.requests[0].count = 2;
        c.match_attributes = vec![crate::model::MatchAttribute {
            attribute: "gpu.example.com/numa".into(),
            requests: vec![],
        }];
        let mut s = slice("shared", "", &["g0", "g1", "g2"]);
        for (d, numa) in s.devices.iter_mut().zip(["0", "1", "1"]) {
            d.attributes
                .insert("gpu.example.com/numa".into(), numa.into());
        }
        let snap = snapshot(
            vec![with_claim(pod("a", 100, 64), "pair")],
            vec![c.clone()],
            vec![s.clone()],
        );
        let out = apply(&snap, &options()).expect("applied");
        assert_eq!(out.pods[0].dra_unsatisfiable, None);
        // Only one device per NUMA value: no pair matches.
        s.devices.truncate(2);
        let snap = snapshot(
            vec![with_claim(pod("a", 100, 64), "pair")],
            vec![c],
            vec![s],
        );
        let out = apply(&snap, &options()).expect("applied");
        assert_eq!(
            out.pods[0].dra_unsatisfiable.as_deref(),
            Some(UNSATISFIABLE)
        );
    }
}
