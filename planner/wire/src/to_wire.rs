//! Model → wire: encoding the planner's model and plans as `dovetail.v1` messages. Total: every
//! model value has a wire form. Resource amounts are written as Kubernetes quantities (the text
//! maps; their milli-unit twins stay empty), which holds any amount the model holds.

use std::collections::BTreeMap;

use proto::v1 as pb;

use planner::catalog::Catalog;
use planner::model::{
    self, BudgetNodes, ClusterSnapshot, IntOrPercent, Named, PlanOptions, Resources, format_bytes,
    format_cpu, names,
};
use planner::plan::{DisruptionDecision, Plan, PlannedNodeClaim};

use crate::CatalogChoice;

/// [`Resources`] → Kubernetes quantities by name (zeros omitted).
pub fn quantities(r: &Resources) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if r.cpu != 0 {
        m.insert(names::CPU.to_string(), format_cpu(r.cpu));
    }
    if r.memory != 0 {
        m.insert(names::MEMORY.to_string(), format_bytes(r.memory));
    }
    if r.ephemeral_storage != 0 {
        m.insert(
            names::EPHEMERAL_STORAGE.to_string(),
            format_bytes(r.ephemeral_storage),
        );
    }
    if r.pods != 0 {
        m.insert(names::PODS.to_string(), r.pods.to_string());
    }
    for (k, v) in &r.extended {
        if *v != 0 {
            m.insert(k.clone(), format_cpu(*v));
        }
    }
    m
}

fn resource_list_out(r: &Option<Resources>) -> Option<pb::ResourceList> {
    r.as_ref().map(|r| pb::ResourceList {
        quantities: quantities(r),
        milli: BTreeMap::new(),
    })
}

fn requirement_out(r: &model::Requirement) -> pb::Requirement {
    pb::Requirement {
        key: r.key.clone(),
        operator: format!("{:?}", r.operator),
        values: r.values.clone(),
        min_values: r.min_values,
    }
}

fn term_out(t: &model::NodeSelectorTerm) -> pb::NodeSelectorTerm {
    pb::NodeSelectorTerm {
        requirements: t.requirements.iter().map(requirement_out).collect(),
    }
}

fn selector_out(s: &model::LabelSelector) -> pb::LabelSelector {
    pb::LabelSelector {
        match_labels: s.match_labels.clone(),
        match_expressions: s
            .match_expressions
            .iter()
            .map(|e| pb::SelectorExpression {
                key: e.key.clone(),
                operator: format!("{:?}", e.operator),
                values: e.values.clone(),
            })
            .collect(),
    }
}

fn taint_out(t: &model::Taint) -> pb::Taint {
    pb::Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: format!("{:?}", t.effect),
    }
}

fn affinity_term_out(t: &model::PodAffinityTerm) -> pb::PodAffinityTerm {
    pb::PodAffinityTerm {
        label_selector: t.label_selector.as_ref().map(selector_out),
        namespaces: t.namespaces.clone(),
        namespace_selector: t.namespace_selector.as_ref().map(selector_out),
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone(),
        mismatch_label_keys: t.mismatch_label_keys.clone(),
    }
}

fn weighted_out(t: &model::WeightedPodAffinityTerm) -> pb::WeightedPodAffinityTerm {
    pb::WeightedPodAffinityTerm {
        weight: t.weight,
        term: Some(affinity_term_out(&t.term)),
    }
}

