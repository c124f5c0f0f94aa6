//! The simulator's own table of EC2 instance types: what a node of each type reports as
//! capacity and allocatable, and the catalog (types, zones, prices) the simulated EC2 sells.
//!
//! Facts about EC2 (vCPUs, memory, ENIs, IPv4 addresses per ENI, GPUs, architectures, usage
//! classes, zones of us-east-1, on-demand prices) are read, with the simulator's own parsing,
//! from the project's data files `planner/engine/data/aws/instance-types.json`,
//! `planner/engine/data/aws/zones/us-east-1.json` and
//! `common/data/aws/on-demand-prices-us-east-1.json`, compiled in with `include_str!`.
//! They are facts about EC2, not planner code; no planner code is used.
//!
//! Capacity and allocatable follow the published EKS behaviour, written out again here:
//! - max pods (ENI-limited, no prefix delegation) = ENIs × (IPv4 per ENI − 1) + 2, counting the
//!   ENIs of the default network card (AWS's `eni-max-pods.txt`);
//! - kube-reserved CPU = 6% of the first core + 1% of the second + 0.5% of cores 3–4 + 0.25% of
//!   the rest, each range rounded down to a millicore (the EKS AMI bootstrap script's integer
//!   arithmetic);
//! - kube-reserved memory = 11 MiB × max pods + 255 MiB;
//! - eviction threshold: `memory.available < 100Mi`, `nodefs.available < 10%`;
//! - memory capacity: the hypervisor keeps part of what EC2 reports; the simulator keeps 7.5%
//!   (rounded up to a MiB), Karpenter's default `vmMemoryOverheadPercent`;
//! - ephemeral storage: a 20 GiB root volume.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use cloud::{Catalog, InstanceType, Offering};
use serde::Deserialize;

use crate::labels;
use crate::resources::Resources;

/// The region the built-in data has prices for.
pub const REGION: &str = "us-east-1";
/// Offline spot price as a fraction of the on-demand price (every zone alike).
pub const SPOT_PRICE_FRACTION: f64 = 0.35;
/// Memory kept back for eviction (`memory.available < 100Mi`).
pub const EVICTION_MEMORY: i64 = 100 << 20;
/// Ephemeral storage of every simulated node (the root volume), in bytes.
pub const ROOT_VOLUME: i64 = 20 << 30;

