//! NodePool limits during cost improvement: a re-packing of a pool with `spec.limits` is kept
//! only when the pool stays within its limits, counted as Karpenter counts them (each claim on
//! the capacity of its largest remaining type, existing nodes on their capacity).

use crate::scheduling::dims;
use crate::scheduling::node_claim::Claim;
use crate::scheduling::run::Run;

/// What pool `p` has left under each of its limits, `(slot, amount)`: the limit minus the
/// capacity of the pool's existing nodes and of its non-empty claims other than `skip`.
pub(super) fn budget(run: &Run<'_, '_>, p: usize, skip: &[usize]) -> Vec<(usize, i64)> {
    let pool = &run.s.pools[p];
    let mut left = pool.limits.clone();
    for n in &run.existing {
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
        if c.reqs.iter().any(|r| r.min_values().is_some()) || c.types.len() < 2 {
            continue;
        }
        let Some(&cheapest) = c.types.iter().min_by(|&&a, &&b| {
            pool.price_of(&c.reqs, &[a])
                .total_cmp(&pool.price_of(&c.reqs, &[b]))
        }) else {
            continue;
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
        c.set_types(pool, keep);
    }
    within(claims)
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
