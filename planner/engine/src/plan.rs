//! The plan: the planner's output, in the shape of the public contract
//! (`designs/planner-io.md`). Field names serialize to lowerCamelCase, exactly as the
//! gRPC `PlanResponse` renders in canonical proto3 JSON.

use serde::{Deserialize, Serialize};

use crate::model::{Labels, PodKey, Taint};

/// A whole plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// New NodeClaims to launch for pending pods.
    pub node_claims: Vec<PlannedNodeClaim>,
    /// Pending pods placed on existing Nodes or in-flight NodeClaims.
    pub existing_nodes: Vec<ExistingNodePlacement>,
    /// Pending pods that cannot be placed, with reasons.
    pub unschedulable: Vec<Unschedulable>,
    /// Disruption decisions.
    pub disruptions: Vec<DisruptionDecision>,
    /// Totals.
    pub summary: Summary,
    /// Things a person should know about how the plan was made (e.g. how spot was priced).
    /// Always printed, even when empty, because the plan's JSON is the proto3 JSON of
    /// `PlanResponse` with default values emitted.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The version of the catalog the plan was made from, when the planner service plans from
    /// a versioned catalog (the actuator's live catalog, or `builtin:<region>` while it falls
    /// back). Set by the service, not by the engine; absent from the JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_version: Option<String>,
    /// Objects of the input left out of the plan, each with why (sorted by kind, namespace and
    /// name). The rest of the input was planned without them.
    #[serde(default)]
    pub excluded: Vec<ExcludedObject>,
    /// What Karpenter would write on each disruption candidate that has something to say (its
    /// NodeClaim's conditions `Drifted` and `Consolidatable`, the Events `DisruptionBlocked` and
    /// `Unconsolidatable`), sorted by node. A candidate with nothing to say is left out.
    #[serde(default)]
    pub node_status: Vec<NodeDisruptionStatus>,
    /// The options the plan was made with, defaults filled in (set by [`crate::plan`]; the
    /// clock is not repeated: the request carries it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<OptionsUsed>,
    /// Each NodeOverlay's `ValidationSucceeded`, by name (empty when the `NodeOverlay` gate is
    /// off).
    #[serde(default)]
    pub node_overlays: Vec<crate::catalog::overlay::NodeOverlayStatus>,
    /// What each CapacityBuffer's status says after this plan (sorted by namespace and name);
    /// empty while the `CapacityBuffer` feature gate is off.
    #[serde(default)]
    pub capacity_buffers: Vec<CapacityBufferStatus>,
    /// Each NodePool's allowed disruptions per graceful reason (`Empty`, `Drifted`,
    /// `Underutilized`), sorted by pool and reason order.
    #[serde(default)]
    pub node_pool_budgets: Vec<NodePoolBudgetStatus>,
    /// The consolidation moves Karpenter v1.14's balanced evaluator would count
    /// (`karpenter_consolidation_moves_total`, `karpenter_consolidation_score`) and announce
    /// (`ConsolidationApproved`): each Underutilized decision, approved, in decision order,
    /// then each candidate the plan keeps whose single-node move its Balanced NodePool's
    /// score refused, rejected, sorted by node (see [`ConsolidationMove`]).
    #[serde(default)]
    pub consolidation_moves: Vec<ConsolidationMove>,
}

