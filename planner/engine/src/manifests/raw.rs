//! The subset of Kubernetes and Karpenter object schemas that planning reads, as lean serde
//! structs. Unknown fields are ignored. Values that need parsing (quantities, durations, times,
//! int-or-percent) are parsed while deserializing, so that an error carries its field path.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::time::parse_rfc3339;
use crate::model::quantity::{parse_milli, parse_units};
use crate::model::{
    IntOrPercent, Labels, NodeInclusionPolicy, Operator, PodPhase, SelectorOperator, TaintEffect,
    Timestamp, VolumeBindingMode, WhenUnsatisfiable, names,
};
use common::duration::parse_go_duration;

// === scalar wrappers ===

/// A Kubernetes quantity given as a string or a bare YAML/JSON number.
struct QuantityText(String);

impl<'de> Deserialize<'de> for QuantityText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::scalar_text::deserialize(d, "a quantity such as \"500m\", \"2Gi\" or 4", false)
            .map(QuantityText)
    }
}

/// Parses a quantity in the planner's unit for the named resource: millicores for `cpu`, bytes
/// for `memory`, `ephemeral-storage` and `storage`, a count for `pods`, milli-units for every
/// extended resource (see [`crate::model::Resources`]).
pub(super) fn parse_resource(name: &str, text: &str) -> Result<i64, String> {
    let parsed = match name {
        names::CPU => parse_milli(text),
        names::MEMORY | names::EPHEMERAL_STORAGE | "storage" | names::PODS => parse_units(text),
        _ => parse_milli(text),
    };
    let v = parsed.map_err(|e| e.to_string())?;
    if v < 0 {
        return Err(format!(
            "invalid quantity {text:?}: quantities must not be negative"
        ));
    }
    Ok(v)
}

struct QuantitySeed<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for QuantitySeed<'_> {
    type Value = i64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<i64, D::Error> {
        let text = QuantityText::deserialize(d)?;
        parse_resource(self.0, &text.0).map_err(de::Error::custom)
    }
}

/// A `ResourceList` (`{cpu: 500m, memory: 1Gi}`): amounts in the planner's units, by name.
/// Presence matters (a request of `0` is not a missing request), so this is a map.
#[derive(Clone, Debug, Default)]
pub(super) struct ResourceList(pub(super) BTreeMap<String, i64>);

impl<'de> Deserialize<'de> for ResourceList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ResourceList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of resource names to quantities")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResourceList, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if out.contains_key(&key) {
                        return Err(de::Error::custom(format!("duplicate key {key:?}")));
                    }
                    let v = map.next_value_seed(QuantitySeed(&key))?;
                    out.insert(key, v);
                }
                Ok(ResourceList(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A Go duration, or `Never` (`None`), in seconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct NillableDuration(pub(super) Option<i64>);

impl<'de> Deserialize<'de> for NillableDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == "Never" {
            return Ok(Self(None));
        }
        parse_go_duration(&s)
            .map(|v| Self(Some(v)))
            .map_err(de::Error::custom)
    }
}

/// A Go duration that cannot be `Never`, in seconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Duration(pub(super) i64);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_go_duration(&s).map(Self).map_err(de::Error::custom)
    }
}

/// An RFC 3339 time in Unix seconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Time(pub(super) Timestamp);

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_rfc3339(&s).map(Self).map_err(de::Error::custom)
    }
}

/// An int or a percentage string (`1`, `"50%"`), as in PDBs.
#[derive(Clone, Copy, Debug)]
pub(super) struct RawIntOrPercent(pub(super) IntOrPercent);

fn parse_int_or_percent(s: &str) -> Result<IntOrPercent, String> {
    let bad = || format!("invalid value {s:?}: expected an integer or a percentage like \"50%\"");
    match s.strip_suffix('%') {
        Some(p) => p.parse().map(IntOrPercent::Percent).map_err(|_| bad()),
        None => s.parse().map(IntOrPercent::Int).map_err(|_| bad()),
    }
}

