//! `CapacityBuffer` (`autoscaling.x-k8s.io/v1beta1`): spare capacity declared as N chunks of a
//! pod template, the API kubernetes-sigs/karpenter v1.14 copies from the cluster autoscaler
//! (`pkg/apis/autoscaling/v1beta1/capacitybuffer.go`,
//! `pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, ResourceList, conditions_schema};

/// `spec.provisioningStrategy`'s default.
pub const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";

/// The desired buffer: what one chunk is (a PodTemplate, or the template of a scalable
/// workload) and how many chunks to keep.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "autoscaling.x-k8s.io",
    version = "v1beta1",
    kind = "CapacityBuffer",
    plural = "capacitybuffers",
    singular = "capacitybuffer",
    shortname = "cb",
    category = "autoscaling",
    namespaced,
    status = "CapacityBufferStatus",
    printcolumn = r#"{"name":"Strategy","type":"string","description":"The strategy to be used.","jsonPath":".spec.provisioningStrategy"}"#,
    printcolumn = r#"{"name":"PodTemplate","type":"string","description":"The name of the PodTemplate used.","jsonPath":".status.podTemplateRef.name"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","description":"The actual number of buffer chunks.","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"ConditionsType","type":"string","description":"List of all condition types.","jsonPath":".status.conditions[*].type"}"#,
    printcolumn = r#"{"name":"ConditionsStatus","type":"string","description":"List of all condition statuses.","jsonPath":".status.conditions[*].status"}"#,
    printcolumn = r#"{"name":"ConditionsReason","type":"string","description":"List of all condition reasons.","jsonPath":".status.conditions[*].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","description":"The age of the CapacityBuffer.","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)", "message": "If podTemplateRef is set, replicas or limits must also be set"},
    {"rule": "!(has(self.podTemplateRef) && has(self.scalableRef))", "message": "You must define either PodTemplateRef or ScalableRef, but not both"}
]))]
pub struct CapacityBufferSpec {
    /// How the buffer is used; `buffer.x-k8s.io/active-capacity` (the default) provisions
    /// capacity for placeholder pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "buffer.x-k8s.io/active-capacity"))]
    pub provisioning_strategy: Option<String>,
    /// A PodTemplate in the buffer's namespace: the shape of one chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// A workload with a scale subresource whose pod template is the shape of one chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_ref: Option<ScalableRef>,
    /// How many chunks; with `percentage`, the larger of the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Chunks as a percentage of the `scalableRef`'s replicas (rounded up, at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub percentage: Option<i32>,
    /// Total requests the chunks may add up to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
}

/// A reference to an object in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectRef {
    /// The referent's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// A reference to an object with a scale subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalableRef {
    /// The referent's API group; empty for the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// The referent's kind.
    #[schemars(length(min = 1))]
    pub kind: String,
    /// The referent's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// What the autoscaler observed and did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferStatus {
    /// The PodTemplate the buffer was provisioned from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// The chunks planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The observed generation of the PodTemplate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_generation: Option<i64>,
    /// Conditions: `ReadyForProvisioning`, `Provisioning`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Option<Vec<Condition>>,
    /// The strategy the buffer is provisioned with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
}
