//! Karpenter's rules for what an AWS node can hold, and the EC2NodeClass kubelet overrides.
//!
//! The base formulas live in `common::ec2::overhead` (the one implementation, shared with the
//! live catalog) and are re-exported here. The numbers follow aws/karpenter-provider-aws (`pkg/providers/instancetype/types.go`):
//!
//! - memory capacity: EC2 MiB, minus 64 MiB on Graviton (arm64, CMA reserved memory), minus the
//!   VM overhead `ceil(MiB × 7.5%)` MiB;
//! - max pods (ENI-limited): `ENIs of the default network card × (IPv4 per ENI − 1) + 2`;
//! - ephemeral storage: the 20Gi root volume of Karpenter's default block device mapping (50Gi
//!   on Windows);
//! - kube-reserved: cpu 6% of the first core, 1% of the second, 0.5% of cores 3–4 and 0.25% of
//!   the rest (each slice truncated to whole millicores); memory `11 MiB × pods + 255 MiB`;
//!   ephemeral storage 1Gi;
//! - eviction threshold: memory 100Mi, ephemeral storage `ceil(10%)` of the volume;
//! - system-reserved: nothing unless the EC2NodeClass sets it.
//!
//! Which pods count for kube-reserved memory depends on the AMI family: AL2, AL2023, Ubuntu and
//! Custom size it from the ENI-limited max pods even when `maxPods` is overridden (their
//! bootstrap computes it that way); Bottlerocket and Windows size it from the node's max pods.

use crate::labels;
use crate::model::{KubeletConfig, Resources};

use super::InstanceType;

pub use common::ec2::overhead::{
    DEFAULT_EPHEMERAL_STORAGE, DEFAULT_MAX_PODS, EVICTION_MEMORY, EVICTION_NODEFS_PERCENT, GIB,
    GRAVITON_CMA_MIB, KUBE_RESERVED_EPHEMERAL_STORAGE, MIB, VM_MEMORY_OVERHEAD_FRACTION,
    WINDOWS_EPHEMERAL_STORAGE, capacity_memory, default_overhead, eni_limited_pods,
    eviction_nodefs, kube_reserved_cpu, kube_reserved_memory, max_pods,
};

/// The AMI family of an EC2NodeClass, as far as it changes capacity and overhead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AmiFamily {
    /// Amazon Linux 2.
    Al2,
    /// Amazon Linux 2023 (Karpenter's default).
    #[default]
    Al2023,
    /// Bottlerocket.
    Bottlerocket,
    /// Ubuntu.
    Ubuntu,
    /// Windows Server 2019.
    Windows2019,
    /// Windows Server 2022.
    Windows2022,
    /// A custom AMI.
    Custom,
}

// === impl AmiFamily ===

impl AmiFamily {
    /// The family of `spec.amiFamily` (`AL2023`) or of an `amiSelectorTerms` alias
    /// (`al2023@latest`), case-insensitively. `None` and unknown names give [`AmiFamily::Al2023`],
    /// Karpenter's default.
    pub fn from_name(name: Option<&str>) -> Self {
        let Some(name) = name else {
            return Self::default();
        };
        let family = name.split('@').next().unwrap_or(name).trim();
        match family.to_ascii_lowercase().as_str() {
            "al2" => Self::Al2,
            "bottlerocket" => Self::Bottlerocket,
            "ubuntu" => Self::Ubuntu,
            "windows2019" => Self::Windows2019,
            "windows2022" => Self::Windows2022,
            "custom" => Self::Custom,
            _ => Self::Al2023,
        }
    }

    /// Whether kube-reserved memory is sized from the ENI-limited max pods rather than from the
    /// node's max pods (Karpenter's `UsesENILimitedMemoryOverhead`).
    pub fn uses_eni_limited_memory_overhead(self) -> bool {
        !matches!(
            self,
            Self::Bottlerocket | Self::Windows2019 | Self::Windows2022
        )
    }

    /// Whether `podsPerCore` is honoured (Karpenter's `PodsPerCoreEnabled`).
    pub fn pods_per_core_enabled(self) -> bool {
        self != Self::Bottlerocket
    }

    /// Whether max pods defaults to the ENI limit (otherwise to 110).
    pub fn supports_eni_limited_pod_density(self) -> bool {
        !self.is_windows()
    }

    /// Whether nodes run Windows.
    pub fn is_windows(self) -> bool {
        matches!(self, Self::Windows2019 | Self::Windows2022)
    }

    /// The `node.kubernetes.io/windows-build` value of Windows families.
    pub fn windows_build(self) -> Option<&'static str> {
        match self {
            Self::Windows2019 => Some("10.0.17763"),
            Self::Windows2022 => Some("10.0.20348"),
            _ => None,
        }
    }
}

