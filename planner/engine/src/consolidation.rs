//! Disruption: which existing nodes to remove or replace — Empty, Underutilized, Drifted and
//! Expired decisions — following Karpenter v1's disruption controller, and going beyond its
//! many→1 consolidation with many→k repacks.
//!
//! Everything here is pure: the clock is `PlanOptions::now` and the only way to learn whether
//! pods fit is the scheduler, through [`Simulate`] (the engine's `Scheduler::simulate`), never
//! a second packer. A plan's decisions are meant to run together, so each is evaluated on the
//! cluster as the earlier decisions leave it: an [`Evaluation`] keeps that working snapshot, and
//! the scheduler is rebuilt over it after each committed decision. Within one state,
//! candidates are evaluated incrementally: a simulation removes their nodes and places only
//! their pods on the model built once for that state.
//!
//! Order of work (as Karpenter): expiry (forceful: ignores budgets and blockers), empty nodes
//! (one decision per NodePool, as many as its budget allows), drift (replacement without a
//! price check), then underutilized nodes. For those, every candidate is first simulated
//! alone; then, per state, prefix searches (Karpenter's binary search, at most
//! [`MAX_GROUP`] nodes) look for the largest jointly deletable group and the largest group
//! that k cheaper new nodes can hold, each in Karpenter's order (cheapest disruption per
//! dollar saved first) and least-utilized first; the command that saves most is committed.
//! In a `Balanced` NodePool an underutilized move must also pass Karpenter v1.14's score of
//! savings against disruption ([`balanced`]).
//! The design note is `designs/disruption.md`.

pub mod balanced;
mod budgets;
mod candidate;
pub use common::cron;
mod evaluation;
mod status;
#[cfg(test)]
pub(crate) mod tests;

use thiserror::Error;

pub use candidate::{
    Candidate, HASH_VERSION, NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION, POD_DELETION_COST,
    eviction_cost, is_reschedulable, lifetime_remaining, offering_price, pod_do_not_disrupt,
};
pub use evaluation::{Command, Evaluation, MIN_REPACK_SAVING, MIN_SPOT_TO_SPOT_TYPES, Rejection};
pub use status::{disruption_status, drift_reason, node_status};

use crate::catalog::Catalog;
use crate::model::{ClusterSnapshot, PlanOptions, Pod, PodKey};
use crate::plan::{DisruptionDecision, PlannedNodeClaim};
use crate::stopwatch::{self, Stopwatch, Untimed};

/// Errors of disruption planning.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A disruption budget's `schedule` is not a valid cron expression.
    #[error("NodePool {pool}: disruption budget schedule: {source}")]
    Schedule {
        /// The NodePool at fault.
        pool: String,
        /// What is wrong with the schedule.
        #[source]
        source: cron::Error,
    },
}

/// Why a node is disrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// No reschedulable pods.
    Empty,
    /// Its pods fit elsewhere, or on cheaper nodes.
    Underutilized,
    /// It no longer matches its NodePool / EC2NodeClass or the catalog.
    Drifted,
    /// `expireAfter` elapsed.
    Expired,
    /// A static NodePool has more nodes than its `replicas`.
    ScaleDown,
}

// === impl Reason ===

impl Reason {
    /// The name used in plans and budgets.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Empty => "Empty",
            Reason::Underutilized => "Underutilized",
            Reason::Drifted => "Drifted",
            Reason::Expired => "Expired",
            Reason::ScaleDown => "ScaleDown",
        }
    }

    /// Whether the decision goes ahead whatever budgets, blockers and PDBs say (pods that fit
    /// nowhere are reported rather than holding it back): expiry and a static pool's
    /// scale-down, as Karpenter deletes those NodeClaims outright and leaves the drain to honour
    /// PDBs and do-not-disrupt.
    pub fn is_forceful(self) -> bool {
        matches!(self, Reason::Expired | Reason::ScaleDown)
    }
}

