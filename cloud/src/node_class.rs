//! What a launch needs to know about the node it makes: the EC2NodeClass (`karpenter.k8s.aws/v1`)
//! fields a provider resolves into subnets, security groups, an AMI, an instance profile and user
//! data, plus the labels and taints the kubelet registers the node with.
//!
//! Plain data with no Kubernetes or AWS types, so that the actuator can fill it from the
//! EC2NodeClass and NodePool objects and providers can read it without either. Field names follow
//! the EC2NodeClass spec (`subnetSelectorTerms` → `subnet_selector_terms`); serde uses the
//! manifest's camelCase names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use common::taint::{Taint, TaintEffect};

use crate::Tags;

/// The node an instance becomes: its class and how it registers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSpec {
    /// The EC2NodeClass the NodePool refers to.
    pub class: NodeClassSpec,
    /// Labels the kubelet registers the node with (`--node-labels`): the NodePool's labels and
    /// its single-valued requirements. Per-claim values (the NodeClaim name) do not belong here,
    /// or every claim would need its own launch template.
    pub labels: BTreeMap<String, String>,
    /// Taints the node registers with: the NodePool's taints followed by its startup taints.
    pub taints: Vec<Taint>,
}

/// The fields of an EC2NodeClass spec that a launch uses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeClassSpec {
    /// `metadata.name` of the EC2NodeClass.
    pub name: String,
    /// `amiFamily`: `AL2023`, `AL2`, `Bottlerocket` or `Custom`. Optional when an alias term
    /// names the family.
    pub ami_family: Option<String>,
    /// `amiSelectorTerms`, ORed.
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// `subnetSelectorTerms`, ORed.
    pub subnet_selector_terms: Vec<SelectorTerm>,
    /// `securityGroupSelectorTerms`, ORed.
    pub security_group_selector_terms: Vec<SelectorTerm>,
    /// `role`: the IAM role of the nodes (the provider derives an instance profile from it).
    pub role: Option<String>,
    /// `instanceProfile`: an existing instance profile (exclusive with `role`).
    pub instance_profile: Option<String>,
    /// `userData`, merged with the generated bootstrap user data.
    pub user_data: Option<String>,
    /// `tags`, put on instances, volumes and launch templates.
    pub tags: Tags,
    /// `blockDeviceMappings`; empty means the AMI family's default root volume.
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// `metadataOptions`; `None` means Karpenter's defaults (IMDSv2 required, hop limit 1).
    pub metadata_options: Option<MetadataOptions>,
    /// `kubelet`: the kubelet settings the bootstrap passes on.
    pub kubelet: Option<KubeletConfig>,
    /// `associatePublicIPAddress`.
    pub associate_public_ip_address: Option<bool>,
    /// `detailedMonitoring`.
    pub detailed_monitoring: Option<bool>,
}

/// A subnet or security group selector term: every field given must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SelectorTerm {
    /// Tags that must all be present; a value of `*` matches any value of the key.
    pub tags: Tags,
    /// A resource ID (`subnet-…`, `sg-…`).
    pub id: Option<String>,
    /// A name (security groups: the group name).
    pub name: Option<String>,
}

/// An AMI selector term: every field given must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AmiSelectorTerm {
    /// `family@version`: `al2023@latest`, `al2@latest`, `bottlerocket@latest`,
    /// `al2023@v20240807`. Exclusive with the other fields.
    pub alias: Option<String>,
    /// Tags that must all be present; `*` matches any value.
    pub tags: Tags,
    /// An image ID (`ami-…`).
    pub id: Option<String>,
    /// An image name (EC2 wildcards allowed).
    pub name: Option<String>,
    /// The owner (account ID or alias such as `amazon`, `self`).
    pub owner: Option<String>,
    /// An SSM parameter holding an image ID (`ssmParameter`); the image it names must match the
    /// term's other fields too.
    pub ssm_parameter: Option<String>,
}

