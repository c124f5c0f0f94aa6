//! `NodeOverlay` (`karpenter.sh/v1alpha1`, Karpenter's `NodeOverlay` feature gate): a price,
//! a price adjustment or extended resources for the instance types and offerings its
//! requirements select (kubernetes-sigs/karpenter `pkg/apis/v1alpha1/nodeoverlay.go`).

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, LABEL_VALUE_PATTERN, Operator, QUALIFIED_NAME_PATTERN, ResourceList,
    conditions_schema,
};

/// The pattern of `spec.price`: an unsigned decimal.
pub const PRICE_PATTERN: &str = r"^\d+(\.\d+)?$";

/// The pattern of `spec.priceAdjustment`: `+N`/`-N`, `+N%`, or a decrease below 100% or exactly
/// `-100%`.
pub const PRICE_ADJUSTMENT_PATTERN: &str =
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$";

/// Which instance types an overlay changes and how.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1alpha1",
    kind = "NodeOverlay",
    plural = "nodeoverlays",
    singular = "nodeoverlay",
    shortname = "overlays",
    category = "karpenter",
    status = "NodeOverlayStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Weight","type":"integer","priority":1,"jsonPath":".spec.weight"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.price) || !has(self.priceAdjustment)",
     "message": "cannot set both 'price' and 'priceAdjustment'"}
]))]
pub struct NodeOverlaySpec {
    /// When the overlay applies: well-known labels (`node.kubernetes.io/instance-type`,
    /// `karpenter.sh/nodepool`, ...) and the NodePools' template labels.
    #[schemars(schema_with = "overlay_requirements_schema")]
    pub requirements: Vec<NodeSelectorRequirement>,
    /// A price change for the matching offerings: `+0.5`, `-0.5`, `+10%`, `-15%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PRICE_ADJUSTMENT_PATTERN))]
    pub price_adjustment: Option<String>,
    /// The price of the matching offerings, USD per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PRICE_PATTERN))]
    pub price: Option<String>,
    /// Extended resources added to the matching instance types (never cpu, memory,
    /// ephemeral-storage or pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))",
         "message": "invalid resource restricted"}
    ]))]
    pub capacity: Option<ResourceList>,
    /// Priority over other overlays (1–10000; absent counts as 0); equal weights are merged in
    /// alphabetical order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub weight: Option<i32>,
}

/// A node requirement of an overlay (no `minValues`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// The label key the requirement applies to.
    #[schemars(length(max = 316), regex(pattern = QUALIFIED_NAME_PATTERN))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": r#"self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")"#,
         "message": r#"label domain "karpenter.sh" is restricted"#},
        {"rule": r#"self != "kubernetes.io/hostname""#, "message": r#"label "kubernetes.io/hostname" is restricted"#}
    ]))]
    pub key: String,
    /// How the values are compared with the label.
    pub operator: Operator,
    /// The values; one integer for `Gt`/`Lt`/`Gte`/`Lte`, none for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 63), regex(pattern = LABEL_VALUE_PATTERN)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub values: Option<Vec<String>>,
}

/// Schema of an overlay's `requirements`: at most 100 items, atomic, with Karpenter's rules.
fn overlay_requirements_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<NodeSelectorRequirement>();
    json_schema!({
        "type": "array",
        "items": item,
        "maxItems": 100,
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": [
            {"rule": "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
             "message": "requirements with operator 'NotIn' must have a value defined"},
            {"rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
             "message": "requirements with operator 'In' must have a value defined"},
            {"rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
             "message": "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"}
        ]
    })
}

/// What Karpenter reports about an overlay: `ValidationSucceeded` and `Ready`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlayStatus {
    /// Conditions: `ValidationSucceeded` (reasons `RuntimeValidation`, `Conflict`), `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Option<Vec<Condition>>,
}