/// What a disruption simulation returns: where the displaced pods go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Relocation {
    /// New NodeClaims the displaced pods need (`pods` are the pods placed on each).
    pub new_claims: Vec<PlannedNodeClaim>,
    /// Pods placed on remaining existing nodes / in-flight claims, by node name.
    pub existing: Vec<(String, Vec<PodKey>)>,
    /// Pods that fit nowhere, with reasons.
    pub unschedulable: Vec<(PodKey, String)>,
}

/// The scheduler's disruption simulation (`scheduling::Scheduler::simulate`), built over one
/// cluster state.
pub trait Simulate {
    /// Places `displaced` as if the nodes in `removed` were gone. Must not change `self`
    /// observably and must be deterministic.
    fn simulate(&self, removed: &[&str], displaced: &[&Pod]) -> Relocation;

    /// As [`Simulate::simulate`], for a caller that rejects any result with a new claim, so
    /// that only whether the pods need new claims matters, not what those claims cost: an
    /// implementation may skip its cost improvement (which never turns new claims into none).
    /// Where the pods go on existing capacity, and which fit nowhere, must be as
    /// [`Simulate::simulate`] says.
    fn simulate_without_new_claims(&self, removed: &[&str], displaced: &[&Pod]) -> Relocation {
        self.simulate(removed, displaced)
    }

    /// As [`Simulate::simulate`], for a caller that rejects any result in which a pod fits
    /// nowhere and any result whose new claims cost more than `max_new_cost` per hour at their
    /// cheapest offerings (infinite: no price limit): an implementation may skip its cost
    /// improvement for such results, returning them unimproved, as long as it never turns a
    /// result the caller would reject into one it accepts. Where the pods go on existing
    /// capacity, and which fit nowhere, must be as [`Simulate::simulate`] says.
    fn simulate_within(
        &self,
        removed: &[&str],
        displaced: &[&Pod],
        max_new_cost: f64,
    ) -> Relocation {
        let _ = max_new_cost;
        self.simulate(removed, displaced)
    }

    /// True once the plan's caller cancelled it: the searches stop between candidates (their
    /// partial outcome is dropped by the caller). Never, unless the simulator says so.
    fn is_cancelled(&self) -> bool {
        false
    }
}

/// Builds a simulator over a cluster state (snapshot, catalog, options of the plan).
pub type BuildSimulator<'c> = dyn for<'s> Fn(&'s ClusterSnapshot, &'s Catalog, &'s PlanOptions) -> Box<dyn Simulate + 's>
    + 'c;

/// A [`BuildSimulator`] that threads may share ([`run_concurrently`]): each thread builds its
/// own simulators with it.
pub type SyncBuildSimulator<'c> = dyn for<'s> Fn(&'s ClusterSnapshot, &'s Catalog, &'s PlanOptions) -> Box<dyn Simulate + 's>
    + Sync
    + 'c;

// === impl Simulate for Scheduler ===

impl From<crate::scheduling::Results> for Relocation {
    fn from(r: crate::scheduling::Results) -> Self {
        Relocation {
            new_claims: r.new_claims,
            existing: r.existing,
            unschedulable: r.unschedulable,
        }
    }
}

impl Simulate for crate::scheduling::Scheduler<'_> {
    fn simulate(&self, removed: &[&str], displaced: &[&Pod]) -> Relocation {
        crate::scheduling::Scheduler::simulate(self, removed, displaced).into()
    }

    fn simulate_without_new_claims(&self, removed: &[&str], displaced: &[&Pod]) -> Relocation {
        crate::scheduling::Scheduler::simulate_placement(self, removed, displaced).into()
    }

    fn simulate_within(
        &self,
        removed: &[&str],
        displaced: &[&Pod],
        max_new_cost: f64,
    ) -> Relocation {
        crate::scheduling::Scheduler::simulate_within(self, removed, displaced, max_new_cost).into()
    }

    fn is_cancelled(&self) -> bool {
        crate::scheduling::Scheduler::is_cancelled(self)
    }
}

/// Builds the engine's scheduler over a cluster state: the [`BuildSimulator`] of real plans.
pub fn with_scheduler<'s>(
    snapshot: &'s ClusterSnapshot,
    catalog: &'s Catalog,
    options: &'s PlanOptions,
) -> Box<dyn Simulate + 's> {
    Box::new(crate::scheduling::Scheduler::new(
        snapshot, catalog, options,
    ))
}

