//! The catalog calls of EC2 over the simulator's catalog (`crate::instance_types`): what the
//! simulated EC2 sells, in the shapes of DescribeInstanceTypes, DescribeInstanceTypeOfferings
//! and DescribeSpotPriceHistory.
//!
//! Types come from the simulation's catalog; their EC2 facts (vCPUs, memory, ENIs, IPv4
//! addresses per ENI, GPUs) from the project's data file when it has the type, else derived
//! from the catalog entry (one interface carrying max-pods − 1 addresses, so that the EKS
//! max-pods formula gives the same number back). Offerings marked out of capacity are still
//! offered (EC2 does not hide them either); spot prices are the catalog's, stamped now.

use cloud::InstanceType;

use super::network::{filters, matches};
use super::query::{Params, page};
use super::xml::Xml;
use super::{Aws, AwsError};
use crate::clock::rfc3339;
use crate::instance_types::{Ec2Facts, ec2_facts};
use crate::labels;

type Result<T, E = AwsError> = std::result::Result<T, E>;

fn facts(t: &InstanceType) -> Ec2Facts {
    ec2_facts(&t.name).unwrap_or_else(|| {
        let arch = match t.labels.get(labels::ARCH).map(String::as_str) {
            Some("arm64") => "arm64",
            _ => "x86_64",
        };
        let memory_mib = t
            .labels
            .get(labels::INSTANCE_MEMORY)
            .and_then(|m| m.parse().ok())
            .unwrap_or(t.capacity.memory >> 20);
        let mut usage: Vec<String> = t
            .offerings
            .iter()
            .map(|o| o.capacity_type.clone())
            .collect();
        usage.sort();
        usage.dedup();
        Ec2Facts {
            vcpu: t.capacity.cpu / 1000,
            memory_mib,
            architectures: vec![arch.into()],
            usage_classes: usage,
            max_network_interfaces: 1,
            network_cards: vec![(0, 1)],
            ipv4_per_interface: (t.capacity.pods - 1).max(1),
            gpus: Vec::new(),
            sustained_clock_speed_mhz: None,
            ebs_bandwidth_mbps: None,
        }
    })
}

const TYPE_FILTERS: &[&str] = &[
    "instance-type",
    "processor-info.supported-architecture",
    "supported-usage-class",
    "current-generation",
    "vcpu-info.default-vcpus",
    "memory-info.size-in-mib",
];

pub(crate) fn describe_instance_types(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let names = p.strings("InstanceType");
    let fs = filters(p, TYPE_FILTERS, false)?;
    let catalog = aws.cloud().catalog();
    if let Some(bad) = names
        .iter()
        .find(|n| !catalog.instance_types.iter().any(|t| &t.name == *n))
    {
        return Err(AwsError::invalid_value(format!(
            "The following supplied instance types do not exist: [{bad}]"
        )));
    }
    let selected: Vec<(&InstanceType, Ec2Facts)> = catalog
        .instance_types
        .iter()
        .filter(|t| names.is_empty() || names.contains(&t.name))
        .map(|t| (t, facts(t)))
        .filter(|(t, f)| {
            matches(&fs, &Default::default(), |name| match name {
                "instance-type" => vec![t.name.clone()],
                "processor-info.supported-architecture" => f.architectures.clone(),
                "supported-usage-class" => f.usage_classes.clone(),
                "current-generation" => vec!["true".into()],
                "vcpu-info.default-vcpus" => vec![f.vcpu.to_string()],
                "memory-info.size-in-mib" => vec![f.memory_mib.to_string()],
                _ => vec![],
            })
        })
        .collect();
    let (selected, next) = page(selected, p)?;
    Ok(Xml::response("DescribeInstanceTypes", rid, |x| {
        x.list("instanceTypeSet", &selected, |x, (t, f)| {
            x.leaf("instanceType", &t.name);
            x.leaf("currentGeneration", true);
            x.leaf("freeTierEligible", false);
            x.list("supportedUsageClasses", &f.usage_classes, |x, u| x.text(u));
            x.list("supportedRootDeviceTypes", ["ebs"], |x, u| x.text(u));
            x.list("supportedVirtualizationTypes", ["hvm"], |x, u| x.text(u));
            x.leaf("bareMetal", t.name.ends_with(".metal"));
            x.leaf("hypervisor", "nitro");
            x.elem("processorInfo", |x| {
                x.list("supportedArchitectures", &f.architectures, |x, a| x.text(a));
                if let Some(mhz) = f.sustained_clock_speed_mhz {
                    x.leaf("sustainedClockSpeedInGhz", mhz as f64 / 1000.0);
                }
            });
            x.elem("vCpuInfo", |x| {
                x.leaf("defaultVCpus", f.vcpu);
            });
            x.elem("memoryInfo", |x| x.leaf("sizeInMiB", f.memory_mib));
            x.leaf("instanceStorageSupported", false);
            x.elem("ebsInfo", |x| {
                match f.ebs_bandwidth_mbps {
                    Some(mbps) => {
                        x.leaf("ebsOptimizedSupport", "default");
                        x.elem("ebsOptimizedInfo", |x| {
                            x.leaf("maximumBandwidthInMbps", mbps)
                        });
                    }
                    None => x.leaf("ebsOptimizedSupport", "supported"),
                }
                x.leaf("encryptionSupport", "supported");
                x.leaf("nvmeSupport", "required");
            });
            x.elem("networkInfo", |x| {
                x.leaf("maximumNetworkInterfaces", f.max_network_interfaces);
                x.leaf("maximumNetworkCards", f.network_cards.len().max(1));
                x.leaf("defaultNetworkCardIndex", 0);
                x.list("networkCards", &f.network_cards, |x, (i, m)| {
                    x.leaf("networkCardIndex", i);
                    x.leaf("maximumNetworkInterfaces", m);
                });
                x.leaf("ipv4AddressesPerInterface", f.ipv4_per_interface);
                x.leaf("ipv6AddressesPerInterface", f.ipv4_per_interface);
                x.leaf("ipv6Supported", true);
                x.leaf("enaSupport", "required");
                x.leaf("efaSupported", false);
            });
            if !f.gpus.is_empty() {
                x.elem("gpuInfo", |x| {
                    x.list("gpus", &f.gpus, |x, (manufacturer, name, count)| {
                        x.leaf("name", name);
                        x.leaf("manufacturer", manufacturer);
                        x.leaf("count", count);
                    });
                });
            }
            x.leaf("hibernationSupported", false);
            x.leaf("burstablePerformanceSupported", t.name.starts_with('t'));
            x.leaf("dedicatedHostsSupported", false);
            x.leaf("autoRecoverySupported", true);
            x.list("supportedBootModes", ["legacy-bios", "uefi"], |x, m| {
                x.text(m)
            });
            x.leaf("supportedInRegion", true);
        });
        x.opt("nextToken", next.as_deref());
    }))
}

