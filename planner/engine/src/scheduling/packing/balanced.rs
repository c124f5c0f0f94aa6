//! Balanced re-pack: each claim takes about the same share of every resource of the pods left.

use crate::scheduling::run::Run;

use super::buckets::Buckets;

/// Packs claims one at a time so that each takes about the same share of every resource of
/// the pods left: the next pod is the one that best fills the claim's most lagging resources
/// (largest `Σ_r share_r × deficit_r`), or the largest pod when the claim is balanced. Each
/// claim then looks like the whole workload, and its cheapest type is the one with the best
/// price for that mix. `None` when some pod fits nowhere or there are too many signatures.
pub(super) fn balanced_pack(
    run: &mut Run<'_, '_>,
    p: usize,
    items: &[u32],
) -> Option<Vec<crate::scheduling::node_claim::Claim>> {
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
    let slots: Vec<usize> = (0..nd)
        .filter(|&r| r != crate::scheduling::dims::EPHEMERAL)
        .collect();
    let mut remaining = vec![0.0f64; nd];
    for (sig, v) in &buckets {
        for &r in &slots {
            remaining[r] += run.sigs.get(*sig).requests[r] as f64 * v.len() as f64;
        }
    }
    let mut claims = Vec::new();
    let mut left: usize = items.len();
    while left > 0 {
        if run.is_cancelled() {
            return None;
        }
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
        let mut claim = crate::scheduling::node_claim::Claim::new(
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