/// Gives a closure the higher-ranked type [`BuildSimulator`] needs (closures do not infer it).
pub fn builder<F>(f: F) -> F
where
    F: for<'s> Fn(&'s ClusterSnapshot, &'s Catalog, &'s PlanOptions) -> Box<dyn Simulate + 's>,
{
    f
}

/// Counters of a disruption run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Candidates (initialized NodePool nodes not being deleted).
    pub candidates: usize,
    /// Simulations run.
    pub simulations: usize,
    /// Cluster states the scheduler was built over.
    pub rebuilds: usize,
}

/// The decisions of a plan, with notes and counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Decisions, in the order they were committed.
    pub decisions: Vec<DisruptionDecision>,
    /// The consolidation moves Karpenter's balanced evaluator would count: one approved per
    /// Underutilized decision, in order, then the rejected single-node moves of candidates
    /// that stay, by node (see [`crate::plan::ConsolidationMove`]).
    pub moves: Vec<crate::plan::ConsolidationMove>,
    /// Things a person should know (blockers, many→k repacks, forced expiries).
    pub notes: Vec<String>,
    /// Counters.
    pub stats: Stats,
}

/// Checks the parts of a snapshot that disruption parses (budget schedules).
///
/// # Errors
/// [`Error::Schedule`] naming the NodePool whose budget schedule is invalid.
pub fn validate(snapshot: &ClusterSnapshot) -> Result<(), Error> {
    for pool in &snapshot.node_pools {
        for b in &pool.disruption.budgets {
            if let Some(s) = &b.schedule {
                cron::Schedule::parse(s).map_err(|source| Error::Schedule {
                    pool: pool.name.clone(),
                    source,
                })?;
            }
        }
    }
    Ok(())
}

/// The disruption candidates of a snapshot at one instant, with the pods bound to each node and
/// the PDB allowances: built once per plan, and read both by the node status
/// ([`Candidates::node_status`]) and by the disruption search ([`disrupt_candidates`]).
pub struct Candidates<'a> {
    snapshot: &'a ClusterSnapshot,
    now: crate::model::Timestamp,
    pods_on: candidate::PodsByNode,
    candidates: Vec<Candidate>,
    /// Per NodePool: (managed initialized nodes, disrupting nodes), for budgets.
    counts: std::collections::BTreeMap<String, (u32, u32)>,
    pdbs: Vec<candidate::PdbState<'a>>,
}

// === impl Candidates ===

impl<'a> Candidates<'a> {
    /// Builds the candidates of `snapshot` at `now`, pricing them from `catalog`.
    pub fn new(
        snapshot: &'a ClusterSnapshot,
        catalog: &Catalog,
        now: crate::model::Timestamp,
    ) -> Self {
        let pods_on = candidate::pods_by_node(snapshot);
        let (candidates, counts) = candidate::build(snapshot, catalog, now, &pods_on);
        Self {
            snapshot,
            now,
            pods_on,
            candidates,
            counts,
            pdbs: candidate::pdb_states(snapshot),
        }
    }

    /// What Karpenter would write on each candidate with something to say, sorted by node
    /// (see [`node_status`]).
    pub fn node_status(&self) -> Vec<crate::plan::NodeDisruptionStatus> {
        status::of_candidates(self)
    }

    /// Each NodePool's allowed disruptions per graceful reason (see
    /// [`disruption_status`]).
    pub fn budget_status(&self) -> Vec<crate::plan::NodePoolBudgetStatus> {
        status::budgets_of_candidates(self)
    }
}

