//! Karpenter's rules for what an AWS node of a type holds before any EC2NodeClass setting
//! (aws/karpenter-provider-aws `pkg/providers/instancetype/types.go`):
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
//! The EC2NodeClass adjustments (kubelet settings, AMI families) are the planner's
//! (`planner::catalog::overhead`), which re-exports these.

use crate::Resources;
use crate::catalog::Overhead;

/// One mebibyte in bytes.
pub const MIB: i64 = 1 << 20;
/// One gibibyte in bytes.
pub const GIB: i64 = 1 << 30;
/// Karpenter's default `VM_MEMORY_OVERHEAD_PERCENT`.
pub const VM_MEMORY_OVERHEAD_FRACTION: f64 = 0.075;
/// Memory Graviton (arm64) types keep for the contiguous memory allocator, in MiB.
pub const GRAVITON_CMA_MIB: i64 = 64;
/// Ephemeral storage of Karpenter's default root volume (Linux AMI families).
pub const DEFAULT_EPHEMERAL_STORAGE: i64 = 20 * GIB;
/// Ephemeral storage of Karpenter's default root volume for Windows AMI families.
pub const WINDOWS_EPHEMERAL_STORAGE: i64 = 50 * GIB;
/// Default kube-reserved ephemeral storage.
pub const KUBE_RESERVED_EPHEMERAL_STORAGE: i64 = GIB;
/// Default hard eviction threshold for memory (`memory.available<100Mi`).
pub const EVICTION_MEMORY: i64 = 100 * MIB;
/// Default hard eviction threshold for the node file system, percent of ephemeral storage.
pub const EVICTION_NODEFS_PERCENT: f64 = 10.0;
/// The kubelet's default max pods, used where pod density is not ENI-limited (Windows).
pub const DEFAULT_MAX_PODS: i64 = 110;

/// Memory capacity in bytes of a node with `memory_mib` MiB of EC2 memory, as Karpenter
/// estimates it: Graviton's CMA memory and the VM overhead are taken off.
pub fn capacity_memory(memory_mib: i64, arm64: bool) -> i64 {
    capacity_memory_with(memory_mib, arm64, VM_MEMORY_OVERHEAD_FRACTION)
}

/// [`capacity_memory`] with Karpenter's `vmMemoryOverheadPercent` setting at `fraction`
/// (`VM_MEMORY_OVERHEAD_PERCENT`, a fraction: 0.075 is 7.5%).
pub fn capacity_memory_with(memory_mib: i64, arm64: bool, fraction: f64) -> i64 {
    let mib = if arm64 {
        memory_mib - GRAVITON_CMA_MIB
    } else {
        memory_mib
    };
    // The same floating-point steps as Karpenter, so that the rounding matches to the MiB.
    let overhead_mib = ((mib * MIB) as f64 * fraction / 1024.0 / 1024.0).ceil() as i64;
    (mib - overhead_mib) * MIB
}

/// ENI-limited max pods: `enis × (ipv4_per_eni − 1) + 2`, or 0 without a usable ENI.
pub fn eni_limited_pods(enis: i64, ipv4_per_eni: i64) -> i64 {
    if enis <= 0 {
        return 0;
    }
    enis * (ipv4_per_eni - 1) + 2
}

/// [`eni_limited_pods`] with Karpenter's `reservedENIs` setting: `reserved` ENIs of the default
/// card are not counted (aws/karpenter-provider-aws `ENILimitedPods`); 0 when none is left.
pub fn eni_limited_pods_reserving(enis: i64, ipv4_per_eni: i64, reserved: i64) -> i64 {
    eni_limited_pods((enis - reserved.max(0)).max(0), ipv4_per_eni)
}

/// Max pods of a node as Karpenter sizes it (aws/karpenter-provider-aws
/// `pkg/providers/instancetype/types.go` `pods`): the kubelet's `maxPods` when set, else
/// `eni_limited` on families with ENI-limited pod density and [`DEFAULT_MAX_PODS`] on the others
/// (Windows), capped at `podsPerCore × vCPUs` (positive values only) where the family honours
/// `podsPerCore` (all but Bottlerocket). The planner's allocatable and the kubelet's
/// `--max-pods` of the launch both come from here, so they agree.
pub fn max_pods(
    eni_limited: i64,
    vcpus: i64,
    eni_density: bool,
    pods_per_core_enabled: bool,
    max_pods: Option<i64>,
    pods_per_core: Option<i64>,
) -> i64 {
    let default = if eni_density {
        eni_limited
    } else {
        DEFAULT_MAX_PODS
    };
    let mut pods = max_pods.unwrap_or(default);
    if let Some(per_core) = pods_per_core.filter(|p| *p > 0)
        && pods_per_core_enabled
    {
        pods = pods.min(per_core.saturating_mul(vcpus));
    }
    pods
}

/// Kube-reserved cpu in millicores for a node with `cpu_milli` millicores.
pub fn kube_reserved_cpu(cpu_milli: i64) -> i64 {
    const RANGES: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    let mut total = 0;
    for (start, end, fraction) in RANGES {
        if cpu_milli >= start {
            let span = if cpu_milli < end {
                cpu_milli - start
            } else {
                end - start
            };
            // Truncated per slice, as Karpenter does.
            total += (span as f64 * fraction) as i64;
        }
    }
    total
}

/// Kube-reserved memory in bytes for a node that runs at most `pods` pods.
pub fn kube_reserved_memory(pods: i64) -> i64 {
    (11 * pods + 255) * MIB
}

/// The hard eviction threshold for the node file system: `ceil(10%)` of the ephemeral storage.
pub fn eviction_nodefs(ephemeral_storage: i64) -> i64 {
    (ephemeral_storage as f64 / 100.0 * EVICTION_NODEFS_PERCENT).ceil() as i64
}

/// The overhead Karpenter computes when the EC2NodeClass sets nothing: kube-reserved from the
/// cpu and `pods` (see [`kube_reserved_memory`]), no system-reserved, and the default eviction
/// thresholds for `ephemeral_storage`. Kube-reserved ephemeral storage never exceeds the disk,
/// so that a catalog-file type declared without disk does not end up with negative allocatable.
pub fn default_overhead(cpu_milli: i64, pods: i64, ephemeral_storage: i64) -> Overhead {
    Overhead {
        kube_reserved: Resources {
            cpu: kube_reserved_cpu(cpu_milli),
            memory: kube_reserved_memory(pods),
            ephemeral_storage: KUBE_RESERVED_EPHEMERAL_STORAGE.min(ephemeral_storage.max(0)),
            ..Resources::default()
        },
        system_reserved: Resources::default(),
        eviction_threshold: Resources {
            memory: EVICTION_MEMORY,
            ephemeral_storage: eviction_nodefs(ephemeral_storage),
            ..Resources::default()
        },
    }
}
