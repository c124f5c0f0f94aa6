//! The live catalog from EC2: what [`crate::Ec2Provider`] answers to
//! `CloudProvider::catalog_facts` (raw facts, for planners) and `instance_types` (the same,
//! with capacity and allocatable by `common::ec2::instance_type`, for NodeClaim status).
//!
//! - instance types: DescribeInstanceTypes, every page;
//! - offerings: DescribeInstanceTypeOfferings by availability zone, restricted to the zones of
//!   the node classes' subnets when some are known (any resolved EC2NodeClass), else every zone
//!   of the region;
//! - spot prices: DescribeSpotPriceHistory for Linux/UNIX from now, the latest price per type
//!   and zone (called on each refresh; the caller sets the interval);
//! - on-demand prices: the AWS Pricing API's (`crate::pricing`, asked by the provider every 12
//!   hours) over the region's built-in table (`common::ec2::prices`, us-east-1's for a region
//!   Karpenter publishes none for, as Karpenter does); notes say which.
//!
//! A spot offering needs a spot price and an on-demand offering an on-demand price; an offering
//! without one is carried unavailable and `unpriced` (counted in a note), so that a planner can
//! price it from a NodeOverlay as Karpenter does for preview instance types. Types are sorted by name and offerings by
//! zone then capacity type, so the same answers give the same catalog (and version).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::{EbsOptimizedSupport, Filter, InstanceTypeInfo as Ec2Info, LocationType};
use cloud::{CatalogFacts, InstanceTypeFacts, InstanceTypeInfo, Offering, Result};
use common::ec2::prices::{OnDemandPrices, RegionPrices};
use common::ec2::{Accelerator, Gpu, NetworkCard};
use common::labels::{CAPACITY_ON_DEMAND, CAPACITY_SPOT};

use crate::error::from_sdk;

/// The product description whose spot prices apply to Linux nodes.
const LINUX: &str = "Linux/UNIX";

/// Reads the live catalog of `region` from EC2, offerings restricted to `zones` when not empty.
///
/// # Errors
/// AWS errors mapped by [`crate::error`]; [`cloud::Error::Unavailable`] when the built-in
/// price table does not parse (a build bug).
pub async fn read(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
    zones: &BTreeSet<String>,
    now: DateTime,
    live: Option<&LivePrices>,
) -> Result<CatalogFacts> {
    let infos = instance_types(ec2).await?;
    let offered = offerings(ec2, zones).await?;
    let spot = spot_prices(ec2, zones, now).await?;
    let mut prices = OnDemandPrices::for_region(region).map_err(|e| cloud::Error::Unavailable {
        message: format!("built-in on-demand prices do not parse: {e}"),
    })?;
    let mut notes = Vec::new();
    if let Some(live) = live {
        if !live.prices.is_empty() {
            prices.prices.on_demand.extend(live.prices.clone());
            notes.push(format!(
                "On-demand prices of {} instance types from the AWS Pricing API (GetProducts); \
                 the built-in table for any other.",
                live.prices.len()
            ));
        }
        if let Some(error) = &live.error {
            notes.push(format!(
                "The AWS Pricing API did not answer the last time it was asked ({error}); \
                 on-demand prices are the ones held before."
            ));
        }
    }
    let mut facts = assemble(region, infos, &offered, &spot, &prices);
    facts.notes.extend(notes);
    Ok(facts)
}

/// On-demand prices the Pricing API gave (`crate::pricing`), as the provider holds them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LivePrices {
    /// USD per hour by instance type; they override the built-in table type by type.
    pub prices: BTreeMap<String, f64>,
    /// Why the last ask failed, if it did.
    pub error: Option<String>,
}

/// Every instance type EC2 describes, converted; types without a name are skipped.
async fn instance_types(ec2: &aws_sdk_ec2::Client) -> Result<Vec<InstanceTypeInfo>> {
    let mut out = Vec::new();
    let mut pages = ec2
        .describe_instance_types()
        .max_results(100)
        .into_paginator()
        .items()
        .send();
    while let Some(item) = pages.next().await {
        let item = item.map_err(|e| from_sdk("DescribeInstanceTypes", &e, &[]))?;
        out.extend(info(&item));
    }
    Ok(out)
}

