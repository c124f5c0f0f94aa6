//! Types shared by the `karpenter.sh` and `karpenter.k8s.aws` resources: node requirements with
//! `minValues`, taints, the node class reference, resource quantities and status conditions,
//! with the OpenAPI constraints Karpenter v1 puts on them.

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// Karpenter's duration pattern for `expireAfter` and `consolidateAfter`: Go-style durations in
/// whole seconds, minutes and hours, or `Never`.
pub const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";

/// The pattern of `terminationGracePeriod`: a Go-style duration without `Never`.
pub const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";

/// The pattern of a Kubernetes resource quantity (`resource.Quantity`).
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The pattern of a qualified label key or taint key (`prefix/name`).
pub const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";

/// The pattern of a label value (possibly empty).
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

// === Quantity ===

/// A Kubernetes resource quantity as written in a manifest: `cpu: 1000` or `memory: 4000Gi`.
///
/// Kept as written (integer or string) so that a manifest read and written back is unchanged;
/// the consumers parse it with their own quantity arithmetic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    /// A plain integer, e.g. `cpu: 1000`.
    Int(i64),
    /// A quantity string, e.g. `"4000Gi"` or `"500m"`.
    String(String),
}

impl JsonSchema for Quantity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true
        })
    }
}

/// Resource names to quantities (`limits`, `status.resources`, `allocatable`, ...), in key order.
pub type ResourceList = BTreeMap<String, Quantity>;

// === NodeClassReference ===

/// Which node class (for AWS an `EC2NodeClass`) the nodes are launched with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.group == oldSelf.group", "message": "nodeClassRef.group is immutable"},
    {"rule": "self.kind == oldSelf.kind", "message": "nodeClassRef.kind is immutable"}
]))]
pub struct NodeClassReference {
    /// API group of the node class, e.g. `karpenter.k8s.aws`.
    #[schemars(regex(pattern = r"^[^/]*$"))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "group may not be empty"}]))]
    pub group: String,
    /// Kind of the node class, e.g. `EC2NodeClass`.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "kind may not be empty"}]))]
    pub kind: String,
    /// Name of the node class.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "name may not be empty"}]))]
    pub name: String,
}

// === NodeSelectorRequirementWithMinValues ===

/// The operator of a node requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Operator {
    /// The label's value is one of `values`.
    In,
    /// The label's value is none of `values` (or the label is absent).
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's integer value is greater than the single value.
    Gt,
    /// The label's integer value is less than the single value.
    Lt,
    /// The label's integer value is greater than or equal to the single value.
    Gte,
    /// The label's integer value is less than or equal to the single value.
    Lte,
}

/// A node selector requirement with Karpenter's `minValues`: how many distinct values of the
/// key the launch decision must keep open (e.g. at least 3 instance families for spot).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
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
    /// The minimum number of distinct values of `key` that must stay possible (1–50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i32>,
}

/// The CEL rules Karpenter puts on a list of requirements (`spec.requirements`).
pub(crate) fn requirements_rules() -> serde_json::Value {
    serde_json::json!([
        {"rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
         "message": "requirements with operator 'In' must have a value defined"},
        {"rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
         "message": "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
        {"rule": "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
         "message": "requirements with 'minValues' must have at least that many values specified in the 'values' field"}
    ])
}

/// Schema of `requirements`: at most 100 items, atomic, with [`requirements_rules`].
pub(crate) fn requirements_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<NodeSelectorRequirementWithMinValues>();
    json_schema!({
        "type": "array",
        "items": item,
        "maxItems": 100,
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": requirements_rules()
    })
}

// === Taint ===

pub use ::common::taint::TaintEffect;

// The API type as Kubernetes writes it, apart from `common::Taint` (which the planner and the
// launches use): `value` may be absent rather than empty, `timeAdded` is kept, and the schema
// carries the API server's patterns. Its `TaintEffect` is the common one. (A plain comment: the
// doc comment below is the CRD schema's description.)
/// A taint placed on the nodes (`taints`, `startupTaints`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// The taint key.
    #[schemars(length(min = 1), regex(pattern = QUALIFIED_NAME_PATTERN))]
    pub key: String,
    /// The taint value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUALIFIED_NAME_PATTERN))]
    pub value: Option<String>,
    /// The taint effect.
    pub effect: TaintEffect,
    /// When the taint was added (RFC 3339), only for `NoExecute`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub time_added: Option<String>,
}

/// Schema of `taints` / `startupTaints`: an atomic list of [`Taint`].
pub(crate) fn taints_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<Taint>();
    json_schema!({"type": "array", "items": item, "x-kubernetes-list-type": "atomic"})
}

// === Condition ===

/// The status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet.
    Unknown,
}

/// A status condition (`metav1.Condition`), e.g. `Ready`, `NodeClassReady`, `Drifted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition type in CamelCase, e.g. `Ready`.
    #[serde(rename = "type")]
    #[schemars(length(max = 316))]
    #[schemars(regex(
        pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
    ))]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// When the status last changed (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
    /// A machine-readable reason in CamelCase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 1024),
        regex(pattern = r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$")
    )]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub message: Option<String>,
    /// The `metadata.generation` the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
}

/// Schema of `status.conditions`: a list map keyed by `type`.
pub(crate) fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<Condition>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map"
    })
}

/// Finds the condition of a type in a list of conditions.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}
