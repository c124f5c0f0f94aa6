//! The built-in on-demand price table: Linux prices in USD per hour for us-east-1
//! (`common/data/aws/on-demand-prices-us-east-1.json`, a snapshot; its `source` says from when).
//!
//! Spot prices are not static: the actuator reads them from EC2 (DescribeSpotPriceHistory);
//! offline, the planner estimates them from these.

use std::collections::HashMap;

use serde::Deserialize;

/// The region whose prices the table carries.
pub const PRICED_REGION: &str = "us-east-1";

/// The data file, relative to the `common` crate.
pub const PRICES_FILE: &str = "data/aws/on-demand-prices-us-east-1.json";

const PRICES: &str = include_str!("../../data/aws/on-demand-prices-us-east-1.json");

/// The on-demand price table of [`PRICED_REGION`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OnDemandPrices {
    /// Where the prices come from and when they were taken.
    pub source: String,
    /// USD per hour by instance type.
    pub on_demand: HashMap<String, f64>,
}

// === impl OnDemandPrices ===

impl OnDemandPrices {
    /// The built-in table.
    ///
    /// # Errors
    /// When the embedded data does not parse (a bug in the build, not in any input).
    pub fn builtin() -> Result<Self, serde_json::Error> {
        serde_json::from_str(PRICES)
    }

    /// The price of `instance_type`, if the table has one.
    pub fn get(&self, instance_type: &str) -> Option<f64> {
        self.on_demand.get(instance_type).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_prices_m5_large() {
        let p = OnDemandPrices::builtin().expect("embedded prices parse");
        assert!(p.on_demand.len() > 1000, "{}", p.on_demand.len());
        assert_eq!(p.get("m5.large"), Some(0.096));
        assert!(p.get("no.such").is_none());
        assert!(p.source.contains(PRICED_REGION), "{}", p.source);
    }
}
