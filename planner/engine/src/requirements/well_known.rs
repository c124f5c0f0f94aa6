//! Which labels Karpenter treats as well known (instance types define them, so a pod may
//! require them of a NodePool that does not mention them) and which it restricts.

use crate::labels;

/// Well-known labels of Karpenter v1 and its AWS provider.
pub const WELL_KNOWN: &[&str] = &[
    labels::NODEPOOL,
    labels::ZONE,
    labels::REGION,
    labels::INSTANCE_TYPE,
    labels::ARCH,
    labels::OS,
    labels::CAPACITY_TYPE,
    "node.kubernetes.io/windows-build",
    "topology.k8s.aws/zone-id",
    labels::EC2_NODE_CLASS,
    labels::INSTANCE_CATEGORY,
    labels::INSTANCE_FAMILY,
    labels::INSTANCE_GENERATION,
    labels::INSTANCE_SIZE,
    labels::INSTANCE_CPU,
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    labels::INSTANCE_MEMORY,
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type",
];

/// Deprecated label keys and the keys Karpenter reads them as (its `NormalizedLabels`): a
/// requirement or selector on the old key is a requirement on the new one.
pub const NORMALIZED: &[(&str, &str)] = &[
    ("failure-domain.beta.kubernetes.io/zone", labels::ZONE),
    ("failure-domain.beta.kubernetes.io/region", labels::REGION),
    ("beta.kubernetes.io/arch", labels::ARCH),
    ("beta.kubernetes.io/os", labels::OS),
    ("beta.kubernetes.io/instance-type", labels::INSTANCE_TYPE),
];

/// The key Karpenter reads `key` as: the stable key for a deprecated one, else `key` itself.
pub fn normalize_key(key: String) -> String {
    match NORMALIZED.iter().find(|(old, _)| *old == key) {
        Some((_, new)) => (*new).to_string(),
        None => key,
    }
}

/// True for a well-known label.
pub fn is_well_known(key: &str) -> bool {
    WELL_KNOWN.contains(&key)
}

/// True for a label a NodePool may not set and a claim never carries as a template label
/// (`kubernetes.io/hostname`, Karpenter's status labels).
pub fn is_restricted(key: &str) -> bool {
    matches!(
        key,
        labels::HOSTNAME | labels::INITIALIZED | labels::REGISTERED
    )
}
