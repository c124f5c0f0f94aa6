//! The state of one disruption evaluation ([`Evaluation`]): candidates, budgets, PDB allowances
//! and the working cluster state that committed decisions leave behind, plus the evaluation of a
//! group of candidates through the scheduler (Karpenter's `SimulateScheduling` +
//! `computeConsolidation` + validation). The price filter for replacements is in
//! `evaluation/replacement.rs`, committing a decision in `evaluation/commit.rs`.

mod commit;
mod replacement;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use super::balanced::{self, PoolTotals};
use super::budgets::Budgets;
use super::candidate::{self, Candidate, PdbState, PodsByNode};
use super::{BuildSimulator, Candidates, Error, Outcome, Reason, Relocation, Simulate, Stats};
use crate::catalog::{Catalog, InstanceType};
use crate::model::{ClusterSnapshot, ConsolidationPolicy, NodePool, PlanOptions, Pod, PodKey};
use crate::plan::{
    ConsolidationMove, ConsolidationPoolScore, DisruptionDecision, PlannedNodeClaim,
};

/// The least share of the removed nodes' price that a repack (two or more nodes onto new ones)
/// must save: moving 50 nodes' pods to save 1% is churn, not consolidation. Deletions and 1→1
/// replacements are not held to it (Karpenter's rule: strictly cheaper).
pub const MIN_REPACK_SAVING: f64 = 0.10;

/// Karpenter's floor of cheaper spot types a single-node spot→spot replacement must keep.
pub const MIN_SPOT_TO_SPOT_TYPES: usize = 15;

/// A decision ready to commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// Why.
    pub reason: Reason,
    /// Candidate indices (into [`Evaluation::candidates`]).
    pub nodes: Vec<usize>,
    /// New claims; their `pods` are the pods that move onto them.
    pub replacements: Vec<PlannedNodeClaim>,
    /// Where every displaced pod goes (existing node name or replacement claim name).
    pub placements: BTreeMap<PodKey, String>,
    /// Price of the nodes minus price of the replacements, per hour.
    pub savings_per_hour: f64,
    /// Pods no node can take (only ever set for forceful expiry).
    pub unschedulable: Vec<(PodKey, String)>,
    /// Underutilized: the move's score in each Balanced NodePool it touches, by pool name.
    pub scores: Vec<(String, balanced::Score)>,
}

/// Whether a simulation improves the cost of the new claims it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pricing {
    /// As the scheduler plans them (cost improvement included).
    Improved,
    /// As first fit packed them: for a caller that does not read their price.
    FirstFit,
}

/// Why a group of candidates cannot be disrupted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// A blocker applies (PDB, do-not-disrupt, ...).
    Blocked(String),
    /// Some pod fits nowhere.
    NoFit(String),
    /// The pods fit, but not more cheaply (or on more new nodes than allowed, or breaking the
    /// spot→spot rules); a larger group may still do better.
    NotCheaper(String),
}

