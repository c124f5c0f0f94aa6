//! NodePool limits during cost improvement: a re-packing of a pool with `spec.limits` is kept
//! only when the pool stays within its limits, counted as Karpenter counts them (each claim on
//! the capacity of its largest remaining type, existing nodes on their capacity). Where a limit
//! binds, [`place_within`] places as many pods as the limits allow.

use std::collections::BTreeSet;

use crate::scheduling::dims;
use crate::scheduling::node_claim::Claim;
use crate::scheduling::pools::Pool;
use crate::scheduling::run::Run;

/// Rounds of [`place_within`]'s narrow-and-retry: each round can only place pods that the
/// previous round's new claims left room for, so few rounds gain anything.
const RETRY_ROUNDS: usize = 4;

/// What pool `p` has left under each of its limits, `(slot, amount)`: the limit minus the
/// capacity of the pool's existing nodes and of its non-empty claims other than `skip`.
pub(super) fn budget(run: &Run<'_, '_>, p: usize, skip: &[usize]) -> Vec<(usize, i64)> {
    let pool = &run.s.pools[p];
    let mut left = pool.limits.clone();
    if left.is_empty() {
        // No limits: nothing to count.
        return left;
    }
    for n in run.existing.iter().map(|t| t.node) {
        if n.pool.as_deref() == Some(pool.name()) {
            for (slot, l) in &mut left {
                *l -= n.capacity[*slot];
            }
        }
    }
    for (c, claim) in run.claims.iter().enumerate() {
        if claim.pool == p && !claim.pods.is_empty() && !skip.contains(&c) {
            let cap = counted(run, claim);
            for (slot, l) in &mut left {
                *l -= cap[*slot];
            }
        }
    }
    left
}

/// The capacity a claim counts against its pool's limits: the slot-wise largest capacity of
/// its remaining types.
fn counted(run: &Run<'_, '_>, claim: &Claim) -> dims::Vector {
    let pool = &run.s.pools[claim.pool];
    let mut cap = run.s.dims.zero();
    for &t in &claim.types {
        dims::max_in(&mut cap, &pool.types[t as usize].capacity);
    }
    cap
}

/// Whether `claims` (fresh claims of pool `p`) fit in `left`. When they do not as they are,
/// each claim without minValues is narrowed to the types no larger, in every limited resource,
/// than its cheapest type (its price does not change), and the claims are counted again.
pub(super) fn fit(
    run: &Run<'_, '_>,
    p: usize,
    claims: &mut [Claim],
    left: &[(usize, i64)],
) -> bool {
    if left.is_empty() {
        return true;
    }
    let within = |claims: &[Claim]| {
        let mut used = vec![0i64; left.len()];
        for c in claims {
            let cap = counted(run, c);
            for (u, (slot, _)) in used.iter_mut().zip(left) {
                *u += cap[*slot];
            }
        }
        used.iter().zip(left).all(|(u, (_, l))| u <= l)
    };
    if within(claims) {
        return true;
    }
    let pool = &run.s.pools[p];
    for c in claims.iter_mut() {
        narrow(pool, c, left);
    }
    within(claims)
}

/// Narrows claim `c` (unless it has minValues) to the types no larger, in every slot of `left`,
/// than its cheapest type: its price does not change and it counts no more than that type
/// against its pool's limits.
fn narrow(pool: &Pool<'_>, c: &mut Claim, left: &[(usize, i64)]) {
    if c.reqs.iter().any(|r| r.min_values().is_some()) || c.types.len() < 2 {
        return;
    }
    let Some(&cheapest) = c.types.iter().min_by(|&&a, &&b| {
        pool.price_of(&c.reqs, &[a])
            .total_cmp(&pool.price_of(&c.reqs, &[b]))
    }) else {
        return;
    };
    let top = pool.types[cheapest as usize].capacity.clone();
    let keep: Vec<u32> = c
        .types
        .iter()
        .copied()
        .filter(|&t| {
            let cap = &pool.types[t as usize].capacity;
            left.iter().all(|(slot, _)| cap[*slot] <= top[*slot])
        })
        .collect();
    if keep.len() != c.types.len() {
        c.set_types(pool, keep);
    }
}

