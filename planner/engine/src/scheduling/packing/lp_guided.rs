//! LP-guided re-pack: claims shaped like the covering LP's fractional optimum.

use crate::scheduling::run::Run;

use super::buckets::{Buckets, Fill};
use super::claims::widen;

/// Which of the fractional optimum's types [`lp_pack`] opens next (among those it uses at
/// least once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// The type it uses most.
    Most,
    /// The type it uses least: the minority shape gets the pods that fit it best first.
    Fewest,
}

/// Packs claims shaped like the fractional optimum: the LP over the pods left says which
/// instance types the cheapest fractional fleet uses; a claim of one of them (see [`Target`])
/// is opened and filled with the pods that best match its shape (see [`Fill`]: the "dot
/// product" rule of vector bin packing, or the best-aligned pod). When the
/// optimum needs less than one node of any type, the claim may use every type and ends on the
/// cheapest that fits. Finally every claim is widened to all the types that fit its pods, so
/// its price is the cheapest that holds them. `None` when some pod fits nowhere or there are
/// too many signatures.
pub(super) fn lp_pack(
    run: &mut Run<'_, '_>,
    p: usize,
    items: &[u32],
    fill: Fill,
    target: Target,
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
    let col_types: Vec<usize> = (0..pool.types.len()).filter(|&t| usable[t]).collect();
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
    let mut left: usize = items.len();
    let mut claims = Vec::new();
    let mut lp_budget: usize = 200;
    let mut x: Vec<f64> = Vec::new();
    while left > 0 {
        if run.is_cancelled() {
            return None;
        }
        // The type the fractional optimum of what is left uses most.
        if lp_budget > 0 || x.is_empty() {
            let mut demand = vec![0.0f64; nd];
            for (sig, v) in &buckets {
                for &r in &slots {
                    demand[r] += run.sigs.get(*sig).requests[r] as f64 * v.len() as f64;
                }
            }
            x = crate::scheduling::lp::covering_primal(&columns, &demand).1;
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
        let mut claim = crate::scheduling::node_claim::Claim::new(
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