/// The state of one disruption run. Cloning it forks the run (to compare two searches from the
/// same state).
#[derive(Clone)]
pub struct Evaluation<'a> {
    catalog: &'a Catalog,
    options: &'a PlanOptions,
    types: BTreeMap<&'a str, &'a InstanceType>,
    pools: BTreeMap<&'a str, &'a NodePool>,
    working: ClusterSnapshot,
    pods_on: PodsByNode,
    candidates: Vec<Candidate>,
    used: Vec<bool>,
    budgets: Budgets,
    pdbs: Vec<PdbState<'a>>,
    /// PDB indices per pod key (pods of the original snapshot).
    pod_pdbs: BTreeMap<PodKey, Vec<usize>>,
    pdb_remaining: Vec<i64>,
    decisions: Vec<DisruptionDecision>,
    notes: Vec<String>,
    rejected: RefCell<BTreeMap<usize, Rejection>>,
    /// Nodes the launch plan places pending pods on: not disrupted.
    receiving: BTreeSet<String>,
    min_repack_saving: f64,
    /// Existing capacity displaced pods must not land on, with why.
    unusable: BTreeMap<String, String>,
    simulations: Cell<usize>,
    rebuilds: Cell<usize>,
    /// Totals of the Balanced NodePools, taken once from the snapshot (as Karpenter takes them
    /// once per disruption cycle).
    balanced: BTreeMap<String, PoolTotals>,
    /// The approved consolidation moves, one per committed Underutilized decision.
    moves: Vec<ConsolidationMove>,
    /// Per candidate, its latest single-node move that its Balanced NodePool's score refused
    /// (reported by [`Evaluation::finish`] when the candidate stays).
    refused: RefCell<BTreeMap<usize, ConsolidationMove>>,
    /// Per static NodePool, how many NodeClaims it has beyond its replicas.
    static_excess: BTreeMap<String, usize>,
    /// No offering of the catalog has a negative price: the scheduler's lower bound on new
    /// claims (which prices at offerings a NodePool can use, never below 0) then also bounds
    /// what the replacement price filter charges.
    prices_nonnegative: bool,
}

// === impl Evaluation ===

impl<'a> Evaluation<'a> {
    /// Builds candidates, budgets and PDB allowances for a snapshot at `options.now`.
    ///
    /// # Errors
    /// [`Error::Schedule`] when a budget schedule is invalid.
    pub fn new(
        snapshot: &'a ClusterSnapshot,
        catalog: &'a Catalog,
        options: &'a PlanOptions,
    ) -> Result<Self, Error> {
        Self::from_candidates(
            Candidates::new(snapshot, catalog, options.now),
            catalog,
            options,
        )
    }

    /// [`Evaluation::new`] from candidates already built at `options.now` (over the same
    /// snapshot and catalog).
    ///
    /// # Errors
    /// [`Error::Schedule`] when a budget schedule is invalid.
    pub fn from_candidates(
        set: Candidates<'a>,
        catalog: &'a Catalog,
        options: &'a PlanOptions,
    ) -> Result<Self, Error> {
        let Candidates {
            snapshot,
            now: _,
            pods_on,
            candidates,
            counts,
            pdbs,
        } = set;
        let budgets = Budgets::new(&snapshot.node_pools, &counts, options.now)?;
        let unusable = candidate::unusable_destinations(snapshot, &candidates, options.now);
        let pdb_remaining = pdbs.iter().map(|p| p.allowed).collect();
        let mut pod_pdbs = BTreeMap::new();
        if !pdbs.is_empty() {
            for p in snapshot.pods.iter().filter(|p| p.is_bound_active()) {
                let v = candidate::pdbs_of(p, &pdbs);
                if !v.is_empty() {
                    pod_pdbs.insert(p.key(), v);
                }
            }
        }
        let balanced = balanced::pool_totals(snapshot, &candidates, &pods_on);
        let sizes = crate::scheduling::static_pool_sizes(snapshot);
        let static_excess = snapshot
            .node_pools
            .iter()
            .filter(|_| options.static_capacity)
            .filter_map(|p| {
                let replicas = usize::try_from(p.replicas?.max(0)).unwrap_or(usize::MAX);
                let have = sizes.get(&p.name).copied().unwrap_or(0);
                (have > replicas).then(|| (p.name.clone(), have - replicas))
            })
            .collect();
        let mut notes = Vec::new();
        for c in &candidates {
            if let Some(b) = &c.blocker {
                notes.push(format!("node {} is not disrupted: {b}", c.name));
            }
        }
        Ok(Self {
            catalog,
            options,
            types: catalog
                .instance_types
                .iter()
                .map(|t| (t.name.as_str(), t))
                .collect(),
            pools: snapshot
                .node_pools
                .iter()
                .map(|p| (p.name.as_str(), p))
                .collect(),
            working: snapshot.clone(),
            pods_on,
            used: vec![false; candidates.len()],
            candidates,
            budgets,
            pdbs,
            pod_pdbs,
            pdb_remaining,
            decisions: Vec::new(),
            notes,
            rejected: RefCell::new(BTreeMap::new()),
            receiving: BTreeSet::new(),
            min_repack_saving: MIN_REPACK_SAVING,
            unusable,
            simulations: Cell::new(0),
            rebuilds: Cell::new(0),
            balanced,
            moves: Vec::new(),
            refused: RefCell::new(BTreeMap::new()),
            static_excess,
            prices_nonnegative: catalog.instance_types.iter().all(|t| {
                t.offerings
                    .iter()
                    .all(|o| o.price >= 0.0 || o.price.is_nan())
            }),
        })
    }

