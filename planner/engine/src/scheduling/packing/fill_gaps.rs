//! With topology constraints in play: pods no constraint can see fill the room left on claims.

use crate::scheduling::run::Run;

use super::buckets::Fill;
use super::claims::{claim_price, pack, price_of};
use super::greedy::{GREEDY_GAP, greedy_pack};
use super::lp_guided::{Target, lp_pack};

/// The label selectors of a pod's spread, affinity and anti-affinity terms (required and
/// preferred).
fn pod_selectors(p: &crate::model::Pod) -> impl Iterator<Item = &crate::model::LabelSelector> {
    let spread = p
        .topology_spread
        .iter()
        .filter_map(|t| t.label_selector.as_ref());
    let required = p
        .pod_affinity
        .iter()
        .chain(&p.pod_anti_affinity)
        .filter_map(|t| t.label_selector.as_ref());
    let preferred = p
        .preferred_pod_affinity
        .iter()
        .chain(&p.preferred_pod_anti_affinity)
        .filter_map(|t| t.term.label_selector.as_ref());
    spread.chain(required).chain(preferred)
}

/// With topology constraints in play: pods that no constraint can see (no constraint of their
/// own, and matched by no selector of any pod) are taken off their claims, the claims are
/// rebuilt with the remaining pods (keeping their requirements, so topology's choices stand),
/// and the free pods go first into the room left on those claims when that costs no more than
/// their resources are worth at the LP's dual prices, the rest onto fresh claims packed like
/// [`super::repack_pool`] does. Kept only when the total price drops. Domain counts do not change,
/// since no constraint counts these pods.
pub(super) fn fill_gaps(run: &mut Run<'_, '_>) {
    let s = run.s;
    // The snapshot's selectors do not change between simulations: collected once per
    // scheduler. Only membership matters (`any` below), so order and duplicates do not.
    let base = s.snapshot_selectors.get_or_init(|| {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for p in &s.snapshot.pods {
            for sel in pod_selectors(p) {
                if seen.insert(sel) {
                    out.push(sel.clone());
                }
            }
        }
        out
    });
    let mut collected: Vec<&crate::model::LabelSelector> = Vec::new();
    for it in &run.items {
        collected.extend(pod_selectors(&it.pod));
    }
    let movable: Vec<bool> = run
        .items
        .iter()
        .map(|it| {
            // Inverse anti-affinity is covered by the selectors.
            !crate::scheduling::has_topology_constraints(&it.pod)
                && !base.iter().any(|sel| sel.matches(&it.pod.labels))
                && !collected.iter().any(|sel| sel.matches(&it.pod.labels))
        })
        .collect();
    if !movable.iter().any(|m| *m) {
        return;
    }
    let saved = run.claims.clone();
    let before: f64 = (0..run.claims.len())
        .filter(|&c| !run.claims[c].pods.is_empty())
        .map(|c| claim_price(run, c))
        .sum();
    // 1. Take the free pods off and rebuild the claims without them.
    let mut free: Vec<Vec<u32>> = vec![Vec::new(); s.pools.len()];
    for c in 0..run.claims.len() {
        if !run.claims[c].pods.iter().any(|&i| movable[i as usize]) {
            continue;
        }
        let old = run.claims[c].clone();
        let pool = &s.pools[old.pool];
        let (moved, keep): (Vec<u32>, Vec<u32>) =
            old.pods.iter().partition(|&&i| movable[i as usize]);
        free[old.pool].extend(moved);
        if keep.is_empty() {
            run.claims[c].pods.clear();
            continue;
        }
        let types: Vec<u32> = (0..pool.types.len() as u32)
            .filter(|&t| {
                let te = &pool.types[t as usize];
                te.reqs.intersects(&old.reqs).is_ok() && te.cheapest_allowed(&old.reqs).is_some()
            })
            .collect();
        let hostname = old
            .reqs
            .get(crate::labels::HOSTNAME)
            .and_then(|r| r.single_value())
            .unwrap_or_default()
            .to_string();
        let mut nc = crate::scheduling::node_claim::Claim::new(old.pool, pool, types, hostname);
        nc.reqs = old.reqs.clone();
        for i in keep {
            let sig = run.sigs.get(run.items[i as usize].sig);
            match nc.check(pool, sig, None, s.options.min_values_policy) {
                Ok(n) => nc.commit(pool, sig, i, n),
                Err(_) => {
                    run.claims = saved;
                    return;
                }
            }
        }
        run.claims[c] = nc;
    }
    // 2. Into the room left, when it costs no more than the pods are worth.
    let mut ok = true;
    for (p, items) in free.iter_mut().enumerate() {
        if items.is_empty() {
            continue;
        }
        items.sort_unstable();
        let pool = &s.pools[p];
        let prices = crate::scheduling::lower_bound::problem(run, items, &[p])
            .map(|(cols, dem)| crate::scheduling::lp::covering_with_duals(&cols, &dem).1)
            .unwrap_or_default();
        let mut cursor: std::collections::HashMap<u32, usize> = Default::default();
        let mut rest = Vec::new();
        let targets: Vec<usize> = (0..run.claims.len())
            .filter(|&c| run.claims[c].pool == p && !run.claims[c].pods.is_empty())
            .collect();
        for &i in items.iter() {
            let sig_id = run.items[i as usize].sig;
            let sig = run.sigs.get(sig_id);
            let value: f64 = sig
                .requests
                .iter()
                .zip(&prices)
                .map(|(r, y)| *r as f64 * y)
                .sum();
            let start = cursor.get(&sig_id).copied().unwrap_or(0);
            let mut placed = false;
            for (k, &c) in targets.iter().enumerate().skip(start) {
                let claim = &run.claims[c];
                if !claim.fits(sig) {
                    cursor.insert(sig_id, k + 1);
                    continue;
                }
                let Ok(n) = claim.check(pool, sig, None, s.options.min_values_policy) else {
                    cursor.insert(sig_id, k + 1);
                    continue;
                };
                let increase = n.price(pool, claim) - claim_price(run, c);
                if increase <= value + 1e-12 {
                    run.claims[c].commit(pool, sig, i, n);
                    placed = true;
                    break;
                }
                // Rooms only fill up: treat as final for this signature.
                cursor.insert(sig_id, k + 1);
            }
            if !placed {
                rest.push(i);
            }
        }
        // 3. The rest onto fresh claims, the cheapest of the packings.
        if rest.is_empty() {
            continue;
        }
        let mut order: Vec<u32> = rest.clone();
        order.sort_unstable();
        let candidates = [
            pack(run, p, order.iter().copied()),
            lp_pack(run, p, &rest, Fill::DotProduct, Target::Most),
            lp_pack(run, p, &rest, Fill::Cosine, Target::Fewest),
        ];
        let mut best = candidates
            .into_iter()
            .flatten()
            .map(|cl| (cl.iter().map(|c| price_of(run, c)).sum::<f64>(), cl))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let lp = crate::scheduling::lower_bound::problem(run, &rest, &[p])
            .map(|(cols, dem)| crate::scheduling::lp::covering(&cols, &dem))
            .unwrap_or(0.0);
        if best.as_ref().is_some_and(|b| b.0 > lp * (1.0 + GREEDY_GAP))
            && let Some(cl) = greedy_pack(run, p, &rest)
        {
            let after: f64 = cl.iter().map(|c| price_of(run, c)).sum();
            if best.as_ref().is_some_and(|b| after < b.0 - 1e-9) {
                best = Some((after, cl));
            }
        }
        match best {
            Some((_, cl)) => run.claims.extend(cl),
            None => {
                ok = false;
                break;
            }
        }
    }
    let after: f64 = (0..run.claims.len())
        .filter(|&c| !run.claims[c].pods.is_empty())
        .map(|c| claim_price(run, c))
        .sum();
    // Every pool within its limits (claims narrowed where needed), else nothing changes.
    if !ok || after >= before - 1e-9 || !(0..s.pools.len()).all(|p| super::limits::settle(run, p)) {
        run.claims = saved;
    }
}
