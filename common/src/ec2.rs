//! EC2 instance-type facts and the one conversion from facts to a catalog [`InstanceType`].
//!
//! [`InstanceTypeInfo`] is what DescribeInstanceTypes reports, trimmed to what scheduling needs
//! (the shape of the built-in data file `planner/engine/data/aws/instance-types.json`).
//! [`instance_type`] turns it into capacity, overhead and labels with Karpenter's rules
//! ([`overhead`], [`name_labels`]). Every catalog built from EC2 facts goes through it: the
//! planner's built-in catalog, the live catalog a planner receives from the actuator (which
//! serves raw facts, never allocatable), and the actuator's NodeClaim status.
//!
//! [`prices`]: the built-in on-demand price table (us-east-1).

pub mod overhead;
pub mod prices;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::{InstanceType, Offering};
use crate::labels;
use crate::{Labels, Resources};

use overhead::DEFAULT_EPHEMERAL_STORAGE;

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

/// One instance type as DescribeInstanceTypes reports it, trimmed to what scheduling needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceTypeInfo {
    /// Name, e.g. `m5.large`.
    pub name: String,
    /// Default vCPUs.
    pub vcpu: i64,
    /// Memory in MiB, as EC2 reports it.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: i64,
    /// EC2 architectures (`x86_64`, `arm64`, `i386`, `x86_64_mac`, ...), in EC2's order.
    pub architectures: Vec<String>,
    /// CPU manufacturer (`Intel`, `AMD`, `AWS`).
    #[serde(default)]
    pub manufacturer: Option<String>,
    /// Hypervisor (`nitro`, `xen`); none for bare metal.
    #[serde(default)]
    pub hypervisor: Option<String>,
    /// Usage classes (`on-demand`, `spot`, `capacity-block`).
    #[serde(default)]
    pub usage_classes: Vec<String>,
    /// Maximum ENIs of the instance.
    pub max_network_interfaces: i64,
    /// IPv4 addresses per ENI.
    pub ipv4_per_interface: i64,
    /// Network cards.
    #[serde(default)]
    pub network_cards: Vec<NetworkCard>,
    /// Published network performance (`Up to 10 Gigabit`, `25 Gigabit`, `High`).
    #[serde(default)]
    pub network_performance: Option<String>,
    /// Whether EFA is supported.
    #[serde(default)]
    pub efa_supported: bool,
    /// Whether encryption in transit is supported.
    #[serde(default)]
    pub encryption_in_transit: bool,
    /// Local NVMe storage in GB, if any.
    #[serde(default, rename = "localNvmeGiB")]
    pub local_nvme_gib: Option<i64>,
    /// GPUs.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// Other accelerators (Inferentia, Trainium, ...).
    #[serde(default)]
    pub accelerators: Vec<Accelerator>,
    /// Sustained CPU clock speed in MHz (`ProcessorInfo.SustainedClockSpeedInGhz` × 1000,
    /// rounded), when EC2 reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained_clock_speed_mhz: Option<i64>,
    /// Maximum EBS bandwidth in Mbit/s (`EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps`), for
    /// types that are EBS-optimized by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs_bandwidth_mbps: Option<i64>,
}

/// A network card of an instance type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkCard {
    /// Card index (0 is the default card).
    pub index: i64,
    /// ENIs on this card.
    pub max_interfaces: i64,
    /// Baseline bandwidth in Gbit/s.
    pub baseline_gbps: f64,
}

/// GPUs of one kind on an instance type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    /// `NVIDIA`, `AMD`, `Habana`.
    pub manufacturer: String,
    /// Model, e.g. `A100`.
    pub name: String,
    /// How many.
    pub count: i64,
    /// Memory per GPU in MiB.
    #[serde(default, rename = "memoryMiB")]
    pub memory_mib: Option<i64>,
}

/// Accelerators of one kind on an instance type (inference accelerators, Neuron devices).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Accelerator {
    /// `AWS`, ...
    pub manufacturer: String,
    /// Model, e.g. `Inferentia2`.
    pub name: String,
    /// How many.
    pub count: i64,
}