/// One consolidation move as Karpenter v1.14's `balancedEvaluator` sees a command that reached
/// `ApproveCommand` (kubernetes-sigs/karpenter `pkg/controllers/disruption/balanced.go`).
///
/// How dovetail's plan maps onto Karpenter's commands:
/// - every Underutilized decision of the plan is one approved move: a decision of one node is
///   Karpenter's single-node command (`ApproveCommand` counts it; its `ConsolidationApproved`
///   Event goes on the Node and the NodeClaim), a decision of several nodes its multi-node
///   command (`EmitMultiNodeEvents` counts it once per NodePool of its nodes; the Event goes on
///   each Balanced NodePool). Empty, Drifted, Expired and static scale-down decisions never
///   reach the evaluator in Karpenter either (`emptiness.go`, `drift.go`), and are not moves;
/// - a candidate the plan leaves in place whose own move (deleting it, or replacing it with
///   one cheaper node, the command Karpenter's single-node consolidation computes) was valid
///   but refused by its Balanced NodePool's score is one rejected move: Karpenter's
///   single-node `ApproveCommand` rejection, which counts and observes the score but
///   publishes no Event. A candidate whose best case cannot pass is skipped before any
///   command, as Karpenter's `CanPassThreshold`, and is no move;
/// - the searches' trial groups (a prefix search's probes, a larger group refused) are not
///   moves: Karpenter reports a multi-node rejection only when its binary search ends with
///   nothing, from one window, and dovetail's searches form many windows Karpenter never
///   would; one command per candidate and decision is what both agree on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidationMove {
    /// `approved` or `rejected` (Karpenter's `decision` label).
    pub decision: String,
    /// The nodes the move removes (one for a single-node move), as the decision names them.
    pub nodes: Vec<String>,
    /// Their NodeClaims, in the same order (empty where none is known).
    pub node_claims: Vec<String>,
    /// One entry per NodePool of `nodes`, sorted by name.
    pub node_pools: Vec<ConsolidationPoolScore>,
}

/// A move's facts for one NodePool (`ScoreResult` of Karpenter's `EvaluateBalancedMove`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidationPoolScore {
    /// The NodePool.
    pub node_pool: String,
    /// Its `consolidationPolicy` (Karpenter's `policy` label).
    pub policy: String,
    /// Whether the pool was scored (only Balanced pools are); the fields below are 0 when not.
    pub scored: bool,
    /// Savings share over disruption share (Karpenter's `Score()`).
    pub score: f64,
    /// `1 / k`.
    pub threshold: f64,
    /// Karpenter's `BalancedK`.
    pub k: u32,
    /// The pool's share of the move's savings, as a percentage of the pool's cost.
    pub savings_percent: f64,
    /// The move's disruption, as a percentage of the pool's disruption.
    pub disruption_percent: f64,
}

/// The allowed disruptions of one NodePool for one reason, as Karpenter's
/// `BuildDisruptionBudgetMapping` (`pkg/controllers/disruption/helpers.go`) computes them: its
/// `karpenter_nodepools_allowed_disruptions` gauge, and the NodePool's `DisruptionBlocked`
/// Event when the pool has nodes and none may be disrupted.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolBudgetStatus {
    /// The NodePool.
    pub node_pool: String,
    /// `Empty`, `Drifted` or `Underutilized`.
    pub reason: String,
    /// The least `nodes` of the budgets active now for the reason, scaled to the pool's nodes
    /// (2147483647, Go's `math.MaxInt32`, when no budget limits it), before the nodes already
    /// disrupting are taken off.
    pub allowed: i32,
    /// The pool's managed, initialized nodes.
    pub nodes: u32,
    /// Of them, the NotReady or disrupting ones.
    pub disrupting: u32,
}

// === impl NodePoolBudgetStatus ===

impl NodePoolBudgetStatus {
    /// Karpenter publishes `DisruptionBlocked` on the NodePool when it has nodes and its budgets
    /// allow none for the reason.
    pub fn is_blocked(&self) -> bool {
        self.nodes != 0 && self.allowed == 0
    }

    /// The Event's message (`NodePoolBlockedForDisruptionReason`).
    pub fn blocked_message(&self) -> String {
        format!(
            "No allowed disruptions for disruption reason {} due to blocking budget",
            self.reason
        )
    }
}