/// Computes the disruption decisions of a snapshot with dovetail's search.
///
/// # Errors
/// [`Error::Schedule`] when a budget schedule is invalid.
pub fn disrupt(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    options: &PlanOptions,
    build: &BuildSimulator<'_>,
) -> Result<Outcome, Error> {
    disrupt_after_launch(snapshot, catalog, options, build, &[])
}

/// As [`disrupt_after_launch`], from candidates already built at `options.now` over the same
/// snapshot and catalog (a plan builds them once for its node status too), with a simulator
/// builder threads may share: the underutilized searches run on two threads
/// ([`run_concurrently`]).
///
/// # Errors
/// [`Error::Schedule`] when a budget schedule is invalid.
pub fn disrupt_candidates<'a>(
    candidates: Candidates<'a>,
    catalog: &'a Catalog,
    options: &'a PlanOptions,
    build: &SyncBuildSimulator<'_>,
    launch: &[(String, Vec<PodKey>)],
    watch: &dyn Stopwatch,
) -> Result<Outcome, Error> {
    let mut s = Evaluation::from_candidates(candidates, catalog, options)?;
    s.place_pending(launch);
    run_concurrently(&mut s, build, watch);
    Ok(s.finish())
}

/// As [`disrupt`], for a plan whose launch part places pending pods on existing nodes
/// (`launch`: node name → pods): those pods count on those nodes, and those nodes are not
/// disrupted, so that the launch plan and the disruption decisions hold together.
///
/// # Errors
/// [`Error::Schedule`] when a budget schedule is invalid.
pub fn disrupt_after_launch(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    options: &PlanOptions,
    build: &BuildSimulator<'_>,
    launch: &[(String, Vec<PodKey>)],
) -> Result<Outcome, Error> {
    let mut s = Evaluation::new(snapshot, catalog, options)?;
    s.place_pending(launch);
    run(&mut s, build);
    Ok(s.finish())
}

/// Runs every disruption method on an evaluation, in Karpenter's order. For underutilized nodes
/// two searches run from the same state — dovetail's bulk search and Karpenter's sequence of
/// single commands (which can chain on slack earlier commands leave) — and the one that saves
/// more is kept.
pub fn run(s: &mut Evaluation<'_>, build: &BuildSimulator<'_>) {
    let before = before_underutilized(s, build, &Untimed);
    let mut sequence = s.clone();
    underutilized(s, build);
    karpenter_sequence(&mut sequence, build, MAX_SEQUENCE_PASSES);
    keep_the_better(s, sequence, before);
}

/// As [`run`], with the two underutilized searches on two threads: they start from the same
/// state and share nothing until the better is kept, so the outcome is [`run`]'s, in about the
/// time of the longer search when a second core is free. `watch` times each method.
pub fn run_concurrently(
    s: &mut Evaluation<'_>,
    build: &SyncBuildSimulator<'_>,
    watch: &dyn Stopwatch,
) {
    let before = before_underutilized(s, build, watch);
    let sequence = s.clone();
    let joined = std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("karpenter-sequence".into())
            // As much stack as a main thread usually has: the search runs the scheduler.
            .stack_size(8 << 20)
            .spawn_scoped(scope, move || {
                let mut sequence = sequence;
                watch.time(stopwatch::SINGLE, &mut || {
                    karpenter_sequence(&mut sequence, build, MAX_SEQUENCE_PASSES);
                });
                sequence
            });
        spawned.ok().map(|handle| {
            watch.time(stopwatch::MULTI, &mut || underutilized(s, build));
            handle.join()
        })
    });
    match joined {
        Some(Ok(sequence)) => keep_the_better(s, sequence, before),
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        // No thread to be had: both searches run here, one after the other.
        None => {
            let mut sequence = s.clone();
            watch.time(stopwatch::MULTI, &mut || underutilized(s, build));
            watch.time(stopwatch::SINGLE, &mut || {
                karpenter_sequence(&mut sequence, build, MAX_SEQUENCE_PASSES);
            });
            keep_the_better(s, sequence, before);
        }
    }
}

