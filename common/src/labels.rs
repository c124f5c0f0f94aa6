//! Well-known label, annotation and taint keys shared by Kubernetes, Karpenter and EKS.

/// `kubernetes.io/hostname`.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// `topology.kubernetes.io/zone`.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const REGION: &str = "topology.kubernetes.io/region";
/// `node.kubernetes.io/instance-type`.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// `kubernetes.io/arch`.
pub const ARCH: &str = "kubernetes.io/arch";
/// `kubernetes.io/os`.
pub const OS: &str = "kubernetes.io/os";
/// `karpenter.sh/capacity-type`.
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// `karpenter.sh/nodepool`.
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// `karpenter.sh/initialized`.
pub const INITIALIZED: &str = "karpenter.sh/initialized";
/// `karpenter.sh/registered`.
pub const REGISTERED: &str = "karpenter.sh/registered";
/// `karpenter.k8s.aws/ec2nodeclass`.
pub const EC2_NODE_CLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// `karpenter.k8s.aws/instance-family`.
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
/// `karpenter.k8s.aws/instance-category`.
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
/// `karpenter.k8s.aws/instance-generation`.
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
/// `karpenter.k8s.aws/instance-size`.
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
/// `karpenter.k8s.aws/instance-cpu`.
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// `karpenter.k8s.aws/instance-memory` (MiB).
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
/// `karpenter.k8s.aws/instance-cpu-manufacturer` (`intel`, `amd`, `aws`).
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
/// `karpenter.k8s.aws/instance-hypervisor` (`nitro`, `xen`, empty for bare metal).
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
/// `karpenter.k8s.aws/instance-encryption-in-transit-supported` (`true`, `false`).
pub const INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
/// `karpenter.k8s.aws/instance-network-bandwidth` (baseline Mbit/s).
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
/// `karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz` (MHz).
pub const INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str =
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
/// `karpenter.k8s.aws/instance-ebs-bandwidth` (Mbit/s).
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
/// `karpenter.k8s.aws/instance-local-nvme` (GB of local NVMe storage).
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
/// `karpenter.k8s.aws/instance-gpu-name` (e.g. `a100`).
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
/// `karpenter.k8s.aws/instance-gpu-manufacturer` (e.g. `nvidia`).
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
/// `karpenter.k8s.aws/instance-gpu-count`.
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
/// `karpenter.k8s.aws/instance-gpu-memory` (MiB per GPU).
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
/// `karpenter.k8s.aws/instance-accelerator-name` (e.g. `inferentia2`).
pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
/// `karpenter.k8s.aws/instance-accelerator-manufacturer` (e.g. `aws`).
pub const INSTANCE_ACCELERATOR_MANUFACTURER: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
/// `karpenter.k8s.aws/instance-accelerator-count`.
pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
/// `node.kubernetes.io/windows-build` (set on Windows nodes).
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";

/// Capacity type value for spot.
pub const CAPACITY_SPOT: &str = "spot";
/// Capacity type value for on-demand.
pub const CAPACITY_ON_DEMAND: &str = "on-demand";

/// Annotation (on pods or nodes) that blocks voluntary disruption.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// Annotation the kubelet puts on mirror pods (static pods it runs from files).
pub const MIRROR_POD: &str = "kubernetes.io/config.mirror";
/// Annotation ordering a ReplicaSet's pods for scale-down (Karpenter ranks evictions by it).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// Annotation carrying the NodePool template hash on NodeClaims and Nodes.
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// Annotation carrying the EC2NodeClass spec hash on NodeClaims and Nodes.
pub const NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// Taint Karpenter puts on nodes it is disrupting.
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
/// Key prefixes of taints a controller removes by itself once a node is ready (Karpenter's
/// `KnownEphemeralTaintKeyPrefixes`: the Node Readiness Controller's `readiness.k8s.io/<rule>`).
pub const EPHEMERAL_TAINT_KEY_PREFIXES: [&str; 1] = ["readiness.k8s.io/"];

/// Whether a taint key belongs to a family of known ephemeral taints
/// ([`EPHEMERAL_TAINT_KEY_PREFIXES`]).
pub fn is_ephemeral_taint_family(key: &str) -> bool {
    EPHEMERAL_TAINT_KEY_PREFIXES
        .iter()
        .any(|p| key.starts_with(p))
}
/// Annotation the actuator keeps on NodeClaims: the subnet ID of the claim's instance, as EC2
/// reports it now (Karpenter has no field for it; its SubnetDrift reads the instance).
pub const INSTANCE_SUBNET: &str = "dovetail.io/subnet-id";
/// Annotation the actuator keeps on NodeClaims: the security group IDs of the claim's instance,
/// sorted, comma-separated, as EC2 reports them now (for SecurityGroupDrift).
pub const INSTANCE_SECURITY_GROUPS: &str = "dovetail.io/security-group-ids";

/// Labels (or annotations) of an object: key to value, in key order.
pub type Labels = std::collections::BTreeMap<String, String>;

/// Annotation marking a CapacityBuffer's virtual pod (kubernetes-sigs/karpenter
/// `pkg/apis/autoscaling/v1beta1/constants.go` `FakePodAnnotationKey`; value `"true"`).
pub const CAPACITY_BUFFER_FAKE_POD: &str = "karpenter.sh/capacity-buffer-fake-pod";
/// The name of the CapacityBuffer a virtual pod belongs to (`BufferNameAnnotation`).
pub const CAPACITY_BUFFER_NAME: &str = "karpenter.sh/capacity-buffer-name";
/// The namespace of the CapacityBuffer a virtual pod belongs to (`BufferNamespaceAnnotation`).
pub const CAPACITY_BUFFER_NAMESPACE: &str = "karpenter.sh/capacity-buffer-namespace";