/// Whether pool `p`'s claims in `run` keep it within its limits, after narrowing them as
/// [`fit`] does when they do not as they are.
pub(super) fn settle(run: &mut Run<'_, '_>, p: usize) -> bool {
    if run.s.pools[p].limits.is_empty() {
        return true;
    }
    let mine: Vec<usize> = (0..run.claims.len())
        .filter(|&c| run.claims[c].pool == p && !run.claims[c].pods.is_empty())
        .collect();
    let left = budget(run, p, &mine);
    let mut claims: Vec<Claim> = mine.iter().map(|&c| run.claims[c].clone()).collect();
    let ok = fit(run, p, &mut claims, &left);
    for (&c, claim) in mine.iter().zip(claims) {
        run.claims[c] = claim;
    }
    ok
}

/// Where a NodePool limit binds (pods are left unschedulable), places as many pods as the
/// limits allow, cheapest first:
/// - without topology constraints, each limited pool's placed pods and the unschedulable pods it
///   could take are packed again smallest share of the limit first, and the longest prefix of
///   that order that fits within the limits replaces the pool's claims when it places more
///   pods (then re-packed for cost);
/// - then every limited pool's claims are narrowed to types no larger than their cheapest (a
///   claim counts its largest type against the limits, as Karpenter counts it) and the
///   unschedulable pods are placed again with the room that frees, for a few rounds.
pub(in crate::scheduling) fn place_within(run: &mut Run<'_, '_>) {
    if run.unschedulable.is_empty()
        || run.s.pools.iter().all(|p| p.limits.is_empty())
        || run.is_cancelled()
    {
        return;
    }
    if !run.s.topology_active {
        for p in 0..run.s.pools.len() {
            if run.is_cancelled() {
                return;
            }
            if !run.s.pools[p].limits.is_empty() && !run.unschedulable.is_empty() {
                smallest_first(run, p);
            }
        }
    }
    run.drop_empty_claims();
    for _ in 0..RETRY_ROUNDS {
        if run.unschedulable.is_empty() || run.is_cancelled() {
            break;
        }
        for p in 0..run.s.pools.len() {
            if run.s.pools[p].limits.is_empty() {
                continue;
            }
            let pool = &run.s.pools[p];
            let slots = pool.limits.clone();
            for c in 0..run.claims.len() {
                if run.claims[c].pool == p && !run.claims[c].pods.is_empty() {
                    narrow(pool, &mut run.claims[c], &slots);
                }
            }
            run.remaining[p] = budget(run, p, &[]);
        }
        let blocked = std::mem::take(&mut run.unschedulable);
        let mut placed = false;
        for (i, reason) in blocked {
            match run.add(i) {
                Ok(()) => placed = true,
                Err(again) => run
                    .unschedulable
                    .push((i, if again.is_empty() { reason } else { again })),
            }
        }
        if !placed {
            break;
        }
    }
}

