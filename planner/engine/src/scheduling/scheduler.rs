//! The scheduler (Karpenter's `scheduler.go`): places pods on existing capacity, on claims
//! opened in this plan, then on new claims from NodePools by weight.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::model::{ClusterSnapshot, PlanOptions, Pod, PreferencePolicy, WhenUnsatisfiable};

use super::dims::Dims;
use super::existing_node::{self, ExistingNode};
use super::pools::{DaemonInfo, Pool};
use super::queue;
use super::results::Results;
use super::run::{Item, Run, Tables};
use super::tables::{PoolTables, SharedTables};
use super::volumes::VolumeTopology;

/// The scheduler of one plan: built once, then [`Scheduler::solve`] and any number of
/// [`Scheduler::simulate`] calls.
#[derive(Debug)]
pub struct Scheduler<'a> {
    pub(super) tables: Tables<'a>,
}

// === impl Scheduler ===

impl<'a> Scheduler<'a> {
    /// Builds the scheduler: NodePool tables, DaemonSet overhead, existing capacity.
    pub fn new(
        snapshot: &'a ClusterSnapshot,
        catalog: &'a Catalog,
        options: &'a PlanOptions,
    ) -> Self {
        Self::build(snapshot, catalog, options, None)
    }

    /// As [`Scheduler::new`], reusing the NodePool tables `shared` built for an earlier state
    /// of the same plan when this state has the same NodePools, node classes, DaemonSets and
    /// resources (as every state of a disruption search does): they are then not rebuilt.
    pub fn with_shared(
        snapshot: &'a ClusterSnapshot,
        catalog: &'a Catalog,
        options: &'a PlanOptions,
        shared: &SharedTables<'_>,
    ) -> Self {
        Self::build(snapshot, catalog, options, Some(shared))
    }

    fn build(
        snapshot: &'a ClusterSnapshot,
        catalog: &'a Catalog,
        options: &'a PlanOptions,
        shared: Option<&SharedTables<'_>>,
    ) -> Self {
        let mut ext: BTreeSet<String> = BTreeSet::new();
        let mut collect = |r: &crate::model::Resources| {
            ext.extend(r.extended.keys().cloned());
        };
        for p in &snapshot.pods {
            collect(&p.requests);
        }
        for ds in &snapshot.daemon_sets {
            collect(&ds.template.requests);
        }
        for it in &catalog.instance_types {
            collect(&it.capacity);
        }
        for n in &snapshot.nodes {
            collect(&n.allocatable);
        }
        for c in &snapshot.node_claims {
            collect(&c.allocatable);
        }
        // `spec.limits.nodes` counts nodes: a slot every node fills by one.
        if snapshot
            .node_pools
            .iter()
            .any(|np| np.limited_resources.iter().any(|r| r == super::dims::NODES))
        {
            ext.insert(super::dims::NODES.to_string());
        }
        let d = Dims::new(ext.iter());

        // DaemonSets whose pods have DRA requests add no overhead while `ignoreDRARequests`
        // is on (Karpenter's shouldSkipDaemonPod, crate::dra).
        let mut daemon_sets: Vec<&crate::model::DaemonSet> = snapshot
            .daemon_sets
            .iter()
            .filter(|ds| crate::dra::daemon_counts(&ds.template, options))
            .collect();
        daemon_sets.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let daemons: Vec<DaemonInfo<'a>> = daemon_sets
            .iter()
            .map(|ds| DaemonInfo::new(ds, &d))
            .collect();

        let built: Arc<PoolTables<'a>> = match shared {
            Some(shared) => shared.get(snapshot, catalog, options, ext, &daemons, &d),
            None => Arc::new(PoolTables::new(snapshot, catalog, options, &daemons, &d)),
        };
        let mut notes = catalog.notes.clone();
        notes.extend(built.notes.iter().cloned());
        let pools = built;
        let existing = existing_node::build(snapshot, &daemons, &pools, &d);

        let going = going_nodes(snapshot);
        let mut pending: Vec<&'a Pod> = snapshot
            .pods
            .iter()
            .filter(|p| is_provisionable(p) || is_displaced(p, &going))
            .collect();
        pending.sort_by(|a, b| queue::compare(a, b));