/// The facts of one DescribeInstanceTypes item, `None` without a type name.
pub fn info(it: &Ec2Info) -> Option<InstanceTypeInfo> {
    let name = it.instance_type()?.as_str().to_string();
    let processor = it.processor_info();
    let network = it.network_info();
    let nvme = it
        .instance_storage_info()
        .filter(|s| {
            s.nvme_support()
                .is_some_and(|n| n.as_str() != "unsupported")
        })
        .and_then(|s| s.total_size_in_gb());
    let mut accelerators: Vec<Accelerator> = it
        .inference_accelerator_info()
        .map(|a| a.accelerators())
        .unwrap_or_default()
        .iter()
        .map(|a| Accelerator {
            manufacturer: a.manufacturer().unwrap_or_default().to_string(),
            name: a.name().unwrap_or_default().to_string(),
            count: i64::from(a.count().unwrap_or(0)),
        })
        .collect();
    if let Some(neuron) = it.neuron_info() {
        accelerators.extend(neuron.neuron_devices().iter().map(|d| Accelerator {
            manufacturer: "AWS".to_string(),
            name: d.name().unwrap_or_default().to_string(),
            count: i64::from(d.count().unwrap_or(0)),
        }));
    }
    Some(InstanceTypeInfo {
        name,
        vcpu: i64::from(
            it.v_cpu_info()
                .and_then(|v| v.default_v_cpus())
                .unwrap_or(0),
        ),
        memory_mib: it.memory_info().and_then(|m| m.size_in_mib()).unwrap_or(0),
        architectures: processor
            .map(|p| p.supported_architectures())
            .unwrap_or_default()
            .iter()
            .map(|a| a.as_str().to_string())
            .collect(),
        manufacturer: processor.and_then(|p| p.manufacturer()).map(String::from),
        hypervisor: it.hypervisor().map(|h| h.as_str().to_string()),
        usage_classes: it
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_string())
            .collect(),
        max_network_interfaces: i64::from(
            network
                .and_then(|n| n.maximum_network_interfaces())
                .unwrap_or(0),
        ),
        ipv4_per_interface: i64::from(
            network
                .and_then(|n| n.ipv4_addresses_per_interface())
                .unwrap_or(0),
        ),
        network_cards: network
            .map(|n| n.network_cards())
            .unwrap_or_default()
            .iter()
            .map(|c| NetworkCard {
                index: i64::from(c.network_card_index().unwrap_or(0)),
                max_interfaces: i64::from(c.maximum_network_interfaces().unwrap_or(0)),
                baseline_gbps: c.baseline_bandwidth_in_gbps().unwrap_or(0.0),
            })
            .collect(),
        network_performance: network
            .and_then(|n| n.network_performance())
            .map(String::from),
        efa_supported: network.and_then(|n| n.efa_supported()).unwrap_or(false),
        encryption_in_transit: network
            .and_then(|n| n.encryption_in_transit_supported())
            .unwrap_or(false),
        local_nvme_gib: nvme,
        // As Karpenter's `pkg/providers/instancetype/types.go` reads them.
        sustained_clock_speed_mhz: processor
            .and_then(|p| p.sustained_clock_speed_in_ghz())
            .map(|ghz| (ghz * 1000.0).round() as i64),
        ebs_bandwidth_mbps: it
            .ebs_info()
            .filter(|e| e.ebs_optimized_support() == Some(&EbsOptimizedSupport::Default))
            .and_then(|e| e.ebs_optimized_info())
            .and_then(|o| o.maximum_bandwidth_in_mbps())
            .map(i64::from),
        gpus: it
            .gpu_info()
            .map(|g| g.gpus())
            .unwrap_or_default()
            .iter()
            .map(|g| Gpu {
                manufacturer: g.manufacturer().unwrap_or_default().to_string(),
                name: g.name().unwrap_or_default().to_string(),
                count: i64::from(g.count().unwrap_or(0)),
                memory_mib: g.memory_info().and_then(|m| m.size_in_mib()).map(i64::from),
            })
            .collect(),
        accelerators,
    })
}