/// `Pod` as its wire message.
pub fn pod(p: &model::Pod) -> pb::Pod {
    pb::Pod {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
        labels: p.labels.clone(),
        annotations: p.annotations.clone(),
        owner: p.owner.as_ref().map(|o| pb::OwnerRef {
            kind: o.kind.clone(),
            name: o.name.clone(),
            controller: o.controller,
        }),
        requests: quantities(&p.requests),
        requests_milli: BTreeMap::new(),
        node_selector: p.node_selector.clone(),
        required_node_affinity: p.required_node_affinity.iter().map(term_out).collect(),
        preferred_node_affinity: p
            .preferred_node_affinity
            .iter()
            .map(|t| pb::PreferredTerm {
                weight: t.weight,
                term: Some(term_out(&t.term)),
            })
            .collect(),
        tolerations: p
            .tolerations
            .iter()
            .map(|t| pb::Toleration {
                key: t.key.clone(),
                operator: format!("{:?}", t.operator),
                value: t.value.clone(),
                effect: t.effect.map(|e| format!("{e:?}")).unwrap_or_default(),
            })
            .collect(),
        topology_spread: p
            .topology_spread
            .iter()
            .map(|t| pb::TopologySpreadConstraint {
                max_skew: t.max_skew,
                topology_key: t.topology_key.clone(),
                when_unsatisfiable: format!("{:?}", t.when_unsatisfiable),
                label_selector: t.label_selector.as_ref().map(selector_out),
                min_domains: t.min_domains,
                match_label_keys: t.match_label_keys.clone(),
                node_affinity_policy: format!("{:?}", t.node_affinity_policy),
                node_taints_policy: format!("{:?}", t.node_taints_policy),
            })
            .collect(),
        pod_affinity: p.pod_affinity.iter().map(affinity_term_out).collect(),
        preferred_pod_affinity: p.preferred_pod_affinity.iter().map(weighted_out).collect(),
        pod_anti_affinity: p.pod_anti_affinity.iter().map(affinity_term_out).collect(),
        preferred_pod_anti_affinity: p
            .preferred_pod_anti_affinity
            .iter()
            .map(weighted_out)
            .collect(),
        host_ports: p
            .host_ports
            .iter()
            .map(|h| pb::HostPort {
                ip: h.ip.clone(),
                protocol: h.protocol.clone(),
                port: h.port,
            })
            .collect(),
        priority: p.priority,
        volume_claims: p.volume_claims.clone(),
        node_name: p.node_name.clone(),
        phase: format!("{:?}", p.phase),
        creation_time: p.creation_time,
        start_time: p.start_time,
        deletion_time: p.deletion_time,
        resource_claims: p.resource_claims.clone(),
        resource_claim_objects: p.resource_claim_objects.clone(),
    }
}

/// `Node` as its wire message.
pub fn node(n: &model::Node) -> pb::Node {
    pb::Node {
        name: n.name.clone(),
        labels: n.labels.clone(),
        annotations: n.annotations.clone(),
        taints: n.taints.iter().map(taint_out).collect(),
        allocatable: quantities(&n.allocatable),
        capacity: quantities(&n.capacity),
        allocatable_milli: BTreeMap::new(),
        capacity_milli: BTreeMap::new(),
        unschedulable: n.unschedulable,
        provider_id: n.provider_id.clone(),
        ready: n.ready,
        creation_time: n.creation_time,
        deletion_time: n.deletion_time,
        uid: String::new(),
    }
}

/// `NodeClaim` as its wire message.
pub fn node_claim(c: &model::NodeClaim) -> pb::NodeClaim {
    pb::NodeClaim {
        name: c.name.clone(),
        labels: c.labels.clone(),
        annotations: c.annotations.clone(),
        requirements: c.requirements.iter().map(requirement_out).collect(),
        taints: c.taints.iter().map(taint_out).collect(),
        startup_taints: c.startup_taints.iter().map(taint_out).collect(),
        requests: quantities(&c.requests),
        node_class: c.node_class.clone(),
        expire_after: c.expire_after,
        node_name: c.node_name.clone(),
        provider_id: c.provider_id.clone(),
        capacity: quantities(&c.capacity),
        allocatable: quantities(&c.allocatable),
        last_pod_event_time: c.last_pod_event_time,
        creation_time: c.creation_time,
        deletion_time: c.deletion_time,
        image_id: c.image_id.clone(),
        uid: String::new(),
        requests_milli: BTreeMap::new(),
        capacity_milli: BTreeMap::new(),
        allocatable_milli: BTreeMap::new(),
    }
}

/// `NodePool` as its wire message.
pub fn node_pool(p: &model::NodePool) -> pb::NodePool {
    let d = &p.disruption;
    pb::NodePool {
        name: p.name.clone(),
        // The model's 0 is "not set" (the manifests door refuses an explicit 0).
        weight: (p.weight != 0).then_some(p.weight),
        labels: p.labels.clone(),
        annotations: p.annotations.clone(),
        taints: p.taints.iter().map(taint_out).collect(),
        startup_taints: p.startup_taints.iter().map(taint_out).collect(),
        requirements: p.requirements.iter().map(requirement_out).collect(),
        node_class: p.node_class.clone(),
        expire_after: p.expire_after,
        limits: resource_list_out(&p.limits),
        limited_resources: p.limited_resources.clone(),
        disruption: Some(pb::Disruption {
            consolidation_policy: format!("{:?}", d.consolidation_policy),
            consolidate_after: d.consolidate_after,
            budgets: d
                .budgets
                .iter()
                .map(|b| pb::Budget {
                    nodes: match b.nodes {
                        BudgetNodes::Count(n) => n.to_string(),
                        BudgetNodes::Percent(p) => format!("{p}%"),
                    },
                    reasons: b.reasons.clone(),
                    schedule: b.schedule.clone(),
                    duration: b.duration,
                })
                .collect(),
        }),
        template_hash: p.template_hash.clone(),
        uid: String::new(),
        metadata_annotations: p.metadata_annotations.clone(),
        deletion_time: p.deletion_time,
        replicas: p.replicas,
    }
}