        // Under `--preference-policy Ignore` every pod is placed without its preferences, so
        // preferred pod (anti-)affinity and ScheduleAnyway spreads constrain nothing.
        let respect = options.preference_policy != PreferencePolicy::Ignore;
        let any_anti_affinity = snapshot.pods.iter().any(|p| {
            !p.pod_anti_affinity.is_empty()
                || (respect && !p.preferred_pod_anti_affinity.is_empty())
        });
        let topology_active = any_anti_affinity
            || snapshot.pods.iter().any(|p| {
                if respect {
                    super::has_topology_constraints(p)
                } else {
                    !p.pod_affinity.is_empty()
                        || p.topology_spread
                            .iter()
                            .any(|t| t.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
                }
            });
        let domains = if topology_active {
            domains(&pools, &existing, snapshot)
        } else {
            BTreeMap::new()
        };
        let mut existing_by_name: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (i, n) in existing.iter().enumerate() {
            existing_by_name
                .entry(n.name.clone())
                .or_default()
                .push(i as u32);
        }
        let tables = Tables {
            cancel: crate::cancel::CancelToken::default(),
            snapshot,
            options,
            dims: d,
            pools,
            existing_by_name,
            existing,
            prefs: super::preferences::Preferences::new(snapshot),
            pending,
            any_anti_affinity,
            topology_active,
            domains,
            volumes: VolumeTopology::new(snapshot),
            notes,
            snapshot_selectors: std::sync::OnceLock::new(),
            zone_blind_selectors: std::sync::OnceLock::new(),
            topology: Default::default(),
            topology_classes: Default::default(),
        };
        Self { tables }
    }

    /// Stops placing pods (in [`Scheduler::solve`] and every [`Scheduler::simulate`]) once
    /// `cancel` is cancelled; the results are then partial and must be dropped.
    pub fn with_cancel(mut self, cancel: crate::cancel::CancelToken) -> Self {
        self.tables.cancel = cancel;
        self
    }

    /// True once the token given to [`Scheduler::with_cancel`] was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.tables.cancel.is_cancelled()
    }

    /// Number of pending pods the launch plan provisions for (pending, not owned by a DaemonSet
    /// or a node).
    pub fn pending_count(&self) -> usize {
        self.tables.pending.len()
    }

    /// The launch plan for the snapshot's pending pods, cost-improved, with its lower bound.
    pub fn solve(&self) -> Results {
        let mut run = self.run(&BTreeSet::new(), self.tables.pending.clone());
        if self.tables.cancel.is_cancelled() {
            // Partial: the caller drops it.
            return run.results();
        }
        super::packing::improve(&mut run);
        if self.tables.cancel.is_cancelled() {
            return run.results();
        }
        super::packing::place_within(&mut run);
        if self.tables.cancel.is_cancelled() {
            return run.results();
        }
        let lb = super::lower_bound::for_run(&run);
        let mut results = run.results();
        results.lower_bound = lb;
        results.notes.extend(self.tables.notes.iter().cloned());
        results
    }

    /// Disruption simulation: the nodes (or in-flight NodeClaims) named in `removed` are gone
    /// and `displaced` must be placed on the remaining existing capacity or on new claims. The
    /// snapshot's pending pods are not part of the simulation (they belong to the launch plan);
    /// bound pods on remaining nodes stay where they are. `lower_bound` is not computed.
    pub fn simulate(&self, removed: &[&str], displaced: &[&Pod]) -> Results {
        let mut run = self.simulation(removed, displaced);
        if !self.tables.cancel.is_cancelled() {
            super::packing::improve(&mut run);
        }
        run.results()
    }

    /// As [`Scheduler::simulate`], for a caller that rejects every result in which some pod
    /// fits nowhere and every result whose new claims cost more than `max_new_cost` per hour
    /// (at their cheapest offerings): such results come back as first fit packed them, without
    /// the cost improvement. The improvement never places a pod that fits nowhere, and no
    /// packing of the pods on new claims costs less than the lower bound of
    /// [`super::lower_bound`] (a proven bound), so when that bound exceeds `max_new_cost` the
    /// improved claims would be rejected too.
    pub fn simulate_within(
        &self,
        removed: &[&str],
        displaced: &[&Pod],
        max_new_cost: f64,
    ) -> Results {
        let mut run = self.simulation(removed, displaced);
        if self.tables.cancel.is_cancelled() || !run.unschedulable.is_empty() {
            return run.results();
        }
        if !run.claims.is_empty()
            && max_new_cost.is_finite()
            && super::lower_bound::for_run(&run) > max_new_cost
        {
            return run.results();
        }
        super::packing::improve(&mut run);
        run.results()
    }

    /// As [`Scheduler::simulate`] without the cost improvement: the new claims are as first
    /// fit packed them. Cost improvement only moves pods between new claims (never onto
    /// existing capacity, never off every claim), so where pods go on existing capacity, which
    /// fit nowhere, and whether any new claim is needed are exactly as `simulate` says; for a
    /// caller that rejects every result with a new claim, the verdict is the same.
    pub fn simulate_placement(&self, removed: &[&str], displaced: &[&Pod]) -> Results {
        self.simulation(removed, displaced).results()
    }

    /// The run of a disruption simulation. It borrows the displaced pods rather than copying
    /// them: the run lives no longer than they do, and the tables it reads are only ever read.
    fn simulation<'p>(&'p self, removed: &[&str], displaced: &[&'p Pod]) -> Run<'p, 'p> {
        let removed: BTreeSet<String> = removed.iter().map(|s| s.to_string()).collect();
        let mut sorted: Vec<&'p Pod> = displaced.to_vec();
        sorted.sort_by(|a, b| queue::compare(a, b));
        let items: Vec<Item<'p>> = sorted
            .into_iter()
            .map(|p| self.item(Cow::Borrowed(p)))
            .collect();
        let tables: &'p Tables<'p> = &self.tables;
        Run::new(tables, &removed, items)
    }

    fn run(&self, removed: &BTreeSet<String>, pods: Vec<&'a Pod>) -> Run<'_, 'a> {
        let items: Vec<Item<'a>> = pods
            .into_iter()
            .map(|p| self.item(Cow::Borrowed(p)))
            .collect();
        Run::new(&self.tables, removed, items)
    }

    fn item<'p>(&self, pod: Cow<'p, Pod>) -> Item<'p> {
        let pod = if self.tables.options.preference_policy == PreferencePolicy::Ignore
            && has_preferences(&pod)
        {
            let mut p = pod.into_owned();
            super::preferences::strip_preferences(&mut p);
            Cow::Owned(p)
        } else {
            pod
        };
        Item { pod, sig: u32::MAX }
    }
}

