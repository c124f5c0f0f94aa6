//! The NodePool tables a scheduler places new claims from ([`PoolTables`]: each NodePool's
//! instance types over its node class's catalog and the NodeOverlays that select them, by
//! Karpenter's weight order), and [`SharedTables`], which lets the schedulers of one plan share
//! them.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::catalog::Catalog;
use crate::model::{ClusterSnapshot, MinValuesPolicy, NodeClass, PlanOptions};

use super::dims::Dims;
use super::pools::{DaemonInfo, Pool};

/// The NodePool tables of a scheduler (by Karpenter's weight order) and their notes.
#[derive(Debug)]
pub(super) struct PoolTables<'a> {
    pub(super) pools: Vec<Pool<'a>>,
    pub(super) notes: Vec<String>,
}

// === impl PoolTables ===

impl<'a> std::ops::Deref for PoolTables<'a> {
    type Target = [Pool<'a>];

    fn deref(&self) -> &[Pool<'a>] {
        &self.pools
    }
}

impl<'a> PoolTables<'a> {
    /// The tables of the NodePools and node classes of `snapshot` over `catalog`.
    pub(super) fn new(
        snapshot: &ClusterSnapshot,
        catalog: &Catalog,
        options: &PlanOptions,
        daemons: &[DaemonInfo<'_>],
        d: &Dims,
    ) -> Self {
        let min_values = options.min_values_policy;
        let mut node_pools: Vec<&crate::model::NodePool> = snapshot.node_pools.iter().collect();
        // Karpenter's OrderByWeight: weight descending, equal weights by name descending.
        node_pools.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| b.name.cmp(&a.name)));
        // Without a node class the catalog is used as it is (not copied).
        let mut class_catalogs: BTreeMap<String, Cow<'_, Catalog>> = BTreeMap::new();
        // NodeOverlays: each pool's types with the overlays that select them (none when the
        // gate is off or there is no overlay).
        let overlays = crate::catalog::overlay::Evaluation::of(snapshot, catalog, options);
        let mut pools = Vec::new();
        let mut notes = Vec::new();
        for np in node_pools {
            let class: Option<&NodeClass> = np
                .node_class
                .as_deref()
                .and_then(|name| snapshot.node_classes.iter().find(|c| c.name == name));
            let missing = match (&np.node_class, class) {
                (Some(name), None) => Some(name.as_str()),
                _ => None,
            };
            let key = class.map(|c| c.name.clone()).unwrap_or_default();
            let cat = class_catalogs.entry(key).or_insert_with(|| match class {
                None => Cow::Borrowed(catalog),
                Some(_) => Cow::Owned(for_node_class(catalog, class)),
            });
            let cat = overlays.for_pool(&np.name, cat);
            let pool = Pool::new(np, &cat, missing, daemons, d, min_values);
            notes.extend(pool.notes.iter().cloned());
            pools.push(pool);
        }
        Self { pools, notes }
    }
}

/// NodePool tables shared by the schedulers of one plan ([`super::Scheduler::with_shared`]): a
/// disruption search builds a scheduler for every cluster state it reaches, and the states
/// differ in nodes and pods, not in NodePools, node classes or DaemonSets. The tables are
/// built from `snapshot` (the plan's input) and given to a state only when its NodePools, node
/// classes and DaemonSets equal the input's, over the same catalog, options and resources.
#[derive(Debug)]
pub struct SharedTables<'o> {
    snapshot: &'o ClusterSnapshot,
    catalog: &'o Catalog,
    /// The tables with the resources and minValues policy they were built for.
    built: Mutex<Option<Built>>,
}

/// Shared NodePool tables, with the resources, minValues policy and NodeOverlay gate they were
/// built for.
type Built = (
    BTreeSet<String>,
    MinValuesPolicy,
    (bool, bool),
    Arc<PoolTables<'static>>,
);

// === impl SharedTables ===

impl<'o> SharedTables<'o> {
    /// Tables to be built from `snapshot`'s NodePools, node classes and DaemonSets over
    /// `catalog`.
    pub fn new(snapshot: &'o ClusterSnapshot, catalog: &'o Catalog) -> Self {
        Self {
            snapshot,
            catalog,
            built: Mutex::new(None),
        }
    }

    /// The tables for a state, shared when it has the input's NodePools, node classes and
    /// DaemonSets (and `ext`'s resources, the same policy), else its own.
    pub(super) fn get<'a>(
        &self,
        snapshot: &'a ClusterSnapshot,
        catalog: &Catalog,
        options: &PlanOptions,
        ext: BTreeSet<String>,
        daemons: &[DaemonInfo<'_>],
        d: &Dims,
    ) -> Arc<PoolTables<'a>> {
        let policy = options.min_values_policy;
        // The NodeOverlay gate, and ignoreDRARequests (which DaemonSets add overhead).
        let gate = (options.node_overlay, options.ignore_dra_requests);
        let same_input = snapshot.node_pools == self.snapshot.node_pools
            && snapshot.node_classes == self.snapshot.node_classes
            && snapshot.daemon_sets == self.snapshot.daemon_sets
            && snapshot.node_overlays == self.snapshot.node_overlays;
        if !same_input || !std::ptr::eq(catalog, self.catalog) {
            return Arc::new(PoolTables::new(snapshot, catalog, options, daemons, d));
        }
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*built {
            Some((e, p, g, tables)) if *e == ext && *p == policy && *g == gate => {
                Arc::clone(tables)
            }
            _ => {
                let tables = Arc::new(PoolTables::new(
                    self.snapshot,
                    self.catalog,
                    options,
                    daemons,
                    d,
                ));
                *built = Some((ext, policy, gate, Arc::clone(&tables)));
                tables
            }
        }
    }
}

/// The catalog as NodePools with this node class see it (kubelet settings applied).
fn for_node_class(catalog: &Catalog, class: Option<&NodeClass>) -> Catalog {
    crate::catalog::ForNodeClass::for_node_class(catalog, class)
}