/// Applies EC2NodeClass kubelet settings to a type, with the rules of the default AMI family
/// (AL2023). See [`apply_kubelet_for_family`].
pub fn apply_kubelet(it: &InstanceType, kubelet: &KubeletConfig) -> InstanceType {
    apply_kubelet_for_family(it, kubelet, AmiFamily::Al2023)
}

/// Applies EC2NodeClass kubelet settings to a base type (one whose `pods` capacity is its
/// default, ENI-limited max pods), as Karpenter does:
///
/// - `maxPods` replaces max pods; `podsPerCore` (when > 0 and the family honours it) caps them
///   at `podsPerCore × vCPUs`;
/// - kube-reserved memory follows the new max pods on families that size it from the node's
///   pods (Bottlerocket, Windows); on the others it stays at the ENI-limited value. It is only
///   recomputed when it is the formula value (`11 MiB × pods + 255 MiB`), so a catalog file's
///   explicit overhead is kept;
/// - `kubeReserved` replaces each resource it names (non-zero amounts), `systemReserved` replaces
///   system-reserved, `evictionHard` replaces the memory and ephemeral-storage thresholds it
///   names (non-zero amounts).
pub fn apply_kubelet_for_family(
    it: &InstanceType,
    kubelet: &KubeletConfig,
    family: AmiFamily,
) -> InstanceType {
    let mut out = it.clone();
    let base_pods = it.capacity.pods;
    let formula_memory = it.overhead.kube_reserved.memory == kube_reserved_memory(base_pods);

    let pods = max_pods(
        base_pods,
        it.capacity.cpu / 1000,
        family.supports_eni_limited_pod_density(),
        family.pods_per_core_enabled(),
        kubelet.max_pods,
        kubelet.pods_per_core,
    );
    out.capacity.pods = pods;

    if formula_memory {
        let memory_pods = if family.uses_eni_limited_memory_overhead() {
            base_pods
        } else {
            pods
        };
        out.overhead.kube_reserved.memory = kube_reserved_memory(memory_pods);
    }
    if let Some(reserved) = &kubelet.kube_reserved {
        override_given(&mut out.overhead.kube_reserved, reserved);
    }
    if let Some(reserved) = &kubelet.system_reserved {
        out.overhead.system_reserved = reserved.clone();
    }
    if let Some(eviction) = &kubelet.eviction_hard {
        if eviction.memory != 0 {
            out.overhead.eviction_threshold.memory = eviction.memory;
        }
        if eviction.ephemeral_storage != 0 {
            out.overhead.eviction_threshold.ephemeral_storage = eviction.ephemeral_storage;
        }
    }
    out
}

/// A base type as NodePools of an EC2NodeClass with this family and kubelet see it, or `None`
/// when the family cannot run it (Windows on anything but amd64).
///
/// Windows families also turn the type into a Windows type: `os` and `kubernetes.io/os` become
/// `windows`, `node.kubernetes.io/windows-build` is set, and the default 20Gi root volume
/// becomes Windows' 50Gi (with its eviction threshold).
pub(crate) fn for_family(
    it: &InstanceType,
    kubelet: &KubeletConfig,
    family: AmiFamily,
) -> Option<InstanceType> {
    let mut out = apply_kubelet_for_family(it, kubelet, family);
    if let Some(build) = family.windows_build() {
        if it.labels.get(labels::ARCH).map(String::as_str) != Some("amd64") {
            return None;
        }
        out.os = vec!["windows".to_string()];
        out.labels
            .insert(labels::OS.to_string(), "windows".to_string());
        out.labels
            .insert(labels::WINDOWS_BUILD.to_string(), build.to_string());
        if it.capacity.ephemeral_storage == DEFAULT_EPHEMERAL_STORAGE {
            out.capacity.ephemeral_storage = WINDOWS_EPHEMERAL_STORAGE;
            let eviction = &mut out.overhead.eviction_threshold.ephemeral_storage;
            if *eviction == eviction_nodefs(DEFAULT_EPHEMERAL_STORAGE) {
                *eviction = eviction_nodefs(WINDOWS_EPHEMERAL_STORAGE);
            }
        }
    }
    Some(out)
}

