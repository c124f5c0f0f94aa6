//! Emptying cheap claims into the other claims of their NodePool, and the zone-pinned variant
//! used when topology constraints are in play.

use crate::scheduling::run::Run;

use super::buckets::Fill;
use super::claims::{claim_price, price_of};
use super::greedy::{GREEDY_GAP, greedy_pack};
use super::lp_guided::{Target, lp_pack};

/// With topology constraints in play: a claim pinned to one zone whose pods only zone-keyed
/// constraints can see (their own constraints are all zone-keyed, and every selector of a
/// constraint with another key, of any pod, matches none of them) is emptied into other claims
/// of its pool pinned to the same zone when that is cheaper. Per-zone domain counts do not
/// change when a pod moves between two nodes of the same zone, and no constraint counts these
/// pods per node, so every constraint that held still holds.
pub(super) fn empty_zoned_claims(run: &mut Run<'_, '_>) {
    let zone_key = crate::labels::ZONE;
    let s = run.s;
    // The snapshot's part is the same for every run of the scheduler.
    let base = s
        .zone_blind_selectors
        .get_or_init(|| other_keyed_selectors(s.snapshot.pods.iter()));
    let own = other_keyed_selectors(run.items.iter().map(|it| it.pod.as_ref()));
    let zone_only = |pod: &crate::model::Pod| -> bool {
        pod.topology_spread
            .iter()
            .all(|t| t.topology_key == zone_key)
            && pod
                .pod_affinity
                .iter()
                .chain(&pod.pod_anti_affinity)
                .chain(pod.preferred_pod_affinity.iter().map(|w| &w.term))
                .chain(pod.preferred_pod_anti_affinity.iter().map(|w| &w.term))
                .all(|t| t.topology_key == zone_key)
            && !base.iter().chain(&own).any(|sel| sel.matches(&pod.labels))
    };
    let movable: Vec<bool> = run.items.iter().map(|it| zone_only(&it.pod)).collect();
    let may_empty: Vec<bool> = run
        .claims
        .iter()
        .map(|c| c.pods.iter().all(|&i| movable[i as usize]))
        .collect();
    if !may_empty.iter().any(|m| *m) {
        return;
    }
    let group: Vec<Option<String>> = run
        .claims
        .iter()
        .map(|c| {
            c.reqs
                .get(zone_key)
                .and_then(|r| r.single_value())
                .map(str::to_string)
        })
        .collect();
    repack_zones(run, &may_empty, &group);
    let may_empty: Vec<bool> = run
        .claims
        .iter()
        .map(|c| c.pods.iter().all(|&i| movable[i as usize]))
        .collect();
    let group: Vec<Option<String>> = run
        .claims
        .iter()
        .map(|c| {
            c.reqs
                .get(zone_key)
                .and_then(|r| r.single_value())
                .map(str::to_string)
        })
        .collect();
    empty_claims(run, &may_empty, &group);
}

/// The selectors of the spread and (anti-)affinity terms of `pods` that count pods by
/// something other than their zone: terms on another key, and zone spreads that count only
/// pods on nodes matching their pod's node affinity (which could count a pod differently on
/// another node of the zone). Sorted, without duplicates.
fn other_keyed_selectors<'p>(
    pods: impl Iterator<Item = &'p crate::model::Pod>,
) -> Vec<crate::model::LabelSelector> {
    let zone_key = crate::labels::ZONE;
    let mut other_keyed: Vec<crate::model::LabelSelector> = Vec::new();
    for p in pods {
        let narrowed = !p.node_selector.is_empty() || !p.required_node_affinity.is_empty();
        for t in &p.topology_spread {
            if t.topology_key != zone_key
                || (narrowed && t.node_affinity_policy == crate::model::NodeInclusionPolicy::Honor)
            {
                other_keyed.extend(t.label_selector.iter().cloned());
            }
        }
        let terms = p
            .pod_affinity
            .iter()
            .chain(&p.pod_anti_affinity)
            .chain(p.preferred_pod_affinity.iter().map(|w| &w.term))
            .chain(p.preferred_pod_anti_affinity.iter().map(|w| &w.term));
        for t in terms {
            if t.topology_key != zone_key {
                other_keyed.extend(t.label_selector.iter().cloned());
            }
        }
    }
    other_keyed.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    other_keyed.dedup();
    other_keyed
}

/// Per NodePool and zone: the pods of the claims that may be emptied (see
/// [`empty_zoned_claims`]) and are pinned to that zone are re-packed onto fresh claims pinned
/// to the same zone (the cheapest of the packings, each claim rebuilt through
/// [`crate::scheduling::node_claim::Claim::check`] with the zone requirement), kept when cheaper.
fn repack_zones(run: &mut Run<'_, '_>, may_empty: &[bool], group: &[Option<String>]) {
    let mut keys: Vec<(usize, String)> = (0..run.claims.len())
        .filter(|&c| may_empty[c] && !run.claims[c].pods.is_empty())
        .filter_map(|c| group[c].clone().map(|z| (run.claims[c].pool, z)))
        .collect();
    keys.sort();
    keys.dedup();
    for (p, zone) in keys {
        // Claims added by an earlier key come after `may_empty`'s end and are left alone.
        let old: Vec<usize> = (0..may_empty.len())
            .filter(|&c| {
                may_empty[c]
                    && run.claims[c].pool == p
                    && !run.claims[c].pods.is_empty()
                    && group[c].as_deref() == Some(zone.as_str())
            })
            .collect();
        let mut items: Vec<u32> = old
            .iter()
            .flat_map(|&c| run.claims[c].pods.iter().copied())
            .collect();
        items.sort_unstable();
        let before: f64 = old.iter().map(|&c| claim_price(run, c)).sum();
        let lp = crate::scheduling::lower_bound::problem(run, &items, &[p])
            .map(|(cols, dem)| crate::scheduling::lp::covering(&cols, &dem))
            .unwrap_or(0.0);
        let left = super::limits::budget(run, p, &old);
        let mut best: Option<(f64, Vec<crate::scheduling::node_claim::Claim>)> = None;
        // The greedy (the slowest) only when the LP-guided packing leaves a gap.
        for step in 0..2 {
            let cl = if step == 0 {
                lp_pack(run, p, &items, Fill::DotProduct, Target::Most)
            } else if best.as_ref().map_or(before, |b| b.0) > lp * (1.0 + GREEDY_GAP) {
                greedy_pack(run, p, &items)
            } else {
                None
            };
            let Some(cl) = cl else { continue };
            let Some(mut pinned) = pin_to_zone(run, p, &zone, cl) else {
                continue;
            };
            if !super::limits::fit(run, p, &mut pinned, &left) {
                continue;
            }
            let after: f64 = pinned.iter().map(|c| price_of(run, c)).sum();
            if after < before - 1e-9 && best.as_ref().is_none_or(|(b, _)| after < *b - 1e-9) {
                best = Some((after, pinned));
            }
        }
        if let Some((_, new_claims)) = best {
            for &c in &old {
                run.claims[c].pods.clear();
            }
            run.claims.extend(new_claims);
        }
    }
}

