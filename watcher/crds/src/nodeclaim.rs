//! `NodeClaim` (`karpenter.sh/v1`): one node that is being launched or runs, with the
//! requirements it was launched for and what the cloud provider reported back.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, NodeClassReference, NodeSelectorRequirementWithMinValues, ResourceList, Taint,
    conditions_schema, requirements_schema, taints_schema,
};

/// The default `expireAfter` of NodeClaims and NodePool templates (30 days).
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";

/// What a NodeClaim asks of the node it becomes. Immutable once created.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    category = "karpenter",
    status = "NodeClaimStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".metadata.labels.node\\.kubernetes\\.io/instance-type"}"#,
    printcolumn = r#"{"name":"Capacity","type":"string","jsonPath":".metadata.labels.karpenter\\.sh/capacity-type"}"#,
    printcolumn = r#"{"name":"Zone","type":"string","jsonPath":".metadata.labels.topology\\.kubernetes\\.io/zone"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"ImageID","type":"string","priority":1,"jsonPath":".status.imageID"}"#,
    printcolumn = r#"{"name":"ID","type":"string","priority":1,"jsonPath":".status.providerID"}"#,
    printcolumn = r#"{"name":"NodePool","type":"string","priority":1,"jsonPath":".metadata.labels.karpenter\\.sh/nodepool"}"#,
    printcolumn = r#"{"name":"NodeClass","type":"string","priority":1,"jsonPath":".spec.nodeClassRef.name"}"#,
    printcolumn = r#"{"name":"Drifted","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Drifted\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "spec is immutable"}]))]
pub struct NodeClaimSpec {
    /// Taints placed on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "taints_schema")]
    pub taints: Option<Vec<Taint>>,
    /// Taints placed on the node at launch that a daemon removes once the node is initialized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "taints_schema")]
    pub startup_taints: Option<Vec<Taint>>,
    /// The label requirements the instance must satisfy.
    #[schemars(schema_with = "requirements_schema")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The minimum resources the node must provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The node class the instance is launched with.
    pub node_class_ref: NodeClassReference,
    /// How long a draining node may take before its pods are deleted, e.g. `48h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN))]
    pub termination_grace_period: Option<String>,
    /// How long the node lives before it is replaced, or `Never` (default `720h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::common::NILLABLE_DURATION_PATTERN))]
    #[schemars(extend("default" = "720h"))]
    pub expire_after: Option<String>,
}

impl NodeClaimSpec {
    /// `expireAfter`, or its default `720h`.
    pub fn expire_after(&self) -> &str {
        self.expire_after.as_deref().unwrap_or(DEFAULT_EXPIRE_AFTER)
    }
}

/// The resources a NodeClaim requests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceRequirements {
    /// Minimum resources, e.g. the sum of the pods' requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceList>,
}

/// What the cloud provider and the node reported about a NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// Name of the Node the claim became.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The cloud provider's ID of the instance, e.g. `aws:///us-east-1a/i-0123`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "providerID")]
    pub provider_id: Option<String>,
    /// The image the instance runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "imageID")]
    pub image_id: Option<String>,
    /// Capacity of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ResourceList>,
    /// Allocatable resources of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<ResourceList>,
    /// Conditions: `Launched`, `Registered`, `Initialized`, `Ready`, `Drifted`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Option<Vec<Condition>>,
    /// When a pod was last scheduled to or removed from the node (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_pod_event_time: Option<String>,
}