/// The Kubernetes architecture of the first EC2 architecture Kubernetes knows, `None` when it
/// knows none (Mac instances).
pub fn kube_arch<S: AsRef<str>>(architectures: &[S]) -> Option<&'static str> {
    architectures.iter().find_map(|a| match a.as_ref() {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    })
}

/// The catalog instance type of `info` in `region` with `offerings`: capacity, overhead and
/// labels by Karpenter's rules. `None` when Kubernetes knows none of its architectures.
pub fn instance_type(
    info: &InstanceTypeInfo,
    region: &str,
    offerings: Vec<Offering>,
) -> Option<InstanceType> {
    let arch = kube_arch(&info.architectures)?;
    // Karpenter looks at the first listed architecture for Graviton's CMA reservation.
    let graviton = info.architectures.first().map(String::as_str) == Some("arm64");
    let cpu = info.vcpu * 1000;
    let pods = overhead::eni_limited_pods(default_card_enis(info), info.ipv4_per_interface);
    let mut capacity = Resources {
        cpu,
        memory: overhead::capacity_memory(info.memory_mib, graviton),
        ephemeral_storage: DEFAULT_EPHEMERAL_STORAGE,
        pods,
        extended: BTreeMap::new(),
    };
    for (name, count) in extended_resources(info) {
        capacity.set(name, count * 1000);
    }
    Some(InstanceType {
        name: info.name.clone(),
        overhead: overhead::default_overhead(cpu, pods, DEFAULT_EPHEMERAL_STORAGE),
        capacity,
        labels: labels_of(info, arch, region),
        os: vec!["linux".to_string()],
        offerings,
    })
}

/// ENIs of the default network card (index 0), which is all the VPC CNI uses; falls back to the
/// instance's maximum when the data lists no cards.
pub fn default_card_enis(info: &InstanceTypeInfo) -> i64 {
    info.network_cards
        .iter()
        .find(|c| c.index == 0)
        .map_or(info.max_network_interfaces, |c| c.max_interfaces)
}

