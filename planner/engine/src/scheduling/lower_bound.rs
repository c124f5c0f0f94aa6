//! A proven lower bound on the cost of new capacity: the fractional relaxation of the covering
//! problem over the pods a run placed on new claims, solved by [`super::lp`].

use std::collections::BTreeSet;

use super::dims;
use super::lp::{Column, Row, covering_rows};
use super::run::Run;

/// The lower bound for the pods a run placed on new claims: columns are every (NodePool,
/// instance type) that at least one of those pods could use on its own, holding allocatable
/// minus the pool's DaemonSet overhead, at the pool's cheapest usable offering.
pub(super) fn for_run(run: &Run<'_, '_>) -> f64 {
    let items: Vec<u32> = run
        .claims
        .iter()
        .flat_map(|c| c.pods.iter().copied())
        .collect();
    let pools: Vec<usize> = (0..run.s.pools.len()).collect();
    let Some((mut columns, demand)) = problem(run, &items, &pools) else {
        return 0.0;
    };
    // Every new node counts one towards a "nodes" row: pods that must not share a node make
    // the count a lower bound too.
    let node_slot = run.s.dims.len();
    for c in &mut columns {
        c.alloc.push(1.0);
    }
    let (min_nodes, alone) = min_new_nodes(run, &items);
    // Classes of pods by the set of NodePools they can use: the nodes holding the pods of any
    // set S of classes come from the columns some class of S can use, so for every S and
    // resource, those columns must cover the demand of S. All subsets when there are few
    // classes, else each class and the whole.
    let d = &run.s.dims;
    let mut classes: std::collections::BTreeMap<Vec<bool>, Vec<f64>> = Default::default();
    for &i in &items {
        let sig = run.items[i as usize].sig;
        let mask: Vec<bool> = pools
            .iter()
            .map(|&p| {
                run.pool_fit_cached(sig, p)
                    .cloned()
                    .unwrap_or_else(|| run.pool_fit_uncached(sig, p))
                    .is_ok()
            })
            .collect();
        let dem = classes.entry(mask).or_insert_with(|| vec![0.0; d.len()]);
        for (slot, v) in run.sigs.get(sig).requests.iter().enumerate() {
            if slot != dims::EPHEMERAL {
                dem[slot] += *v as f64;
            }
        }
    }
    let classes: Vec<(Vec<bool>, Vec<f64>)> = classes.into_iter().collect();
    let k = classes.len();
    let subsets: Vec<Vec<usize>> = if k <= 5 {
        (1..(1usize << k))
            .map(|s| (0..k).filter(|c| s & (1 << c) != 0).collect())
            .collect()
    } else {
        let mut v: Vec<Vec<usize>> = (0..k).map(|c| vec![c]).collect();
        v.push((0..k).collect());
        v
    };
    // Which pool each column belongs to.
    let mut column_pool = Vec::with_capacity(columns.len());
    for (p, n) in &column_counts(run, &items, &pools) {
        column_pool.extend(std::iter::repeat_n(*p, *n));
    }
    let mut rows = Vec::new();
    for members in subsets {
        let allowed: Vec<bool> = column_pool
            .iter()
            .map(|&p| members.iter().any(|&c| classes[c].0[p]))
            .collect();
        for r in 0..d.len() {
            let dem: f64 = members.iter().map(|&c| classes[c].1[r]).sum();
            if dem > 0.0 {
                rows.push(Row {
                    resource: r,
                    demand: dem,
                    allowed: Some(allowed.clone()),
                });
            }
        }
    }
    let _ = demand;
    if min_nodes > 1.0 {
        rows.push(Row {
            resource: node_slot,
            demand: min_nodes,
            allowed: None,
        });
    }
    covering_rows(&columns, &rows).0.max(alone)
}

