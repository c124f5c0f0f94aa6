//! The built-in AWS catalog, compiled in from `planner/engine/data/aws/`.
//!
//! The data are EC2 facts (DescribeInstanceTypes, the zones of 30 regions) and on-demand Linux
//! prices for us-east-1 (`common::ec2::prices`, shared with the actuator); `scripts/aws-data.py`
//! copies them from the shared data folder. For every type the catalog computes capacity,
//! overhead and labels with Karpenter's rules through `common::ec2::instance_type` (the same
//! conversion the live catalog from the actuator goes through) and one offering per zone and
//! capacity type.
//!
//! Decisions, also written into the catalog's notes where they affect a plan:
//!
//! - Prices exist only for us-east-1. Any other known region is an error
//!   ([`Error::NoPrices`]) that points at `--instance-types`: a plan without prices cannot choose
//!   between types.
//! - Spot prices are not static facts. Offline, every spot offering is priced at
//!   [`SPOT_PRICE_FRACTION`] of the type's on-demand price, the same in every zone.
//! - Types with no on-demand price in the data, with no zone in the region, or whose
//!   architecture Kubernetes does not know (Mac instances) are left out and counted in a note.
//! - `capacity-block` usage is not a capacity type Karpenter launches; it gives no offering.

use std::collections::HashMap;

use common::ec2::prices::{self, OnDemandPrices};
use common::ec2::{self, InstanceTypeInfo};
use serde::Deserialize;
use thiserror::Error;

use crate::labels;

use super::{Catalog, Offering};

/// Offline spot price as a fraction of the on-demand price.
pub const SPOT_PRICE_FRACTION: f64 = 0.35;

pub use common::ec2::prices::PRICED_REGION;
pub use common::ec2::{
    RESOURCE_AMD_GPU, RESOURCE_AWS_NEURON, RESOURCE_AWS_NEURON_CORE, RESOURCE_EFA,
    RESOURCE_HABANA_GAUDI, RESOURCE_NVIDIA_GPU, name_labels,
};

const INSTANCE_TYPES_FILE: &str = "data/aws/instance-types.json";
const INSTANCE_TYPES: &str = include_str!("../../data/aws/instance-types.json");

macro_rules! zone_files {
    ($($region:literal),* $(,)?) => {
        &[$(($region, include_str!(concat!("../../data/aws/zones/", $region, ".json")))),*]
    };
}

/// Per region, the zones file (`{"types": {"m5.large": "abcdf"}}`: zone letters per type).
const ZONES: &[(&str, &str)] = zone_files!(
    "af-south-1",
    "ap-east-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "ap-south-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ca-central-1",
    "ca-west-1",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "il-central-1",
    "me-central-1",
    "me-south-1",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
);

/// Why the built-in catalog could not be built.
#[derive(Debug, Error)]
pub enum Error {
    /// The region is not one of the 30 the built-in data covers.
    #[error("unknown AWS region {region:?}; the built-in catalog knows: {known}")]
    UnknownRegion {
        /// The region asked for.
        region: String,
        /// The known regions, comma-separated.
        known: String,
    },
    /// The region is known but the built-in data has no prices for it.
    #[error(
        "the built-in catalog has prices only for {PRICED_REGION}, not {region:?}; \
         give a catalog with {region} prices with --instance-types FILE"
    )]
    NoPrices {
        /// The region asked for.
        region: String,
    },
    /// Embedded data that does not parse: a bug in the build, not in the input.
    #[error("built-in AWS data {file} is malformed: {source}")]
    Data {
        /// The data file.
        file: &'static str,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The regions the built-in data knows (zones); only [`PRICED_REGION`] has prices.
pub fn regions() -> impl Iterator<Item = &'static str> {
    ZONES.iter().map(|(region, _)| *region)
}

