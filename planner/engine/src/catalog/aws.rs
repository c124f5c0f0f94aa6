//! The built-in AWS catalog, compiled in from `planner/engine/data/aws/`.
//!
//! The data are EC2 facts (DescribeInstanceTypes, the zones of 30 regions) and on-demand Linux
//! prices for us-east-1; `scripts/aws-data.py` copies them from the shared data folder. For every
//! type the catalog computes capacity, overhead and labels with Karpenter's rules (see
//! [`super::overhead`] and [`name_labels`]) and one offering per zone and capacity type.
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

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use thiserror::Error;

use crate::labels;
use crate::model::{Labels, Resources};

use super::overhead::{self, DEFAULT_EPHEMERAL_STORAGE};
use super::{Catalog, InstanceType, Offering};

/// The region whose prices the built-in data carries, and the default region.
pub const PRICED_REGION: &str = "us-east-1";

/// Offline spot price as a fraction of the on-demand price.
pub const SPOT_PRICE_FRACTION: f64 = 0.35;

/// Extended resource: NVIDIA GPUs.
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
/// Extended resource: AMD GPUs.
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
/// Extended resource: AWS Neuron devices (Inferentia, Trainium).
pub const RESOURCE_AWS_NEURON: &str = "aws.amazon.com/neuron";
/// Extended resource: AWS NeuronCores.
pub const RESOURCE_AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
/// Extended resource: Habana Gaudi accelerators.
pub const RESOURCE_HABANA_GAUDI: &str = "habana.ai/gaudi";
/// Extended resource: Elastic Fabric Adapter interfaces.
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";

const INSTANCE_TYPES_FILE: &str = "data/aws/instance-types.json";
const PRICES_FILE: &str = "data/aws/on-demand-prices-us-east-1.json";
const INSTANCE_TYPES: &str = include_str!("../../data/aws/instance-types.json");
const PRICES: &str = include_str!("../../data/aws/on-demand-prices-us-east-1.json");

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
    let types: RawTypes<'_> =
        serde_json::from_str(INSTANCE_TYPES).map_err(|source| Error::Data {
            file: INSTANCE_TYPES_FILE,
            source,
        })?;
    let prices: RawPrices<'_> = serde_json::from_str(PRICES).map_err(|source| Error::Data {
        file: PRICES_FILE,
        source,
    })?;
    let zones: RawZones<'_> = serde_json::from_str(zones_text).map_err(|source| Error::Data {
        file: "data/aws/zones/<region>.json",
        source,
    })?;
    Ok(build(region, &types, &prices, &zones))
}

