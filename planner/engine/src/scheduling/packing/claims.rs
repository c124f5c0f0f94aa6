//! Pricing and first-fit packing of fresh claims, shared by every re-pack strategy.

use crate::scheduling::run::Run;

/// First-fit packing of `items` onto fresh claims of pool `p`, in the given order, through the
/// same checks as scheduling. `None` when some item fits nowhere.
pub(super) fn pack(
    run: &mut Run<'_, '_>,
    p: usize,
    items: impl Iterator<Item = u32>,
) -> Option<Vec<crate::scheduling::node_claim::Claim>> {
    let s = run.s;
    let pool = &s.pools[p];
    let mut claims: Vec<crate::scheduling::node_claim::Claim> = Vec::new();
    // Per signature: first claim that has not rejected it (claims only fill up).
    let mut cursor: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for i in items {
        if run.is_cancelled() {
            return None;
        }
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
            let mut claim = crate::scheduling::node_claim::Claim::new(
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

pub(super) fn price_of(run: &Run<'_, '_>, claim: &crate::scheduling::node_claim::Claim) -> f64 {
    run.s.pools[claim.pool].price_of(&claim.reqs, &claim.types)
}

/// Rebuilds every claim with all the types of its first pod's signature that hold its pods,
/// so that its price is the cheapest that holds them (the claim is kept as it is when the
/// rebuild fails).
pub(super) fn widen(
    run: &Run<'_, '_>,
    p: usize,
    buckets: &[(u32, Vec<u32>)],
    fit_list: &[std::rc::Rc<[u32]>],
    claims: Vec<crate::scheduling::node_claim::Claim>,
    prefix: &str,
) -> Option<Vec<crate::scheduling::node_claim::Claim>> {
    let s = run.s;
    let pool = &s.pools[p];
    let mut out = Vec::with_capacity(claims.len());
    for (k, c) in claims.into_iter().enumerate() {
        let first_sig = run.items[*c.pods.first()? as usize].sig;
        let b = buckets.iter().position(|(sig, _)| *sig == first_sig)?;
        let mut wide = crate::scheduling::node_claim::Claim::new(
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