/// The zones each type is offered in (DescribeInstanceTypeOfferings by availability zone).
async fn offerings(
    ec2: &aws_sdk_ec2::Client,
    zones: &BTreeSet<String>,
) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut req = ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone);
    if !zones.is_empty() {
        req = req.filters(
            Filter::builder()
                .name("location")
                .set_values(Some(zones.iter().cloned().collect()))
                .build(),
        );
    }
    let mut pages = req.max_results(1000).into_paginator().items().send();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    while let Some(item) = pages.next().await {
        let item = item.map_err(|e| from_sdk("DescribeInstanceTypeOfferings", &e, &[]))?;
        if let (Some(t), Some(zone)) = (item.instance_type(), item.location()) {
            out.entry(t.as_str().to_string())
                .or_default()
                .insert(zone.to_string());
        }
    }
    Ok(out)
}

/// The latest Linux spot price per (type, zone), from `now` on.
async fn spot_prices(
    ec2: &aws_sdk_ec2::Client,
    zones: &BTreeSet<String>,
    now: DateTime,
) -> Result<BTreeMap<(String, String), f64>> {
    let mut req = ec2
        .describe_spot_price_history()
        .product_descriptions(LINUX)
        .start_time(now);
    if !zones.is_empty() {
        req = req.filters(
            Filter::builder()
                .name("availability-zone")
                .set_values(Some(zones.iter().cloned().collect()))
                .build(),
        );
    }
    let mut pages = req.max_results(1000).into_paginator().items().send();
    let mut latest: BTreeMap<(String, String), (DateTime, f64)> = BTreeMap::new();
    while let Some(item) = pages.next().await {
        let item = item.map_err(|e| from_sdk("DescribeSpotPriceHistory", &e, &[]))?;
        let (Some(t), Some(zone), Some(price)) = (
            item.instance_type(),
            item.availability_zone(),
            item.spot_price().and_then(|p| p.parse::<f64>().ok()),
        ) else {
            continue;
        };
        if !price.is_finite() || price < 0.0 {
            continue;
        }
        let at = item.timestamp().copied().unwrap_or(DateTime::from_secs(0));
        let key = (t.as_str().to_string(), zone.to_string());
        match latest.get(&key) {
            Some((seen, _)) if *seen >= at => {}
            _ => {
                latest.insert(key, (at, price));
            }
        }
    }
    Ok(latest.into_iter().map(|(k, (_, p))| (k, p)).collect())
}

/// An offering at a known price.
fn priced(zone: &str, capacity_type: &str, price: f64) -> Offering {
    Offering {
        zone: zone.to_string(),
        capacity_type: capacity_type.to_string(),
        price,
        available: true,
        unpriced: false,
    }
}

/// An offering no price source knows (a preview type, or a zone without spot price history):
/// unavailable unless a NodeOverlay prices it (aws/karpenter-provider-aws
/// `pkg/providers/instancetype/offering/base_resolver.go`: `Available` needs `hasPrice`, and
/// `GetOverlayPrice` supplies one).
fn unpriced(zone: &str, capacity_type: &str) -> Offering {
    Offering {
        zone: zone.to_string(),
        capacity_type: capacity_type.to_string(),
        price: 0.0,
        available: false,
        unpriced: true,
    }
}

