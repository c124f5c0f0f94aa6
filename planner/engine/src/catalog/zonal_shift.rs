//! ARC zonal shift (Karpenter's `ENABLE_ZONAL_SHIFT`, aws/karpenter-provider-aws v1.14.1
//! `designs/zonal-shift.md`, `pkg/providers/arczonalshift`, `pkg/providers/instancetype/offering`):
//! while a zone is shifted away from, every offering in it is unavailable, so no new capacity
//! (launch or consolidation replacement) goes there; and the Nodes in it are not disrupted
//! voluntarily (consolidation and drift: [`blocker`]), so that Karpenter does not add churn to
//! an impaired zone. The zones come with the snapshot ([`crate::model::ClusterSnapshot::shifted_zones`]).
//!
//! Not covered, as in Karpenter's provider-only design: disruption of Nodes in other zones
//! whose pods would move onto existing Nodes of the shifted zone (EKS taints those Nodes during
//! a shift, which keeps pods off them).

use std::borrow::Cow;

use super::Catalog;

/// The catalog with every offering in `shifted` zones unavailable (borrowed when nothing is
/// shifted or no offering is in a shifted zone).
pub fn apply<'a>(catalog: Cow<'a, Catalog>, shifted: &[String]) -> Cow<'a, Catalog> {
    let hit = |zone: &str| shifted.iter().any(|z| z == zone);
    let touches = catalog
        .instance_types
        .iter()
        .flat_map(|t| &t.offerings)
        .any(|o| (o.available || o.unpriced) && hit(&o.zone));
    if !touches {
        return catalog;
    }
    let mut out = catalog.into_owned();
    for o in out.instance_types.iter_mut().flat_map(|t| &mut t.offerings) {
        if hit(&o.zone) {
            o.available = false;
            // Unavailable for the shift, not only for want of a price: an overlay price does
            // not make it available.
            o.unpriced = false;
        }
    }
    Cow::Owned(out)
}

/// Why a Node in `zone` is not disrupted voluntarily, when `zone` is shifted.
pub fn blocker(zone: Option<&str>, shifted: &[String]) -> Option<String> {
    let zone = zone?;
    shifted.iter().any(|z| z == zone).then(|| {
        format!("zone {zone} is under an ARC zonal shift; voluntary disruption there is paused")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::aws;

    #[test]
    fn offerings_in_shifted_zones_are_unavailable() {
        let c = aws::builtin("us-east-1").expect("built-in catalog");
        assert!(matches!(apply(Cow::Borrowed(&c), &[]), Cow::Borrowed(_)));
        let shifted = vec!["us-east-1a".to_string()];
        let out = apply(Cow::Borrowed(&c), &shifted);
        let offerings: Vec<_> = out
            .instance_types
            .iter()
            .flat_map(|t| &t.offerings)
            .collect();
        assert!(
            offerings
                .iter()
                .filter(|o| o.zone == "us-east-1a")
                .all(|o| !o.available)
        );
        assert!(
            offerings
                .iter()
                .any(|o| o.zone == "us-east-1b" && o.available)
        );
        assert_eq!(blocker(Some("us-east-1b"), &shifted), None);
        assert!(blocker(Some("us-east-1a"), &shifted).is_some());
    }
}