/// Accelerator devices by name: the data can list the same device twice (from the inference
/// accelerator and the Neuron descriptions), so each name counts once, with its largest count.
fn accelerators(info: &InstanceTypeInfo) -> BTreeMap<&str, (&str, i64)> {
    let mut out: BTreeMap<&str, (&str, i64)> = BTreeMap::new();
    for a in &info.accelerators {
        let e = out
            .entry(a.name.as_str())
            .or_insert((a.manufacturer.as_str(), 0));
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
fn extended_resources(info: &InstanceTypeInfo) -> Vec<(&'static str, i64)> {
    let gpus = |maker: &str| -> i64 {
        info.gpus
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
    for (name, (maker, count)) in accelerators(info) {
        if maker == "AWS" {
            neurons += count;
            cores += neuron_cores_per_device(name).unwrap_or(0) * count;
        }
    }
    out.push((RESOURCE_AWS_NEURON, neurons));
    out.push((RESOURCE_AWS_NEURON_CORE, cores));
    if info.efa_supported {
        // Karpenter uses EC2's MaximumEfaInterfaces, which is one per network card.
        out.push((RESOURCE_EFA, info.network_cards.len().max(1) as i64));
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
fn labels_of(info: &InstanceTypeInfo, arch: &str, region: &str) -> Labels {
    let mut l = Labels::new();
    let mut put = |k: &str, v: String| {
        l.insert(k.to_string(), v);
    };
    put(labels::INSTANCE_TYPE, info.name.clone());
    put(labels::ARCH, arch.to_string());
    put(labels::OS, "linux".to_string());
    put(labels::REGION, region.to_string());
    for (k, v) in name_labels(&info.name) {
        put(k, v);
    }
    put(labels::INSTANCE_CPU, info.vcpu.to_string());
    put(labels::INSTANCE_MEMORY, info.memory_mib.to_string());
    if let Some(maker) = &info.manufacturer {
        put(labels::INSTANCE_CPU_MANUFACTURER, kebab(maker));
    }
    // Bare-metal types have no hypervisor; Karpenter then sets the label to the empty string.
    put(
        labels::INSTANCE_HYPERVISOR,
        info.hypervisor.clone().unwrap_or_default(),
    );
    put(
        labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        info.encryption_in_transit.to_string(),
    );
    // As Karpenter's `pkg/providers/instancetype/types.go` (aws/karpenter-provider-aws).
    if let Some(mhz) = info.sustained_clock_speed_mhz {
        put(
            labels::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
            mhz.to_string(),
        );
    }
    if let Some(mbps) = info.ebs_bandwidth_mbps {
        put(labels::INSTANCE_EBS_BANDWIDTH, mbps.to_string());
    }
    if let Some(mbps) = network_bandwidth_mbps(info) {
        put(labels::INSTANCE_NETWORK_BANDWIDTH, mbps.to_string());
    }
    if let Some(gb) = info.local_nvme_gib.filter(|gb| *gb > 0) {
        put(labels::INSTANCE_LOCAL_NVME, gb.to_string());
    }
    if let [gpu] = info.gpus.as_slice() {
        put(labels::INSTANCE_GPU_NAME, kebab(&gpu.name));
        put(labels::INSTANCE_GPU_MANUFACTURER, kebab(&gpu.manufacturer));
        put(labels::INSTANCE_GPU_COUNT, gpu.count.to_string());
        if let Some(mib) = gpu.memory_mib {
            put(labels::INSTANCE_GPU_MEMORY, mib.to_string());
        }
    }
    let accelerators = accelerators(info);
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
fn network_bandwidth_mbps(info: &InstanceTypeInfo) -> Option<i64> {
    let performance = info.network_performance.as_deref()?;
    if !performance.bytes().any(|b| b.is_ascii_digit()) || info.network_cards.is_empty() {
        return None;
    }
    let gbps: f64 = info.network_cards.iter().map(|c| c.baseline_gbps).sum();
    Some((gbps * 1000.0).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m5_large() -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: "m5.large".into(),
            vcpu: 2,
            memory_mib: 8192,
            architectures: vec!["x86_64".into()],
            manufacturer: Some("Intel".into()),
            hypervisor: Some("nitro".into()),
            usage_classes: vec!["on-demand".into(), "spot".into()],
            max_network_interfaces: 3,
            ipv4_per_interface: 10,
            network_cards: vec![NetworkCard {
                index: 0,
                max_interfaces: 3,
                baseline_gbps: 0.75,
            }],
            network_performance: Some("Up to 10 Gigabit".into()),
            ..InstanceTypeInfo::default()
        }
    }

    #[test]
    fn m5_large_gets_karpenters_capacity_overhead_and_labels() {
        let it = instance_type(&m5_large(), "us-east-1", Vec::new()).expect("amd64");
        assert_eq!(it.capacity.pods, 29);
        assert_eq!(it.capacity.memory, 7577 * overhead::MIB);
        assert_eq!(it.allocatable().cpu, 2000 - 70);
        assert_eq!(it.labels[labels::ARCH], "amd64");
        assert_eq!(it.labels[labels::INSTANCE_NETWORK_BANDWIDTH], "750");
        assert_eq!(it.labels[labels::INSTANCE_FAMILY], "m5");
    }

    #[test]
    fn mac_types_have_no_kubernetes_architecture() {
        let mut mac = m5_large();
        mac.architectures = vec!["x86_64_mac".into()];
        assert!(instance_type(&mac, "us-east-1", Vec::new()).is_none());
    }

    #[test]
    fn the_json_shape_is_the_data_files() {
        let text = r#"{"name":"g5.xlarge","vcpu":4,"memoryMiB":16384,"architectures":["x86_64"],
            "usageClasses":["on-demand"],"maxNetworkInterfaces":4,"ipv4PerInterface":15,
            "gpus":[{"manufacturer":"NVIDIA","name":"A10G","count":1,"memoryMiB":24576}]}"#;
        let info: InstanceTypeInfo = serde_json::from_str(text).expect("parses");
        let it = instance_type(&info, "us-east-1", Vec::new()).expect("amd64");
        assert_eq!(it.capacity.get(RESOURCE_NVIDIA_GPU), 1000);
        assert_eq!(it.labels[labels::INSTANCE_GPU_NAME], "a10g");
    }
}