/// Replaces in `target` every resource that `given` sets to a non-zero amount.
fn override_given(target: &mut Resources, given: &Resources) {
    if given.cpu != 0 {
        target.cpu = given.cpu;
    }
    if given.memory != 0 {
        target.memory = given.memory;
    }
    if given.ephemeral_storage != 0 {
        target.ephemeral_storage = given.ephemeral_storage;
    }
    if given.pods != 0 {
        target.pods = given.pods;
    }
    for (name, amount) in &given.extended {
        target.set(name, *amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, aws};
    use crate::model::NodeClass;

    fn m5_large() -> InstanceType {
        aws::builtin("us-east-1")
            .expect("built-in catalog")
            .get("m5.large")
            .expect("m5.large")
            .clone()
    }

    #[test]
    fn formulas_match_hand_computed_values() {
        assert_eq!(kube_reserved_cpu(1000), 60);
        assert_eq!(kube_reserved_cpu(2000), 70);
        assert_eq!(kube_reserved_cpu(4000), 80);
        assert_eq!(kube_reserved_cpu(8000), 90);
        assert_eq!(kube_reserved_cpu(96_000), 310);
        assert_eq!(kube_reserved_cpu(500), 30);
        assert_eq!(kube_reserved_memory(29), 574 * MIB);
        assert_eq!(kube_reserved_memory(110), 1465 * MIB);
        assert_eq!(capacity_memory(8192, false), 7577 * MIB);
        assert_eq!(capacity_memory(8192, true), 7518 * MIB);
        assert_eq!(capacity_memory(1024, false), (1024 - 77) * MIB);
        assert_eq!(eni_limited_pods(3, 10), 29);
        assert_eq!(eni_limited_pods(2, 2), 4, "t3.micro");
        assert_eq!(eni_limited_pods(0, 10), 0);
        assert_eq!(eviction_nodefs(20 * GIB), 2 * GIB);
        assert_eq!(eviction_nodefs(15), 2, "rounded up");
        let diskless = default_overhead(2000, 29, 0);
        assert_eq!(diskless.total().ephemeral_storage, 0);
    }

    #[test]
    fn max_pods_replaces_pods_but_al2023_keeps_eni_memory() {
        let it = m5_large();
        let kubelet = KubeletConfig {
            max_pods: Some(110),
            ..KubeletConfig::default()
        };
        let out = apply_kubelet(&it, &kubelet);
        assert_eq!(out.capacity.pods, 110);
        assert_eq!(
            out.overhead.kube_reserved.memory,
            574 * MIB,
            "ENI-limited 29 pods"
        );
        assert_eq!(out.capacity.cpu, it.capacity.cpu);
        assert_eq!(out.offerings, it.offerings);
    }

    #[test]
    fn bottlerocket_sizes_kube_reserved_memory_from_max_pods() {
        let it = m5_large();
        let kubelet = KubeletConfig {
            max_pods: Some(110),
            pods_per_core: Some(2),
            ..KubeletConfig::default()
        };
        let out = apply_kubelet_for_family(&it, &kubelet, AmiFamily::Bottlerocket);
        assert_eq!(
            out.capacity.pods, 110,
            "podsPerCore is ignored on Bottlerocket"
        );
        assert_eq!(out.overhead.kube_reserved.memory, 1465 * MIB);
        assert_eq!(out.allocatable().memory, (7577 - 1465 - 100) * MIB);
    }

    #[test]
    fn pods_per_core_caps_max_pods() {
        let it = m5_large();
        let per_core = |ppc, max| {
            let kubelet = KubeletConfig {
                max_pods: max,
                pods_per_core: Some(ppc),
                ..KubeletConfig::default()
            };
            apply_kubelet(&it, &kubelet).capacity.pods
        };
        assert_eq!(per_core(4, None), 8, "4 × 2 vCPU under the ENI limit of 29");
        assert_eq!(per_core(50, None), 29, "the ENI limit is lower");
        assert_eq!(per_core(50, Some(20)), 20, "maxPods is lower");
        assert_eq!(per_core(0, None), 29, "0 disables podsPerCore");
    }

    #[test]
    fn reserved_and_eviction_overrides_replace_what_they_name() {
        let it = m5_large();
        let kubelet = KubeletConfig {
            kube_reserved: Some(Resources::cpu_memory(200, 0)),
            system_reserved: Some(Resources::cpu_memory(100, 300 * MIB)),
            eviction_hard: Some(Resources::cpu_memory(0, 500 * MIB)),
            ..KubeletConfig::default()
        };
        let out = apply_kubelet(&it, &kubelet);
        let o = &out.overhead;
        assert_eq!(o.kube_reserved.cpu, 200);
        assert_eq!(
            o.kube_reserved.memory,
            574 * MIB,
            "memory not given: formula kept"
        );
        assert_eq!(o.kube_reserved.ephemeral_storage, GIB);
        assert_eq!(o.system_reserved, Resources::cpu_memory(100, 300 * MIB));
        assert_eq!(o.eviction_threshold.memory, 500 * MIB);
        assert_eq!(
            o.eviction_threshold.ephemeral_storage,
            2 * GIB,
            "nodefs not given"
        );
        let a = out.allocatable();
        assert_eq!(a.cpu, 2000 - 200 - 100);
        assert_eq!(a.memory, (7577 - 574 - 300 - 500) * MIB);
    }

    #[test]
    fn explicit_file_overhead_is_not_recomputed() {
        let mut it = m5_large();
        it.overhead.kube_reserved.memory = 400 * MIB;
        let kubelet = KubeletConfig {
            max_pods: Some(58),
            ..KubeletConfig::default()
        };
        let out = apply_kubelet_for_family(&it, &kubelet, AmiFamily::Bottlerocket);
        assert_eq!(out.capacity.pods, 58);
        assert_eq!(out.overhead.kube_reserved.memory, 400 * MIB);
    }

    #[test]
    fn for_node_class_applies_family_and_kubelet() {
        use crate::catalog::ForNodeClass;
        let catalog = aws::builtin("us-east-1").expect("built-in catalog");
        assert_eq!(catalog.for_node_class(None), catalog);

        let class = NodeClass {
            name: "default".to_string(),
            ami_family: Some("al2023@latest".to_string()),
            kubelet: KubeletConfig {
                max_pods: Some(50),
                ..KubeletConfig::default()
            },
            ..NodeClass::default()
        };
        let c = catalog.for_node_class(Some(&class));
        assert_eq!(c.instance_types.len(), catalog.instance_types.len());
        assert!(c.instance_types.iter().all(|t| t.capacity.pods == 50));

        let windows = NodeClass {
            ami_family: Some("Windows2022".to_string()),
            ..NodeClass::default()
        };
        let w: Catalog = catalog.for_node_class(Some(&windows));
        assert!(w.get("m6g.large").is_none(), "no Windows on arm64");
        let m5 = w.get("m5.large").expect("amd64 types stay");
        assert_eq!(m5.os, ["windows"]);
        assert_eq!(m5.labels[labels::OS], "windows");
        assert_eq!(m5.labels[labels::WINDOWS_BUILD], "10.0.20348");
        assert_eq!(
            m5.capacity.pods, 110,
            "Windows pod density is not ENI-limited"
        );
        assert_eq!(m5.overhead.kube_reserved.memory, 1465 * MIB);
        assert_eq!(m5.capacity.ephemeral_storage, 50 * GIB);
        assert_eq!(m5.overhead.eviction_threshold.ephemeral_storage, 5 * GIB);
    }

    proptest::proptest! {
        #[test]
        fn kubelet_overrides_respect_their_limits(
            i in 0usize..40,
            max_pods in proptest::option::of(1i64..300),
            per_core in proptest::option::of(0i64..40),
            bottlerocket in proptest::bool::ANY,
        ) {
            let it = crate::catalog::synthetic::karpenter_benchmark(40).instance_types.remove(i);
            let family = if bottlerocket { AmiFamily::Bottlerocket } else { AmiFamily::Al2023 };
            let kubelet = KubeletConfig {
                max_pods,
                pods_per_core: per_core,
                ..KubeletConfig::default()
            };
            let out = apply_kubelet_for_family(&it, &kubelet, family);
            let mut expected = max_pods.unwrap_or(it.capacity.pods);
            if let Some(p) = per_core.filter(|p| *p > 0) && !bottlerocket {
                expected = expected.min(p * (i as i64 + 1));
            }
            proptest::prop_assert_eq!(out.capacity.pods, expected);
            // Only pods change: the synthetic overhead is explicit, so it is kept.
            proptest::prop_assert_eq!(&out.overhead, &it.overhead);
            proptest::prop_assert_eq!(out.capacity.cpu, it.capacity.cpu);
            proptest::prop_assert_eq!(out.capacity.memory, it.capacity.memory);
        }
    }

    #[test]
    fn family_names_parse() {
        assert_eq!(AmiFamily::from_name(None), AmiFamily::Al2023);
        assert_eq!(AmiFamily::from_name(Some("AL2")), AmiFamily::Al2);
        assert_eq!(
            AmiFamily::from_name(Some("bottlerocket@v1.20")),
            AmiFamily::Bottlerocket
        );
        assert_eq!(
            AmiFamily::from_name(Some("windows2019@latest")),
            AmiFamily::Windows2019
        );
        assert_eq!(AmiFamily::from_name(Some("Custom")), AmiFamily::Custom);
        assert_eq!(AmiFamily::from_name(Some("whatever")), AmiFamily::Al2023);
    }
}
