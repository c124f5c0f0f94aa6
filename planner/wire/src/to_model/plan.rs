//! Wire → model for the client side: a `PlanResponse` back into the plan it carries.

use proto::v1 as pb;

use planner::model::VmMemoryOverhead;
use planner::plan::{
    DisruptionDecision, ExcludedObject, ExistingNodePlacement, OptionsUsed, Plan, PlannedNodeClaim,
    Summary, TaintOut, Unschedulable,
};

fn claim_in(c: pb::PlannedNodeClaim) -> PlannedNodeClaim {
    PlannedNodeClaim {
        name: c.name,
        node_pool: c.node_pool,
        instance_types: c.instance_types,
        zones: c.zones,
        capacity_types: c.capacity_types,
        price: c.price,
        labels: c.labels,
        taints: c
            .taints
            .into_iter()
            .map(|t| TaintOut {
                key: t.key,
                value: t.value,
                effect: t.effect,
            })
            .collect(),
        pods: c.pods,
    }
}

/// Decodes a `PlanResponse` into the plan it carries (the client side of
/// [`crate::to_wire::plan_response`]).
pub fn plan(p: pb::PlanResponse) -> Plan {
    {
        let s = p.summary.unwrap_or_default();
        Plan {
            node_claims: p.node_claims.into_iter().map(claim_in).collect(),
            existing_nodes: p
                .existing_nodes
                .into_iter()
                .map(|e| ExistingNodePlacement {
                    name: e.name,
                    pods: e.pods,
                })
                .collect(),
            unschedulable: p
                .unschedulable
                .into_iter()
                .map(|u| Unschedulable {
                    pod: u.pod,
                    reason: u.reason,
                })
                .collect(),
            disruptions: p
                .disruptions
                .into_iter()
                .map(|d| DisruptionDecision {
                    reason: d.reason,
                    nodes: d.nodes,
                    replacements: d.replacements.into_iter().map(claim_in).collect(),
                    savings_per_hour: d.savings_per_hour,
                    destinations: d
                        .destinations
                        .into_iter()
                        .map(|e| ExistingNodePlacement {
                            name: e.name,
                            pods: e.pods,
                        })
                        .collect(),
                })
                .collect(),
            summary: Summary {
                pending_pods: s.pending_pods,
                scheduled_pods: s.scheduled_pods,
                new_node_claims: s.new_node_claims,
                cost_per_hour: s.cost_per_hour,
                lower_bound_cost_per_hour: s.lower_bound_cost_per_hour,
            },
            notes: p.notes,
            catalog_version: p.catalog_version,
            excluded: p
                .excluded
                .into_iter()
                .map(|e| ExcludedObject {
                    kind: e.kind,
                    namespace: e.namespace,
                    name: e.name,
                    reason: e.reason,
                    message: e.message,
                    field: e.field,
                })
                .collect(),
            node_status: p
                .node_status
                .into_iter()
                .map(|n| planner::plan::NodeDisruptionStatus {
                    node: n.node,
                    node_claim: n.node_claim,
                    node_pool: n.node_pool,
                    drifted: n.drifted,
                    drift_message: n.drift_message,
                    consolidatable: n.consolidatable,
                    blocked: n.blocked,
                    unconsolidatable: n.unconsolidatable,
                    empty: n.empty,
                })
                .collect(),
            node_overlays: p
                .node_overlays
                .into_iter()
                .map(|o| planner::catalog::overlay::NodeOverlayStatus {
                    name: o.name,
                    validation_succeeded: o.validation_succeeded,
                    reason: o.reason,
                    message: o.message,
                })
                .collect(),
            options: p.options.map(|o| OptionsUsed {
                preference_policy: o.preference_policy,
                min_values_policy: o.min_values_policy,
                spot_to_spot_consolidation: o.spot_to_spot_consolidation,
                no_disruption: o.no_disruption,
                static_capacity: o.static_capacity,
                node_overlay: o.node_overlay,
                capacity_buffer: o.capacity_buffer,
                ignore_dra_requests: o
                    .ignore_dra_requests
                    .unwrap_or_else(planner::dra::ignore_default),
                reserved_enis: u32::try_from(o.reserved_enis).unwrap_or(0),
                vm_memory_overhead_percent: o
                    .vm_memory_overhead_percent
                    .unwrap_or(VmMemoryOverhead::DEFAULT),
            }),
            capacity_buffers: p
                .capacity_buffers
                .into_iter()
                .map(|b| planner::plan::CapacityBufferStatus {
                    namespace: b.namespace,
                    name: b.name,
                    ready_for_provisioning: b.ready_for_provisioning,
                    ready_reason: b.ready_reason,
                    ready_message: b.ready_message,
                    replicas: b.replicas,
                    pod_template: b.pod_template,
                    pod_template_generation: b.pod_template_generation,
                    provisioning_strategy: b.provisioning_strategy,
                    provisioning: b.provisioning,
                    provisioning_reason: b.provisioning_reason,
                    provisioning_message: b.provisioning_message,
                    nodes: b.nodes,
                })
                .collect(),
            node_pool_budgets: p
                .node_pool_budgets
                .into_iter()
                .map(|b| planner::plan::NodePoolBudgetStatus {
                    node_pool: b.node_pool,
                    reason: b.reason,
                    allowed: b.allowed,
                    nodes: b.nodes,
                    disrupting: b.disrupting,
                })
                .collect(),
            consolidation_moves: p
                .consolidation_moves
                .into_iter()
                .map(|m| planner::plan::ConsolidationMove {
                    decision: m.decision,
                    nodes: m.nodes,
                    node_claims: m.node_claims,
                    node_pools: m
                        .node_pools
                        .into_iter()
                        .map(|s| planner::plan::ConsolidationPoolScore {
                            node_pool: s.node_pool,
                            policy: s.policy,
                            scored: s.scored,
                            score: s.score,
                            threshold: s.threshold,
                            k: s.k,
                            savings_percent: s.savings_percent,
                            disruption_percent: s.disruption_percent,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}