/// Everything [`run`] does before the underutilized searches (expiry, static scale-down, empty
/// nodes, drift); the number of decisions committed by then.
fn before_underutilized(
    s: &mut Evaluation<'_>,
    build: &BuildSimulator<'_>,
    watch: &dyn Stopwatch,
) -> usize {
    expire(s, build);
    scale_down(s, build);
    watch.time(stopwatch::EMPTY, &mut || empty(s));
    watch.time(stopwatch::DRIFT, &mut || drift(s, build));
    s.decision_count()
}

/// Keeps in `s` the search that saved more: `s` itself (the bulk search) unless Karpenter's
/// `sequence` saved strictly more. `before` is how many decisions both started from.
fn keep_the_better<'a>(s: &mut Evaluation<'a>, sequence: Evaluation<'a>, before: usize) {
    if sequence.savings() > s.savings() + 1e-9 {
        sequence.absorb_counters(s);
        sequence.absorb_refusals(s);
        let mut sequence = sequence;
        let n = sequence.decision_count() - before;
        sequence.note(format!(
            "Underutilized: Karpenter's one-command-per-pass sequence ({n} decisions) saved more than the bulk search here, and was kept"
        ));
        *s = sequence;
    } else {
        s.absorb_counters(&sequence);
        s.absorb_refusals(&sequence);
    }
}

/// Most single candidates one pass of the sequential search tries (Karpenter bounds
/// single-node consolidation by a timeout instead; at its ~1 s per simulation that is a few
/// hundred).
pub const SEQUENCE_SINGLES: usize = 200;

/// Most passes of the sequential search in [`run`] (each rebuilds the scheduler).
pub const MAX_SEQUENCE_PASSES: usize = 250;

/// Karpenter's consolidation as its controller runs it, one command per pass: multi-node
/// (binary search over the first [`MAX_GROUP`] candidates, at most one new node), else the first
/// of the next [`SEQUENCE_SINGLES`] single nodes that can go or be replaced more cheaply; at
/// most `max_passes` passes.
pub fn karpenter_sequence(s: &mut Evaluation<'_>, build: &BuildSimulator<'_>, max_passes: usize) {
    for _ in 0..max_passes {
        let cmd = {
            let sim = s.build(build);
            if sim.is_cancelled() {
                return;
            }
            let order = s.underutilized_order();
            let multi = &order[..order.len().min(MAX_GROUP)];
            s.prefix_search(&*sim, multi, Reason::Underutilized, Some(1), 1)
                .or_else(|| {
                    order
                        .iter()
                        .take(SEQUENCE_SINGLES)
                        .take_while(|_| !sim.is_cancelled())
                        .find_map(|&c| s.evaluate(&*sim, &[c], Reason::Underutilized, Some(1)).ok())
                })
        };
        match cmd {
            Some(cmd) => s.commit(cmd),
            None => return,
        }
    }
}

/// Expired nodes, one decision per NodePool; forceful: no budget, no blocker, and pods that fit
/// nowhere are reported in a note rather than holding the expiry back.
fn expire(s: &mut Evaluation<'_>, build: &BuildSimulator<'_>) {
    for pool in s.pool_names() {
        let group: Vec<usize> = s.ordered(|c| c.expired && c.node_pool == pool);
        if group.is_empty() {
            continue;
        }
        let cmd = {
            let sim = s.build(build);
            if sim.is_cancelled() {
                return;
            }
            s.evaluate(&*sim, &group, Reason::Expired, None)
        };
        if let Ok(cmd) = cmd {
            s.commit(cmd);
        }
    }
}