impl<'de> Deserialize<'de> for RawIntOrPercent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawIntOrPercent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a percentage like \"50%\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawIntOrPercent, E> {
                i32::try_from(v)
                    .map(|v| RawIntOrPercent(IntOrPercent::Int(v)))
                    .map_err(|_| E::custom(format!("{v} is out of range")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawIntOrPercent, E> {
                i32::try_from(v)
                    .map(|v| RawIntOrPercent(IntOrPercent::Int(v)))
                    .map_err(|_| E::custom(format!("{v} is out of range")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawIntOrPercent, E> {
                parse_int_or_percent(v)
                    .map(RawIntOrPercent)
                    .map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

// === metadata ===

/// `metadata`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct ObjectMeta {
    pub(super) name: String,
    pub(super) namespace: Option<String>,
    pub(super) uid: Option<String>,
    #[serde(deserialize_with = "super::strict::labels")]
    pub(super) labels: Labels,
    #[serde(deserialize_with = "super::strict::labels")]
    pub(super) annotations: Labels,
    pub(super) creation_timestamp: Option<Time>,
    pub(super) deletion_timestamp: Option<Time>,
    pub(super) owner_references: Vec<OwnerReference>,
}

/// `metadata.ownerReferences[]`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct OwnerReference {
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) controller: Option<bool>,
}

/// `metadata` of a template: labels and annotations only.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct TemplateMeta {
    pub(super) name: Option<String>,
    #[serde(deserialize_with = "super::strict::labels")]
    pub(super) labels: Labels,
    #[serde(deserialize_with = "super::strict::labels")]
    pub(super) annotations: Labels,
}

// === selectors, taints, tolerations ===

/// A node selector requirement, with Karpenter's `minValues`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NodeSelectorRequirement {
    pub(super) key: String,
    pub(super) operator: Operator,
    #[serde(default)]
    pub(super) values: Vec<String>,
    #[serde(default)]
    pub(super) min_values: Option<u32>,
}

/// A node selector term.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeSelectorTerm {
    pub(super) match_expressions: Vec<NodeSelectorRequirement>,
    pub(super) match_fields: Vec<NodeSelectorRequirement>,
}

/// `nodeSelector` of a required node affinity or a PV's node affinity.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeSelector {
    pub(super) node_selector_terms: Vec<NodeSelectorTerm>,
}

/// A preferred scheduling term.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PreferredSchedulingTerm {
    pub(super) weight: i32,
    pub(super) preference: NodeSelectorTerm,
}

/// A label selector expression.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LabelSelectorRequirement {
    pub(super) key: String,
    pub(super) operator: SelectorOperator,
    #[serde(default)]
    pub(super) values: Vec<String>,
}

/// A label selector.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct LabelSelector {
    #[serde(deserialize_with = "super::strict::labels")]
    pub(super) match_labels: Labels,
    pub(super) match_expressions: Vec<LabelSelectorRequirement>,
}

/// A taint.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Taint {
    pub(super) key: String,
    #[serde(default)]
    pub(super) value: String,
    pub(super) effect: TaintEffect,
}

/// `operator` of a toleration; empty means `Equal`.
#[derive(Deserialize, Default, Clone, Copy)]
pub(super) enum TolerationOperator {
    #[default]
    #[serde(rename = "")]
    Empty,
    Equal,
    Exists,
}

/// `effect` of a toleration; empty means every effect.
#[derive(Deserialize, Default, Clone, Copy)]
pub(super) enum TolerationEffect {
    #[default]
    #[serde(rename = "")]
    All,
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// A toleration.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Toleration {
    pub(super) key: String,
    pub(super) operator: TolerationOperator,
    pub(super) value: String,
    pub(super) effect: TolerationEffect,
}

// === pods ===

/// `resources` of a container or a pod.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct ResourceRequirements {
    pub(super) requests: ResourceList,
    pub(super) limits: ResourceList,
}

/// A container port.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ContainerPort {
    #[serde(default)]
    pub(super) container_port: i32,
    #[serde(default)]
    pub(super) host_port: Option<i32>,
    #[serde(default, rename = "hostIP")]
    pub(super) host_ip: Option<String>,
    #[serde(default)]
    pub(super) protocol: Option<String>,
}

/// A container or init container.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Container {
    pub(super) resources: ResourceRequirements,
    pub(super) ports: Vec<ContainerPort>,
    pub(super) restart_policy: Option<String>,
}

/// `affinity.nodeAffinity`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeAffinity {
    pub(super) required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
    pub(super) preferred_during_scheduling_ignored_during_execution: Vec<PreferredSchedulingTerm>,
}