/// `NodeClass` as its wire message.
pub fn node_class(c: &model::NodeClass) -> pb::NodeClass {
    let k = &c.kubelet;
    pb::NodeClass {
        name: c.name.clone(),
        ami_family: c.ami_family.clone(),
        kubelet: Some(pb::KubeletConfig {
            max_pods: k.max_pods,
            pods_per_core: k.pods_per_core,
            kube_reserved: resource_list_out(&k.kube_reserved),
            system_reserved: resource_list_out(&k.system_reserved),
            eviction_hard: resource_list_out(&k.eviction_hard),
            eviction_hard_percent: percentages_out(&k.eviction_hard_percent),
            eviction_hard_percent_milli: BTreeMap::new(),
        }),
        spec_hash: c.spec_hash.clone(),
        uid: String::new(),
        root_volume_size: c.root_volume_size.map(format_bytes),
        resolved_amis: c.resolved_amis.clone().unwrap_or_default(),
        resolved_subnets: c.resolved_subnets.clone().unwrap_or_default(),
        resolved_security_groups: c.resolved_security_groups.clone().unwrap_or_default(),
        metadata_annotations: c.metadata_annotations.clone(),
        not_ready: c.not_ready.clone(),
    }
}

fn int_or_percent_out(v: IntOrPercent) -> String {
    match v {
        IntOrPercent::Int(i) => i.to_string(),
        IntOrPercent::Percent(p) => format!("{p}%"),
    }
}

/// `ClusterSnapshot` as its wire message.
pub fn snapshot(s: &ClusterSnapshot) -> pb::ClusterSnapshot {
    pb::ClusterSnapshot {
        pods: s.pods.iter().map(pod).collect(),
        nodes: s.nodes.iter().map(node).collect(),
        node_claims: s.node_claims.iter().map(node_claim).collect(),
        node_pools: s.node_pools.iter().map(node_pool).collect(),
        node_classes: s.node_classes.iter().map(node_class).collect(),
        daemon_sets: s
            .daemon_sets
            .iter()
            .map(|d| pb::DaemonSet {
                namespace: d.namespace.clone(),
                name: d.name.clone(),
                template: Some(pod(&d.template)),
                uid: String::new(),
            })
            .collect(),
        pdbs: s
            .pdbs
            .iter()
            .map(|p| pb::PodDisruptionBudget {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                selector: p.selector.as_ref().map(selector_out),
                min_available: p.min_available.map(int_or_percent_out),
                max_unavailable: p.max_unavailable.map(int_or_percent_out),
                disruptions_allowed: p.disruptions_allowed,
                uid: String::new(),
            })
            .collect(),
        namespaces: s
            .namespaces
            .iter()
            .map(|n| pb::Namespace {
                name: n.name.clone(),
                labels: n.labels.clone(),
                uid: String::new(),
            })
            .collect(),
        pvcs: s
            .pvcs
            .iter()
            .map(|c| pb::PersistentVolumeClaim {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                storage_class: c.storage_class.clone(),
                volume_name: c.volume_name.clone(),
                uid: String::new(),
            })
            .collect(),
        pvs: s
            .pvs
            .iter()
            .map(|v| pb::PersistentVolume {
                name: v.name.clone(),
                storage_class: v.storage_class.clone(),
                node_affinity: v.node_affinity.iter().map(term_out).collect(),
                uid: String::new(),
                node_local: v.node_local,
            })
            .collect(),
        shifted_zones: s.shifted_zones.clone(),
        node_overlays: s.node_overlays.iter().map(node_overlay_out).collect(),
        capacity_buffers: s.capacity_buffers.iter().map(capacity_buffer).collect(),
        resource_claims: s.resource_claims.iter().map(resource_claim).collect(),
        device_classes: s.device_classes.iter().map(device_class).collect(),
        resource_slices: s.resource_slices.iter().map(resource_slice).collect(),
        storage_classes: s
            .storage_classes
            .iter()
            .map(|c| pb::StorageClass {
                name: c.name.clone(),
                volume_binding_mode: format!("{:?}", c.volume_binding_mode),
                allowed_topologies: c.allowed_topologies.iter().map(term_out).collect(),
                uid: String::new(),
            })
            .collect(),
    }
}

