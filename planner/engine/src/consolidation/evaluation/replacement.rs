//! Karpenter's price filter for replacements: which instance types a replacement claim may keep
//! so that the replacements together are strictly cheaper than the nodes they replace.

use std::collections::BTreeSet;

use super::{Evaluation, MIN_SPOT_TO_SPOT_TYPES, Rejection};
use crate::catalog::InstanceType;
use crate::labels;
use crate::plan::PlannedNodeClaim;

/// A replacement claim's capacity types and its instance types with their worst-case launch
/// prices, cheapest first.
type ClaimOptions<'t> = (Vec<String>, Vec<(f64, &'t InstanceType)>);

// === impl Evaluation ===

impl<'a> Evaluation<'a> {
    /// The worst-case launch price of an instance type under a claim's zones and capacity types.
    fn worst_price(it: &InstanceType, zones: &[String], cts: &[String]) -> Option<f64> {
        Self::offer_prices(it, zones, cts).reduce(f64::max)
    }

    fn cheapest_price(it: &InstanceType, zones: &[String], cts: &[String]) -> Option<f64> {
        Self::offer_prices(it, zones, cts).reduce(f64::min)
    }

    fn offer_prices<'i>(
        it: &'i InstanceType,
        zones: &'i [String],
        cts: &'i [String],
    ) -> impl Iterator<Item = f64> + 'i {
        it.offerings
            .iter()
            .filter(|o| o.available && o.price.is_finite())
            .filter(move |o| zones.is_empty() || zones.contains(&o.zone))
            .filter(move |o| cts.is_empty() || cts.contains(&o.capacity_type))
            .map(|o| o.price)
    }

    /// Karpenter's price filter generalised to k claims: each claim keeps only the instance
    /// types whose worst-case launch price is below its share of the nodes' price, so that the
    /// replacements together are strictly cheaper whatever launches. Spot→spot needs the
    /// option, and for a single node at least 15 cheaper types (or minValues).
    pub(super) fn cheaper_replacements(
        &self,
        group: &[usize],
        claims: Vec<PlannedNodeClaim>,
        price: f64,
    ) -> Result<Vec<PlannedNodeClaim>, Rejection> {
        if claims.is_empty() {
            return Ok(claims);
        }
        if group.iter().any(|&c| self.candidates[c].price.is_none()) {
            return Err(Rejection::NotCheaper("a node's price is unknown".into()));
        }
        let all_spot = group
            .iter()
            .all(|&c| self.candidates[c].capacity_type.as_deref() == Some(labels::CAPACITY_SPOT));
        // Per claim: capacity types, and (worst price, type) cheapest first.
        let mut options: Vec<ClaimOptions<'_>> = Vec::new();
        for claim in &claims {
            let mut cts = claim.capacity_types.clone();
            let has = |v: &str| cts.iter().any(|c| c == v);
            if has(labels::CAPACITY_SPOT) && has(labels::CAPACITY_ON_DEMAND) {
                // Priced as spot; an on-demand fallback would not be cheaper.
                cts = vec![labels::CAPACITY_SPOT.to_string()];
            }
            if all_spot
                && cts.iter().any(|c| c == labels::CAPACITY_SPOT)
                && !self.options.spot_to_spot_consolidation
            {
                return Err(Rejection::NotCheaper(
                    "spot-to-spot consolidation is disabled".into(),
                ));
            }
            let mut types: Vec<(f64, &InstanceType)> = claim
                .instance_types
                .iter()
                .filter_map(|n| self.types.get(n.as_str()).copied())
                .filter_map(|t| Self::worst_price(t, &claim.zones, &cts).map(|w| (w, t)))
                .collect();
            types.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.name.cmp(&b.1.name)));
            if types.is_empty() {
                return Err(Rejection::NotCheaper(format!(
                    "replacement {} has no priced offering",
                    claim.name
                )));
            }
            options.push((cts, types));
        }
        let sum_min: f64 = options.iter().map(|(_, t)| t[0].0).sum();
        if sum_min >= price {
            return Err(Rejection::NotCheaper(format!(
                "replacements would cost {sum_min:.4}/h, not less than {price:.4}/h"
            )));
        }
        let slack = price - sum_min;
        let k = options.len() as f64;
        let mut out = Vec::with_capacity(claims.len());
        for (claim, (cts, types)) in claims.into_iter().zip(options) {
            let min = types[0].0;
            let share = if sum_min > 0.0 {
                min + slack * min / sum_min
            } else {
                min + slack / k
            };
            let mut kept: Vec<&InstanceType> = types
                .iter()
                .filter(|(w, _)| *w < share)
                .map(|(_, t)| *t)
                .collect();
            let pool = self.pools.get(claim.node_pool.as_str()).copied();
            let min_values = pool
                .map(|p| {
                    p.requirements
                        .iter()
                        .filter_map(|r| r.min_values)
                        .max()
                        .unwrap_or(0) as usize
                })
                .unwrap_or(0);
            if all_spot && cts.iter().any(|c| c == labels::CAPACITY_SPOT) && group.len() == 1 {
                let need = MIN_SPOT_TO_SPOT_TYPES.max(min_values);
                if kept.len() < need {
                    return Err(Rejection::NotCheaper(format!(
                        "spot-to-spot replacement keeps {} cheaper types, {need} needed",
                        kept.len()
                    )));
                }
                kept.truncate(need);
            }
            // Under either policy: BestEffort relaxes minValues to launch capacity pods need,
            // never to make a consolidation possible (Karpenter's rule).
            if let Some(pool) = pool {
                for r in pool.requirements.iter().filter(|r| r.min_values.is_some()) {
                    let distinct: BTreeSet<&str> = kept
                        .iter()
                        .filter_map(|t| {
                            if r.key == labels::INSTANCE_TYPE {
                                Some(t.name.as_str())
                            } else {
                                t.labels.get(&r.key).map(String::as_str)
                            }
                        })
                        .collect();
                    let want = r.min_values.unwrap_or(0) as usize;
                    if distinct.len() < want {
                        return Err(Rejection::NotCheaper(format!(
                            "cheaper types keep {} values of {}, minValues {want}",
                            distinct.len(),
                            r.key
                        )));
                    }
                }
            }
            kept.sort_by(|a, b| {
                let pa = Self::cheapest_price(a, &claim.zones, &cts).unwrap_or(f64::MAX);
                let pb = Self::cheapest_price(b, &claim.zones, &cts).unwrap_or(f64::MAX);
                pa.total_cmp(&pb).then(a.name.cmp(&b.name))
            });
            let new_price = kept
                .iter()
                .filter_map(|t| Self::cheapest_price(t, &claim.zones, &cts))
                .reduce(f64::min)
                .unwrap_or(claim.price);
            out.push(PlannedNodeClaim {
                instance_types: kept.iter().map(|t| t.name.clone()).collect(),
                capacity_types: cts,
                price: new_price,
                ..claim
            });
        }
        Ok(out)
    }
}