/// Pods Karpenter provisions for: pending, not owned by a DaemonSet or a node.
fn is_provisionable(p: &Pod) -> bool {
    p.is_pending() && !p.is_daemonset_pod() && !p.is_mirror_pod()
}

/// Nodes that are going away: being deleted, or tainted `karpenter.sh/disrupted` (an
/// interruption or a disruption in progress; neither is a target for pods). Karpenter's
/// provisioner schedules the pods of such nodes as if pending (`nodes.Deleting()` in
/// `provisioner.go`), so that their replacement capacity is launched before the pods are
/// evicted. (A node whose NodeClaim alone is deleting is not included: it is still a target
/// here; the actuator taints it when it acts.)
fn going_nodes(snapshot: &ClusterSnapshot) -> BTreeSet<&str> {
    snapshot
        .nodes
        .iter()
        .filter(|n| {
            n.deletion_time.is_some()
                || n.taints
                    .iter()
                    .any(|t| t.key == crate::labels::DISRUPTED_TAINT)
        })
        .map(|n| n.name.as_str())
        .collect()
}

/// A pod bound to a node that is going away that must run elsewhere (Karpenter's
/// `IsReschedulable`): active, not itself terminating, not a DaemonSet or mirror pod.
fn is_displaced(p: &Pod, going: &BTreeSet<&str>) -> bool {
    p.node_name.as_deref().is_some_and(|n| going.contains(n))
        && p.is_bound_active()
        && p.deletion_time.is_none()
        && !p.is_daemonset_pod()
        && !p.is_mirror_pod()
}

fn has_preferences(p: &Pod) -> bool {
    !p.preferred_node_affinity.is_empty()
        || !p.preferred_pod_affinity.is_empty()
        || !p.preferred_pod_anti_affinity.is_empty()
        || p.topology_spread
            .iter()
            .any(|t| t.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
}

/// The topology domain universe of new capacity: values each key can take on a new node
/// (NodePool requirements ∩ instance types' labels and offerings). Existing nodes are added by
/// [`Topology::new`] from the snapshot.
fn domains(
    pools: &[Pool<'_>],
    existing: &[ExistingNode],
    snapshot: &ClusterSnapshot,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pool in pools.iter().filter(|p| p.unusable.is_none()) {
        for r in pool.reqs.iter() {
            if !r.is_complement() {
                out.entry(r.key().to_string())
                    .or_default()
                    .extend(r.values().iter().cloned());
            }
        }
        for t in &pool.types {
            for r in t.reqs.iter() {
                if r.is_complement() || r.values().is_empty() {
                    continue;
                }
                let allowed = pool.reqs.get(r.key());
                let set = out.entry(r.key().to_string()).or_default();
                for v in r.values() {
                    if allowed.is_none_or(|a| a.has(v)) {
                        set.insert(v.clone());
                    }
                }
            }
        }
    }
    // Existing nodes' labels are added by the topology itself, which needs to know which domains
    // only exist on nodes (they count for a spread only when the node passes its node filter);
    // existing nodes' and in-flight claims' hostnames are registered by `Run::new`.
    let _ = (existing, snapshot);
    out
}
