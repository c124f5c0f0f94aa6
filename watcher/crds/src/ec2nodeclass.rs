//! `EC2NodeClass` (`karpenter.k8s.aws/v1`): how EC2 instances are launched — AMIs, subnets,
//! security groups, the IAM role or instance profile, block devices, kubelet settings, tags.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::common::{Condition, conditions_schema};

/// The CEL rules on `spec` that tie `amiFamily` to the alias in `amiSelectorTerms`.
fn ami_family_alias_rule(alias: &str, family: &str) -> serde_json::Value {
    serde_json::json!({
        "rule": format!("!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == '{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)"),
        "message": format!("if set, amiFamily must be '{family}' or 'Custom' when using an {family} alias"),
    })
}

fn spec_rules() -> serde_json::Value {
    let mut rules = vec![serde_json::json!({
        "rule": "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
        "message": "must specify exactly one of ['role', 'instanceProfile']"
    })];
    for (alias, family) in [
        ("al2", "AL2"),
        ("al2023", "AL2023"),
        ("bottlerocket", "Bottlerocket"),
        ("windows2019", "Windows2019"),
        ("windows2022", "Windows2022"),
        ("windows2025", "Windows2025"),
    ] {
        rules.push(ami_family_alias_rule(alias, family));
    }
    rules.push(serde_json::json!({
        "rule": "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
        "message": "must specify amiFamily if amiSelectorTerms does not contain an alias"
    }));
    serde_json::Value::Array(rules)
}

/// Adds the spec-level CEL rules, and expresses "exactly one of role / instanceProfile" in
/// plain OpenAPI too (`oneOf` of `required`), so that validators without CEL reject both.
fn spec_transform(schema: &mut Schema) {
    schema.insert("x-kubernetes-validations".into(), spec_rules());
    schema.insert(
        "oneOf".into(),
        serde_json::json!([{"required": ["role"]}, {"required": ["instanceProfile"]}]),
    );
}

/// How EC2 instances are launched for the NodePools that reference this class.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    singular = "ec2nodeclass",
    category = "karpenter",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    status = "EC2NodeClassStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Role","type":"string","priority":1,"jsonPath":".spec.role"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = spec_transform)]
pub struct EC2NodeClassSpec {
    /// Subnets the instances may be launched in (terms are ORed).
    #[schemars(schema_with = "subnet_terms_schema")]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Security groups of the instances (terms are ORed).
    #[schemars(schema_with = "security_group_terms_schema")]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// On-demand capacity reservations the instances may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "capacity_reservation_terms_schema")]
    pub capacity_reservation_selector_terms: Option<Vec<CapacityReservationSelectorTerm>>,
    /// Whether instances get a public IP (default: the subnet's setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "associatePublicIPAddress")]
    pub associate_public_ip_address: Option<bool>,
    /// AMIs of the instances (terms are ORed); an `alias` term stands alone.
    #[schemars(schema_with = "ami_terms_schema")]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// The AMI family, which decides the user data format; required without an alias.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AmiFamily>,
    /// User data merged into the generated one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// The IAM role of the nodes; exactly one of `role` and `instanceProfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "role cannot be empty"}]))]
    pub role: Option<String>,
    /// An existing instance profile; exactly one of `role` and `instanceProfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "instanceProfile cannot be empty"}]))]
    pub instance_profile: Option<String>,
    /// Tags put on instances, volumes and launch templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "tags_schema")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Kubelet settings of the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// Block devices of the instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "block_device_mappings_schema")]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    /// How local NVMe instance stores are used (`RAID0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// Detailed CloudWatch monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Instance metadata service options (IMDSv2 required by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}))]
    pub metadata_options: Option<MetadataOptions>,
    /// The EC2 launch context (Fleet `Context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Number of IPv4 prefixes per network interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ip_prefix_count: Option<i32>,
    /// Connection tracking timeouts of the primary interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// CPU options of the instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
    /// Network interfaces (EFA) of the instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "network_interfaces_schema")]
    pub network_interfaces: Option<Vec<NetworkInterface>>,
    /// The placement group of the instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
}

const EMPTY_TAGS_RULE: &str = "self.all(k, k != '' && self[k] != '')";

fn selector_tags() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "maxProperties": 20,
        "x-kubernetes-validations": [{"rule": EMPTY_TAGS_RULE, "message": "empty tag keys or values aren't supported"}]
    })
}