/// A NodeOverlay as its wire message (`price` / `priceAdjustment` as the CRD spells them).
fn node_overlay_out(o: &model::NodeOverlay) -> pb::NodeOverlay {
    let signed = |v: f64| {
        if v < 0.0 {
            format!("{v}")
        } else {
            format!("+{v}")
        }
    };
    let (price, price_adjustment) = match o.price {
        None => (None, None),
        Some(model::PriceChange::Price(p)) => (Some(format!("{p}")), None),
        Some(model::PriceChange::Add(d)) => (None, Some(signed(d))),
        Some(model::PriceChange::Percent(p)) => (None, Some(format!("{}%", signed(p)))),
    };
    pb::NodeOverlay {
        name: o.name.clone(),
        requirements: o.requirements.iter().map(requirement_out).collect(),
        price,
        price_adjustment,
        capacity: quantities(&o.capacity),
        capacity_milli: BTreeMap::new(),
        weight: o.weight,
        uid: String::new(),
    }
}

/// A ResourceClaim on the wire.
pub fn resource_claim(c: &model::ResourceClaim) -> pb::ResourceClaim {
    pb::ResourceClaim {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        requests: c
            .requests
            .iter()
            .map(|r| pb::DeviceRequest {
                name: r.name.clone(),
                device_class_name: r.device_class_name.clone(),
                count: r.count,
                all: r.all,
                selectors: r.selectors.clone(),
                first_available: r.first_available,
            })
            .collect(),
        match_attributes: c
            .match_attributes
            .iter()
            .map(|m| pb::MatchAttribute {
                attribute: m.attribute.clone(),
                requests: m.requests.clone(),
            })
            .collect(),
        unsupported_constraint: c.unsupported_constraint,
        allocated: c.allocated,
        allocation_node_selector: c.allocation_node_selector.iter().map(term_out).collect(),
        allocated_devices: c
            .allocated_devices
            .iter()
            .map(|d| pb::AllocatedDevice {
                driver: d.driver.clone(),
                pool: d.pool.clone(),
                device: d.device.clone(),
            })
            .collect(),
        reserved_for_pods: c.reserved_for_pods.clone(),
        reserved_by_other: c.reserved_by_other,
        uid: String::new(),
    }
}

/// A DeviceClass on the wire.
pub fn device_class(c: &model::DeviceClass) -> pb::DeviceClass {
    pb::DeviceClass {
        name: c.name.clone(),
        selectors: c.selectors.clone(),
        unsupported_selector: c.unsupported_selector,
        uid: String::new(),
    }
}

/// A ResourceSlice on the wire.
pub fn resource_slice(s: &model::ResourceSlice) -> pb::ResourceSlice {
    pb::ResourceSlice {
        name: s.name.clone(),
        driver: s.driver.clone(),
        pool: s.pool.clone(),
        pool_generation: s.pool_generation,
        resource_slice_count: s.resource_slice_count,
        node_name: s.node_name.clone(),
        all_nodes: s.all_nodes,
        node_selector: s.node_selector.iter().map(term_out).collect(),
        owner_node: s.owner_node.clone(),
        devices: s
            .devices
            .iter()
            .map(|d| pb::Device {
                name: d.name.clone(),
                attributes: d.attributes.clone().into_iter().collect(),
            })
            .collect(),
        shared_counters: s.shared_counters,
        uid: String::new(),
    }
}

/// A `CapacityBuffer` as its wire message.
pub fn capacity_buffer(b: &planner::model::CapacityBuffer) -> pb::CapacityBuffer {
    let (unresolved_reason, unresolved_message) = b.unresolved.clone().unwrap_or_default();
    pb::CapacityBuffer {
        namespace: b.namespace.clone(),
        name: b.name.clone(),
        uid: b.uid.clone(),
        provisioning_strategy: b.provisioning_strategy.clone().unwrap_or_default(),
        pod_template_ref: b.pod_template_ref.clone().unwrap_or_default(),
        scalable_ref: b.scalable_ref.clone().unwrap_or_default(),
        replicas: b.replicas,
        percentage: b.percentage,
        limits: resource_list_out(&b.limits),
        template: b.template.as_ref().map(pod),
        pod_template_generation: b.pod_template_generation,
        scalable_replicas: b.scalable_replicas,
        unresolved_reason,
        unresolved_message,
    }
}