/// The smallest-share-first re-pack of limited pool `p` (see [`place_within`]).
fn smallest_first(run: &mut Run<'_, '_>, p: usize) {
    let old: Vec<usize> = (0..run.claims.len())
        .filter(|&c| run.claims[c].pool == p && !run.claims[c].pods.is_empty())
        .collect();
    let mut blocked: Vec<u32> = Vec::new();
    for k in 0..run.unschedulable.len() {
        let i = run.unschedulable[k].0;
        let sig = run.items[i as usize].sig;
        // A pod refused for its DRA requests stays refused (crate::dra).
        let refused = crate::dra::refusal(&run.items[i as usize].pod, run.s.options).is_some();
        if !refused && run.sigs.get(sig).invalid.is_none() && run.pool_fit(sig, p).is_ok() {
            blocked.push(i);
        }
    }
    if blocked.is_empty() {
        return;
    }
    let placed_now: usize = old.iter().map(|&c| run.claims[c].pods.len()).sum();
    let left = budget(run, p, &old);
    let limits = run.s.pools[p].limits.clone();
    // A pod's share of the limits: what it takes of each limited resource, relative to the
    // limit (the node count is no pod's share).
    let share = |i: u32| -> f64 {
        let req = &run.sigs.get(run.items[i as usize].sig).requests;
        limits
            .iter()
            .map(|(slot, l)| req[*slot] as f64 / (*l).max(1) as f64)
            .sum()
    };
    let mut order: Vec<(f64, u32)> = old
        .iter()
        .flat_map(|&c| run.claims[c].pods.iter().copied())
        .chain(blocked)
        .map(|i| (share(i), i))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let order: Vec<u32> = order.into_iter().map(|x| x.1).collect();
    let (mut new_claims, placed) = limit_pack(run, p, &order, &left);
    if placed.len() <= placed_now || !fit(run, p, &mut new_claims, &left) {
        return;
    }
    for &c in &old {
        run.claims[c].pods.clear();
    }
    run.claims.extend(new_claims);
    let dropped: Vec<u32> = order
        .iter()
        .copied()
        .filter(|i| !placed.contains(i) && !run.unschedulable.iter().any(|(u, _)| u == i))
        .collect();
    run.unschedulable.retain(|(i, _)| !placed.contains(i));
    let reason = over_limits(run, p);
    run.unschedulable
        .extend(dropped.into_iter().map(|i| (i, reason.clone())));
    run.unschedulable.sort_by_key(|(i, _)| *i);
    super::repack_pool(run, p);
}