/// Static NodePools with more nodes than their replicas: one decision per pool removes the
/// excess, empty nodes first, then the cheapest to disrupt (Karpenter's
/// `pkg/controllers/static/deprovisioning`); forceful, like expiry.
fn scale_down(s: &mut Evaluation<'_>, build: &BuildSimulator<'_>) {
    for pool in s.pool_names() {
        let excess = s.static_excess(&pool);
        if excess == 0 {
            continue;
        }
        let mut group: Vec<usize> = s.ordered(|c| c.node_pool == pool);
        // Stable: empty nodes first, each part in disruption-cost order.
        group.sort_by_key(|&c| !s.is_empty(c));
        group.truncate(excess);
        if group.is_empty() {
            continue;
        }
        let cmd = {
            let sim = s.build(build);
            if sim.is_cancelled() {
                return;
            }
            s.evaluate(&*sim, &group, Reason::ScaleDown, None)
        };
        if let Ok(cmd) = cmd {
            s.commit(cmd);
        }
    }
}

/// Empty nodes: consolidatable, unblocked, no reschedulable pods; one decision per NodePool
/// with as many as its Empty budget allows. A static pool's nodes are left to its replicas.
fn empty(s: &mut Evaluation<'_>) {
    for pool in s.pool_names() {
        let budget = s.remaining(&pool, Reason::Empty);
        let group: Vec<usize> = s
            .ordered(|c| {
                c.node_pool == pool && c.consolidatable && c.blocker.is_none() && !c.static_pool
            })
            .into_iter()
            .filter(|&c| s.is_empty(c))
            .take(budget as usize)
            .collect();
        if !group.is_empty() {
            let cmd = s.empty_command(&group, Reason::Empty);
            s.commit(cmd);
        }
    }
}

/// Drifted nodes, per NodePool within its Drifted budget: each is simulated alone; the largest
/// prefix of those that can be replaced whose pods fit together is committed as one decision
/// (replacements without a price check).
fn drift(s: &mut Evaluation<'_>, build: &BuildSimulator<'_>) {
    for pool in s.pool_names() {
        let budget = s.remaining(&pool, Reason::Drifted) as usize;
        let drifted =
            s.ordered(|c| c.node_pool == pool && c.drift.is_some() && c.blocker.is_none());
        if drifted.is_empty() || budget == 0 {
            continue;
        }
        let cmd = {
            let sim = s.build(build);
            if sim.is_cancelled() {
                return;
            }
            let valid: Vec<usize> = drifted
                .into_iter()
                .take_while(|_| !sim.is_cancelled())
                // Valid or not does not depend on what the replacements cost (drift has no
                // price check): their cost improvement is skipped.
                .filter(|&c| {
                    s.evaluate_unpriced(&*sim, &[c], Reason::Drifted)
                        .map_err(|r| s.reject(c, r))
                        .is_ok()
                })
                .take(budget)
                .collect();
            s.prefix_search(&*sim, &valid, Reason::Drifted, None, 1)
        };
        if let Some(cmd) = cmd {
            s.commit(cmd);
        }
    }
}

/// Most nodes one Underutilized decision removes (Karpenter's multi-node bound): keeps each
/// joint simulation small and each decision's blast radius bounded.
pub const MAX_GROUP: usize = 100;

/// How many successive windows of [`MAX_GROUP`] candidates a search tries.
pub const MAX_WINDOWS: usize = 2;