fn selector_tags_schema(_: &mut SchemaGenerator) -> Schema {
    Schema::try_from(selector_tags()).unwrap_or_default()
}

fn tags_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "x-kubernetes-validations": [
            {"rule": "self.all(k, k != '')", "message": "empty tag keys aren't supported"},
            {"rule": "self.all(k, k !='eks:eks-cluster-name')", "message": "tag contains a restricted tag matching eks:eks-cluster-name"},
            {"rule": "self.all(k, !k.startsWith('kubernetes.io/cluster') )", "message": "tag contains a restricted tag matching kubernetes.io/cluster/"},
            {"rule": "self.all(k, k != 'karpenter.sh/nodepool')", "message": "tag contains a restricted tag matching karpenter.sh/nodepool"},
            {"rule": "self.all(k, k !='karpenter.sh/nodeclaim')", "message": "tag contains a restricted tag matching karpenter.sh/nodeclaim"},
            {"rule": "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')", "message": "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"}
        ]
    })
}

/// Selects subnets by tags or ID.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SubnetSelectorTerm {
    /// Tags the subnet must have; `*` matches any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "selector_tags_schema")]
    pub tags: Option<BTreeMap<String, String>>,
    /// The subnet ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "subnet-[0-9a-z]+"))]
    pub id: Option<String>,
}

fn subnet_terms_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<SubnetSelectorTerm>();
    json_schema!({
        "type": "array", "items": item, "maxItems": 30, "minItems": 1,
        "x-kubernetes-validations": [
            {"rule": "self.size() != 0", "message": "subnetSelectorTerms cannot be empty"},
            {"rule": "self.all(x, has(x.tags) || has(x.id))", "message": "expected at least one, got none, ['tags', 'id']"},
            {"rule": "!self.all(x, has(x.id) && has(x.tags))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"}
        ]
    })
}

/// Selects security groups by tags, ID or name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecurityGroupSelectorTerm {
    /// Tags the security group must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "selector_tags_schema")]
    pub tags: Option<BTreeMap<String, String>>,
    /// The security group ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "sg-[0-9a-z]+"))]
    pub id: Option<String>,
    /// The security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

fn security_group_terms_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<SecurityGroupSelectorTerm>();
    json_schema!({
        "type": "array", "items": item, "maxItems": 30, "minItems": 1,
        "x-kubernetes-validations": [
            {"rule": "self.size() != 0", "message": "securityGroupSelectorTerms cannot be empty"},
            {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.name))", "message": "expected at least one, got none, ['tags', 'id', 'name']"},
            {"rule": "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
            {"rule": "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))", "message": "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"}
        ]
    })
}

/// Selects capacity reservations by tags, ID or match criteria.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    /// Tags the reservation must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "selector_tags_schema")]
    pub tags: Option<BTreeMap<String, String>>,
    /// The reservation ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    /// The owning account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "ownerID")]
    #[schemars(regex(pattern = "^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    /// `open` or `targeted` reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<InstanceMatchCriteria>,
}

/// Which capacity reservations an instance may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InstanceMatchCriteria {
    /// Any instance with matching attributes.
    Open,
    /// Only instances that target the reservation.
    Targeted,
}

fn capacity_reservation_terms_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<CapacityReservationSelectorTerm>();
    json_schema!({
        "type": "array", "items": item, "maxItems": 30,
        "x-kubernetes-validations": [
            {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))", "message": "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
            {"rule": "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))", "message": "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"}
        ]
    })
}

/// Selects AMIs by alias (`al2023@latest`), tags, ID, name or SSM parameter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// An EKS-optimized AMI family and version, `family@version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.matches('^[a-zA-Z0-9]+@.+$')", "message": "'alias' is improperly formatted, must match the format 'family@version'"},
        {"rule": "self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']", "message": "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"},
        {"rule": "self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true", "message": "windows families may only specify version 'latest'"}
    ]))]
    pub alias: Option<String>,
    /// Tags the AMI must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "selector_tags_schema")]
    pub tags: Option<BTreeMap<String, String>>,
    /// The AMI ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "ami-[0-9a-z]+"))]
    pub id: Option<String>,
    /// The AMI name (wildcards allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The AMI owner (account ID or alias).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// An SSM parameter holding the AMI ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

fn ami_terms_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<AmiSelectorTerm>();
    json_schema!({
        "type": "array", "items": item, "maxItems": 30, "minItems": 1,
        "x-kubernetes-validations": [
            {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))", "message": "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
            {"rule": "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
            {"rule": "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))", "message": "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
            {"rule": "!(self.exists(x, has(x.alias)) && self.size() != 1)", "message": "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"}
        ]
    })
}