/// `claims` rebuilt pinned to `zone` (types without an offering there dropped), through
/// [`crate::scheduling::node_claim::Claim::check`]; `None` when some pod no longer fits.
fn pin_to_zone(
    run: &Run<'_, '_>,
    p: usize,
    zone: &str,
    claims: Vec<crate::scheduling::node_claim::Claim>,
) -> Option<Vec<crate::scheduling::node_claim::Claim>> {
    let s = run.s;
    let pool = &s.pools[p];
    let mut pinned = Vec::with_capacity(claims.len());
    for (k, c) in claims.into_iter().enumerate() {
        let mut reqs = pool.reqs.clone();
        reqs.add(crate::requirements::Requirement::is_in(
            crate::labels::HOSTNAME,
            [format!("hostname-placeholder-zoned-{p}-{zone}-{k}")],
        ));
        reqs.add(crate::requirements::Requirement::is_in(
            crate::labels::ZONE,
            [zone.to_string()],
        ));
        let types: Vec<u32> = c
            .types
            .iter()
            .copied()
            .filter(|&t| {
                let te = &pool.types[t as usize];
                te.reqs.intersects(&reqs).is_ok() && te.cheapest_allowed(&reqs).is_some()
            })
            .collect();
        let mut nc = crate::scheduling::node_claim::Claim::new(p, pool, types, String::new());
        nc.reqs = reqs;
        for &i in &c.pods {
            let sig = run.sigs.get(run.items[i as usize].sig);
            let n = nc
                .check(pool, sig, None, s.options.min_values_policy)
                .ok()?;
            nc.commit(pool, sig, i, n);
        }
        pinned.push(nc);
    }
    Some(pinned)
}

/// For each claim, cheapest first: move all its pods onto the other claims of the same NodePool
/// when that lowers the total price (the freed claim's price exceeds the increase of the
/// receivers'). Pods never change NodePool: weights decide which pool takes a pod.
/// Only claims with `may_empty` are emptied, and only into claims of the same `group` (claims
/// with no group take part in nothing).
pub(super) fn empty_claims(run: &mut Run<'_, '_>, may_empty: &[bool], group: &[Option<String>]) {
    let mut order: Vec<usize> = (0..run.claims.len()).collect();
    let prices: Vec<f64> = order.iter().map(|&c| claim_price(run, c)).collect();
    order.sort_by(|&a, &b| prices[a].total_cmp(&prices[b]).then(a.cmp(&b)));
    let mut budget: usize = 2_000_000;
    for v in order {
        if run.is_cancelled() {
            return;
        }
        if run.claims[v].pods.is_empty() || !may_empty[v] || group[v].is_none() {
            continue;
        }
        let saved = claim_price(run, v);
        let victims = run.claims[v].pods.clone();
        let mut touched: Vec<(usize, crate::scheduling::node_claim::Claim)> = Vec::new();
        let mut ok = true;
        for &i in &victims {
            let sig_id = run.items[i as usize].sig;
            let mut placed = false;
            for c in 0..run.claims.len() {
                if c == v
                    || run.claims[c].pods.is_empty()
                    || run.claims[c].pool != run.claims[v].pool
                    || group[c] != group[v]
                {
                    continue;
                }
                if budget == 0 {
                    break;
                }
                budget -= 1;
                let pool_idx = run.claims[c].pool;
                if run.pool_fit(sig_id, pool_idx).is_err() {
                    continue;
                }
                let s = run.s;
                let pool = &s.pools[pool_idx];
                let sig = run.sigs.get(sig_id);
                if let Ok(n) = run.claims[c].check(pool, sig, None, s.options.min_values_policy) {
                    if !touched.iter().any(|(k, _)| *k == c) {
                        touched.push((c, run.claims[c].clone()));
                    }
                    run.claims[c].commit(pool, sig, i, n);
                    placed = true;
                    break;
                }
            }
            if !placed {
                ok = false;
                break;
            }
        }
        let before: f64 = saved
            + touched
                .iter()
                .map(|(_, old)| price_of(run, old))
                .sum::<f64>();
        let after: f64 = touched.iter().map(|(c, _)| claim_price(run, *c)).sum();
        if ok && after < before - 1e-9 {
            run.claims[v].pods.clear();
        } else {
            for (c, old) in touched {
                run.claims[c] = old;
            }
        }
        if budget == 0 {
            break;
        }
    }
}
