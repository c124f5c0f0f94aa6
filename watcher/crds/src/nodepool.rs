//! `NodePool` (`karpenter.sh/v1`): a template for the NodeClaims dovetail may launch, their
//! limits, priority (`weight`) and how their nodes may be disrupted.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, LABEL_VALUE_PATTERN, NodeClassReference, NodeSelectorRequirementWithMinValues,
    ResourceList, Taint, conditions_schema, requirements_schema, taints_schema,
};
use crate::nodeclaim::DEFAULT_EXPIRE_AFTER;

/// The default `consolidateAfter`.
pub const DEFAULT_CONSOLIDATE_AFTER: &str = "0s";

/// The default disruption budget: `nodes: 10%`.
pub const DEFAULT_BUDGET_NODES: &str = "10%";

/// A NodePool: which nodes may be launched for pending pods and how they are disrupted.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    category = "karpenter",
    status = "NodePoolStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.nodes"
    ),
    printcolumn = r#"{"name":"NodeClass","type":"string","jsonPath":".spec.template.spec.nodeClassRef.name"}"#,
    printcolumn = r#"{"name":"Nodes","type":"string","jsonPath":".status.nodes"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Weight","type":"integer","priority":1,"jsonPath":".spec.weight"}"#,
    printcolumn = r#"{"name":"CPU","type":"string","priority":1,"jsonPath":".status.resources.cpu"}"#,
    printcolumn = r#"{"name":"Memory","type":"string","priority":1,"jsonPath":".status.resources.memory"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.replicas) == has(oldSelf.replicas)",
     "message": "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"},
    {"rule": "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",
     "message": "only 'limits.nodes' is supported on static NodePools"},
    {"rule": "!has(self.replicas) || !has(self.weight)",
     "message": "'weight' is not supported on static NodePools"}
]))]
pub struct NodePoolSpec {
    /// The NodeClaims launched for this pool are made from this template.
    pub template: NodeClaimTemplate,
    /// How and when nodes of this pool may be disrupted (default `consolidateAfter: 0s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"consolidateAfter": "0s"}))]
    pub disruption: Option<Disruption>,
    /// Caps on the total resources of the pool's nodes (`cpu`, `memory`, `nodes`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
    /// Priority among pools that fit a pod: higher first (1–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
    /// A static pool: keep exactly this many nodes (no weight, only `limits.nodes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,
}

impl NodePoolSpec {
    /// `weight`, or 0 when unset (the lowest priority).
    pub fn weight(&self) -> i32 {
        self.weight.unwrap_or(0)
    }
}

/// The NodeClaim template of a NodePool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    /// Labels and annotations put on the NodeClaims and nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<NodeClaimTemplateMetadata>,
    /// The NodeClaim spec.
    pub spec: NodeClaimTemplateSpec,
}

/// Labels and annotations of a NodeClaim template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClaimTemplateMetadata {
    /// Labels put on the nodes; the `karpenter.sh` domain (but `karpenter.sh/capacity-type`),
    /// `karpenter.sh/nodepool` and `kubernetes.io/hostname` are reserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "template_labels_schema")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations put on the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "granular"))]
    pub annotations: Option<BTreeMap<String, String>>,
}

fn template_labels_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE_PATTERN},
        "maxProperties": 100,
        "x-kubernetes-map-type": "atomic",
        "x-kubernetes-validations": [
            {"rule": r#"self.all(x, x in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.find("^([^/]+)").endsWith("karpenter.sh"))"#,
             "message": r#"label domain "karpenter.sh" is restricted"#},
            {"rule": r#"self.all(x, x != "karpenter.sh/nodepool")"#,
             "message": r#"label "karpenter.sh/nodepool" is restricted"#},
            {"rule": r#"self.all(x, x != "kubernetes.io/hostname")"#,
             "message": r#"label "kubernetes.io/hostname" is restricted"#}
        ]
    })
}

/// The spec of a NodeClaim template: a NodeClaim spec without `resources`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Taints placed on the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "taints_schema")]
    pub taints: Option<Vec<Taint>>,
    /// Taints placed at launch that a daemon removes once the node is initialized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "taints_schema")]
    pub startup_taints: Option<Vec<Taint>>,
    /// The label requirements of the instances (`nodepool_requirements_schema`).
    #[schemars(schema_with = "nodepool_requirements_schema")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The node class the instances are launched with.
    pub node_class_ref: NodeClassReference,
    /// How long a draining node may take before its pods are deleted, e.g. `48h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::common::DURATION_PATTERN))]
    pub termination_grace_period: Option<String>,
    /// How long a node lives before it is replaced, or `Never` (default `720h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::common::NILLABLE_DURATION_PATTERN))]
    #[schemars(extend("default" = "720h"))]
    pub expire_after: Option<String>,
}