/// A pod (anti-)affinity term.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PodAffinityTerm {
    pub(super) label_selector: Option<LabelSelector>,
    pub(super) namespaces: Vec<String>,
    pub(super) namespace_selector: Option<LabelSelector>,
    pub(super) topology_key: String,
    pub(super) match_label_keys: Vec<String>,
    pub(super) mismatch_label_keys: Vec<String>,
}

/// A weighted pod (anti-)affinity term.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WeightedPodAffinityTerm {
    pub(super) weight: i32,
    pub(super) pod_affinity_term: PodAffinityTerm,
}

/// `affinity.podAffinity` / `affinity.podAntiAffinity`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PodAffinity {
    pub(super) required_during_scheduling_ignored_during_execution: Vec<PodAffinityTerm>,
    pub(super) preferred_during_scheduling_ignored_during_execution: Vec<WeightedPodAffinityTerm>,
}

/// `affinity`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Affinity {
    pub(super) node_affinity: Option<NodeAffinity>,
    pub(super) pod_affinity: Option<PodAffinity>,
    pub(super) pod_anti_affinity: Option<PodAffinity>,
}

/// A topology spread constraint.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TopologySpreadConstraint {
    pub(super) max_skew: i32,
    pub(super) topology_key: String,
    pub(super) when_unsatisfiable: WhenUnsatisfiable,
    #[serde(default)]
    pub(super) label_selector: Option<LabelSelector>,
    #[serde(default)]
    pub(super) min_domains: Option<i32>,
    #[serde(default)]
    pub(super) match_label_keys: Vec<String>,
    #[serde(default)]
    pub(super) node_affinity_policy: Option<NodeInclusionPolicy>,
    #[serde(default)]
    pub(super) node_taints_policy: Option<NodeInclusionPolicy>,
}

/// `persistentVolumeClaim` of a volume.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PvcSource {
    pub(super) claim_name: String,
}

/// A pod volume (only the kinds that bind claims).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Volume {
    pub(super) name: String,
    pub(super) persistent_volume_claim: Option<PvcSource>,
    pub(super) ephemeral: Option<EphemeralVolume>,
}

/// `ephemeral` of a pod volume.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct EphemeralVolume {
    pub(super) volume_claim_template: Option<ClaimTemplate>,
}

/// `spec` of a pod or pod template.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PodSpec {
    pub(super) node_name: Option<String>,
    #[serde(deserialize_with = "super::strict::labels")]
    pub(super) node_selector: Labels,
    pub(super) affinity: Option<Affinity>,
    pub(super) tolerations: Vec<Toleration>,
    pub(super) topology_spread_constraints: Vec<TopologySpreadConstraint>,
    pub(super) containers: Vec<Container>,
    pub(super) init_containers: Vec<Container>,
    pub(super) overhead: Option<ResourceList>,
    pub(super) resources: Option<ResourceRequirements>,
    pub(super) priority: Option<i32>,
    pub(super) priority_class_name: Option<String>,
    pub(super) volumes: Vec<Volume>,
    pub(super) host_network: bool,
}

/// `status` of a pod.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PodStatus {
    pub(super) phase: Option<PodPhase>,
    pub(super) start_time: Option<Time>,
}

/// A Pod.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Pod {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: PodSpec,
    pub(super) status: PodStatus,
}

/// A pod template.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PodTemplate {
    pub(super) metadata: TemplateMeta,
    pub(super) spec: PodSpec,
}

// === workloads ===

/// `spec` of a Deployment, ReplicaSet, StatefulSet, Job or DaemonSet.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct WorkloadSpec {
    pub(super) replicas: Option<i32>,
    pub(super) parallelism: Option<i32>,
    pub(super) completions: Option<i32>,
    pub(super) template: PodTemplate,
    pub(super) volume_claim_templates: Vec<ClaimTemplate>,
    /// Job: a suspended Job runs no pods.
    pub(super) suspend: bool,
    /// StatefulSet: `ordinals.start`.
    pub(super) ordinals: Option<Ordinals>,
}

/// `spec.ordinals` of a StatefulSet.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Ordinals {
    pub(super) start: i32,
}