/// The status of one CapacityBuffer as Karpenter v1.14 writes it
/// (kubernetes-sigs/karpenter `pkg/controllers/capacitybuffer/controller.go` and
/// `pkg/controllers/provisioning/buffers.go`).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferStatus {
    /// The buffer's namespace.
    pub namespace: String,
    /// The buffer's name.
    pub name: String,
    /// The `ReadyForProvisioning` condition: its template resolved.
    pub ready_for_provisioning: bool,
    /// Its reason (`Resolved`, `PodTemplateNotFound`, `ScalableRefNotFound`,
    /// `ResolutionFailed`).
    pub ready_reason: String,
    /// Its message.
    pub ready_message: String,
    /// `status.replicas`: the chunks planned; absent when the template did not resolve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// `status.podTemplateRef.name` (empty for a scalableRef).
    pub pod_template: String,
    /// `status.podTemplateGeneration` (a string in JSON, as proto3 JSON writes 64-bit integers).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "int64_text")]
    pub pod_template_generation: Option<i64>,
    /// `status.provisioningStrategy` (the spec's, empty when unset).
    pub provisioning_strategy: String,
    /// The `Provisioning` condition's status: `True` (every chunk fits on existing capacity)
    /// or `False`.
    pub provisioning: String,
    /// Its reason (`FitsExistingCapacity`, `RequiresNewCapacity`, `NotReadyForProvisioning`,
    /// `BufferEmpty`).
    pub provisioning_reason: String,
    /// Its message.
    pub provisioning_message: String,
    /// The existing Nodes (or in-flight NodeClaims) its chunks are placed on.
    pub nodes: Vec<String>,
}

/// The disruption facts of one node, in Karpenter's words
/// (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/disruption/`,
/// `pkg/controllers/disruption/`).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionStatus {
    /// The Node.
    pub node: String,
    /// Its NodeClaim; empty when none is known.
    pub node_claim: String,
    /// Its NodePool.
    pub node_pool: String,
    /// The `Drifted` condition's reason (`NodePoolDrifted`, `RequirementsDrifted`,
    /// `InstanceTypeNotFound`, `NodeClassDrift`, `AMIDrift`, `SubnetDrift`,
    /// `SecurityGroupDrift`); empty when not drifted.
    pub drifted: String,
    /// What drifted, in words.
    pub drift_message: String,
    /// `consolidateAfter` has elapsed since the last pod event (`Consolidatable`).
    pub consolidatable: bool,
    /// The `DisruptionBlocked` Event's message; empty when not blocked.
    pub blocked: String,
    /// The `Unconsolidatable` Event's message; empty when none.
    pub unconsolidatable: String,
    /// No pod would have to move.
    pub empty: bool,
}

/// The options a plan was made with, as `PlanResponse.options` renders them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OptionsUsed {
    /// `Respect` or `Ignore`.
    pub preference_policy: String,
    /// `Strict` or `BestEffort`.
    pub min_values_policy: String,
    /// Spot-to-spot consolidation.
    pub spot_to_spot_consolidation: bool,
    /// Only the launch plan.
    pub no_disruption: bool,
    /// The StaticCapacity feature gate.
    pub static_capacity: bool,
    /// Karpenter's `reservedENIs`.
    pub reserved_enis: u32,
    /// Karpenter's `vmMemoryOverheadPercent`.
    pub vm_memory_overhead_percent: f64,
    /// The NodeOverlay feature gate.
    #[serde(default)]
    pub node_overlay: bool,
    /// The CapacityBuffer feature gate.
    #[serde(default)]
    pub capacity_buffer: bool,
    /// Karpenter's `ignoreDRARequests` (default true).
    #[serde(default = "crate::dra::ignore_default")]
    pub ignore_dra_requests: bool,
}

// === impl OptionsUsed ===

impl OptionsUsed {
    /// What a plan made with `o` reports.
    pub fn of(o: &crate::model::PlanOptions) -> Self {
        use crate::model::Named;
        Self {
            preference_policy: o.preference_policy.as_str().to_string(),
            min_values_policy: o.min_values_policy.as_str().to_string(),
            spot_to_spot_consolidation: o.spot_to_spot_consolidation,
            no_disruption: o.no_disruption,
            static_capacity: o.static_capacity,
            node_overlay: o.node_overlay,
            capacity_buffer: o.capacity_buffer,
            ignore_dra_requests: o.ignore_dra_requests,
            reserved_enis: o.reserved_enis,
            vm_memory_overhead_percent: o.vm_memory_overhead_percent.0,
        }
    }
}