    /// Sets the least share of the removed nodes' price a repack must save (default
    /// [`MIN_REPACK_SAVING`]; 0 is Karpenter's rule).
    pub fn set_min_repack_saving(&mut self, share: f64) {
        self.min_repack_saving = share;
    }

    /// Binds the pending pods the launch plan places on existing nodes (node name → pods) to
    /// those nodes in the working state, and keeps those nodes from being disrupted.
    pub fn place_pending(&mut self, launch: &[(String, Vec<PodKey>)]) {
        if launch.is_empty() {
            return;
        }
        let target: BTreeMap<&str, &str> = launch
            .iter()
            .flat_map(|(n, pods)| pods.iter().map(move |p| (p.as_str(), n.as_str())))
            .collect();
        for p in &mut self.working.pods {
            if p.is_pending()
                && let Some(n) = target.get(p.key().as_str())
            {
                p.node_name = Some(n.to_string());
            }
        }
        // A node that receives only CapacityBuffer virtual pods stays a candidate: its buffer
        // pods are displaced with it and must fit elsewhere (Karpenter nominates nodes for real
        // pods only, `scheduler.go`).
        let virtual_pods: BTreeSet<PodKey> = self
            .working
            .pods
            .iter()
            .filter(|p| crate::buffers::is_virtual(p))
            .map(Pod::key)
            .collect();
        self.receiving.extend(
            launch
                .iter()
                .filter(|(_, pods)| pods.iter().any(|p| !virtual_pods.contains(p)))
                .map(|(n, _)| n.clone()),
        );
        self.pods_on = candidate::pods_by_node(&self.working);
    }

    /// The cluster as the committed decisions leave it (removed nodes gone, their pods bound
    /// where they move, replacements present as nodes).
    pub fn snapshot(&self) -> &ClusterSnapshot {
        &self.working
    }

    /// Builds a simulator over the working state (counted in [`Stats::rebuilds`]).
    pub fn build<'s>(&'s self, build: &BuildSimulator<'_>) -> Box<dyn Simulate + 's> {
        self.rebuilds.set(self.rebuilds.get() + 1);
        build(&self.working, self.catalog, self.options)
    }

    /// All candidates, sorted by node name.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// NodePool names, sorted.
    pub fn pool_names(&self) -> Vec<String> {
        self.pools.keys().map(|s| s.to_string()).collect()
    }

    /// How many NodeClaims the static NodePool `pool` has beyond its replicas (0 for a dynamic
    /// pool).
    pub fn static_excess(&self, pool: &str) -> usize {
        self.static_excess.get(pool).copied().unwrap_or(0)
    }

    /// How many more nodes of `pool` this plan may disrupt for `reason`.
    pub fn remaining(&self, pool: &str, reason: Reason) -> u32 {
        self.budgets.remaining(pool, reason)
    }

    /// Records why a candidate was turned down; it is not evaluated again.
    pub fn reject(&self, c: usize, why: Rejection) {
        self.rejected.borrow_mut().entry(c).or_insert(why);
    }