pub(crate) fn describe_instance_type_offerings(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let location_type = p.get("LocationType").unwrap_or("region");
    let net = aws.network().clone();
    let zone_id = |zone: &str| {
        net.subnets
            .iter()
            .find(|s| s.zone == zone)
            .map(|s| s.zone_id.clone())
            .unwrap_or_default()
    };
    let fs = filters(p, &["instance-type", "location"], false)?;
    let region = aws.region().to_string();
    let mut rows: Vec<(String, String)> = Vec::new();
    for t in &aws.cloud().catalog().instance_types {
        let mut locations: Vec<String> = match location_type {
            "region" => vec![region.clone()],
            "availability-zone" => t.offerings.iter().map(|o| o.zone.clone()).collect(),
            "availability-zone-id" => t.offerings.iter().map(|o| zone_id(&o.zone)).collect(),
            other => {
                return Err(AwsError::invalid_value(format!(
                    "LocationType {other}: expected region, availability-zone or availability-zone-id"
                )));
            }
        };
        locations.sort();
        locations.dedup();
        for l in locations {
            let keep = matches(&fs, &Default::default(), |name| match name {
                "instance-type" => vec![t.name.clone()],
                "location" => vec![l.clone()],
                _ => vec![],
            });
            if keep {
                rows.push((t.name.clone(), l));
            }
        }
    }
    let (rows, next) = page(rows, p)?;
    Ok(Xml::response("DescribeInstanceTypeOfferings", rid, |x| {
        x.list("instanceTypeOfferingSet", &rows, |x, (t, l)| {
            x.leaf("instanceType", t);
            x.leaf("locationType", location_type);
            x.leaf("location", l);
        });
        x.opt("nextToken", next.as_deref());
    }))
}

pub(crate) fn describe_spot_price_history(aws: &Aws, p: &Params, rid: &str) -> Result<String> {
    let types = p.strings("InstanceType");
    let products = p.strings("ProductDescription");
    let zone = p.get("AvailabilityZone");
    let fs = filters(
        p,
        &[
            "instance-type",
            "availability-zone",
            "product-description",
            "spot-price",
        ],
        false,
    )?;
    let now = rfc3339(aws.clock().now());
    let net = aws.network().clone();
    let mut rows: Vec<(String, String, String, f64)> = Vec::new();
    for t in &aws.cloud().catalog().instance_types {
        if !types.is_empty() && !types.contains(&t.name) {
            continue;
        }
        // An unpriced offering (a preview type) has no spot price history.
        for o in t
            .offerings
            .iter()
            .filter(|o| o.capacity_type == labels::CAPACITY_SPOT && !o.unpriced)
        {
            if zone.is_some_and(|z| z != o.zone) {
                continue;
            }
            let product = "Linux/UNIX";
            if !products.is_empty()
                && !products
                    .iter()
                    .any(|p| p == product || p == "Linux/UNIX (Amazon VPC)")
            {
                continue;
            }
            let price = format!("{:.6}", o.price);
            let keep = matches(&fs, &Default::default(), |name| match name {
                "instance-type" => vec![t.name.clone()],
                "availability-zone" => vec![o.zone.clone()],
                "product-description" => vec![product.into()],
                "spot-price" => vec![price.clone()],
                _ => vec![],
            });
            if keep {
                let zone_id = net
                    .subnets
                    .iter()
                    .find(|s| s.zone == o.zone)
                    .map(|s| s.zone_id.clone())
                    .unwrap_or_default();
                rows.push((t.name.clone(), o.zone.clone(), zone_id, o.price));
            }
        }
    }
    let (rows, next) = page(rows, p)?;
    Ok(Xml::response("DescribeSpotPriceHistory", rid, |x| {
        x.list("spotPriceHistorySet", &rows, |x, (t, z, zid, price)| {
            x.leaf("instanceType", t);
            x.leaf("productDescription", "Linux/UNIX");
            x.leaf("spotPrice", format!("{price:.6}"));
            x.leaf("timestamp", &now);
            x.leaf("availabilityZone", z);
            x.leaf("availabilityZoneId", zid);
        });
        x.leaf("nextToken", next.as_deref().unwrap_or(""));
    }))
}