/// An object of the input the planner could not use, left out of the plan.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExcludedObject {
    /// Its kind: `Pod`, `NodePool`, `EC2NodeClass`, `Node`, ...
    pub kind: String,
    /// Its namespace (empty for cluster-scoped kinds).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Why, as a CamelCase word: `Invalid` (breaks a rule of its schema), `Unsupported` (a
    /// value newer than this planner), `Duplicate` (a second object of the same name) or
    /// `NodeClassExcluded` (a NodePool whose EC2NodeClass was left out).
    pub reason: String,
    /// Why, in words a person can act on.
    pub message: String,
    /// The field at fault, by its path inside the object (e.g. `requests.cpu`,
    /// `disruption.budgets[0].schedule`); empty when the object as a whole is at fault.
    pub field: String,
}

/// One new NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedNodeClaim {
    /// Stable name: `<nodepool>-<suffix>` derived from its content.
    pub name: String,
    /// NodePool it comes from.
    pub node_pool: String,
    /// Every compatible type that fits all its pods plus overhead, cheapest first (≤ 60).
    pub instance_types: Vec<String>,
    /// Zones it may launch in.
    pub zones: Vec<String>,
    /// Capacity types it may launch as.
    pub capacity_types: Vec<String>,
    /// Cheapest available offering allowed by zones × capacity types, USD per hour.
    pub price: f64,
    /// Labels every node launched for it carries.
    pub labels: Labels,
    /// Taints (the NodePool's).
    pub taints: Vec<TaintOut>,
    /// Pods placed on it (`namespace/name`).
    pub pods: Vec<PodKey>,
}

/// A taint as output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaintOut {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl From<&Taint> for TaintOut {
    fn from(t: &Taint) -> Self {
        Self {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: format!("{:?}", t.effect),
        }
    }
}

/// Pending pods placed on an existing node or in-flight claim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistingNodePlacement {
    /// Node name (or NodeClaim name when the claim has no Node yet).
    pub name: String,
    /// Pods placed there.
    pub pods: Vec<PodKey>,
}

/// A pod that cannot be placed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unschedulable {
    /// `namespace/name`.
    pub pod: PodKey,
    /// Why, in words a person can act on.
    pub reason: String,
}

/// One disruption decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionDecision {
    /// `Empty`, `Underutilized`, `Drifted` or `Expired`.
    pub reason: String,
    /// Nodes (or NodeClaims without nodes) to remove.
    pub nodes: Vec<String>,
    /// New claims that replace them (their `pods` are the pods that move onto them).
    pub replacements: Vec<PlannedNodeClaim>,
    /// Hourly saving (current price of `nodes` minus price of `replacements`).
    pub savings_per_hour: f64,
    /// Where every pod the decision displaces goes: existing nodes (as the earlier decisions
    /// leave the cluster) and this decision's replacements, by name, each with its pods, sorted
    /// by name. With it a plan can be audited, decision by decision, without re-running it.
    #[serde(default)]
    pub destinations: Vec<ExistingNodePlacement>,
}

/// Totals of a plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Pending pods in the input.
    pub pending_pods: u32,
    /// Pending pods placed.
    pub scheduled_pods: u32,
    /// New NodeClaims.
    pub new_node_claims: u32,
    /// Sum of `nodeClaims[].price`.
    pub cost_per_hour: f64,
    /// A proven lower bound on the hourly cost of new capacity for the placed pods.
    pub lower_bound_cost_per_hour: f64,
}

/// An optional 64-bit integer as proto3 JSON writes it: a string (read from a string or a
/// number).
mod int64_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(n) => s.serialize_str(&n.to_string()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Number(i64),
        }
        match Option::<Either>::deserialize(d)? {
            None => Ok(None),
            Some(Either::Number(n)) => Ok(Some(n)),
            Some(Either::Text(t)) => t.parse().map(Some).map_err(serde::de::Error::custom),
        }
    }
}