    /// The reschedulable pods on a node in the working state.
    fn displaced(&self, name: &str) -> Vec<&Pod> {
        self.pods_on
            .get(name)
            .map(|v| {
                v.iter()
                    .map(|&i| &self.working.pods[i])
                    .filter(|p| candidate::is_reschedulable(p))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the only pods to move off the candidate are CapacityBuffer virtual pods:
    /// Karpenter's consolidation never picks such a node (it has no reschedulable pods) and its
    /// emptiness check keeps it for the buffer (`emptiness.go`, `consolidation_test.go` "should
    /// skip buffer-only nodes in single-node consolidation but protect via emptiness").
    fn hosts_only_buffer_pods(&self, c: usize) -> bool {
        let d = self.displaced(&self.candidates[c].name);
        !d.is_empty() && d.iter().all(|p| crate::buffers::is_virtual(p))
    }

    /// True when the candidate has no reschedulable pods.
    pub fn is_empty(&self, c: usize) -> bool {
        self.displaced(&self.candidates[c].name).is_empty()
    }

    /// The larger of the cpu and memory fractions its reschedulable pods request (0 when the
    /// node is unknown or has no allocatable).
    pub fn utilization(&self, c: usize) -> f64 {
        let name = &self.candidates[c].name;
        match self.working.nodes.iter().find(|n| &n.name == name) {
            Some(node) => self.utilization_on(c, node),
            None => 0.0,
        }
    }

    /// [`Evaluation::utilization`] of each of `cands`, finding their nodes in one pass.
    pub fn utilizations(&self, cands: &[usize]) -> Vec<f64> {
        let nodes: std::collections::HashMap<&str, &crate::model::Node> = self
            .working
            .nodes
            .iter()
            .rev()
            .map(|n| (n.name.as_str(), n))
            .collect();
        cands
            .iter()
            .map(|&c| {
                nodes
                    .get(self.candidates[c].name.as_str())
                    .map_or(0.0, |node| self.utilization_on(c, node))
            })
            .collect()
    }

    fn utilization_on(&self, c: usize, node: &crate::model::Node) -> f64 {
        let name = &self.candidates[c].name;
        let mut used = crate::model::Resources::default();
        for p in self.displaced(name) {
            used.add(&p.requests);
        }
        let frac = |u: i64, a: i64| if a > 0 { u as f64 / a as f64 } else { 0.0 };
        frac(used.cpu, node.allocatable.cpu).max(frac(used.memory, node.allocatable.memory))
    }

    /// Karpenter's disruption cost of a candidate: the eviction cost of its pods times the
    /// fraction of its lifetime left.
    pub fn disruption_cost(&self, c: usize) -> f64 {
        let cost: f64 = self
            .displaced(&self.candidates[c].name)
            .iter()
            .map(|p| candidate::eviction_cost(p))
            .sum();
        cost * candidate::lifetime_remaining(&self.candidates[c], self.options.now)
    }

    /// Unused, not rejected candidates matching `keep`, cheapest disruption per dollar saved
    /// first (ties: higher price, then name).
    pub fn ordered(&self, keep: impl Fn(&Candidate) -> bool) -> Vec<usize> {
        let rejected = self.rejected.borrow();
        let mut v: Vec<(f64, f64, usize)> = (0..self.candidates.len())
            .filter(|&i| !self.used[i] && !rejected.contains_key(&i))
            .filter(|&i| !self.receiving.contains(&self.candidates[i].name))
            .filter(|&i| keep(&self.candidates[i]))
            .map(|i| {
                let price = self.candidates[i].price.unwrap_or(0.0);
                let cost = self.disruption_cost(i);
                let key = if price > 0.0 { cost / price } else { f64::MAX };
                (key, price, i)
            })
            .collect();
        v.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(b.1.total_cmp(&a.1))
                .then(a.2.cmp(&b.2))
        });
        v.into_iter().map(|(_, _, i)| i).collect()
    }

    /// The disruption cost Balanced scoring charges for a candidate (1 + its reschedulable
    /// pods' positive eviction costs, in the working state).
    fn balanced_disruption(&self, c: usize) -> f64 {
        balanced::node_disruption_cost(self.displaced(&self.candidates[c].name))
    }

    /// Whether deleting the candidate outright, the best any move can do for it, would pass
    /// its pool's Balanced score (Karpenter's `CanPassThreshold`); true outside Balanced pools.
    fn can_pass_balanced(&self, c: usize) -> bool {
        let cand = &self.candidates[c];
        let Some(totals) = self.balanced.get(&cand.node_pool) else {
            return true;
        };
        if totals.cost <= 0.0 {
            return true;
        }
        balanced::Score::of(
            cand.price.unwrap_or(0.0),
            self.balanced_disruption(c),
            *totals,
        )
        .approved()
    }

    /// Candidates for Underutilized consolidation, in order, taken while their NodePool's
    /// budget allows: consolidatable, policy WhenEmptyOrUnderutilized (or Balanced, when even
    /// deleting the node would pass its score), unblocked, priced, not empty (empty nodes are
    /// the Empty budget's business).
    pub fn underutilized_order(&self) -> Vec<usize> {
        let mut taken: BTreeMap<&str, u32> = BTreeMap::new();
        self.ordered(|c| {
            c.consolidatable
                && !c.static_pool
                && matches!(
                    c.policy,
                    ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced
                )
                && c.blocker.is_none()
                && c.price.is_some()
        })
        .into_iter()
        .filter(|&i| !self.is_empty(i) && !self.hosts_only_buffer_pods(i))
        .filter(|&i| self.can_pass_balanced(i))
        .filter(|&i| {
            let pool = self.candidates[i].node_pool.as_str();
            let t = taken.entry(pool).or_default();
            if *t < self.budgets.remaining(pool, Reason::Underutilized) {
                *t += 1;
                true
            } else {
                false
            }
        })
        .collect()
    }

    /// A command that deletes candidates without simulation (they have no reschedulable pods).
    pub fn empty_command(&self, nodes: &[usize], reason: Reason) -> Command {
        Command {
            reason,
            nodes: nodes.to_vec(),
            replacements: Vec::new(),
            placements: BTreeMap::new(),
            savings_per_hour: nodes.iter().filter_map(|&c| self.candidates[c].price).sum(),
            unschedulable: Vec::new(),
            scores: Vec::new(),
        }
    }

    /// Karpenter's binary search over prefixes of `list` (longest valid prefix of at least
    /// `min_len`); validity need not be monotone, as in Karpenter.
    pub fn prefix_search(
        &self,
        sim: &dyn Simulate,
        list: &[usize],
        reason: Reason,
        max_claims: Option<usize>,
        min_len: usize,
    ) -> Option<Command> {
        let (mut lo, mut hi) = (min_len.max(1), list.len());
        let mut best = None;
        while lo <= hi && !sim.is_cancelled() {
            let mid = (lo + hi) / 2;
            match self.evaluate(sim, &list[..mid], reason, max_claims) {
                Ok(cmd) => {
                    best = Some(cmd);
                    lo = mid + 1;
                }
                Err(_) => hi = mid - 1,
            }
        }
        best
    }

    /// Evaluates disrupting a group of candidates together: PDB allowances (graceful reasons),
    /// one simulation, then the replacement rules of the reason (Underutilized: strictly
    /// cheaper by worst-case launch price, at most `max_claims` new claims, spot→spot rules).
    ///
    /// # Errors
    /// A [`Rejection`] saying why not.
    pub fn evaluate(
        &self,
        sim: &dyn Simulate,
        group: &[usize],
        reason: Reason,
        max_claims: Option<usize>,
    ) -> Result<Command, Rejection> {
        let result = self.relocate(sim, group, reason, max_claims, Pricing::Improved)?;
        self.judge(group, reason, max_claims, result)
    }

    /// As [`Evaluation::evaluate`] with no bound on new claims, for a caller that needs the
    /// command only when it adds no claim: the simulation skips the cost improvement of new
    /// claims. `Ok(None)`: the pods fit, on new claims too (the verdict on their price is not
    /// known); any other answer is exactly what [`Evaluation::evaluate`] gives. Sound because
    /// the improvement never changes where pods go on existing capacity, which fit nowhere, or
    /// whether a new claim is needed, and without new claims it has nothing to improve.
    ///
    /// # Errors
    /// A [`Rejection`] saying why not.
    pub fn evaluate_unpriced(
        &self,
        sim: &dyn Simulate,
        group: &[usize],
        reason: Reason,
    ) -> Result<Option<Command>, Rejection> {
        let result = self.relocate(sim, group, reason, None, Pricing::FirstFit)?;
        if !result.new_claims.is_empty() {
            return Ok(None);
        }
        self.judge(group, reason, None, result).map(Some)
    }

    /// The simulation of [`Evaluation::evaluate`] and the checks that do not depend on what new
    /// claims cost: PDB allowances, pods that fit nowhere, capacity that cannot be counted on.
    fn relocate(
        &self,
        sim: &dyn Simulate,
        group: &[usize],
        reason: Reason,
        max_claims: Option<usize>,
        pricing: Pricing,
    ) -> Result<Relocation, Rejection> {
        let mut displaced: Vec<&Pod> = Vec::new();
        for &c in group {
            displaced.extend(self.displaced(&self.candidates[c].name));
        }
        if !reason.is_forceful() {
            self.check_pdbs(&displaced)?;
        }
        // Capacity that cannot be counted on is simulated as gone too, so that the scheduler
        // looks elsewhere (or to new nodes) instead of failing the decision.
        let mut removed: Vec<&str> = group
            .iter()
            .map(|&c| self.candidates[c].name.as_str())
            .collect();
        if !reason.is_forceful() {
            removed.extend(self.unusable.keys().map(String::as_str));
            removed.sort_unstable();
            removed.dedup();
        }
        let result: Relocation = if displaced.is_empty() {
            Relocation::default()
        } else {
            self.simulations.set(self.simulations.get() + 1);
            if max_claims == Some(0) || pricing == Pricing::FirstFit {
                // Any new claim rejects the group, whatever it costs, or the caller does not
                // read what the new claims cost.
                sim.simulate_without_new_claims(&removed, &displaced)
            } else if reason.is_forceful() {
                sim.simulate(&removed, &displaced)
            } else {
                sim.simulate_within(&removed, &displaced, self.max_new_cost(group, reason))
            }
        };
        if !reason.is_forceful()
            && let Some((pod, why)) = result.unschedulable.first()
        {
            return Err(Rejection::NoFit(format!("pod {pod} would not fit: {why}")));
        }
        if !reason.is_forceful() {
            for (node, pods) in &result.existing {
                if let (Some(why), Some(pod)) = (self.unusable.get(node), pods.first()) {
                    return Err(Rejection::NoFit(format!(
                        "pod {pod} would only fit on {node}, which cannot be counted on: {why}"
                    )));
                }
            }
        }
        Ok(result)
    }

    /// The rules of `reason` on a simulation's result (new claims within `max_claims`,
    /// strictly cheaper, a repack's least saving, Balanced's score): the command, or why not.
    fn judge(
        &self,
        group: &[usize],
        reason: Reason,
        max_claims: Option<usize>,
        result: Relocation,
    ) -> Result<Command, Rejection> {
        if max_claims == Some(0) && !result.new_claims.is_empty() {
            // Counted before cost improvement, which was skipped: say only that some are needed.
            return Err(Rejection::NotCheaper(
                "needs new nodes, none allowed".to_string(),
            ));
        }
        if let Some(max) = max_claims
            && result.new_claims.len() > max
        {
            return Err(Rejection::NotCheaper(format!(
                "needs {} new nodes, at most {max} allowed",
                result.new_claims.len()
            )));
        }
        let price: f64 = group
            .iter()
            .map(|&c| self.candidates[c].price.unwrap_or(0.0))
            .sum();
        let replacements = if reason == Reason::Underutilized {
            self.cheaper_replacements(group, result.new_claims, price)?
        } else {
            result.new_claims
        };
        let mut placements = BTreeMap::new();
        for (node, pods) in &result.existing {
            for p in pods {
                placements.insert(p.clone(), node.clone());
            }
        }
        for claim in &replacements {
            for p in &claim.pods {
                placements.insert(p.clone(), claim.name.clone());
            }
        }
        let cost: f64 = replacements.iter().map(|r| r.price).sum();
        if reason == Reason::Underutilized
            && group.len() >= 2
            && !replacements.is_empty()
            && price - cost < self.min_repack_saving * price
        {
            return Err(Rejection::NotCheaper(format!(
                "repack saves {:.4}/h, less than {:.0}% of {price:.4}/h",
                price - cost,
                100.0 * self.min_repack_saving
            )));
        }
        let mut scores = Vec::new();
        if reason == Reason::Underutilized && !self.balanced.is_empty() {
            let nodes: Vec<(&str, f64, f64)> = group
                .iter()
                .map(|&c| {
                    let cand = &self.candidates[c];
                    (
                        cand.node_pool.as_str(),
                        cand.price.unwrap_or(0.0),
                        self.balanced_disruption(c),
                    )
                })
                .collect();
            scores = balanced::scores(&nodes, price - cost, &self.balanced);
            if let Some(why) = balanced::refusal(&scores) {
                // The command Karpenter's single-node consolidation would have scored (one
                // node, at most one replacement): a rejected move if the candidate stays.
                if let [c] = group
                    && replacements.len() <= 1
                {
                    let mv = self.consolidation_move("rejected", group, &scores);
                    self.refused.borrow_mut().insert(*c, mv);
                }
                return Err(Rejection::NotCheaper(why));
            }
        }
        Ok(Command {
            reason,
            nodes: group.to_vec(),
            replacements,
            placements,
            savings_per_hour: price - cost,
            unschedulable: result.unschedulable,
            scores,
        })
    }

    /// The most new claims may cost (at their cheapest offerings) for `group` not to be
    /// rejected as not cheaper (Underutilized: strictly below the nodes' price, a repack at
    /// least [`MIN_REPACK_SAVING`]'s share below it), with a margin for rounding; infinite when
    /// the reason has no price check.
    fn max_new_cost(&self, group: &[usize], reason: Reason) -> f64 {
        if reason != Reason::Underutilized || !self.prices_nonnegative {
            return f64::INFINITY;
        }
        let price: f64 = group
            .iter()
            .map(|&c| self.candidates[c].price.unwrap_or(0.0))
            .sum();
        let limit = if group.len() >= 2 {
            price - self.min_repack_saving * price
        } else {
            price
        };
        limit + 1e-9 * (1.0 + price.abs())
    }

    /// Every displaced pod is covered by at most one PDB, and no PDB is asked for more
    /// evictions than it still allows in this plan.
    fn check_pdbs(&self, displaced: &[&Pod]) -> Result<(), Rejection> {
        if self.pdbs.is_empty() {
            return Ok(());
        }
        let mut need: BTreeMap<usize, i64> = BTreeMap::new();
        for p in displaced {
            let key = p.key();
            let Some(v) = self.pod_pdbs.get(&key) else {
                continue;
            };
            if v.len() > 1 {
                return Err(Rejection::Blocked(format!(
                    "pod {key} is covered by more than one PodDisruptionBudget (eviction is refused)"
                )));
            }
            *need.entry(v[0]).or_default() += 1;
        }
        for (i, n) in need {
            if n > self.pdb_remaining[i] {
                let pdb = self.pdbs[i].pdb;
                return Err(Rejection::Blocked(format!(
                    "PodDisruptionBudget {}/{} allows {} eviction(s), {n} needed",
                    pdb.namespace,
                    pdb.name,
                    self.pdb_remaining[i].max(0)
                )));
            }
        }
        Ok(())
    }

    /// The plan's facts of a consolidation move of `group` (`decision`: `approved` or
    /// `rejected`): one entry per NodePool of its nodes, the Balanced ones with their
    /// `scores`.
    fn consolidation_move(
        &self,
        decision: &str,
        group: &[usize],
        scores: &[(String, balanced::Score)],
    ) -> ConsolidationMove {
        let mut pools: BTreeMap<&str, ConsolidationPoolScore> = BTreeMap::new();
        for &c in group {
            let cand = &self.candidates[c];
            pools.entry(cand.node_pool.as_str()).or_insert_with(|| {
                match scores.iter().find(|(p, _)| *p == cand.node_pool) {
                    Some((_, score)) => score.facts(&cand.node_pool),
                    None => ConsolidationPoolScore {
                        node_pool: cand.node_pool.clone(),
                        policy: cand.policy.as_str().to_string(),
                        ..ConsolidationPoolScore::default()
                    },
                }
            });
        }
        ConsolidationMove {
            decision: decision.to_string(),
            nodes: group
                .iter()
                .map(|&c| self.candidates[c].name.clone())
                .collect(),
            node_claims: group
                .iter()
                .map(|&c| self.candidates[c].claim.clone().unwrap_or_default())
                .collect(),
            node_pools: pools.into_values().collect(),
        }
    }

    /// Records the approved move of an Underutilized command about to be committed.
    fn note_move(&mut self, cmd: &Command) {
        if cmd.reason == Reason::Underutilized {
            let mv = self.consolidation_move("approved", &cmd.nodes, &cmd.scores);
            self.moves.push(mv);
        }
    }

    /// Takes the other fork's Balanced refusals of candidates this one has none for: both
    /// forks judged single-node moves from the same start, each of a part of the candidates.
    pub fn absorb_refusals(&self, other: &Evaluation<'_>) {
        let mut mine = self.refused.borrow_mut();
        for (c, mv) in other.refused.borrow().iter() {
            mine.entry(*c).or_insert_with(|| mv.clone());
        }
    }

    /// Hourly savings of the decisions committed so far.
    pub fn savings(&self) -> f64 {
        self.decisions.iter().map(|d| d.savings_per_hour).sum()
    }

    /// Number of decisions committed so far.
    pub fn decision_count(&self) -> usize {
        self.decisions.len()
    }

    /// Adds another fork's simulation and rebuild counters to this one's (work done on a
    /// search that was not kept still counts).
    pub fn absorb_counters(&self, other: &Evaluation<'_>) {
        self.simulations
            .set(self.simulations.get() + other.simulations.get());
        self.rebuilds
            .set(self.rebuilds.get() + other.rebuilds.get());
    }

    /// Adds a note to the outcome.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Ends the run: decisions in commit order, notes (blockers found while evaluating
    /// included), counters.
    pub fn finish(self) -> Outcome {
        let mut notes = self.notes;
        for (c, why) in self.rejected.borrow().iter() {
            if let Rejection::Blocked(b) = why {
                notes.push(format!(
                    "node {} is not disrupted: {b}",
                    self.candidates[*c].name
                ));
            }
        }
        let mut moves = self.moves;
        let mut refused: Vec<ConsolidationMove> = self
            .refused
            .into_inner()
            .into_iter()
            .filter(|(c, _)| !self.used[*c])
            .map(|(_, mv)| mv)
            .collect();
        refused.sort_by(|a, b| a.nodes.cmp(&b.nodes));
        moves.extend(refused);
        Outcome {
            decisions: self.decisions,
            moves,
            notes,
            stats: Stats {
                candidates: self.candidates.len(),
                simulations: self.simulations.get(),
                rebuilds: self.rebuilds.get(),
            },
        }
    }
}