const INSTANCE_TYPES: &str = include_str!("../../planner/engine/data/aws/instance-types.json");
const ZONES: &str = include_str!("../../planner/engine/data/aws/zones/us-east-1.json");
const PRICES: &str = include_str!("../../common/data/aws/on-demand-prices-us-east-1.json");

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTypes {
    instance_types: Vec<RawType>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawType {
    name: String,
    vcpu: i64,
    #[serde(rename = "memoryMiB")]
    memory_mib: i64,
    architectures: Vec<String>,
    usage_classes: Vec<String>,
    max_network_interfaces: i64,
    ipv4_per_interface: i64,
    #[serde(default)]
    network_cards: Vec<RawCard>,
    #[serde(default)]
    gpus: Vec<RawGpu>,
    #[serde(default)]
    sustained_clock_speed_mhz: Option<i64>,
    #[serde(default)]
    ebs_bandwidth_mbps: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCard {
    index: i64,
    max_interfaces: i64,
}

#[derive(Deserialize)]
struct RawGpu {
    manufacturer: String,
    name: String,
    count: i64,
}

#[derive(Deserialize)]
struct RawZones {
    types: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPrices {
    on_demand: BTreeMap<String, f64>,
}

/// Max pods of an ENI-limited node: `enis × (ipv4_per_eni − 1) + 2`.
pub fn max_pods(enis: i64, ipv4_per_eni: i64) -> i64 {
    enis * (ipv4_per_eni - 1) + 2
}

/// kube-reserved CPU in millicores for `cpu_milli` of capacity: 6% of the first core, 1% of
/// the second, 0.5% of cores 3–4 and 0.25% of the rest, each range rounded down.
pub fn kube_reserved_cpu(cpu_milli: i64) -> i64 {
    // (range start, range end, basis points reserved)
    let ranges = [(0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50)];
    let mut reserved = 0;
    for (lo, hi, bp) in ranges {
        let in_range = cpu_milli.clamp(lo, hi) - lo;
        reserved += in_range * bp / 10_000;
    }
    reserved + (cpu_milli - 4000).max(0) * 25 / 10_000
}

/// kube-reserved memory in bytes for a node with `max_pods`: 11 MiB × max pods + 255 MiB.
pub fn kube_reserved_memory(max_pods: i64) -> i64 {
    (11 * max_pods + 255) << 20
}

/// What pods can use on a node of `capacity` (whose `pods` is its max pods): capacity minus
/// kube-reserved and the eviction thresholds.
pub fn allocatable(capacity: &Resources) -> Resources {
    let mut a = capacity.clone();
    a.cpu -= kube_reserved_cpu(capacity.cpu);
    a.memory -= kube_reserved_memory(capacity.pods) + EVICTION_MEMORY;
    a.ephemeral_storage -= (capacity.ephemeral_storage + 9) / 10;
    a
}

/// Memory capacity in bytes the kubelet reports for `ec2_mib` of EC2 memory.
pub fn memory_capacity(ec2_mib: i64) -> i64 {
    (ec2_mib - (ec2_mib * 75 + 999) / 1000) << 20
}

/// The catalog entry of a type whose node reports `capacity` (the simulator fills capacity,
/// overhead and labels; offerings are given).
pub fn instance_type(
    name: &str,
    arch: &str,
    capacity: &Resources,
    ec2_mib: i64,
    offerings: Vec<Offering>,
) -> InstanceType {
    let mut it = InstanceType {
        name: name.to_string(),
        capacity: Default::default(),
        overhead: Default::default(),
        labels: Default::default(),
        os: vec!["linux".to_string()],
        offerings,
    };
    it.capacity.cpu = capacity.cpu;
    it.capacity.memory = capacity.memory;
    it.capacity.ephemeral_storage = capacity.ephemeral_storage;
    it.capacity.pods = capacity.pods;
    it.capacity.extended = capacity.extended.clone();
    it.overhead.kube_reserved.cpu = kube_reserved_cpu(capacity.cpu);
    it.overhead.kube_reserved.memory = kube_reserved_memory(capacity.pods);
    it.overhead.eviction_threshold.memory = EVICTION_MEMORY;
    it.overhead.eviction_threshold.ephemeral_storage = (capacity.ephemeral_storage + 9) / 10;
    let (family, size) = name.split_once('.').unwrap_or((name, ""));
    let category: String = family
        .chars()
        .take_while(char::is_ascii_lowercase)
        .collect();
    let generation: String = family[category.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let mut put = |k: &str, v: String| {
        it.labels.insert(k.to_string(), v);
    };
    put(labels::INSTANCE_TYPE, name.to_string());
    put(labels::ARCH, arch.to_string());
    put(labels::OS, "linux".to_string());
    put(labels::INSTANCE_FAMILY, family.to_string());
    put(labels::INSTANCE_CATEGORY, category);
    if !generation.is_empty() {
        put(labels::INSTANCE_GENERATION, generation);
    }
    put(labels::INSTANCE_SIZE, size.to_string());
    put(labels::INSTANCE_CPU, (capacity.cpu / 1000).to_string());
    put(labels::INSTANCE_MEMORY, ec2_mib.to_string());
    it
}

/// The built-in us-east-1 catalog, built once: every type with a Kubernetes architecture, a
/// zone in the region and an on-demand price, offered in each of its zones on-demand and/or
/// spot as its usage classes allow (spot at [`SPOT_PRICE_FRACTION`] of on-demand).
///
/// # Errors
/// [`DataError`] when a compiled-in data file does not parse.
pub fn builtin() -> Result<Catalog, DataError> {
    static CATALOG: OnceLock<Result<Catalog, DataError>> = OnceLock::new();
    CATALOG.get_or_init(build).clone()
}

/// What EC2's DescribeInstanceTypes says about one type, from the project's data file.
#[derive(Clone, Debug, PartialEq)]
pub struct Ec2Facts {
    /// vCPUs.
    pub vcpu: i64,
    /// Memory in MiB as EC2 reports it.
    pub memory_mib: i64,
    /// `x86_64`, `arm64`, ….
    pub architectures: Vec<String>,
    /// `on-demand`, `spot`.
    pub usage_classes: Vec<String>,
    /// Network interfaces of the type (all cards).
    pub max_network_interfaces: i64,
    /// Interfaces per network card, `(index, max interfaces)`.
    pub network_cards: Vec<(i64, i64)>,
    /// IPv4 addresses per interface.
    pub ipv4_per_interface: i64,
    /// GPUs: `(manufacturer, name, count)`.
    pub gpus: Vec<(String, String, i64)>,
    /// Sustained clock speed in MHz (DescribeInstanceTypes reports GHz).
    pub sustained_clock_speed_mhz: Option<i64>,
    /// Maximum EBS bandwidth in Mbit/s of a type EBS-optimized by default.
    pub ebs_bandwidth_mbps: Option<i64>,
}

/// The EC2 facts of `name`, when the project's data has the type.
pub fn ec2_facts(name: &str) -> Option<Ec2Facts> {
    static FACTS: OnceLock<BTreeMap<String, Ec2Facts>> = OnceLock::new();
    FACTS
        .get_or_init(|| {
            let Ok(types) = parse::<RawTypes>("instance-types.json", INSTANCE_TYPES) else {
                return BTreeMap::new();
            };
            types
                .instance_types
                .into_iter()
                .map(|r| {
                    let facts = Ec2Facts {
                        vcpu: r.vcpu,
                        memory_mib: r.memory_mib,
                        architectures: r.architectures,
                        usage_classes: r.usage_classes,
                        max_network_interfaces: r.max_network_interfaces,
                        network_cards: r
                            .network_cards
                            .iter()
                            .map(|c| (c.index, c.max_interfaces))
                            .collect(),
                        ipv4_per_interface: r.ipv4_per_interface,
                        gpus: r
                            .gpus
                            .into_iter()
                            .map(|g| (g.manufacturer, g.name, g.count))
                            .collect(),
                        sustained_clock_speed_mhz: r.sustained_clock_speed_mhz,
                        ebs_bandwidth_mbps: r.ebs_bandwidth_mbps,
                    };
                    (r.name, facts)
                })
                .collect()
        })
        .get(name)
        .cloned()
}

/// A compiled-in data file does not parse.
#[derive(Clone, Debug, thiserror::Error)]
#[error("simulator data file {file} does not parse: {message}")]
pub struct DataError {
    /// The file at fault.
    pub file: &'static str,
    /// What the JSON parser said.
    pub message: String,
}

fn parse<T: serde::de::DeserializeOwned>(file: &'static str, text: &str) -> Result<T, DataError> {
    serde_json::from_str(text).map_err(|e| DataError {
        file,
        message: e.to_string(),
    })
}

fn build() -> Result<Catalog, DataError> {
    let types: RawTypes = parse("instance-types.json", INSTANCE_TYPES)?;
    let zones: RawZones = parse("zones/us-east-1.json", ZONES)?;
    let prices: RawPrices = parse("on-demand-prices-us-east-1.json", PRICES)?;
    let mut out = Vec::new();
    for raw in &types.instance_types {
        let Some(arch) = raw.architectures.iter().find_map(|a| match a.as_str() {
            "x86_64" => Some("amd64"),
            "arm64" => Some("arm64"),
            _ => None,
        }) else {
            continue;
        };
        let (Some(letters), Some(&on_demand)) =
            (zones.types.get(&raw.name), prices.on_demand.get(&raw.name))
        else {
            continue;
        };
        let spot = (on_demand * SPOT_PRICE_FRACTION * 1e6).round() / 1e6;
        let mut offerings = Vec::new();
        for letter in letters.chars() {
            let mut seen: Vec<&str> = Vec::new();
            for class in &raw.usage_classes {
                let price = match class.as_str() {
                    labels::CAPACITY_ON_DEMAND => on_demand,
                    labels::CAPACITY_SPOT => spot,
                    _ => continue,
                };
                if seen.contains(&class.as_str()) {
                    continue;
                }
                seen.push(class);
                offerings.push(Offering {
                    zone: format!("{REGION}{letter}"),
                    capacity_type: class.clone(),
                    price,
                    available: true,
                    unpriced: false,
                });
            }
        }
        if offerings.is_empty() {
            continue;
        }
        let enis = raw
            .network_cards
            .iter()
            .find(|c| c.index == 0)
            .map_or(raw.max_network_interfaces, |c| c.max_interfaces);
        let mut capacity = Resources {
            cpu: raw.vcpu * 1000,
            memory: memory_capacity(raw.memory_mib),
            ephemeral_storage: ROOT_VOLUME,
            pods: max_pods(enis, raw.ipv4_per_interface),
            extended: BTreeMap::new(),
        };
        let mut gpu_labels = None;
        if let [gpu] = raw.gpus.as_slice() {
            let resource = match gpu.manufacturer.as_str() {
                "NVIDIA" => Some("nvidia.com/gpu"),
                "AMD" => Some("amd.com/gpu"),
                _ => None,
            };
            if let Some(resource) = resource {
                capacity.extended.insert(resource.into(), gpu.count * 1000);
            }
            gpu_labels = Some(gpu);
        }
        let mut it = instance_type(&raw.name, arch, &capacity, raw.memory_mib, offerings);
        if let Some(gpu) = gpu_labels {
            for (k, v) in [
                (labels::INSTANCE_GPU_COUNT, gpu.count.to_string()),
                (labels::INSTANCE_GPU_MANUFACTURER, kebab(&gpu.manufacturer)),
                (labels::INSTANCE_GPU_NAME, kebab(&gpu.name)),
            ] {
                it.labels.insert(k.into(), v);
            }
        }
        it.labels.insert(labels::REGION.into(), REGION.into());
        out.push(it);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    let notes = vec![format!(
        "Simulated EC2 catalog for {REGION}: {} instance types; on-demand Linux prices from \
             the project's data; spot offerings cost {SPOT_PRICE_FRACTION} x on-demand.",
        out.len()
    )];
    Ok(Catalog {
        instance_types: out,
        notes,
    })
}

fn kebab(s: &str) -> String {
    s.to_ascii_lowercase().replace([' ', '_'], "-")
}

/// The simulator's built-in us-east-1 catalog ([`builtin`]: the
/// project's EC2 data with the simulator's own EKS formulas), or the small sample catalog should
/// the data fail to parse.
pub fn default_catalog() -> Catalog {
    crate::instance_types::builtin().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "Built-in AWS catalog unavailable; using the sample catalog");
        sample_catalog("us-east-1")
    })
}

/// A small catalog for tests that do not need the full AWS one: general-purpose and
/// compute-optimized amd64 types plus one arm64 type, in three zones, on-demand and spot, with
/// capacity and overhead from the simulator's EKS formulas (this module).
pub fn sample_catalog(region: &str) -> Catalog {
    let types = [
        ("m5.large", 2, 8192, 29, "amd64", 0.096),
        ("m5.xlarge", 4, 16384, 58, "amd64", 0.192),
        ("m5.2xlarge", 8, 32768, 58, "amd64", 0.384),
        ("c5.large", 2, 4096, 29, "amd64", 0.085),
        ("c5.xlarge", 4, 8192, 58, "amd64", 0.17),
        ("m6g.large", 2, 8192, 29, "arm64", 0.077),
    ];
    let zones = ["a", "b", "c"].map(|z| format!("{region}{z}"));
    let instance_types = types
        .iter()
        .map(|(name, vcpu, mib, pods, arch, price)| {
            let capacity = Resources {
                cpu: vcpu * 1000,
                memory: mib << 20,
                ephemeral_storage: ROOT_VOLUME,
                pods: *pods,
                extended: BTreeMap::new(),
            };
            let mut offerings = Vec::new();
            for z in &zones {
                for (ct, p) in [("on-demand", *price), ("spot", price * 0.35)] {
                    offerings.push(Offering {
                        zone: z.clone(),
                        capacity_type: ct.into(),
                        price: p,
                        unpriced: false,
                        available: true,
                    });
                }
            }
            let mut it = instance_type(name, arch, &capacity, *mib, offerings);
            it.labels
                .insert(crate::labels::REGION.into(), region.to_string());
            it
        })
        .collect();
    Catalog {
        instance_types,
        notes: vec!["simulator sample catalog".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eks_formulas_match_published_figures() {
        // eni-max-pods.txt: m5.large 29, m5.xlarge 58, c5.18xlarge 737... (15 × 49 + 2).
        assert_eq!(max_pods(3, 10), 29);
        assert_eq!(max_pods(4, 15), 58);
        assert_eq!(max_pods(15, 50), 737);
        // 2 vCPUs: 60 + 10; 4 vCPUs: + 2 × 5; 8 vCPUs: + 4 × 2.5.
        assert_eq!(kube_reserved_cpu(2000), 70);
        assert_eq!(kube_reserved_cpu(4000), 80);
        assert_eq!(kube_reserved_cpu(8000), 90);
        assert_eq!(kube_reserved_cpu(500), 30);
        assert_eq!(kube_reserved_memory(29), 574 << 20);
    }

    #[test]
    fn builtin_sells_m5_large_with_eks_allocatable() {
        let c = builtin().unwrap();
        let t = c
            .instance_types
            .iter()
            .find(|t| t.name == "m5.large")
            .unwrap();
        assert_eq!((t.capacity.cpu, t.capacity.pods), (2000, 29));
        assert_eq!(t.capacity.memory, (8192 - 615) << 20);
        let od = t
            .offerings
            .iter()
            .find(|o| o.capacity_type == "on-demand")
            .unwrap();
        let spot = t
            .offerings
            .iter()
            .find(|o| o.capacity_type == "spot")
            .unwrap();
        assert!((spot.price - od.price * SPOT_PRICE_FRACTION).abs() < 1e-6);
        let cap = Resources {
            cpu: 2000,
            memory: 8 << 30,
            ephemeral_storage: ROOT_VOLUME,
            pods: 29,
            extended: BTreeMap::new(),
        };
        let a = allocatable(&cap);
        assert_eq!(a.cpu, 1930);
        assert_eq!(a.memory, (8192 - 574 - 100) << 20);
        assert!(c.instance_types.len() > 500, "{}", c.instance_types.len());
    }
}