/// A StatefulSet `volumeClaimTemplates[]` entry (its name only).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct ClaimTemplate {
    pub(super) metadata: TemplateMeta,
    pub(super) spec: ClaimTemplateSpec,
}

/// `spec` of a claim template (only what volume topology needs).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct ClaimTemplateSpec {
    pub(super) storage_class_name: Option<String>,
}

/// `status` of a Job.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct JobStatus {
    pub(super) succeeded: Option<i32>,
}

/// A workload controller.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Workload {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: WorkloadSpec,
    pub(super) status: JobStatus,
}

/// `spec` of a PodDisruptionBudget.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PdbSpec {
    pub(super) selector: Option<LabelSelector>,
    pub(super) min_available: Option<RawIntOrPercent>,
    pub(super) max_unavailable: Option<RawIntOrPercent>,
}

/// `status` of a PodDisruptionBudget.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PdbStatus {
    pub(super) disruptions_allowed: Option<i32>,
}

/// A PodDisruptionBudget.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Pdb {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: PdbSpec,
    pub(super) status: PdbStatus,
}

// === nodes ===

/// `spec` of a Node.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeSpec {
    pub(super) taints: Vec<Taint>,
    pub(super) unschedulable: bool,
    #[serde(rename = "providerID")]
    pub(super) provider_id: Option<String>,
}

/// A status condition.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Condition {
    #[serde(rename = "type")]
    pub(super) type_: String,
    pub(super) status: String,
}

/// `status` of a Node.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeStatus {
    pub(super) allocatable: ResourceList,
    pub(super) capacity: ResourceList,
    pub(super) conditions: Vec<Condition>,
}

/// A Node.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Node {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: NodeSpec,
    pub(super) status: NodeStatus,
}

// === Karpenter ===

/// `nodeClassRef`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeClassRef {
    pub(super) name: String,
}

/// `spec` of a NodeClaim, and `spec.template.spec` of a NodePool.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeClaimSpec {
    pub(super) taints: Vec<Taint>,
    pub(super) startup_taints: Vec<Taint>,
    pub(super) requirements: Vec<NodeSelectorRequirement>,
    pub(super) node_class_ref: Option<NodeClassRef>,
    pub(super) expire_after: Option<NillableDuration>,
    pub(super) resources: ResourceRequirements,
}

/// `status` of a NodeClaim.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeClaimStatus {
    pub(super) node_name: Option<String>,
    #[serde(rename = "providerID")]
    pub(super) provider_id: Option<String>,
    pub(super) capacity: ResourceList,
    pub(super) allocatable: ResourceList,
    pub(super) last_pod_event_time: Option<Time>,
    #[serde(rename = "imageID")]
    pub(super) image_id: Option<String>,
}

/// A NodeClaim.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeClaim {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: NodeClaimSpec,
    pub(super) status: NodeClaimStatus,
}

/// `spec.template` of a NodePool.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodeClaimTemplate {
    pub(super) metadata: TemplateMeta,
    pub(super) spec: NodeClaimSpec,
}

/// A budget `reasons[]` entry.
#[derive(Deserialize, Clone, Copy, Debug)]
pub(super) enum DisruptionReason {
    Underutilized,
    Empty,
    Drifted,
}

/// A disruption budget.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Budget {
    pub(super) nodes: Option<RawIntOrPercent>,
    pub(super) reasons: Vec<DisruptionReason>,
    pub(super) schedule: Option<String>,
    pub(super) duration: Option<Duration>,
}

/// `spec.disruption.consolidationPolicy`.
#[derive(Deserialize, Clone, Copy)]
pub(super) enum ConsolidationPolicy {
    WhenEmpty,
    WhenEmptyOrUnderutilized,
    Balanced,
    /// `WhenUnderutilized`, karpenter.sh/v1beta1's name of WhenEmptyOrUnderutilized (read with
    /// a warning).
    #[serde(rename = "WhenUnderutilized")]
    LegacyWhenUnderutilized,
}

/// `spec.disruption`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Disruption {
    pub(super) consolidation_policy: Option<ConsolidationPolicy>,
    pub(super) consolidate_after: Option<NillableDuration>,
    pub(super) budgets: Option<Vec<Budget>>,
}

