//! Greedy re-pack by value for money at the covering LP's dual resource prices.

use crate::scheduling::run::Run;

use super::buckets::{Buckets, Fill};
use super::claims::widen;

/// [`greedy_pack`] runs only when the best packing so far costs more than the fractional
/// optimum by this share.
pub(super) const GREEDY_GAP: f64 = 0.005;

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
/// through [`crate::scheduling::node_claim::Claim::check`] (a pod it rejects waits for a later claim) and
/// finally widened to every type that fits its pods. `None` when some pod fits nowhere or
/// there are too many signatures.
pub(super) fn greedy_pack(
    run: &mut Run<'_, '_>,
    p: usize,
    items: &[u32],
) -> Option<Vec<crate::scheduling::node_claim::Claim>> {
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
    let slots: Vec<usize> = (0..nd)
        .filter(|&r| r != crate::scheduling::dims::EPHEMERAL)
        .collect();
    let col_types: Vec<usize> = (0..pool.types.len())
        .filter(|&t| usable[t] && pool.types[t].price > 0.0)
        .collect();
    let columns: Vec<crate::scheduling::lp::Column> = col_types
        .iter()
        .map(|&t| crate::scheduling::lp::Column {
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
        if run.is_cancelled() {
            return None;
        }
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
            duals = crate::scheduling::lp::covering_with_duals(&columns, &demand).1;
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
/// buckets), through [`crate::scheduling::node_claim::Claim::check`]: a pod it rejects stays in its
/// bucket. `None` when it takes no pod.
fn greedy_claim(
    run: &Run<'_, '_>,
    p: usize,
    t: usize,
    buckets: &mut [(u32, Vec<u32>)],
    counts: &[usize],
    k: usize,
) -> Option<crate::scheduling::node_claim::Claim> {
    let s = run.s;
    let pool = &s.pools[p];
    let mut claim = crate::scheduling::node_claim::Claim::new(
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