fn build(
    region: &str,
    types: &RawTypes<'_>,
    prices: &RawPrices<'_>,
    zones: &RawZones<'_>,
) -> Catalog {
    let mut unpriced = Vec::new();
    let mut not_offered = Vec::new();
    let mut unknown_arch = Vec::new();
    let mut instance_types = Vec::with_capacity(types.instance_types.len());
    for raw in &types.instance_types {
        let Some(arch) = kube_arch(&raw.architectures) else {
            unknown_arch.push(raw.name);
            continue;
        };
        let Some(letters) = zones.types.get(raw.name) else {
            not_offered.push(raw.name);
            continue;
        };
        let Some(&on_demand) = prices.on_demand.get(raw.name) else {
            unpriced.push(raw.name);
            continue;
        };
        let offerings = offerings(region, letters, &raw.usage_classes, on_demand);
        if offerings.is_empty() {
            not_offered.push(raw.name);
            continue;
        }
        instance_types.push(instance_type(raw, arch, region, offerings));
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
fn offerings(region: &str, letters: &str, usage_classes: &[&str], on_demand: f64) -> Vec<Offering> {
    let spot = round_price(on_demand * SPOT_PRICE_FRACTION);
    let mut out = Vec::new();
    for letter in letters.chars() {
        let zone = format!("{region}{letter}");
        let mut seen: Vec<&str> = Vec::new();
        for class in usage_classes {
            if seen.contains(class) {
                continue;
            }
            seen.push(class);
            let price = match *class {
                labels::CAPACITY_ON_DEMAND => on_demand,
                labels::CAPACITY_SPOT => spot,
                _ => continue,
            };
            out.push(Offering {
                zone: zone.clone(),
                capacity_type: (*class).to_string(),
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

/// The Kubernetes architecture of the first EC2 architecture Kubernetes knows.
fn kube_arch(architectures: &[&str]) -> Option<&'static str> {
    architectures.iter().find_map(|a| match *a {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    })
}

fn instance_type(
    raw: &RawType<'_>,
    arch: &'static str,
    region: &str,
    offerings: Vec<Offering>,
) -> InstanceType {
    // Karpenter looks at the first listed architecture for Graviton's CMA reservation.
    let graviton = raw.architectures.first() == Some(&"arm64");
    let cpu = raw.vcpu * 1000;
    let pods = overhead::eni_limited_pods(default_card_enis(raw), raw.ipv4_per_interface);
    let mut capacity = Resources {
        cpu,
        memory: overhead::capacity_memory(raw.memory_mib, graviton),
        ephemeral_storage: DEFAULT_EPHEMERAL_STORAGE,
        pods,
        extended: BTreeMap::new(),
    };
    for (name, count) in extended_resources(raw) {
        capacity.set(name, count * 1000);
    }
    InstanceType {
        name: raw.name.to_string(),
        overhead: overhead::default_overhead(cpu, pods, DEFAULT_EPHEMERAL_STORAGE),
        capacity,
        labels: labels_of(raw, arch, region),
        os: vec!["linux".to_string()],
        offerings,
    }
}

/// ENIs of the default network card (index 0), which is all the VPC CNI uses; falls back to the
/// instance's maximum when the data lists no cards.
fn default_card_enis(raw: &RawType<'_>) -> i64 {
    raw.network_cards
        .iter()
        .find(|c| c.index == 0)
        .map_or(raw.max_network_interfaces, |c| c.max_interfaces)
}

/// Accelerator devices by name: the data can list the same device twice (from the inference
/// accelerator and the Neuron descriptions), so each name counts once, with its largest count.
fn accelerators<'a>(raw: &RawType<'a>) -> BTreeMap<&'a str, (&'a str, i64)> {
    let mut out: BTreeMap<&str, (&str, i64)> = BTreeMap::new();
    for a in &raw.accelerators {
        let e = out.entry(a.name).or_insert((a.manufacturer, 0));
        e.1 = e.1.max(a.count);
    }
    out
}

/// NeuronCores per Neuron device (not in the EC2 facts the data holds).
fn neuron_cores_per_device(device: &str) -> Option<i64> {
    match device {
        "Inferentia" => Some(4),
        "Inferentia2" | "Trainium" => Some(2),
        "Trainium2" => Some(8),
        _ => None,
    }
}

/// Extended resources as whole devices, in a stable order.
fn extended_resources(raw: &RawType<'_>) -> Vec<(&'static str, i64)> {
    let gpus = |maker: &str| -> i64 {
        raw.gpus
            .iter()
            .filter(|g| g.manufacturer == maker)
            .map(|g| g.count)
            .sum()
    };
    let mut out = vec![
        (RESOURCE_NVIDIA_GPU, gpus("NVIDIA")),
        (RESOURCE_AMD_GPU, gpus("AMD")),
        (RESOURCE_HABANA_GAUDI, gpus("Habana")),
    ];
    let (mut neurons, mut cores) = (0, 0);
    for (name, (maker, count)) in accelerators(raw) {
        if maker == "AWS" {
            neurons += count;
            cores += neuron_cores_per_device(name).unwrap_or(0) * count;
        }
    }
    out.push((RESOURCE_AWS_NEURON, neurons));
    out.push((RESOURCE_AWS_NEURON_CORE, cores));
    if raw.efa_supported {
        // Karpenter uses EC2's MaximumEfaInterfaces, which is one per network card.
        out.push((RESOURCE_EFA, raw.network_cards.len().max(1) as i64));
    }
    out.retain(|(_, n)| *n > 0);
    out
}

/// Karpenter's `lowerKabobCase`: lower case, spaces to dashes.
fn kebab(s: &str) -> String {
    s.replace(' ', "-").to_lowercase()
}

/// The labels Karpenter derives from an AWS type name: `instance-family` and `instance-size`
/// (`m5`, `large` from `m5.large`), `instance-category` and `instance-generation` (`m`, `5`)
/// as Karpenter's pattern `^([a-z]+)(-[0-9]+tb)?([0-9]+).*\.` reads them. Names that do not fit
/// give no label.
pub fn name_labels(name: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some((category, generation)) = category_generation(name) {
        out.push((labels::INSTANCE_CATEGORY, category.to_string()));
        out.push((labels::INSTANCE_GENERATION, generation.to_string()));
    }
    let parts: Vec<&str> = name.split('.').collect();
    if let [family, size] = parts[..] {
        out.push((labels::INSTANCE_FAMILY, family.to_string()));
        out.push((labels::INSTANCE_SIZE, size.to_string()));
    }
    out
}

fn category_generation(name: &str) -> Option<(&str, &str)> {
    let letters = name.bytes().take_while(u8::is_ascii_lowercase).count();
    if letters == 0 {
        return None;
    }
    let (category, mut rest) = name.split_at(letters);
    // Optional `-<digits>tb` (high-memory `u-6tb1` names).
    if let Some(after) = rest.strip_prefix('-') {
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with("tb") {
            let candidate = &after[digits + 2..];
            if candidate.starts_with(|c: char| c.is_ascii_digit()) {
                rest = candidate;
            }
        }
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].contains('.') {
        return None;
    }
    Some((category, &rest[..digits]))
}

/// Every label Karpenter puts on a node of this type that does not depend on the offering.
fn labels_of(raw: &RawType<'_>, arch: &str, region: &str) -> Labels {
    let mut l = Labels::new();
    let mut put = |k: &str, v: String| {
        l.insert(k.to_string(), v);
    };
    put(labels::INSTANCE_TYPE, raw.name.to_string());
    put(labels::ARCH, arch.to_string());
    put(labels::OS, "linux".to_string());
    put(labels::REGION, region.to_string());
    for (k, v) in name_labels(raw.name) {
        put(k, v);
    }
    put(labels::INSTANCE_CPU, raw.vcpu.to_string());
    put(labels::INSTANCE_MEMORY, raw.memory_mib.to_string());
    if let Some(maker) = raw.manufacturer {
        put(labels::INSTANCE_CPU_MANUFACTURER, kebab(maker));
    }
    // Bare-metal types have no hypervisor; Karpenter then sets the label to the empty string.
    put(
        labels::INSTANCE_HYPERVISOR,
        raw.hypervisor.unwrap_or_default().to_string(),
    );
    put(
        labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        raw.encryption_in_transit.to_string(),
    );
    if let Some(mbps) = network_bandwidth_mbps(raw) {
        put(labels::INSTANCE_NETWORK_BANDWIDTH, mbps.to_string());
    }
    if let Some(gb) = raw.local_nvme_gib.filter(|gb| *gb > 0) {
        put(labels::INSTANCE_LOCAL_NVME, gb.to_string());
    }
    if let [gpu] = raw.gpus.as_slice() {
        put(labels::INSTANCE_GPU_NAME, kebab(gpu.name));
        put(labels::INSTANCE_GPU_MANUFACTURER, kebab(gpu.manufacturer));
        put(labels::INSTANCE_GPU_COUNT, gpu.count.to_string());
        if let Some(mib) = gpu.memory_mib {
            put(labels::INSTANCE_GPU_MEMORY, mib.to_string());
        }
    }
    let accelerators = accelerators(raw);
    if accelerators.len() == 1
        && let Some((name, (maker, count))) = accelerators.into_iter().next()
    {
        put(labels::INSTANCE_ACCELERATOR_NAME, kebab(name));
        put(labels::INSTANCE_ACCELERATOR_MANUFACTURER, kebab(maker));
        put(labels::INSTANCE_ACCELERATOR_COUNT, count.to_string());
    }
    l
}

/// Baseline network bandwidth in Mbit/s, summed over network cards, as Karpenter's generated
/// table has it. Karpenter has no value for types whose published performance is only a word
/// ("Moderate", "High", ...), so neither do we.
fn network_bandwidth_mbps(raw: &RawType<'_>) -> Option<i64> {
    let performance = raw.network_performance?;
    if !performance.bytes().any(|b| b.is_ascii_digit()) || raw.network_cards.is_empty() {
        return None;
    }
    let gbps: f64 = raw.network_cards.iter().map(|c| c.baseline_gbps).sum();
    Some((gbps * 1000.0).round() as i64)
}

// === raw data ===

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTypes<'a> {
    #[serde(borrow)]
    instance_types: Vec<RawType<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawType<'a> {
    name: &'a str,
    vcpu: i64,
    #[serde(rename = "memoryMiB")]
    memory_mib: i64,
    #[serde(borrow)]
    architectures: Vec<&'a str>,
    manufacturer: Option<&'a str>,
    hypervisor: Option<&'a str>,
    #[serde(borrow)]
    usage_classes: Vec<&'a str>,
    max_network_interfaces: i64,
    ipv4_per_interface: i64,
    network_cards: Vec<RawCard>,
    network_performance: Option<&'a str>,
    efa_supported: bool,
    encryption_in_transit: bool,
    #[serde(rename = "localNvmeGiB")]
    local_nvme_gib: Option<i64>,
    #[serde(borrow)]
    gpus: Vec<RawGpu<'a>>,
    #[serde(borrow)]
    accelerators: Vec<RawAccelerator<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCard {
    index: i64,
    max_interfaces: i64,
    baseline_gbps: f64,
}

#[derive(Deserialize)]
struct RawGpu<'a> {
    manufacturer: &'a str,
    name: &'a str,
    count: i64,
    #[serde(rename = "memoryMiB")]
    memory_mib: Option<i64>,
}

#[derive(Deserialize)]
struct RawAccelerator<'a> {
    manufacturer: &'a str,
    name: &'a str,
    count: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPrices<'a> {
    source: &'a str,
    #[serde(borrow)]
    on_demand: HashMap<&'a str, f64>,
}

#[derive(Deserialize)]
struct RawZones<'a> {
    #[serde(borrow)]
    types: HashMap<&'a str, &'a str>,
}

#[cfg(test)]
mod tests;