/// `spec` of a NodePool.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodePoolSpec {
    pub(super) template: NodeClaimTemplate,
    pub(super) disruption: Disruption,
    pub(super) limits: Option<ResourceList>,
    pub(super) weight: Option<i32>,
    pub(super) replicas: Option<i64>,
}

/// A NodePool.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NodePool {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: NodePoolSpec,
}

/// A threshold of `evictionHard`: an absolute quantity or a percentage.
pub(super) enum Threshold {
    Absolute(String),
    Percent(String),
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let QuantityText(s) = QuantityText::deserialize(d)?;
        Ok(match s.strip_suffix('%') {
            Some(p) => Threshold::Percent(p.trim().to_string()),
            None => Threshold::Absolute(s),
        })
    }
}

/// `spec.kubelet` of an EC2NodeClass.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct KubeletConfiguration {
    pub(super) max_pods: Option<i64>,
    pub(super) pods_per_core: Option<i64>,
    pub(super) kube_reserved: Option<ResourceList>,
    pub(super) system_reserved: Option<ResourceList>,
    pub(super) eviction_hard: BTreeMap<String, Threshold>,
}

/// An `amiSelectorTerms[]` entry (its alias only).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct AmiSelectorTerm {
    pub(super) alias: Option<String>,
}

/// `ebs` of a block device mapping.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct BlockDevice {
    pub(super) volume_size: Option<QuantityString>,
}

/// A quantity kept as text and parsed as bytes by the converter.
#[derive(Deserialize)]
#[serde(transparent)]
pub(super) struct QuantityString(#[serde(deserialize_with = "quantity_bytes")] pub(super) i64);

fn quantity_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    QuantitySeed(names::MEMORY).deserialize(d)
}

/// A block device mapping.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct BlockDeviceMapping {
    pub(super) device_name: Option<String>,
    pub(super) ebs: Option<BlockDevice>,
    pub(super) root_volume: bool,
}

/// `spec` of an EC2NodeClass.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Ec2NodeClassSpec {
    pub(super) ami_family: Option<String>,
    pub(super) ami_selector_terms: Vec<AmiSelectorTerm>,
    pub(super) kubelet: Option<KubeletConfiguration>,
    pub(super) block_device_mappings: Vec<BlockDeviceMapping>,
}

/// An EC2NodeClass.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Ec2NodeClass {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: Ec2NodeClassSpec,
}

// === cluster objects ===

/// A Namespace or PriorityClass-like object that only needs metadata.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct MetaOnly {
    pub(super) metadata: ObjectMeta,
}

/// `spec` of a PersistentVolumeClaim.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PvcSpec {
    pub(super) storage_class_name: Option<String>,
    pub(super) volume_name: Option<String>,
}

/// A PersistentVolumeClaim.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Pvc {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: PvcSpec,
}

/// `spec.nodeAffinity` of a PersistentVolume.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct VolumeNodeAffinity {
    pub(super) required: Option<NodeSelector>,
}

/// `spec` of a PersistentVolume.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PvSpec {
    pub(super) storage_class_name: Option<String>,
    pub(super) node_affinity: Option<VolumeNodeAffinity>,
    /// `spec.local` (only whether it is set matters).
    pub(super) local: Option<serde_json::Value>,
    /// `spec.hostPath` (only whether it is set matters).
    pub(super) host_path: Option<serde_json::Value>,
}

/// A PersistentVolume.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Pv {
    pub(super) metadata: ObjectMeta,
    pub(super) spec: PvSpec,
}

/// A `matchLabelExpressions[]` entry of a StorageClass's `allowedTopologies`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TopologySelectorRequirement {
    pub(super) key: String,
    #[serde(default)]
    pub(super) values: Vec<String>,
}

/// An `allowedTopologies[]` term.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct TopologySelectorTerm {
    pub(super) match_label_expressions: Vec<TopologySelectorRequirement>,
}

/// A StorageClass (fields at the top level, not under `spec`).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct StorageClass {
    pub(super) metadata: ObjectMeta,
    pub(super) volume_binding_mode: Option<VolumeBindingMode>,
    pub(super) allowed_topologies: Vec<TopologySelectorTerm>,
}

/// A PriorityClass (fields at the top level).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PriorityClass {
    pub(super) metadata: ObjectMeta,
    pub(super) value: i32,
    pub(super) global_default: bool,
}