/// The built-in catalog of `region`, instance types sorted by name.
///
/// # Errors
/// [`Error::UnknownRegion`] for a region the data does not cover, [`Error::NoPrices`] for a
/// region other than us-east-1.
pub fn builtin(region: &str) -> Result<Catalog> {
    let Some((_, zones_text)) = ZONES.iter().find(|(r, _)| *r == region) else {
        return Err(Error::UnknownRegion {
            region: region.to_string(),
            known: regions().collect::<Vec<_>>().join(", "),
        });
    };
    if region != PRICED_REGION {
        return Err(Error::NoPrices {
            region: region.to_string(),
        });
    }
    let types: RawTypes = serde_json::from_str(INSTANCE_TYPES).map_err(|source| Error::Data {
        file: INSTANCE_TYPES_FILE,
        source,
    })?;
    let prices = OnDemandPrices::builtin().map_err(|source| Error::Data {
        file: prices::PRICES_FILE,
        source,
    })?;
    let zones: RawZones<'_> = serde_json::from_str(zones_text).map_err(|source| Error::Data {
        file: "data/aws/zones/<region>.json",
        source,
    })?;
    Ok(build(region, &types, &prices, &zones))
}

fn build(region: &str, types: &RawTypes, prices: &OnDemandPrices, zones: &RawZones<'_>) -> Catalog {
    let mut unpriced = Vec::new();
    let mut not_offered = Vec::new();
    let mut unknown_arch = Vec::new();
    let mut instance_types = Vec::with_capacity(types.instance_types.len());
    for raw in &types.instance_types {
        let name = raw.name.as_str();
        if ec2::kube_arch(&raw.architectures).is_none() {
            unknown_arch.push(name);
            continue;
        }
        let Some(letters) = zones.types.get(name) else {
            not_offered.push(name);
            continue;
        };
        let Some(on_demand) = prices.get(name) else {
            unpriced.push(name);
            continue;
        };
        let offerings = offerings(region, letters, &raw.usage_classes, on_demand);
        if offerings.is_empty() {
            not_offered.push(name);
            continue;
        }
        instance_types.extend(ec2::instance_type(raw, region, offerings));
    }
    instance_types.sort_by(|a, b| a.name.cmp(&b.name));

    let mut notes = vec![
        format!(
            "Built-in AWS catalog for {region}: {} instance types; on-demand prices are Linux \
             prices from a {PRICED_REGION} snapshot (source: {}).",
            instance_types.len(),
            prices.source
        ),
        format!(
            "Spot prices are estimated offline: every spot offering costs {SPOT_PRICE_FRACTION} \
             x the on-demand price of its type, in every zone (real spot prices vary by zone and \
             hour). Give real prices with --instance-types FILE."
        ),
    ];
    for (names, why) in [
        (&unpriced, "have no on-demand price in the built-in data"),
        (&not_offered, "are not offered in any zone of the region"),
        (
            &unknown_arch,
            "have no Kubernetes architecture (Mac instances)",
        ),
    ] {
        if !names.is_empty() {
            notes.push(format!(
                "{} instance types {why} and are left out: {}.",
                names.len(),
                names.join(", ")
            ));
        }
    }
    Catalog {
        instance_types,
        notes,
    }
}

/// Offerings of a type: each zone (by letter) × each launchable capacity type.
fn offerings(
    region: &str,
    letters: &str,
    usage_classes: &[String],
    on_demand: f64,
) -> Vec<Offering> {
    let spot = round_price(on_demand * SPOT_PRICE_FRACTION);
    let mut out = Vec::new();
    for letter in letters.chars() {
        let zone = format!("{region}{letter}");
        let mut seen: Vec<&str> = Vec::new();
        for class in usage_classes {
            let class = class.as_str();
            if seen.contains(&class) {
                continue;
            }
            seen.push(class);
            let price = match class {
                labels::CAPACITY_ON_DEMAND => on_demand,
                labels::CAPACITY_SPOT => spot,
                _ => continue,
            };
            out.push(Offering {
                zone: zone.clone(),
                capacity_type: class.to_string(),
                price,
                available: true,
            });
        }
    }
    out
}

/// Rounds to a millionth of a dollar so that estimated prices print cleanly.
fn round_price(price: f64) -> f64 {
    (price * 1e6).round() / 1e6
}

// === raw data ===

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTypes {
    instance_types: Vec<InstanceTypeInfo>,
}

#[derive(Deserialize)]
struct RawZones<'a> {
    #[serde(borrow)]
    types: HashMap<&'a str, &'a str>,
}

#[cfg(test)]
mod tests;