/// The family of the AMIs, which decides the bootstrap format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AmiFamily {
    /// Amazon Linux 2.
    AL2,
    /// Amazon Linux 2023.
    AL2023,
    /// Bottlerocket.
    Bottlerocket,
    /// A custom AMI with user data as given.
    Custom,
    /// Windows Server 2019.
    Windows2019,
    /// Windows Server 2022.
    Windows2022,
    /// Windows Server 2025.
    Windows2025,
}

/// Kubelet settings dovetail and Karpenter read for scheduling (`maxPods`, reservations,
/// eviction thresholds) and pass on to the node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
     "message": "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
    {"rule": "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true",
     "message": "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
    {"rule": "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true",
     "message": "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"}
]))]
pub struct KubeletConfiguration {
    /// Cluster DNS server IPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Option<Vec<String>>,
    /// Maximum pods per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    /// Maximum pods per core (the lower of this and `maxPods` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    /// Resources reserved for the OS (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "reserved_schema")]
    pub system_reserved: Option<BTreeMap<String, String>>,
    /// Resources reserved for Kubernetes daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "reserved_schema")]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    /// Hard eviction thresholds, e.g. `memory.available: 100Mi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "eviction_schema")]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// Soft eviction thresholds (each needs a grace period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "eviction_schema")]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// Grace periods of the soft eviction thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "eviction_grace_schema")]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    /// Longest grace period given to pods evicted for a soft threshold, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Disk usage above which image garbage collection always runs (0–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "imageGCHighThresholdPercent")]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk usage below which image garbage collection never runs (0–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "imageGCLowThresholdPercent")]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// CPU CFS quota enforcement for containers with CPU limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: Option<bool>,
}

const EVICTION_SIGNALS: &str = "['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']";

fn reserved_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string", "pattern": crate::common::QUANTITY_PATTERN},
        "x-kubernetes-validations": [
            {"rule": "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')", "message": "valid keys for systemReserved and kubeReserved are ['cpu','memory','ephemeral-storage','pid']"},
            {"rule": "self.all(x, !self[x].startsWith('-'))", "message": "systemReserved and kubeReserved values cannot be negative resource quantities"}
        ]
    })
}

fn eviction_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "x-kubernetes-validations": [{"rule": format!("self.all(x, x in {EVICTION_SIGNALS})"), "message": format!("valid keys for eviction thresholds are {EVICTION_SIGNALS}")}]
    })
}

fn eviction_grace_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "x-kubernetes-validations": [{"rule": format!("self.all(x, x in {EVICTION_SIGNALS})"), "message": format!("valid keys for evictionSoftGracePeriod are {EVICTION_SIGNALS}")}]
    })
}

/// A block device of the instances.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// The device name, e.g. `/dev/xvda`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The EBS volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this is the root volume (at most one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
}

fn block_device_mappings_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<BlockDeviceMapping>();
    json_schema!({
        "type": "array", "items": item, "maxItems": 50,
        "x-kubernetes-validations": [{"rule": "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1", "message": "must have only one blockDeviceMappings with rootVolume"}]
    })
}

/// An EBS volume.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.snapshotID) || has(self.volumeSize)", "message": "snapshotID or volumeSize must be defined"},
    {"rule": "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')", "message": "snapshotID must be set when volumeInitializationRate is set"}
]))]
pub struct BlockDevice {
    /// Whether the volume is deleted with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Whether the volume is encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS (io1, io2, gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// The KMS key of an encrypted volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "kmsKeyID")]
    pub kms_key_id: Option<String>,
    /// The snapshot the volume is created from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "snapshotID")]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// Snapshot initialization rate in MiB/s (100–300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300))]
    pub volume_initialization_rate: Option<i32>,
    /// The volume size, e.g. `100Gi` (at most 64 TiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
    ))]
    pub volume_size: Option<String>,
    /// The EBS volume type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<VolumeType>,
}

/// An EBS volume type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeType {
    /// Magnetic.
    Standard,
    /// Provisioned IOPS SSD.
    Io1,
    /// Provisioned IOPS SSD, second generation.
    Io2,
    /// General purpose SSD.
    Gp2,
    /// Cold HDD.
    Sc1,
    /// Throughput optimized HDD.
    St1,
    /// General purpose SSD, third generation.
    Gp3,
}

