//! Cost improvement after the first-fit packing: moves that provably lower the price of the
//! new claims without breaking any rule. Every move is re-validated through the same fit check
//! as scheduling ([`super::node_claim::Claim::check`]).
//!
//! With topology constraints in play, only pods no constraint can see move anywhere, and pods
//! only zone-keyed constraints can see move between claims pinned to the same zone, so that no
//! domain count any constraint depends on changes.

use super::run::Run;

/// Improves the packing of `run`'s new claims in place.
pub(super) fn improve(run: &mut Run<'_, '_>) {
    if run.claims.is_empty() {
        return;
    }
    if run.s.topology_active {
        fill_gaps(run);
        empty_zoned_claims(run);
        return;
    }
    for p in 0..run.s.pools.len() {
        repack_pool(run, p);
    }
    let n = run.claims.len();
    empty_claims(run, &vec![true; n], &vec![Some(String::new()); n]);
}

/// With topology constraints in play: a claim pinned to one zone whose pods only zone-keyed
/// constraints can see (their own constraints are all zone-keyed, and every selector of a
/// constraint with another key, of any pod, matches none of them) is emptied into other claims
/// of its pool pinned to the same zone when that is cheaper. Per-zone domain counts do not
/// change when a pod moves between two nodes of the same zone, and no constraint counts these
/// pods per node, so every constraint that held still holds.
fn empty_zoned_claims(run: &mut Run<'_, '_>) {
    let zone_key = crate::labels::ZONE;
    let s = run.s;
    let mut other_keyed: Vec<crate::model::LabelSelector> = Vec::new();
    for p in s
        .snapshot
        .pods
        .iter()
        .chain(run.items.iter().map(|it| it.pod.as_ref()))
    {
        // A zone spread that counts only pods on nodes matching its pod's node affinity
        // could count a pod differently on another node of the zone.
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
            && !other_keyed.iter().any(|sel| sel.matches(&pod.labels))
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

/// Per NodePool without limits and zone: the pods of the claims that may be emptied (see
/// [`empty_zoned_claims`]) and are pinned to that zone are re-packed onto fresh claims pinned
/// to the same zone (the cheapest of the packings, each claim rebuilt through
/// [`super::node_claim::Claim::check`] with the zone requirement), kept when cheaper.
fn repack_zones(run: &mut Run<'_, '_>, may_empty: &[bool], group: &[Option<String>]) {
    let s = run.s;
    let mut keys: Vec<(usize, String)> = (0..run.claims.len())
        .filter(|&c| may_empty[c] && !run.claims[c].pods.is_empty())
        .filter_map(|c| group[c].clone().map(|z| (run.claims[c].pool, z)))
        .filter(|(p, _)| s.pools[*p].limits.is_empty())
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
        let lp = super::lower_bound::problem(run, &items, &[p])
            .map(|(cols, dem)| super::lp::covering(&cols, &dem))
            .unwrap_or(0.0);
        let mut best: Option<(f64, Vec<super::node_claim::Claim>)> = None;
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
            let Some(pinned) = pin_to_zone(run, p, &zone, cl) else {
                continue;
            };
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
/// [`super::node_claim::Claim::check`]; `None` when some pod no longer fits.
fn pin_to_zone(
    run: &Run<'_, '_>,
    p: usize,
    zone: &str,
    claims: Vec<super::node_claim::Claim>,
) -> Option<Vec<super::node_claim::Claim>> {
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
        let mut nc = super::node_claim::Claim::new(p, pool, types, String::new());
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

/// Re-packs the pods of one NodePool's claims in the order of their value under the LP's dual
/// resource prices (so that cpu-heavy and memory-heavy pods share claims instead of filling
/// claims of one shape), and keeps the result when it is cheaper. Pools with limits are left
/// alone (their accounting depends on claim order).
fn repack_pool(run: &mut Run<'_, '_>, p: usize) {
    let s = run.s;
    let pool = &s.pools[p];
    if !pool.limits.is_empty() {
        return;
    }
    let old: Vec<usize> = (0..run.claims.len())
        .filter(|&c| run.claims[c].pool == p && !run.claims[c].pods.is_empty())
        .collect();
    if old.is_empty() {
        return;
    }
    let items: Vec<u32> = old
        .iter()
        .flat_map(|&c| run.claims[c].pods.iter().copied())
        .collect();
    let Some((columns, demand)) = super::lower_bound::problem(run, &items, &[p]) else {
        return;
    };
    let (lp, prices) = super::lp::covering_with_duals(&columns, &demand);
    let value = |i: u32| -> f64 {
        let sig = run.sigs.get(run.items[i as usize].sig);
        sig.requests
            .iter()
            .zip(&prices)
            .map(|(r, y)| *r as f64 * y)
            .sum()
    };
    let mut order: Vec<(f64, u32)> = items.iter().map(|&i| (value(i), i)).collect();
    // Largest value first; ties in queue order (item index) so the result is deterministic.
    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut best: Option<(f64, Vec<super::node_claim::Claim>)> = None;
    let before: f64 = old.iter().map(|&c| claim_price(run, c)).sum();
    let candidates = [
        pack(run, p, order.iter().map(|x| x.1)),
        balanced_pack(run, p, &items),
        lp_pack(run, p, &items, Fill::DotProduct, Target::Most),
        lp_pack(run, p, &items, Fill::Cosine, Target::Most),
        lp_pack(run, p, &items, Fill::DotProduct, Target::Fewest),
        lp_pack(run, p, &items, Fill::Cosine, Target::Fewest),
    ];
    for new_claims in candidates.into_iter().flatten() {
        let after: f64 = new_claims.iter().map(|c| price_of(run, c)).sum();
        if after < before - 1e-9 && best.as_ref().is_none_or(|(b, _)| after < *b - 1e-9) {
            best = Some((after, new_claims));
        }
    }
    // The greedy is the slowest: only when the others leave a gap to the fractional optimum.
    let so_far = best.as_ref().map_or(before, |b| b.0);
    if so_far > lp * (1.0 + GREEDY_GAP)
        && let Some(new_claims) = greedy_pack(run, p, &items)
    {
        let after: f64 = new_claims.iter().map(|c| price_of(run, c)).sum();
        if after < so_far - 1e-9 {
            best = Some((after, new_claims));
        }
    }
    if let Some((_, new_claims)) = best {
        for &c in &old {
            run.claims[c].pods.clear();
        }
        run.claims.extend(new_claims);
    }
}

/// Most distinct signatures [`balanced_pack`] works with (it scores every signature for every
/// pod it adds).
const BALANCED_MAX_SIGNATURES: usize = 512;

/// Packs claims one at a time so that each takes about the same share of every resource of
/// the pods left: the next pod is the one that best fills the claim's most lagging resources
/// (largest `Σ_r share_r × deficit_r`), or the largest pod when the claim is balanced. Each
/// claim then looks like the whole workload, and its cheapest type is the one with the best
/// price for that mix. `None` when some pod fits nowhere or there are too many signatures.
fn balanced_pack(
    run: &mut Run<'_, '_>,
    p: usize,
    items: &[u32],
) -> Option<Vec<super::node_claim::Claim>> {
    let s = run.s;
    let pool = &s.pools[p];
    // Buckets are stacks: pop from the end (each is reversed, queue order first).
    let Buckets {
        mut buckets,
        fit_list: fit,
        ..
    } = Buckets::new(run, p, items)?;
    let run: &Run<'_, '_> = run;
    let nd = s.dims.len();
    let slots: Vec<usize> = (0..nd).filter(|&r| r != super::dims::EPHEMERAL).collect();
    let mut remaining = vec![0.0f64; nd];
    for (sig, v) in &buckets {
        for &r in &slots {
            remaining[r] += run.sigs.get(*sig).requests[r] as f64 * v.len() as f64;
        }
    }
    let mut claims = Vec::new();
    let mut left: usize = items.len();
    while left > 0 {
        // Shares are relative to what is left when the claim opens.
        let base: Vec<f64> = remaining.clone();
        let share = |sig: u32, r: usize| -> f64 {
            if base[r] > 0.0 {
                run.sigs.get(sig).requests[r] as f64 / base[r]
            } else {
                0.0
            }
        };
        // Seed: the largest pod left.
        let seed_b = (0..buckets.len())
            .filter(|&b| !buckets[b].1.is_empty())
            .max_by(|&a, &b| {
                let sa: f64 = slots.iter().map(|&r| share(buckets[a].0, r)).sum();
                let sb: f64 = slots.iter().map(|&r| share(buckets[b].0, r)).sum();
                sa.total_cmp(&sb).then(b.cmp(&a))
            })?;
        let mut claim = super::node_claim::Claim::new(
            p,
            pool,
            fit[seed_b].to_vec(),
            format!("hostname-placeholder-balanced-{}", claims.len()),
        );
        let mut blocked = vec![false; buckets.len()];
        let mut level = vec![0.0f64; nd];
        let mut next = Some(seed_b);
        while let Some(b) = next {
            let sig_id = buckets[b].0;
            let sig = run.sigs.get(sig_id);
            match claim.check(pool, sig, None, s.options.min_values_policy) {
                Ok(n) => {
                    let i = buckets[b].1.pop()?;
                    claim.commit(pool, sig, i, n);
                    left -= 1;
                    for &r in &slots {
                        level[r] += share(sig_id, r);
                        remaining[r] -= sig.requests[r] as f64;
                    }
                }
                _ => {
                    if claim.pods.is_empty() {
                        return None;
                    }
                    blocked[b] = true;
                }
            }
            let top = slots.iter().map(|&r| level[r]).fold(0.0, f64::max);
            let mut best: Option<(f64, f64, usize)> = None;
            for (k, (sig, v)) in buckets.iter().enumerate() {
                if v.is_empty() || blocked[k] {
                    continue;
                }
                let fill: f64 = slots
                    .iter()
                    .map(|&r| share(*sig, r) * (top - level[r]))
                    .sum();
                let size: f64 = slots.iter().map(|&r| share(*sig, r)).sum();
                let better = match best {
                    None => true,
                    Some((bf, bs, _)) => fill > bf + 1e-15 || (fill >= bf - 1e-15 && size > bs),
                };
                if better {
                    best = Some((fill, size, k));
                }
            }
            next = best.map(|x| x.2);
        }
        claims.push(claim);
    }
    Some(claims)
}

/// First-fit packing of `items` onto fresh claims of pool `p`, in the given order, through the
/// same checks as scheduling. `None` when some item fits nowhere.
fn pack(
    run: &mut Run<'_, '_>,
    p: usize,
    items: impl Iterator<Item = u32>,
) -> Option<Vec<super::node_claim::Claim>> {
    let s = run.s;
    let pool = &s.pools[p];
    let mut claims: Vec<super::node_claim::Claim> = Vec::new();
    // Per signature: first claim that has not rejected it (claims only fill up).
    let mut cursor: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for i in items {
        let sig_id = run.items[i as usize].sig;
        let types = run.pool_fit(sig_id, p).ok()?;
        let sig = run.sigs.get(sig_id);
        let start = cursor.get(&sig_id).copied().unwrap_or(0);
        let mut placed = false;
        let mut advance = true;
        for (c, claim) in claims.iter_mut().enumerate().skip(start) {
            match claim.check(pool, sig, None, s.options.min_values_policy) {
                Ok(n) => {
                    claim.commit(pool, sig, i, n);
                    placed = true;
                    break;
                }
                Err(r) => {
                    if r.permanent && advance {
                        cursor.insert(sig_id, c + 1);
                    } else {
                        advance = false;
                    }
                }
            }
        }
        if !placed {
            let mut claim = super::node_claim::Claim::new(
                p,
                pool,
                types.to_vec(),
                format!("hostname-placeholder-repack-{}", claims.len()),
            );
            let n = claim
                .check(pool, sig, None, s.options.min_values_policy)
                .ok()?;
            claim.commit(pool, sig, i, n);
            claims.push(claim);
        }
    }
    Some(claims)
}

/// The price of a claim: its cheapest remaining type's cheapest allowed offering.
pub(super) fn claim_price(run: &Run<'_, '_>, c: usize) -> f64 {
    price_of(run, &run.claims[c])
}

/// For each claim, cheapest first: move all its pods onto the other claims of the same NodePool
/// when that lowers the total price (the freed claim's price exceeds the increase of the
/// receivers'). Pods never change NodePool: weights decide which pool takes a pod.
/// Only claims with `may_empty` are emptied, and only into claims of the same `group` (claims
/// with no group take part in nothing).
fn empty_claims(run: &mut Run<'_, '_>, may_empty: &[bool], group: &[Option<String>]) {
    let mut order: Vec<usize> = (0..run.claims.len()).collect();
    let prices: Vec<f64> = order.iter().map(|&c| claim_price(run, c)).collect();
    order.sort_by(|&a, &b| prices[a].total_cmp(&prices[b]).then(a.cmp(&b)));
    let mut budget: usize = 2_000_000;
    for v in order {
        if run.claims[v].pods.is_empty() || !may_empty[v] || group[v].is_none() {
            continue;
        }
        let saved = claim_price(run, v);
        let victims = run.claims[v].pods.clone();
        let mut touched: Vec<(usize, super::node_claim::Claim)> = Vec::new();
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

fn price_of(run: &Run<'_, '_>, claim: &super::node_claim::Claim) -> f64 {
    run.s.pools[claim.pool].price_of(&claim.reqs, &claim.types)
}

/// How [`lp_pack`] picks the next pod for a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    /// Largest `Σ_r share_r × free_r` (big pods that use the free room).
    DotProduct,
    /// Best aligned with the free room (cosine, rounded), then largest.
    Cosine,
}

/// Which of the fractional optimum's types [`lp_pack`] opens next (among those it uses at
/// least once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// The type it uses most.
    Most,
    /// The type it uses least: the minority shape gets the pods that fit it best first.
    Fewest,
}

/// The pods of one re-pack grouped by signature (largest index first within a bucket), with
/// the pool's instance types each signature fits, as a mask and as a list, and which types any
/// of them fits. `None` when some pod fits nowhere or there are too many signatures.
struct Buckets {
    buckets: Vec<(u32, Vec<u32>)>,
    fit: Vec<Vec<bool>>,
    fit_list: Vec<std::rc::Rc<[u32]>>,
    usable: Vec<bool>,
}

// === impl Buckets ===

impl Buckets {
    fn new(run: &mut Run<'_, '_>, p: usize, items: &[u32]) -> Option<Self> {
        let pool = &run.s.pools[p];
        let mut grouped: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for &i in items {
            grouped
                .entry(run.items[i as usize].sig)
                .or_default()
                .push(i);
        }
        if grouped.len() > BALANCED_MAX_SIGNATURES {
            return None;
        }
        let buckets: Vec<(u32, Vec<u32>)> = grouped
            .into_iter()
            .map(|(sig, mut v)| {
                v.sort_unstable();
                v.reverse();
                (sig, v)
            })
            .collect();
        let mut fit = Vec::with_capacity(buckets.len());
        let mut fit_list = Vec::with_capacity(buckets.len());
        let mut usable = vec![false; pool.types.len()];
        for (sig, _) in &buckets {
            let types = run.pool_fit(*sig, p).ok()?;
            let mut mask = vec![false; pool.types.len()];
            for &t in types.iter() {
                mask[t as usize] = true;
                usable[t as usize] = true;
            }
            fit.push(mask);
            fit_list.push(types);
        }
        Some(Self {
            buckets,
            fit,
            fit_list,
            usable,
        })
    }
}

/// Packs claims shaped like the fractional optimum: the LP over the pods left says which
/// instance types the cheapest fractional fleet uses; a claim of one of them (see [`Target`])
/// is opened and filled with the pods that best match its shape (see [`Fill`]: the "dot
/// product" rule of vector bin packing, or the best-aligned pod). When the
/// optimum needs less than one node of any type, the claim may use every type and ends on the
/// cheapest that fits. Finally every claim is widened to all the types that fit its pods, so
/// its price is the cheapest that holds them. `None` when some pod fits nowhere or there are
/// too many signatures.
fn lp_pack(
    run: &mut Run<'_, '_>,
    p: usize,
    items: &[u32],
    fill: Fill,
    target: Target,
) -> Option<Vec<super::node_claim::Claim>> {
    let s = run.s;
    let pool = &s.pools[p];
    let Buckets {
        mut buckets,
        fit,
        fit_list,
        usable,
    } = Buckets::new(run, p, items)?;
    let run: &Run<'_, '_> = run;
    let nd = s.dims.len();
    let slots: Vec<usize> = (0..nd).filter(|&r| r != super::dims::EPHEMERAL).collect();
    let col_types: Vec<usize> = (0..pool.types.len()).filter(|&t| usable[t]).collect();
    let columns: Vec<super::lp::Column> = col_types
        .iter()
        .map(|&t| super::lp::Column {
            price: pool.types[t].price,
            alloc: pool.types[t]
                .free
                .iter()
                .map(|a| (*a).max(0) as f64)
                .collect(),
        })
        .collect();
    let mut left: usize = items.len();
    let mut claims = Vec::new();
    let mut lp_budget: usize = 200;
    let mut x: Vec<f64> = Vec::new();
    while left > 0 {
        // The type the fractional optimum of what is left uses most.
        if lp_budget > 0 || x.is_empty() {
            let mut demand = vec![0.0f64; nd];
            for (sig, v) in &buckets {
                for &r in &slots {
                    demand[r] += run.sigs.get(*sig).requests[r] as f64 * v.len() as f64;
                }
            }
            x = super::lp::covering_primal(&columns, &demand).1;
            lp_budget = lp_budget.saturating_sub(1);
        }
        let target = (0..x.len())
            .filter(|&j| x[j] >= 1.0 - 1e-9)
            .max_by(|&a, &b| match target {
                Target::Most => x[a].total_cmp(&x[b]).then(b.cmp(&a)),
                Target::Fewest => x[b].total_cmp(&x[a]).then(b.cmp(&a)),
            })
            .map(|j| col_types[j]);
        // Capacity the pods may use, per slot, on the target (or the largest type).
        let mut cap: Vec<f64> = vec![0.0; nd];
        match target {
            Some(t) => {
                for &r in &slots {
                    cap[r] = pool.types[t].free[r].max(0) as f64;
                }
            }
            None => {
                for &t in &col_types {
                    for &r in &slots {
                        cap[r] = cap[r].max(pool.types[t].free[r].max(0) as f64);
                    }
                }
            }
        }
        let allowed = |b: usize| target.is_none_or(|t| fit[b][t]);
        let score = |sig: u32, used: &[i64]| -> f64 {
            let req = &run.sigs.get(sig).requests;
            let (mut dot, mut nq, mut nr, mut size) = (0.0, 0.0, 0.0, 0.0f64);
            for &r in slots.iter().filter(|&&r| cap[r] > 0.0) {
                let q = req[r] as f64 / cap[r];
                let free = (cap[r] - used[r] as f64) / cap[r];
                dot += q * free;
                nq += q * q;
                nr += free * free;
                size = size.max(q);
            }
            match fill {
                Fill::DotProduct => dot,
                // Direction first (the pod that points where the claim has room), then size.
                Fill::Cosine => {
                    let cos = if nq > 0.0 && nr > 0.0 {
                        dot / (nq.sqrt() * nr.sqrt())
                    } else {
                        0.0
                    };
                    (cos * 1e3).round() + size
                }
            }
        };
        let zero = s.dims.zero();
        let Some(seed) = (0..buckets.len())
            .filter(|&b| !buckets[b].1.is_empty() && allowed(b))
            .max_by(|&a, &b| {
                score(buckets[a].0, &zero)
                    .total_cmp(&score(buckets[b].0, &zero))
                    .then(b.cmp(&a))
            })
        else {
            // No pod may use the target type: drop it and retry with every type.
            if let Some(t) = target
                && let Some(j) = col_types.iter().position(|&c| c == t)
            {
                x[j] = 0.0;
                continue;
            }
            return None;
        };
        let types: Vec<u32> = match target {
            Some(t) => vec![t as u32],
            None => fit_list[seed].to_vec(),
        };
        let mut claim = super::node_claim::Claim::new(
            p,
            pool,
            types,
            format!("hostname-placeholder-lp-{}", claims.len()),
        );
        let mut blocked = vec![false; buckets.len()];
        let mut next = Some(seed);
        while let Some(b) = next {
            let sig_id = buckets[b].0;
            let sig = run.sigs.get(sig_id);
            match claim.check(pool, sig, None, s.options.min_values_policy) {
                Ok(n) => {
                    let i = buckets[b].1.pop()?;
                    claim.commit(pool, sig, i, n);
                    left -= 1;
                }
                Err(_) => {
                    if claim.pods.is_empty() {
                        return None;
                    }
                    blocked[b] = true;
                }
            }
            let mut best: Option<(f64, usize)> = None;
            for (k, (sig, v)) in buckets.iter().enumerate() {
                if v.is_empty() || blocked[k] || !allowed(k) {
                    continue;
                }
                let sc = score(*sig, &claim.used);
                if best.is_none_or(|(bs, _)| sc > bs + 1e-15) {
                    best = Some((sc, k));
                }
            }
            next = best.map(|x| x.1);
        }
        // The LP's count for the target drops by the node just built.
        if let Some(t) = target
            && let Some(j) = col_types.iter().position(|&c| c == t)
        {
            x[j] -= 1.0;
        }
        claims.push(claim);
    }
    widen(run, p, &buckets, &fit_list, claims, "lp")
}

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
/// [`repack_pool`] does. Kept only when the total price drops. Domain counts do not change,
/// since no constraint counts these pods.
fn fill_gaps(run: &mut Run<'_, '_>) {
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
            !super::has_topology_constraints(&it.pod)
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
        // Pools with limits keep their claims (their accounting depends on claim order).
        if !run.claims[c].pods.iter().any(|&i| movable[i as usize])
            || !s.pools[run.claims[c].pool].limits.is_empty()
        {
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
        let mut nc = super::node_claim::Claim::new(old.pool, pool, types, hostname);
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
        let prices = super::lower_bound::problem(run, items, &[p])
            .map(|(cols, dem)| super::lp::covering_with_duals(&cols, &dem).1)
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
        let lp = super::lower_bound::problem(run, &rest, &[p])
            .map(|(cols, dem)| super::lp::covering(&cols, &dem))
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
    if !ok || after >= before - 1e-9 {
        run.claims = saved;
    }
}

/// [`greedy_pack`] runs only when the best packing so far costs more than the fractional
/// optimum by this share.
const GREEDY_GAP: f64 = 0.005;

/// Most types [`greedy_pack`] fills in trial per claim before it settles for the best so far.
const GREEDY_MAX_TRIALS: usize = 64;

/// Greedy by value for money: each new claim is the instance type, filled in trial with the
/// pods left that best use its free room (the "dot product" rule, or the best-aligned pod; see
/// [`Fill`]; only resources the LP prices steer the fill), whose pods are worth the
/// most at the LP's dual resource prices per dollar of its price. Dual prices are those of the
/// covering LP over the pods left, so a type in the cheapest fractional fleet filled to the
/// brim is worth its price, a big type at the tail (few pods left) is worth little, and the
/// tail ends on small types. Types are tried in the order of the most their price could buy
/// (their free room capped at the demand left, at dual prices), and the search stops when no
/// type left can beat the best fill; the chosen claim (type and pods per signature) repeats while
/// its pods last. The trial is arithmetic only; the claim is then built
/// through [`super::node_claim::Claim::check`] (a pod it rejects waits for a later claim) and
/// finally widened to every type that fits its pods. `None` when some pod fits nowhere or
/// there are too many signatures.
fn greedy_pack(
    run: &mut Run<'_, '_>,
    p: usize,
    items: &[u32],
) -> Option<Vec<super::node_claim::Claim>> {
    let s = run.s;
    let pool = &s.pools[p];
    let Buckets {
        mut buckets,
        fit,
        fit_list,
        usable,
    } = Buckets::new(run, p, items)?;
    let run: &Run<'_, '_> = run;
    let nd = s.dims.len();
    let slots: Vec<usize> = (0..nd).filter(|&r| r != super::dims::EPHEMERAL).collect();
    let col_types: Vec<usize> = (0..pool.types.len())
        .filter(|&t| usable[t] && pool.types[t].price > 0.0)
        .collect();
    let columns: Vec<super::lp::Column> = col_types
        .iter()
        .map(|&t| super::lp::Column {
            price: pool.types[t].price,
            alloc: pool.types[t]
                .free
                .iter()
                .map(|a| (*a).max(0) as f64)
                .collect(),
        })
        .collect();
    let sig_of: Vec<u32> = buckets.iter().map(|(sig, _)| *sig).collect();
    let req = |b: usize| -> &[i64] { &run.sigs.get(sig_of[b]).requests };
    let mut left: usize = items.len();
    let mut claims = Vec::new();
    let mut lp_budget: usize = 200;
    let mut duals: Vec<f64> = Vec::new();
    // Trial fill state, reused.
    let mut counts = vec![0usize; buckets.len()];
    let mut used = vec![0i64; nd];
    let mut best_counts = vec![0usize; buckets.len()];
    // The last claim's type and pods per bucket: repeated while the pods last.
    let mut last: Option<usize> = None;
    while left > 0 {
        if let Some(t) = last
            && best_counts
                .iter()
                .zip(&buckets)
                .all(|(k, (_, v))| *k <= v.len())
        {
            let claim = greedy_claim(run, p, t, &mut buckets, &best_counts, claims.len())?;
            left -= claim.pods.len();
            claims.push(claim);
            continue;
        }
        let mut demand = vec![0.0f64; nd];
        for (b, (_, v)) in buckets.iter().enumerate() {
            for &r in &slots {
                demand[r] += req(b)[r] as f64 * v.len() as f64;
            }
        }
        if lp_budget > 0 || duals.is_empty() {
            duals = super::lp::covering_with_duals(&columns, &demand).1;
            lp_budget = lp_budget.saturating_sub(1);
        }
        let priced: Vec<usize> = slots.iter().copied().filter(|&r| duals[r] > 0.0).collect();
        let value: Vec<f64> = (0..buckets.len())
            .map(|b| slots.iter().map(|&r| req(b)[r] as f64 * duals[r]).sum())
            .collect();
        // The most each type's price could buy, per dollar.
        let mut order: Vec<(f64, usize)> = col_types
            .iter()
            .map(|&t| {
                let te = &pool.types[t];
                let ub: f64 = slots
                    .iter()
                    .map(|&r| (te.free[r].max(0) as f64).min(demand[r]) * duals[r])
                    .sum();
                (ub / te.price, t)
            })
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut best: Option<(f64, usize)> = None;
        for &(ub, t) in order.iter().take(GREEDY_MAX_TRIALS) {
            if best.is_some_and(|(r, _)| ub <= r + 1e-12) {
                break;
            }
            let te = &pool.types[t];
            for fill in [Fill::DotProduct, Fill::Cosine] {
                counts.iter_mut().for_each(|c| *c = 0);
                used.iter_mut().for_each(|u| *u = 0);
                let mut worth = 0.0;
                loop {
                    let mut pick: Option<(f64, usize)> = None;
                    for (b, (_, v)) in buckets.iter().enumerate() {
                        if counts[b] >= v.len() || !fit[b][t] {
                            continue;
                        }
                        let q = req(b);
                        if !slots.iter().all(|&r| used[r] + q[r] <= te.free[r]) {
                            continue;
                        }
                        // Only resources with a price steer the fill: the others are slack
                        // in the cheapest fractional fleet.
                        let (mut dot, mut nq, mut nf, mut size) = (0.0, 0.0, 0.0, 0.0f64);
                        for &r in &priced {
                            if te.free[r] > 0 {
                                let cap = te.free[r] as f64;
                                let qr = q[r] as f64 / cap;
                                let free = (cap - used[r] as f64) / cap;
                                dot += qr * free;
                                nq += qr * qr;
                                nf += free * free;
                                size = size.max(qr);
                            }
                        }
                        let score = match fill {
                            Fill::DotProduct => dot,
                            Fill::Cosine => {
                                let cos = if nq > 0.0 && nf > 0.0 {
                                    dot / (nq.sqrt() * nf.sqrt())
                                } else {
                                    0.0
                                };
                                (cos * 1e3).round() + size
                            }
                        };
                        if pick.is_none_or(|(d, _)| score > d + 1e-15) {
                            pick = Some((score, b));
                        }
                    }
                    let Some((_, b)) = pick else { break };
                    counts[b] += 1;
                    worth += value[b];
                    for &r in &slots {
                        used[r] += req(b)[r];
                    }
                }
                let ratio = worth / te.price;
                if worth > 0.0 && best.is_none_or(|(r, _)| ratio > r + 1e-12) {
                    best = Some((ratio, t));
                    best_counts.copy_from_slice(&counts);
                }
            }
        }
        let (_, t) = best?;
        last = Some(t);
        let claim = greedy_claim(run, p, t, &mut buckets, &best_counts, claims.len())?;
        left -= claim.pods.len();
        claims.push(claim);
    }
    widen(run, p, &buckets, &fit_list, claims, "greedy")
}

/// A claim of type `t` of pool `p` with `counts[b]` pods of each bucket (taken off the
/// buckets), through [`super::node_claim::Claim::check`]: a pod it rejects stays in its
/// bucket. `None` when it takes no pod.
fn greedy_claim(
    run: &Run<'_, '_>,
    p: usize,
    t: usize,
    buckets: &mut [(u32, Vec<u32>)],
    counts: &[usize],
    k: usize,
) -> Option<super::node_claim::Claim> {
    let s = run.s;
    let pool = &s.pools[p];
    let mut claim = super::node_claim::Claim::new(
        p,
        pool,
        vec![t as u32],
        format!("hostname-placeholder-greedy-{k}"),
    );
    for (b, &n) in counts.iter().enumerate() {
        let sig = run.sigs.get(buckets[b].0);
        for _ in 0..n {
            match claim.check(pool, sig, None, s.options.min_values_policy) {
                Ok(nw) => {
                    let i = buckets[b].1.pop()?;
                    claim.commit(pool, sig, i, nw);
                }
                Err(_) => break,
            }
        }
    }
    (!claim.pods.is_empty()).then_some(claim)
}

/// Rebuilds every claim with all the types of its first pod's signature that hold its pods,
/// so that its price is the cheapest that holds them (the claim is kept as it is when the
/// rebuild fails).
fn widen(
    run: &Run<'_, '_>,
    p: usize,
    buckets: &[(u32, Vec<u32>)],
    fit_list: &[std::rc::Rc<[u32]>],
    claims: Vec<super::node_claim::Claim>,
    prefix: &str,
) -> Option<Vec<super::node_claim::Claim>> {
    let s = run.s;
    let pool = &s.pools[p];
    let mut out = Vec::with_capacity(claims.len());
    for (k, c) in claims.into_iter().enumerate() {
        let first_sig = run.items[*c.pods.first()? as usize].sig;
        let b = buckets.iter().position(|(sig, _)| *sig == first_sig)?;
        let mut wide = super::node_claim::Claim::new(
            p,
            pool,
            fit_list[b].to_vec(),
            format!("hostname-placeholder-{prefix}-{k}"),
        );
        let mut ok = true;
        for &i in &c.pods {
            let sig = run.sigs.get(run.items[i as usize].sig);
            match wide.check(pool, sig, None, s.options.min_values_policy) {
                Ok(n) => wide.commit(pool, sig, i, n),
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        out.push(if ok { wide } else { c });
    }
    Some(out)
}