/// Underutilized nodes (dovetail's search; see the module header).
///
/// Simulating every candidate alone is the expensive part, so it is done once, and again only
/// when the prefix searches over what it found stop finding anything: between refreshes the
/// lists may be stale, which costs nothing in safety (every committed prefix is verified
/// jointly on the current state) and at worst one refresh.
fn underutilized(s: &mut Evaluation<'_>, build: &BuildSimulator<'_>) {
    let mut deletable: Vec<usize> = Vec::new();
    let mut repackable: Vec<usize> = Vec::new();
    let mut fresh = false;
    let mut first_pass = true;
    loop {
        let order = s.underutilized_order();
        if order.is_empty() {
            return;
        }
        let evaluated_now = !fresh;
        let cmd = {
            let sim = s.build(build);
            if sim.is_cancelled() {
                return;
            }
            let mut first_replace: Option<Command> = None;
            if evaluated_now {
                deletable.clear();
                repackable.clear();
                // The first pass evaluates every candidate; a refresh only as many as the
                // searches can use.
                let limit = if first_pass {
                    usize::MAX
                } else {
                    2 * MAX_WINDOWS * MAX_GROUP
                };
                for &c in &order {
                    if repackable.len() >= limit || sim.is_cancelled() {
                        break;
                    }
                    // Once the first replacement is found, what new claims would cost no
                    // longer matters here: priced or not, a candidate whose pods need them is
                    // repackable, so their cost improvement is skipped.
                    let verdict = if first_replace.is_none() {
                        s.evaluate(&*sim, &[c], Reason::Underutilized, None)
                            .map(Some)
                    } else {
                        s.evaluate_unpriced(&*sim, &[c], Reason::Underutilized)
                    };
                    match verdict {
                        Ok(Some(cmd)) => {
                            repackable.push(c);
                            if cmd.replacements.is_empty() {
                                deletable.push(c);
                            } else if first_replace.is_none() {
                                first_replace = Some(cmd);
                            }
                        }
                        Ok(None) => repackable.push(c),
                        // Alone it is not cheaper, but with others it may be (many→k).
                        Err(Rejection::NotCheaper(_)) => repackable.push(c),
                        Err(r) => s.reject(c, r),
                    }
                }
                fresh = true;
                first_pass = false;
            }
            // Keep what the budgets (and earlier commits) still allow, in the current order.
            let rank: std::collections::BTreeMap<usize, usize> =
                order.iter().enumerate().map(|(i, &c)| (c, i)).collect();
            let keep = |v: &mut Vec<usize>| {
                v.retain(|c| rank.contains_key(c));
                v.sort_by_key(|c| rank[c]);
            };
            keep(&mut deletable);
            keep(&mut repackable);
            // Beyond Karpenter's one order: also the least utilized first. Of every command
            // found, the one that saves most wins.
            let util: std::collections::BTreeMap<usize, f64> =
                order.iter().copied().zip(s.utilizations(&order)).collect();
            let by_util = |v: &[usize]| {
                let mut v = v.to_vec();
                v.sort_by(|a, b| util[a].total_cmp(&util[b]).then(rank[a].cmp(&rank[b])));
                v
            };
            // Windows of at most MAX_GROUP nodes, the next one tried when one finds nothing
            // (at most MAX_WINDOWS: each failed window costs a handful of large simulations).
            let windowed = |v: &[usize], max_claims: Option<usize>, min_len: usize| {
                v.chunks(MAX_GROUP).take(MAX_WINDOWS).find_map(|w| {
                    s.prefix_search(&*sim, w, Reason::Underutilized, max_claims, min_len)
                })
            };
            let found = [
                windowed(&deletable, Some(0), 1),
                windowed(&by_util(&deletable), Some(0), 1),
                windowed(&repackable, None, 2),
                windowed(&by_util(&repackable), None, 2),
                first_replace,
            ];
            found
                .into_iter()
                .flatten()
                .fold(None, |best: Option<Command>, c| match best {
                    Some(b) if b.savings_per_hour >= c.savings_per_hour => Some(b),
                    _ => Some(c),
                })
        };
        match cmd {
            Some(cmd) => {
                let used = cmd.nodes.clone();
                s.commit(cmd);
                deletable.retain(|c| !used.contains(c));
                repackable.retain(|c| !used.contains(c));
                // Stale lists are re-checked jointly; refresh only when they dry up.
                if deletable.is_empty() && repackable.len() < 2 {
                    fresh = false;
                }
            }
            // The lists were stale: simulate every candidate alone again, once.
            None if !evaluated_now => fresh = false,
            None => return,
        }
    }
}
