//! The label and annotation keys the simulator writes on the objects it creates (well-known
//! Kubernetes labels, and Karpenter's labels on nodes launched for NodeClaims).
//!
//! Written out here for the simulator rather than imported, so that a wrong key elsewhere in the
//! project shows up as a mismatch in tests instead of being repeated by the simulated cluster.

/// Node hostname (`kubernetes.io/hostname`).
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// Availability zone.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// Region.
pub const REGION: &str = "topology.kubernetes.io/region";
/// Instance type.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// CPU architecture (`amd64`, `arm64`).
pub const ARCH: &str = "kubernetes.io/arch";
/// Operating system.
pub const OS: &str = "kubernetes.io/os";
/// Karpenter's capacity type (`spot`, `on-demand`).
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// The NodePool a node belongs to.
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// The EC2NodeClass a node was launched with.
pub const EC2_NODE_CLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// Instance family (`m5`).
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
/// Instance category (`m`).
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
/// Instance generation (`5`).
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
/// Instance size (`large`).
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
/// vCPUs.
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// Memory in MiB as EC2 reports it.
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
/// GPU count.
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
/// GPU manufacturer.
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
/// GPU name.
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
/// Annotation: the NodePool hash a NodeClaim was created with.
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// Annotation: the EC2NodeClass hash a NodeClaim was created with.
pub const NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// The spot capacity type.
pub const CAPACITY_SPOT: &str = "spot";
/// The on-demand capacity type.
pub const CAPACITY_ON_DEMAND: &str = "on-demand";
