//! Cost improvement after the first-fit packing: moves that provably lower the price of the
//! new claims without breaking any rule. Every move is re-validated through the same fit check
//! as scheduling ([`super::node_claim::Claim::check`]).
//!
//! With topology constraints in play, only pods no constraint can see move anywhere, and pods
//! only zone-keyed constraints can see move between claims pinned to the same zone, so that no
//! domain count any constraint depends on changes.

mod balanced;
mod buckets;
mod claims;
mod emptying;
mod fill_gaps;
mod greedy;
mod limits;
mod lp_guided;

use super::run::Run;
use balanced::balanced_pack;
use buckets::Fill;
use claims::{claim_price, pack, price_of};
use emptying::{empty_claims, empty_zoned_claims};
use fill_gaps::fill_gaps;
use greedy::{GREEDY_GAP, greedy_pack};
pub(super) use limits::place_within;
use lp_guided::{Target, lp_pack};

/// Improves the packing of `run`'s new claims in place.
pub(super) fn improve(run: &mut Run<'_, '_>) {
    if run.claims.is_empty() || run.is_cancelled() {
        return;
    }
    if run.s.topology_active {
        fill_gaps(run);
        if !run.is_cancelled() {
            empty_zoned_claims(run);
        }
        return;
    }
    for p in 0..run.s.pools.len() {
        if run.is_cancelled() {
            return;
        }
        repack_pool(run, p);
    }
    if run.is_cancelled() {
        return;
    }
    let n = run.claims.len();
    empty_claims(run, &vec![true; n], &vec![Some(String::new()); n]);
}

/// Re-packs the pods of one NodePool's claims in the order of their value under the LP's dual
/// resource prices (so that cpu-heavy and memory-heavy pods share claims instead of filling
/// claims of one shape), and keeps the result when it is cheaper and keeps the pool within its
/// limits (see [`limits::fit`]).
fn repack_pool(run: &mut Run<'_, '_>, p: usize) {
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
    let left = limits::budget(run, p, &old);
    let mut best: Option<(f64, Vec<super::node_claim::Claim>)> = None;
    let before: f64 = old.iter().map(|&c| claim_price(run, c)).sum();
    for k in 0..6 {
        // A cancelled plan keeps the claims it has (the caller drops them).
        if run.is_cancelled() {
            return;
        }
        let candidate = match k {
            0 => pack(run, p, order.iter().map(|x| x.1)),
            1 => balanced_pack(run, p, &items),
            2 => lp_pack(run, p, &items, Fill::DotProduct, Target::Most),
            3 => lp_pack(run, p, &items, Fill::Cosine, Target::Most),
            4 => lp_pack(run, p, &items, Fill::DotProduct, Target::Fewest),
            _ => lp_pack(run, p, &items, Fill::Cosine, Target::Fewest),
        };
        let Some(mut new_claims) = candidate else {
            continue;
        };
        if !limits::fit(run, p, &mut new_claims, &left) {
            continue;
        }
        let after: f64 = new_claims.iter().map(|c| price_of(run, c)).sum();
        if after < before - 1e-9 && best.as_ref().is_none_or(|(b, _)| after < *b - 1e-9) {
            best = Some((after, new_claims));
        }
    }
    // The greedy is the slowest: only when the others leave a gap to the fractional optimum.
    let so_far = best.as_ref().map_or(before, |b| b.0);
    if so_far > lp * (1.0 + GREEDY_GAP)
        && !run.is_cancelled()
        && let Some(mut new_claims) = greedy_pack(run, p, &items)
        && limits::fit(run, p, &mut new_claims, &left)
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