impl NodeClaimTemplateSpec {
    /// `expireAfter`, or its default `720h`.
    pub fn expire_after(&self) -> &str {
        self.expire_after.as_deref().unwrap_or(DEFAULT_EXPIRE_AFTER)
    }
}

/// A NodePool's requirements also may not name `karpenter.sh/nodepool` (Karpenter sets it).
fn nodepool_requirements_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = requirements_schema(generator);
    if let Some(rules) = schema
        .get_mut("items")
        .and_then(|items| items.pointer_mut("/properties/key/x-kubernetes-validations"))
        .and_then(serde_json::Value::as_array_mut)
    {
        rules.insert(
            1,
            serde_json::json!({"rule": r#"self != "karpenter.sh/nodepool""#,
                               "message": r#"label "karpenter.sh/nodepool" is restricted"#}),
        );
    }
    schema
}

/// How nodes of a pool may be disrupted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// How long a node must be empty or underutilized before it is consolidated, or `Never`
    /// (default `0s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::common::NILLABLE_DURATION_PATTERN))]
    #[schemars(extend("default" = "0s"))]
    pub consolidate_after: Option<String>,
    /// Which nodes may be consolidated (default `WhenEmptyOrUnderutilized`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "WhenEmptyOrUnderutilized"))]
    pub consolidation_policy: Option<ConsolidationPolicy>,
    /// How many nodes may be disrupted at once (default `[{nodes: 10%}]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "budgets_schema")]
    pub budgets: Option<Vec<Budget>>,
}

impl Disruption {
    /// `consolidateAfter`, or its default `0s`.
    pub fn consolidate_after(&self) -> &str {
        self.consolidate_after
            .as_deref()
            .unwrap_or(DEFAULT_CONSOLIDATE_AFTER)
    }

    /// `consolidationPolicy`, or its default `WhenEmptyOrUnderutilized`.
    pub fn consolidation_policy(&self) -> ConsolidationPolicy {
        self.consolidation_policy
            .unwrap_or(ConsolidationPolicy::WhenEmptyOrUnderutilized)
    }

    /// `budgets`, or the default `[{nodes: 10%}]`.
    pub fn budgets(&self) -> Vec<Budget> {
        self.budgets.clone().unwrap_or_else(|| {
            vec![Budget {
                nodes: DEFAULT_BUDGET_NODES.to_owned(),
                ..Budget::default()
            }]
        })
    }
}

fn budgets_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<Budget>();
    json_schema!({
        "type": "array",
        "items": item,
        "maxItems": 50,
        "default": [{"nodes": "10%"}],
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": [
            {"rule": "self.all(x, has(x.schedule) == has(x.duration))",
             "message": "'schedule' must be set with 'duration'"}
        ]
    })
}

/// Which nodes consolidation may act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Empty nodes, and nodes whose pods fit elsewhere more cheaply.
    WhenEmptyOrUnderutilized,
    /// Like `WhenEmptyOrUnderutilized`, but only when the saving outweighs the disruption.
    Balanced,
}

/// Why a node is disrupted, for budgets limited to some reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DisruptionReason {
    /// Consolidation of an underutilized node.
    Underutilized,
    /// Consolidation of an empty node.
    Empty,
    /// Replacement of a drifted node.
    Drifted,
}

/// A disruption budget: at most `nodes` nodes (a count or a percentage) disrupted at once,
/// optionally only during a cron `schedule` for a `duration`, and only for some `reasons`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// The reasons the budget applies to (all when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub reasons: Option<Vec<DisruptionReason>>,
    /// How many nodes may be disrupted: `10%` or `5`.
    #[schemars(regex(pattern = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    #[schemars(extend("default" = "10%"))]
    pub nodes: String,
    /// When the budget starts being active (cron syntax or a macro such as `@daily`), in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
    ))]
    pub schedule: Option<String>,
    /// How long the budget is active after each `schedule` time, e.g. `8h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"))]
    pub duration: Option<String>,
}

/// What Karpenter reports about a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Resources of the pool's nodes in total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceList>,
    /// How many nodes the pool has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub nodes: Option<i64>,
    /// The generation of the node class last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// Conditions: `Ready`, `ValidationSucceeded`, `NodeClassReady`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Option<Vec<Condition>>,
}