/// Puts the answers together (pure, so it is tested without EC2).
pub fn assemble(
    region: &str,
    mut infos: Vec<InstanceTypeInfo>,
    offered: &BTreeMap<String, BTreeSet<String>>,
    spot: &BTreeMap<(String, String), f64>,
    region_prices: &RegionPrices,
) -> CatalogFacts {
    let prices = &region_prices.prices;
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    infos.dedup_by(|a, b| a.name == b.name);
    let (mut no_zone, mut no_on_demand_price, mut no_spot_price) = (0, 0, 0);
    let mut instance_types = Vec::new();
    for info in infos {
        let Some(zones) = offered.get(&info.name) else {
            no_zone += 1;
            continue;
        };
        let on_demand = prices.get(&info.name);
        let mut offerings = Vec::new();
        for zone in zones {
            if info.usage_classes.iter().any(|c| c == CAPACITY_ON_DEMAND) {
                match on_demand {
                    Some(price) => offerings.push(priced(zone, CAPACITY_ON_DEMAND, price)),
                    None => {
                        no_on_demand_price += 1;
                        offerings.push(unpriced(zone, CAPACITY_ON_DEMAND));
                    }
                }
            }
            if info.usage_classes.iter().any(|c| c == CAPACITY_SPOT) {
                match spot.get(&(info.name.clone(), zone.clone())) {
                    Some(&price) => offerings.push(priced(zone, CAPACITY_SPOT, price)),
                    None => {
                        no_spot_price += 1;
                        offerings.push(unpriced(zone, CAPACITY_SPOT));
                    }
                }
            }
        }
        offerings.sort_by(|a, b| {
            (a.zone.as_str(), a.capacity_type.as_str())
                .cmp(&(b.zone.as_str(), b.capacity_type.as_str()))
        });
        instance_types.push(InstanceTypeFacts { info, offerings });
    }
    let mut notes = vec![format!(
        "Live EC2 catalog for {region}: {} instance types (DescribeInstanceTypes), offerings \
         per zone (DescribeInstanceTypeOfferings), spot prices from DescribeSpotPriceHistory \
         (latest per type and zone), on-demand prices from the built-in table unless a note \
         below names the Pricing API.",
        instance_types.len(),
    )];
    notes.push(region_prices.note(region));
    for (n, what) in [
        (
            no_zone,
            "instance types are offered in none of the zones and are left out",
        ),
        (
            no_on_demand_price,
            "on-demand offerings have no price in the built-in table or the Pricing API and are \
             carried unavailable (unpriced: a NodeOverlay price makes them available)",
        ),
        (
            no_spot_price,
            "spot offerings have no spot price history and are carried unavailable (unpriced: a \
             NodeOverlay price makes them available)",
        ),
    ] {
        if n > 0 {
            notes.push(format!("{n} {what}."));
        }
    }
    CatalogFacts {
        region: region.to_string(),
        instance_types,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, classes: &[&str]) -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: name.to_string(),
            vcpu: 2,
            memory_mib: 8192,
            architectures: vec!["x86_64".into()],
            usage_classes: classes.iter().map(|c| c.to_string()).collect(),
            max_network_interfaces: 3,
            ipv4_per_interface: 10,
            ..InstanceTypeInfo::default()
        }
    }

    #[test]
    fn offerings_need_a_zone_and_a_price() {
        let prices = OnDemandPrices::for_region("us-east-1").expect("prices");
        let offered = BTreeMap::from([
            (
                "m5.large".to_string(),
                BTreeSet::from(["us-east-1b".to_string(), "us-east-1a".to_string()]),
            ),
            (
                "no-price.large".to_string(),
                BTreeSet::from(["us-east-1a".to_string()]),
            ),
        ]);
        let spot = BTreeMap::from([(("m5.large".to_string(), "us-east-1a".to_string()), 0.04)]);
        let facts = assemble(
            "us-east-1",
            vec![
                info("m5.large", &["on-demand", "spot"]),
                info("no-price.large", &["on-demand"]),
                info("nowhere.large", &["on-demand"]),
            ],
            &offered,
            &spot,
            &prices,
        );
        let names: Vec<&str> = facts
            .instance_types
            .iter()
            .map(|t| t.info.name.as_str())
            .collect();
        assert_eq!(names, ["m5.large", "no-price.large"]);
        let m5: Vec<(&str, &str, f64)> = facts.instance_types[0]
            .offerings
            .iter()
            .filter(|o| !o.unpriced)
            .map(|o| (o.zone.as_str(), o.capacity_type.as_str(), o.price))
            .collect();
        assert_eq!(
            m5,
            [
                ("us-east-1a", "on-demand", 0.096),
                ("us-east-1a", "spot", 0.04),
                ("us-east-1b", "on-demand", 0.096),
            ]
        );
        let preview = &facts.instance_types[1].offerings;
        assert_eq!(preview.len(), 1, "{preview:?}");
        assert!(
            preview[0].unpriced && !preview[0].available && preview[0].price == 0.0,
            "a type no price source knows is carried unpriced and unavailable: {preview:?}"
        );
        let notes = facts.notes.join("\n");
        assert!(
            notes.contains("1 instance types are offered in none"),
            "{notes}"
        );
        assert!(
            notes.contains("1 spot offerings have no spot price"),
            "{notes}"
        );
        assert!(
            notes.contains("1 on-demand offerings have no price"),
            "{notes}"
        );
    }
}
