//! Cost improvement after the first-fit packing: moves that provably lower the price of the
//! new claims without breaking any rule. Every move is re-validated through the same fit check
//! as scheduling ([`super::node_claim::Claim::check`]).
//!
//! Moves are only made when no pod in the snapshot has topology constraints, so that domain
//! counts that other pods' constraints depend on cannot change.

use super::scheduler::Run;

/// Improves the packing of `run`'s new claims in place.
pub(super) fn improve(run: &mut Run<'_, '_>) {
    if run.s.topology_active || run.claims.len() < 2 {
        return;
    }
    empty_claims(run);
}

/// The price of a claim: its cheapest remaining type's cheapest allowed offering.
pub(super) fn claim_price(run: &Run<'_, '_>, c: usize) -> f64 {
    let claim = &run.claims[c];
    let pool = &run.s.pools[claim.pool];
    claim
        .types
        .iter()
        .filter_map(|&t| pool.types[t as usize].cheapest_allowed(&claim.reqs))
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min)
}

/// For each claim, cheapest first: move all its pods onto the other claims when that lowers
/// the total price (the freed claim's price exceeds the increase of the receivers').
fn empty_claims(run: &mut Run<'_, '_>) {
    let mut order: Vec<usize> = (0..run.claims.len()).collect();
    let prices: Vec<f64> = order.iter().map(|&c| claim_price(run, c)).collect();
    order.sort_by(|&a, &b| prices[a].total_cmp(&prices[b]).then(a.cmp(&b)));
    let mut budget: usize = 2_000_000;
    for v in order {
        if run.claims[v].pods.is_empty() {
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
                if c == v || run.claims[c].pods.is_empty() {
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
    let pool = &run.s.pools[claim.pool];
    claim
        .types
        .iter()
        .filter_map(|&t| pool.types[t as usize].cheapest_allowed(&claim.reqs))
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min)
}