/// One block device mapping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BlockDeviceMapping {
    /// Device name, e.g. `/dev/xvda`.
    pub device_name: String,
    /// The EBS volume.
    pub ebs: Ebs,
    /// Whether this is the root volume (ephemeral storage is computed from it).
    pub root_volume: bool,
}

/// An EBS volume of a block device mapping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Ebs {
    /// Size in GiB.
    pub volume_size_gib: Option<i32>,
    /// `gp3`, `gp2`, `io2`, ...
    pub volume_type: Option<String>,
    /// Provisioned IOPS.
    pub iops: Option<i32>,
    /// Throughput in MiB/s (gp3).
    pub throughput: Option<i32>,
    /// Encrypted.
    pub encrypted: Option<bool>,
    /// KMS key for encryption.
    pub kms_key_id: Option<String>,
    /// Delete on termination (default true).
    pub delete_on_termination: Option<bool>,
    /// Snapshot to create the volume from.
    pub snapshot_id: Option<String>,
}

/// Instance metadata service options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MetadataOptions {
    /// `enabled` or `disabled`.
    pub http_endpoint: Option<String>,
    /// `enabled` or `disabled`.
    #[serde(rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: Option<String>,
    /// Hop limit for PUT responses.
    pub http_put_response_hop_limit: Option<i32>,
    /// `required` (IMDSv2 only) or `optional`.
    pub http_tokens: Option<String>,
}

/// Kubelet settings of an EC2NodeClass (`spec.kubelet`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KubeletConfig {
    /// `maxPods`.
    pub max_pods: Option<i32>,
    /// `podsPerCore`.
    pub pods_per_core: Option<i32>,
    /// `clusterDNS`.
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Vec<String>,
    /// `systemReserved` (resource name → quantity).
    pub system_reserved: BTreeMap<String, String>,
    /// `kubeReserved`.
    pub kube_reserved: BTreeMap<String, String>,
    /// `evictionHard` (signal → threshold).
    pub eviction_hard: BTreeMap<String, String>,
    /// `evictionSoft`.
    pub eviction_soft: BTreeMap<String, String>,
}

/// What a node class's selectors resolve to in the account now: the content of an
/// EC2NodeClass `status`. Each part is either what matched or why nothing usable did (a
/// selector that matched nothing, an invalid field), so that one failing part does not hide the
/// others. A cloud that cannot be asked at all is an error of the whole call instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeClassResolution {
    /// The subnets `subnetSelectorTerms` match, by ID.
    pub subnets: Result<Vec<ResolvedSubnet>, String>,
    /// The security groups `securityGroupSelectorTerms` match, by ID.
    pub security_groups: Result<Vec<ResolvedSecurityGroup>, String>,
    /// The AMIs a launch would use (one per architecture), sorted by architecture.
    pub amis: Result<Vec<ResolvedAmi>, String>,
    /// The instance profile nodes get.
    pub instance_profile: Result<Option<String>, String>,
}

/// A subnet a node class resolved to.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResolvedSubnet {
    /// `subnet-…`.
    pub id: String,
    /// Its availability zone.
    pub zone: String,
    /// Its availability zone ID (`use1-az1`), when the cloud says.
    pub zone_id: Option<String>,
}

/// A security group a node class resolved to.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResolvedSecurityGroup {
    /// `sg-…`.
    pub id: String,
    /// Its name, when the cloud says.
    pub name: Option<String>,
}

/// An AMI a node class resolved to.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResolvedAmi {
    /// `ami-…`.
    pub id: String,
    /// Its name, when the cloud says.
    pub name: Option<String>,
    /// EC2's architecture name (`x86_64`, `arm64`).
    pub architecture: String,
    /// The hardware an alias's image serves (`standard`, `nvidia`, `neuron`); empty for images
    /// found by selector terms (every type of the architecture).
    pub variants: Vec<String>,
}