/// Packs `order` onto fresh claims of pool `p` within `left`, each pod where it adds the least
/// to what the claims count against the limits (a claim counts its cheapest type, to which it is
/// narrowed), an open claim before a new one on ties; a pod that fits nowhere within the limits
/// is skipped. Returns the claims and the pods placed.
fn limit_pack(
    run: &mut Run<'_, '_>,
    p: usize,
    order: &[u32],
    left: &[(usize, i64)],
) -> (Vec<Claim>, BTreeSet<u32>) {
    let s = run.s;
    let pool = &s.pools[p];
    let policy = s.options.min_values_policy;
    let weight: Vec<f64> = pool
        .limits
        .iter()
        .map(|(_, l)| 1.0 / (*l).max(1) as f64)
        .collect();
    let cheapest_cap = |types: &[u32]| -> Vec<i64> {
        let cap = &pool.types[types[0] as usize].capacity;
        left.iter().map(|(slot, _)| cap[*slot]).collect()
    };
    let mut claims: Vec<Claim> = Vec::new();
    let mut counts: Vec<Vec<i64>> = Vec::new();
    let mut used = vec![0i64; left.len()];
    let mut placed = BTreeSet::new();
    let mut cursor: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    // What checking the current signature against each claim gave, and the claim's version
    // then: pods of one signature come one after another in `order` (same share), and a
    // placement changes one claim, so most checks of the next pod are answered from here.
    let mut versions: Vec<u32> = Vec::new();
    let mut memo: Vec<Option<Checked>> = Vec::new();
    let mut memo_sig = None;
    for &i in order {
        if run.is_cancelled() {
            // Partial: the caller keeps its old claims unless this placed more.
            break;
        }
        let sig_id = run.items[i as usize].sig;
        let Ok(types) = run.pool_fit(sig_id, p) else {
            continue;
        };
        let sig = run.sigs.get(sig_id);
        if memo_sig != Some(sig_id) {
            memo_sig = Some(sig_id);
            memo.iter_mut().for_each(|m| *m = None);
        }
        let within = |delta: &[i64]| {
            used.iter()
                .zip(delta)
                .zip(left)
                .all(|((u, d), (_, l))| u + d <= *l)
        };
        let cost =
            |delta: &[i64]| -> f64 { delta.iter().zip(&weight).map(|(d, w)| *d as f64 * w).sum() };
        let mut best: Option<Placement> = None;
        let start = cursor.get(&sig_id).copied().unwrap_or(0);
        let mut advance = true;
        for (c, claim) in claims.iter().enumerate().skip(start) {
            if !matches!(&memo[c], Some((v, _)) if *v == versions[c]) {
                // The quick resource check first: most open claims are full.
                let r = if claim.fits(sig) {
                    claim
                        .check(pool, sig, None, policy)
                        .map(|n| {
                            let after = cheapest_cap(n.types());
                            (n, after)
                        })
                        .map_err(|r| r.permanent)
                } else {
                    Err(true)
                };
                memo[c] = Some((versions[c], r));
            }
            let Some((_, res)) = &memo[c] else {
                continue;
            };
            match res {
                Ok((n, after)) => {
                    let delta: Vec<i64> = after
                        .iter()
                        .zip(&counts[c])
                        .map(|(a, b)| (a - b).max(0))
                        .collect();
                    let free = delta.iter().all(|d| *d == 0);
                    if within(&delta) && best.as_ref().is_none_or(|b| cost(&delta) < b.0) {
                        best = Some((cost(&delta), Some(c), Some(n.clone()), after.clone()));
                    }
                    advance = false;
                    // Nothing beats a claim that holds the pod at no extra count.
                    if free {
                        break;
                    }
                }
                Err(permanent) => {
                    if *permanent && advance {
                        cursor.insert(sig_id, c + 1);
                    } else {
                        advance = false;
                    }
                }
            }
        }
        let fresh = cheapest_cap(&types);
        if within(&fresh) && best.as_ref().is_none_or(|b| cost(&fresh) < b.0) {
            best = Some((cost(&fresh), None, None, fresh));
        }
        let Some((_, at, narrowed, after)) = best else {
            continue;
        };
        let c = match at {
            Some(c) => c,
            None => {
                claims.push(Claim::new(
                    p,
                    pool,
                    types.to_vec(),
                    format!("hostname-placeholder-limits-{}", claims.len()),
                ));
                counts.push(vec![0; left.len()]);
                versions.push(0);
                memo.push(None);
                claims.len() - 1
            }
        };
        let n = match narrowed {
            Some(n) => n,
            None => match claims[c].check(pool, sig, None, policy) {
                Ok(n) => n,
                Err(_) => {
                    claims.pop();
                    counts.pop();
                    versions.pop();
                    memo.pop();
                    continue;
                }
            },
        };
        claims[c].commit(pool, sig, i, n);
        versions[c] += 1;
        for (k, (u, a)) in used.iter_mut().zip(&after).enumerate() {
            *u += a - counts[c][k];
        }
        counts[c] = after;
        placed.insert(i);
    }
    for c in &mut claims {
        narrow(pool, c, left);
    }
    (claims, placed)
}

/// A memoised check of a signature against a claim: the claim's version then, and either the
/// claim's state after taking the pod with what it would count against the limits, or whether
/// the rejection was permanent.
type Checked = (
    u32,
    Result<(crate::scheduling::node_claim::Narrowed, Vec<i64>), bool>,
);

/// A place [`limit_pack`] may put a pod: (what it adds to the limits' use, weighted; the open
/// claim, or `None` for a new one; the claim's state after; what the claim counts after).
type Placement = (
    f64,
    Option<usize>,
    Option<crate::scheduling::node_claim::Narrowed>,
    Vec<i64>,
);

/// Why a pod does not fit within pool `p`'s limits, with what is left under each.
fn over_limits(run: &Run<'_, '_>, p: usize) -> String {
    let left: Vec<String> = budget(run, p, &[])
        .iter()
        .map(|(slot, l)| {
            format!(
                "{}={}",
                run.s.dims.name(*slot),
                crate::scheduling::run::fmt_amount(*slot, (*l).max(0))
            )
        })
        .collect();
    format!(
        "NodePool {}: every instance type that fits would exceed its limits (left: {})",
        run.s.pools[p].name(),
        left.join(" ")
    )
}