/// The least number of nodes the pods `items` need whatever the packing: a pod with a required
/// hostname anti-affinity term that selects itself needs a node without another such pod, and
/// pods with a hostname spread (`DoNotSchedule`) that selects them fit at most `maxSkew` to a
/// new node (a node that could still be launched is an empty domain, so the global minimum is
/// 0). The largest such group gives the bound. Also returns, for the groups whose pods need a
/// node each (anti-affinity, `maxSkew` 1), the largest sum over a group of the cheapest type
/// each pod fits alone: a bound on cost by itself.
fn min_new_nodes(run: &Run<'_, '_>, items: &[u32]) -> (f64, f64) {
    let host = crate::labels::HOSTNAME;
    let mut groups: std::collections::BTreeMap<String, (usize, i64, f64)> = Default::default();
    for &i in items {
        let pod = &run.items[i as usize].pod;
        for t in &pod.pod_anti_affinity {
            if t.topology_key == host
                && t.namespaces.is_empty()
                && t.namespace_selector.is_none()
                && t.match_label_keys.is_empty()
                && t.mismatch_label_keys.is_empty()
                && t.label_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&pod.labels))
            {
                let e = groups
                    .entry(format!("anti {} {:?}", pod.namespace, t))
                    .or_insert((0, 1, 0.0));
                e.0 += 1;
                e.2 += cheapest_alone(run, i);
            }
        }
        for t in &pod.topology_spread {
            if t.topology_key == host
                && t.when_unsatisfiable == crate::model::WhenUnsatisfiable::DoNotSchedule
                && t.max_skew > 0
                && t.match_label_keys.is_empty()
                && t.label_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&pod.labels))
            {
                let e = groups
                    .entry(format!("spread {} {:?}", pod.namespace, t))
                    .or_insert((0, i64::from(t.max_skew), 0.0));
                e.0 += 1;
                e.2 += cheapest_alone(run, i);
            }
        }
    }
    let nodes = groups
        .values()
        .map(|(n, k, _)| (*n as i64 + k - 1) / k)
        .max()
        .unwrap_or(0) as f64;
    let alone = groups
        .values()
        .filter(|(_, k, _)| *k == 1)
        .map(|(_, _, sum)| *sum)
        .fold(0.0, f64::max);
    (nodes, alone * (1.0 - 1e-9))
}

/// The cheapest price of any type of any NodePool that item `i` fits alone (its pools' types
/// are cheapest first).
fn cheapest_alone(run: &Run<'_, '_>, i: u32) -> f64 {
    let sig = run.items[i as usize].sig;
    (0..run.s.pools.len())
        .filter_map(|p| {
            let fit = run
                .pool_fit_cached(sig, p)
                .cloned()
                .unwrap_or_else(|| run.pool_fit_uncached(sig, p))
                .ok()?;
            fit.iter()
                .map(|&t| run.s.pools[p].types[t as usize].price)
                .reduce(f64::min)
        })
        .reduce(f64::min)
        .unwrap_or(0.0)
}

/// Number of columns [`problem`] emits per pool, in order.
fn column_counts(run: &Run<'_, '_>, items: &[u32], pools: &[usize]) -> Vec<(usize, usize)> {
    let sigs: BTreeSet<u32> = items.iter().map(|&i| run.items[i as usize].sig).collect();
    pools
        .iter()
        .map(|&p| {
            let mut usable: BTreeSet<u32> = BTreeSet::new();
            for &sig in &sigs {
                if let Ok(types) = run
                    .pool_fit_cached(sig, p)
                    .cloned()
                    .unwrap_or_else(|| run.pool_fit_uncached(sig, p))
                {
                    usable.extend(types.iter().copied());
                }
            }
            (p, usable.len())
        })
        .collect()
}

/// The covering problem of `items` over the types of `pools` they can use: columns and the
/// demand per resource slot. `None` when there is nothing to cover.
pub(super) fn problem(
    run: &Run<'_, '_>,
    items: &[u32],
    pools: &[usize],
) -> Option<(Vec<Column>, Vec<f64>)> {
    let d = &run.s.dims;
    let mut demand = vec![0.0f64; d.len()];
    let mut sigs: BTreeSet<u32> = BTreeSet::new();
    for &i in items {
        let sig = run.items[i as usize].sig;
        sigs.insert(sig);
        for (slot, v) in run.sigs.get(sig).requests.iter().enumerate() {
            demand[slot] += *v as f64;
        }
    }
    if sigs.is_empty() {
        return None;
    }
    // Ephemeral storage is often unreported (unlimited); leave it out rather than guess.
    demand[dims::EPHEMERAL] = 0.0;
    let mut columns = Vec::new();
    for &p in pools {
        let pool = &run.s.pools[p];
        let mut usable: BTreeSet<u32> = BTreeSet::new();
        for &sig in &sigs {
            let fit = run
                .pool_fit_cached(sig, p)
                .cloned()
                .unwrap_or_else(|| run.pool_fit_uncached(sig, p));
            if let Ok(types) = fit {
                usable.extend(types.iter().copied());
            }
        }
        for t in usable {
            let te = &pool.types[t as usize];
            let alloc = te.free.iter().map(|a| (*a).max(0) as f64).collect();
            columns.push(Column {
                price: te.price,
                alloc,
            });
        }
    }
    Some((columns, demand))
}