/// `Catalog` as its wire message.
pub fn catalog(c: &Catalog) -> pb::Catalog {
    pb::Catalog {
        instance_types: c
            .instance_types
            .iter()
            .map(|t| pb::InstanceType {
                name: t.name.clone(),
                capacity: quantities(&t.capacity),
                overhead: Some(pb::Overhead {
                    kube_reserved: quantities(&t.overhead.kube_reserved),
                    system_reserved: quantities(&t.overhead.system_reserved),
                    eviction_threshold: quantities(&t.overhead.eviction_threshold),
                }),
                labels: t.labels.clone(),
                os: t.os.clone(),
                offerings: t
                    .offerings
                    .iter()
                    .map(|o| pb::Offering {
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type.clone(),
                        price: o.price,
                        available: o.available,
                        unpriced: o.unpriced,
                    })
                    .collect(),
            })
            .collect(),
        notes: c.notes.clone(),
    }
}

/// `PlanOptions` as its wire message.
pub fn options(o: &PlanOptions) -> pb::PlanOptions {
    pb::PlanOptions {
        preference_policy: o.preference_policy.as_str().to_string(),
        min_values_policy: o.min_values_policy.as_str().to_string(),
        spot_to_spot_consolidation: o.spot_to_spot_consolidation,
        no_disruption: o.no_disruption,
        static_capacity: o.static_capacity,
        node_overlay: o.node_overlay,
        capacity_buffer: o.capacity_buffer,
        reserved_enis: i32::try_from(o.reserved_enis).unwrap_or(i32::MAX),
        vm_memory_overhead_percent: Some(o.vm_memory_overhead_percent.0),
        ignore_dra_requests: Some(o.ignore_dra_requests),
    }
}

/// Builds a `PlanRequest` from model values (the client side of
/// [`crate::to_model::plan_request`]).
pub fn plan_request(
    snapshot: &ClusterSnapshot,
    catalog: &CatalogChoice,
    options: &PlanOptions,
) -> pb::PlanRequest {
    use pb::plan_request::CatalogSource as S;
    pb::PlanRequest {
        snapshot: Some(self::snapshot(snapshot)),
        catalog_source: match catalog {
            CatalogChoice::Inline(c) => Some(S::Catalog(self::catalog(c))),
            CatalogChoice::Builtin { region } => Some(S::CatalogRef(pb::CatalogRef {
                region: region.clone(),
            })),
            CatalogChoice::Default => None,
        },
        options: Some(self::options(options)),
        now: options.now,
    }
}

// === plan ⇄ wire ===

fn claim_out(c: &PlannedNodeClaim) -> pb::PlannedNodeClaim {
    pb::PlannedNodeClaim {
        name: c.name.clone(),
        node_pool: c.node_pool.clone(),
        instance_types: c.instance_types.clone(),
        zones: c.zones.clone(),
        capacity_types: c.capacity_types.clone(),
        price: c.price,
        labels: c.labels.clone(),
        taints: c
            .taints
            .iter()
            .map(|t| pb::Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
            })
            .collect(),
        pods: c.pods.clone(),
    }
}

/// The wire form of `decision_out`.
pub fn decision_out(d: &DisruptionDecision) -> pb::DisruptionDecision {
    pb::DisruptionDecision {
        reason: d.reason.clone(),
        nodes: d.nodes.clone(),
        replacements: d.replacements.iter().map(claim_out).collect(),
        savings_per_hour: d.savings_per_hour,
        destinations: d
            .destinations
            .iter()
            .map(|e| pb::ExistingNodePlacement {
                name: e.name.clone(),
                pods: e.pods.clone(),
            })
            .collect(),
    }
}

/// The wire form of `planned_claim_out`.
pub fn planned_claim_out(c: &PlannedNodeClaim) -> pb::PlannedNodeClaim {
    claim_out(c)
}