/// How instance store volumes are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum InstanceStorePolicy {
    /// Combine them into one RAID-0 array for the kubelet and container runtime.
    RAID0,
}

/// An enabled/disabled switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Toggle {
    /// On.
    Enabled,
    /// Off.
    Disabled,
}

/// Whether IMDSv2 tokens are required.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HttpTokens {
    /// IMDSv2 only.
    Required,
    /// IMDSv1 allowed.
    Optional,
}

/// Instance metadata service options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// Whether IMDS is reachable (default `enabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "enabled"))]
    pub http_endpoint: Option<Toggle>,
    /// Whether IMDS is reachable over IPv6 (default `disabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "httpProtocolIPv6")]
    #[schemars(extend("default" = "disabled"))]
    pub http_protocol_ipv6: Option<Toggle>,
    /// The hop limit of IMDS responses (1–64, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    #[schemars(extend("default" = 1))]
    pub http_put_response_hop_limit: Option<i64>,
    /// Whether IMDSv2 is required (default `required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "required"))]
    pub http_tokens: Option<HttpTokens>,
}

/// Connection tracking timeouts, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
     "message": "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"}
]))]
pub struct ConnectionTracking {
    /// Idle timeout of established TCP connections (60–432000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 432000))]
    pub tcp_established_timeout: Option<i32>,
    /// Idle timeout of UDP streams (60–180).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 180))]
    pub udp_stream_timeout: Option<i32>,
    /// Idle timeout of other UDP flows (30–60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 60))]
    pub udp_timeout: Option<i32>,
}

/// CPU options of the instances.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    /// Nested virtualization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<Toggle>,
}

/// The kind of a network interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InterfaceType {
    /// An ENA interface.
    Interface,
    /// An EFA-only interface.
    EfaOnly,
}

/// A network interface of the instances.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    /// The network card.
    #[schemars(range(min = 0))]
    pub network_card_index: i32,
    /// The device index on the card.
    #[schemars(range(min = 0))]
    pub device_index: i32,
    /// The kind of interface.
    pub interface_type: InterfaceType,
}

fn network_interfaces_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<NetworkInterface>();
    json_schema!({
        "type": "array", "items": item, "maxItems": 150,
        "x-kubernetes-validations": [
            {"rule": "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')", "message": "networkInterfaces must include a primary interface with interfaceType='interface'"},
            {"rule": "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))", "message": "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"}
        ]
    })
}

/// Selects a placement group by name or ID (exactly one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.name) || has(self.id)", "message": "expected at least one, got none, ['name', 'id']"},
    {"rule": "!(has(self.name) && has(self.id))", "message": "'name' and 'id' are mutually exclusive"}
]))]
pub struct PlacementGroupSelector {
    /// The placement group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    /// The placement group ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^pg-[0-9a-z]+$"))]
    pub id: Option<String>,
}

/// What Karpenter resolved from the selectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// The subnets found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<Subnet>>,
    /// The security groups found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<SecurityGroup>>,
    /// The AMIs found, with the requirements they apply to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amis: Option<Vec<Ami>>,
    /// The capacity reservations found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_reservations: Option<Vec<CapacityReservation>>,
    /// The instance profile in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Conditions: `Ready`, `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Option<Vec<Condition>>,
}

/// A resolved subnet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Subnet {
    /// The subnet ID.
    pub id: String,
    /// Its availability zone.
    pub zone: String,
    /// Its availability zone ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "zoneID")]
    pub zone_id: Option<String>,
}

/// A resolved security group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecurityGroup {
    /// The security group ID.
    pub id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A resolved AMI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Ami {
    /// The AMI ID.
    pub id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether it is deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// The instance requirements it applies to (architecture, GPU, ...).
    pub requirements: Vec<AmiRequirement>,
}

/// A node selector requirement of a resolved AMI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AmiRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: String,
    /// The values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// A resolved capacity reservation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservation {
    /// Its availability zone.
    pub availability_zone: String,
    /// When it ends (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub end_time: Option<String>,
    /// The reservation ID.
    #[schemars(regex(pattern = "^cr-[0-9a-z]+$"))]
    pub id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    /// The instance type reserved.
    pub instance_type: String,
    /// Whether the reservation is interruptible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    /// The owning account.
    #[serde(rename = "ownerID")]
    #[schemars(regex(pattern = "^[0-9]{12}$"))]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_type: Option<String>,
    /// `active` or `expiring`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}
