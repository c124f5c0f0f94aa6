//! Karpenter's `NodeOverlay` (karpenter.sh/v1alpha1, feature gate `NodeOverlay`): a price or
//! extra capacity for the instance types and offerings its requirements select
//! (kubernetes-sigs/karpenter `pkg/apis/v1alpha1/nodeoverlay.go`).

use serde::{Deserialize, Serialize};

use super::{Requirement, Resources};

/// A NodeOverlay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeOverlay {
    /// Name (cluster-scoped).
    pub name: String,
    /// `spec.requirements`: matched against each NodePool's name and template labels, the
    /// instance type's labels and its offerings' zone and capacity type.
    pub requirements: Vec<Requirement>,
    /// `spec.price` or `spec.priceAdjustment` (the CRD allows one of them).
    pub price: Option<PriceChange>,
    /// `spec.capacity`: extended resources added to the matching types' capacity.
    pub capacity: Resources,
    /// `spec.weight` (1–10000); absent counts as 0.
    pub weight: Option<i32>,
}

/// How an overlay changes an offering's price (Karpenter's `AdjustedPrice`,
/// `pkg/cloudprovider/types.go`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum PriceChange {
    /// `price: "1.5"`: this price.
    Price(f64),
    /// `priceAdjustment: "+0.1"` or `"-0.5"`: added, never below 0.
    Add(f64),
    /// `priceAdjustment: "+10%"` or `"-15%"`: scaled, never below 0.
    Percent(f64),
}

// === impl PriceChange ===

impl PriceChange {
    /// Reads `spec.price` (an unsigned decimal, the CRD's `^\d+(\.\d+)?$`).
    ///
    /// # Errors
    /// What is wrong with the text.
    pub fn price(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let ok = match t.split_once('.') {
            Some((a, b)) => digits(a) && digits(b),
            None => digits(t),
        };
        match t.parse::<f64>() {
            Ok(v) if ok && v.is_finite() => Ok(Self::Price(v)),
            _ => Err(format!(
                "{text:?} is not a price (an unsigned decimal such as \"1.25\")"
            )),
        }
    }

    /// Reads `spec.priceAdjustment`: `+N`/`-N` (added) or `+N%`/`-N%` (a percentage; a
    /// decrease is below 100% or exactly `-100%`), the CRD's pattern.
    ///
    /// # Errors
    /// What is wrong with the text.
    pub fn adjustment(text: &str) -> Result<Self, String> {
        let bad = || {
            format!("{text:?} is not a price adjustment (\"+0.1\", \"-0.5\", \"+10%\" or \"-15%\")")
        };
        let t = text.trim();
        let (sign, rest) = match t.as_bytes().first() {
            Some(b'+') => (1.0, &t[1..]),
            Some(b'-') => (-1.0, &t[1..]),
            _ => return Err(bad()),
        };
        let (number, percent) = match rest.strip_suffix('%') {
            Some(n) => (n, true),
            None => (rest, false),
        };
        let decimal = |s: &str| {
            let (a, b) = s.split_once('.').unwrap_or((s, ""));
            !(a.is_empty() && b.is_empty())
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
                && !(s.contains('.') && b.is_empty())
        };
        if !decimal(number) {
            return Err(bad());
        }
        let v: f64 = number.parse().map_err(|_| bad())?;
        if !v.is_finite() {
            return Err(bad());
        }
        if percent {
            // The CRD allows a decrease of at most two integer digits, or exactly -100%.
            if sign < 0.0 {
                let int = number.split('.').next().unwrap_or("");
                if !(int.len() <= 2 && !int.is_empty() || number == "100") {
                    return Err(bad());
                }
            }
            Ok(Self::Percent(sign * v))
        } else {
            Ok(Self::Add(sign * v))
        }
    }

    /// The price after the change (Karpenter's `AdjustedPrice`).
    pub fn apply(self, price: f64) -> f64 {
        match self {
            Self::Price(p) => p,
            Self::Add(d) => (price + d).max(0.0),
            Self::Percent(p) => (price * (1.0 + p / 100.0)).max(0.0),
        }
    }

    /// An absolute price, if this is one.
    pub fn absolute(self) -> Option<f64> {
        match self {
            Self::Price(p) => Some(p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_and_adjustments_read_as_the_crd_patterns_allow() {
        assert_eq!(PriceChange::price("98.32"), Ok(PriceChange::Price(98.32)));
        assert_eq!(PriceChange::price("3"), Ok(PriceChange::Price(3.0)));
        for bad in ["-1", "+1", "1.", ".5", "abc", "", "1e3"] {
            assert!(PriceChange::price(bad).is_err(), "{bad}");
        }
        assert_eq!(PriceChange::adjustment("+0.1"), Ok(PriceChange::Add(0.1)));
        assert_eq!(PriceChange::adjustment("-2"), Ok(PriceChange::Add(-2.0)));
        assert_eq!(PriceChange::adjustment("-.5"), Ok(PriceChange::Add(-0.5)));
        assert_eq!(
            PriceChange::adjustment("+10%"),
            Ok(PriceChange::Percent(10.0))
        );
        assert_eq!(
            PriceChange::adjustment("-15.5%"),
            Ok(PriceChange::Percent(-15.5))
        );
        assert_eq!(
            PriceChange::adjustment("-100%"),
            Ok(PriceChange::Percent(-100.0))
        );
        assert_eq!(
            PriceChange::adjustment("+250%"),
            Ok(PriceChange::Percent(250.0))
        );
        for bad in ["10", "-150%", "-101%", "+", "+%", "1%", "+1.%", "abc"] {
            assert!(PriceChange::adjustment(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn adjusted_prices_never_go_below_zero() {
        assert_eq!(PriceChange::Price(2.0).apply(1.0), 2.0);
        assert_eq!(PriceChange::Add(-2.0).apply(1.0), 0.0);
        assert!((PriceChange::Add(0.5).apply(1.0) - 1.5).abs() < 1e-12);
        assert!((PriceChange::Percent(-10.0).apply(2.0) - 1.8).abs() < 1e-12);
        assert_eq!(PriceChange::Percent(-100.0).apply(2.0), 0.0);
    }
}