/// A plan as its wire message.
pub fn plan_response(p: &Plan) -> pb::PlanResponse {
    let s = &p.summary;
    pb::PlanResponse {
        node_claims: p.node_claims.iter().map(claim_out).collect(),
        existing_nodes: p
            .existing_nodes
            .iter()
            .map(|e| pb::ExistingNodePlacement {
                name: e.name.clone(),
                pods: e.pods.clone(),
            })
            .collect(),
        unschedulable: p
            .unschedulable
            .iter()
            .map(|u| pb::Unschedulable {
                pod: u.pod.clone(),
                reason: u.reason.clone(),
            })
            .collect(),
        disruptions: p.disruptions.iter().map(decision_out).collect(),
        summary: Some(pb::Summary {
            pending_pods: s.pending_pods,
            scheduled_pods: s.scheduled_pods,
            new_node_claims: s.new_node_claims,
            cost_per_hour: s.cost_per_hour,
            lower_bound_cost_per_hour: s.lower_bound_cost_per_hour,
        }),
        notes: p.notes.clone(),
        catalog_version: p.catalog_version.clone(),
        excluded: p
            .excluded
            .iter()
            .map(|e| pb::ExcludedObject {
                kind: e.kind.clone(),
                namespace: e.namespace.clone(),
                name: e.name.clone(),
                reason: e.reason.clone(),
                message: e.message.clone(),
                field: e.field.clone(),
            })
            .collect(),
        node_status: p
            .node_status
            .iter()
            .map(|n| pb::NodeDisruptionStatus {
                node: n.node.clone(),
                node_claim: n.node_claim.clone(),
                node_pool: n.node_pool.clone(),
                drifted: n.drifted.clone(),
                drift_message: n.drift_message.clone(),
                consolidatable: n.consolidatable,
                blocked: n.blocked.clone(),
                unconsolidatable: n.unconsolidatable.clone(),
                empty: n.empty,
            })
            .collect(),
        options: p.options.as_ref().map(|o| pb::PlanOptions {
            preference_policy: o.preference_policy.clone(),
            min_values_policy: o.min_values_policy.clone(),
            spot_to_spot_consolidation: o.spot_to_spot_consolidation,
            no_disruption: o.no_disruption,
            static_capacity: o.static_capacity,
            node_overlay: o.node_overlay,
            capacity_buffer: o.capacity_buffer,
            reserved_enis: i32::try_from(o.reserved_enis).unwrap_or(i32::MAX),
            vm_memory_overhead_percent: Some(o.vm_memory_overhead_percent),
            ignore_dra_requests: Some(o.ignore_dra_requests),
        }),
        node_overlays: p
            .node_overlays
            .iter()
            .map(|o| pb::NodeOverlayStatus {
                name: o.name.clone(),
                validation_succeeded: o.validation_succeeded,
                reason: o.reason.clone(),
                message: o.message.clone(),
            })
            .collect(),
        capacity_buffers: p
            .capacity_buffers
            .iter()
            .map(|b| pb::CapacityBufferStatus {
                namespace: b.namespace.clone(),
                name: b.name.clone(),
                ready_for_provisioning: b.ready_for_provisioning,
                ready_reason: b.ready_reason.clone(),
                ready_message: b.ready_message.clone(),
                replicas: b.replicas,
                pod_template: b.pod_template.clone(),
                pod_template_generation: b.pod_template_generation,
                provisioning_strategy: b.provisioning_strategy.clone(),
                provisioning: b.provisioning.clone(),
                provisioning_reason: b.provisioning_reason.clone(),
                provisioning_message: b.provisioning_message.clone(),
                nodes: b.nodes.clone(),
            })
            .collect(),
        node_pool_budgets: p
            .node_pool_budgets
            .iter()
            .map(|b| pb::NodePoolBudgetStatus {
                node_pool: b.node_pool.clone(),
                reason: b.reason.clone(),
                allowed: b.allowed,
                nodes: b.nodes,
                disrupting: b.disrupting,
            })
            .collect(),
        consolidation_moves: p
            .consolidation_moves
            .iter()
            .map(|m| pb::ConsolidationMove {
                decision: m.decision.clone(),
                nodes: m.nodes.clone(),
                node_claims: m.node_claims.clone(),
                node_pools: m
                    .node_pools
                    .iter()
                    .map(|s| pb::ConsolidationPoolScore {
                        node_pool: s.node_pool.clone(),
                        policy: s.policy.clone(),
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

fn percentages_out(m: &BTreeMap<String, i64>) -> BTreeMap<String, String> {
    m.iter()
        .map(|(k, v)| {
            let text = if v % 1000 == 0 {
                format!("{}%", v / 1000)
            } else {
                let frac = format!("{:03}", v % 1000);
                format!("{}.{}%", v / 1000, frac.trim_end_matches('0'))
            };
            (k.clone(), text)
        })
        .collect()
}
