//! Wire → model: decoding `dovetail.v1` messages into the planner's model. Every error names
//! the field at fault by its path in the request.

use std::collections::BTreeMap;

use proto::v1 as pb;

use planner::catalog::{Catalog, InstanceType, Offering, Overhead};
use planner::model::{
    self, BudgetNodes, ClusterSnapshot, ConsolidationPolicy, IntOrPercent, MinValuesPolicy, Named,
    NodeInclusionPolicy, Operator, PlanOptions, PodPhase, PreferencePolicy, Resources,
    SelectorOperator, TaintEffect, TolerationOperator, VmMemoryOverhead, VolumeBindingMode,
    WhenUnsatisfiable, names, quantity,
};

use crate::{
    At, CatalogChoice, Error, PlanInput, Result, list, non_empty, non_negative, one_of, required,
};

mod catalog;
mod dra;
pub mod isolated;
mod plan;

pub use catalog::{catalog, live_catalog};
pub use dra::{device_class, resource_claim, resource_slice};
pub use plan::plan;

/// Decodes a whole `PlanRequest`. An object of the snapshot that cannot be decoded or breaks
/// a rule is left out, with why, in [`PlanInput::excluded`]; the rest is planned.
///
/// # Errors
/// [`Error::InvalidField`] naming the first field at fault in the catalog or the options.
pub fn plan_request(req: pb::PlanRequest) -> Result<PlanInput> {
    let root = At::ROOT;
    let (snapshot, excluded) = isolated::snapshot(req.snapshot.unwrap_or_default());
    let catalog = catalog_choice(req.catalog_source, root)?;
    let mut options = options(req.options.unwrap_or_default(), root.field("options"))?;
    options.now = req.now;
    Ok(PlanInput {
        snapshot,
        catalog,
        options,
        excluded,
    })
}

impl TryFrom<pb::PlanRequest> for PlanInput {
    type Error = Error;

    fn try_from(req: pb::PlanRequest) -> Result<Self> {
        plan_request(req)
    }
}

/// Decodes a session's opening snapshot (`now` is set per batch); objects are isolated as in
/// [`plan_request`].
///
/// # Errors
/// [`Error::InvalidField`] naming the first field at fault in the catalog or the options
/// (paths start at `snapshot.`).
pub fn session_snapshot(s: pb::SessionSnapshot, at: At<'_>) -> Result<PlanInput> {
    let (snapshot, excluded) = isolated::snapshot(s.snapshot.unwrap_or_default());
    let catalog = session_catalog_choice(s.catalog_source, at)?;
    let options = options(s.options.unwrap_or_default(), at.field("options"))?;
    Ok(PlanInput {
        snapshot,
        catalog,
        options,
        excluded,
    })
}

fn catalog_choice(c: Option<pb::plan_request::CatalogSource>, at: At<'_>) -> Result<CatalogChoice> {
    use pb::plan_request::CatalogSource as S;
    Ok(match c {
        None => CatalogChoice::Default,
        Some(S::Catalog(c)) => CatalogChoice::Inline(catalog(c, at.field("catalog"))?),
        Some(S::CatalogRef(r)) => CatalogChoice::Builtin {
            region: non_empty(r.region, at.field("catalog_ref").field("region"))?,
        },
    })
}

fn session_catalog_choice(
    c: Option<pb::session_snapshot::CatalogSource>,
    at: At<'_>,
) -> Result<CatalogChoice> {
    use pb::session_snapshot::CatalogSource as S;
    Ok(match c {
        None => CatalogChoice::Default,
        Some(S::Catalog(c)) => CatalogChoice::Inline(catalog(c, at.field("catalog"))?),
        Some(S::CatalogRef(r)) => CatalogChoice::Builtin {
            region: non_empty(r.region, at.field("catalog_ref").field("region"))?,
        },
    })
}

/// Decodes plan options (`now` stays 0: it travels separately).
///
/// # Errors
/// An unknown policy name.
pub fn options(o: pb::PlanOptions, at: At<'_>) -> Result<PlanOptions> {
    let preference_policy = match o.preference_policy.as_str() {
        "" => PreferencePolicy::default(),
        s => one_of(s, at.field("preference_policy"), PreferencePolicy::VARIANTS)?,
    };
    let min_values_policy = match o.min_values_policy.as_str() {
        "" => MinValuesPolicy::default(),
        s => one_of(s, at.field("min_values_policy"), MinValuesPolicy::VARIANTS)?,
    };
    let reserved_enis = u32::try_from(o.reserved_enis).map_err(|_| {
        at.field("reserved_enis").err(format!(
            "{} is negative; reservedENIs is 0 or more",
            o.reserved_enis
        ))
    })?;
    let vm_memory_overhead_percent = match o.vm_memory_overhead_percent {
        None => VmMemoryOverhead::default(),
        Some(f) if f.is_finite() && (0.0..1.0).contains(&f) => VmMemoryOverhead(f),
        Some(f) => {
            return Err(at.field("vm_memory_overhead_percent").err(format!(
                "{f} is not a fraction at least 0 and below 1 (Karpenter's default is 0.075)"
            )));
        }
    };
    Ok(PlanOptions {
        now: 0,
        preference_policy,
        min_values_policy,
        spot_to_spot_consolidation: o.spot_to_spot_consolidation,
        no_disruption: o.no_disruption,
        static_capacity: o.static_capacity,
        node_overlay: o.node_overlay,
        capacity_buffer: o.capacity_buffer,
        reserved_enis,
        vm_memory_overhead_percent,
        ignore_dra_requests: o
            .ignore_dra_requests
            .unwrap_or_else(planner::dra::ignore_default),
    })
}

/// Decodes a snapshot.
///
/// # Errors
/// [`Error::InvalidField`] naming the first field at fault.
pub fn snapshot(s: pb::ClusterSnapshot, at: At<'_>) -> Result<ClusterSnapshot> {
    Ok(ClusterSnapshot {
        pods: list(s.pods, at.field("pods"), pod)?,
        nodes: list(s.nodes, at.field("nodes"), node)?,
        node_claims: list(s.node_claims, at.field("node_claims"), node_claim)?,
        node_pools: list(s.node_pools, at.field("node_pools"), node_pool)?,
        node_classes: list(s.node_classes, at.field("node_classes"), node_class)?,
        daemon_sets: list(s.daemon_sets, at.field("daemon_sets"), daemon_set)?,
        pdbs: list(s.pdbs, at.field("pdbs"), pdb)?,
        namespaces: list(s.namespaces, at.field("namespaces"), namespace)?,
        pvcs: list(s.pvcs, at.field("pvcs"), pvc)?,
        pvs: list(s.pvs, at.field("pvs"), pv)?,
        storage_classes: list(
            s.storage_classes,
            at.field("storage_classes"),
            storage_class,
        )?,
        shifted_zones: shifted_zones(s.shifted_zones, at.field("shifted_zones"))?,
        node_overlays: list(s.node_overlays, at.field("node_overlays"), node_overlay)?,
        capacity_buffers: list(
            s.capacity_buffers,
            at.field("capacity_buffers"),
            capacity_buffer,
        )?,
        resource_claims: list(
            s.resource_claims,
            at.field("resource_claims"),
            resource_claim,
        )?,
        device_classes: list(s.device_classes, at.field("device_classes"), device_class)?,
        resource_slices: list(
            s.resource_slices,
            at.field("resource_slices"),
            resource_slice,
        )?,
    })
}

/// Zones under a zonal shift: names, not empty.
///
/// # Errors
/// An empty zone name, naming its index.
pub fn shifted_zones(zones: Vec<String>, at: At<'_>) -> Result<Vec<String>> {
    for (i, z) in zones.iter().enumerate() {
        if z.trim().is_empty() {
            return Err(at.index(i).err("empty zone name"));
        }
    }
    Ok(zones)
}

/// Kubernetes quantities by name → [`Resources`].
pub fn resources(map: BTreeMap<String, String>, at: At<'_>) -> Result<Resources> {
    amounts(map, at, BTreeMap::new(), at)
}

/// A field's resource amounts from its twin maps → [`Resources`]: `text` holds Kubernetes
/// quantities, parsed here (what a client sent as text), `milli` holds milli-units, which
/// k8s-reader has parsed once and are only checked and scaled here. A resource is named in
/// one of the two maps.
pub fn amounts(
    text: BTreeMap<String, String>,
    at: At<'_>,
    milli: BTreeMap<String, i64>,
    at_milli: At<'_>,
) -> Result<Resources> {
    let mut r = Resources::default();
    for (k, v) in &text {
        let a = at.key(k);
        if k.is_empty() {
            return Err(at.err("resource names must not be empty"));
        }
        let parsed = match k.as_str() {
            names::MEMORY | names::EPHEMERAL_STORAGE | names::PODS => quantity::parse_units(v),
            _ => quantity::parse_milli(v),
        };
        let n = parsed.map_err(|e| a.err(e.to_string()))?;
        r.set(k, non_negative(n, a)?);
    }
    for (k, &m) in &milli {
        let a = at_milli.key(k);
        if k.is_empty() {
            return Err(at_milli.err("resource names must not be empty"));
        }
        if text.contains_key(k) {
            return Err(a.err(format!(
                "{k} is also given as a quantity ({}); a resource is given once",
                at.key(k).render()
            )));
        }
        let m = non_negative(m, a)?;
        let n = match k.as_str() {
            names::MEMORY | names::EPHEMERAL_STORAGE | names::PODS => quantity::units_of_milli(m),
            _ => m,
        };
        r.set(k, n);
    }
    Ok(r)
}

fn resource_list(l: Option<pb::ResourceList>, at: At<'_>) -> Result<Option<Resources>> {
    l.map(|l| {
        amounts(
            l.quantities,
            at.field("quantities"),
            l.milli,
            at.field("milli"),
        )
    })
    .transpose()
}

fn operator(s: &str, at: At<'_>) -> Result<Operator> {
    one_of(
        s,
        at,
        &[
            ("In", Operator::In),
            ("NotIn", Operator::NotIn),
            ("Exists", Operator::Exists),
            ("DoesNotExist", Operator::DoesNotExist),
            ("Gt", Operator::Gt),
            ("Lt", Operator::Lt),
            ("Gte", Operator::Gte),
            ("Lte", Operator::Lte),
        ],
    )
}

fn requirement(r: pb::Requirement, at: At<'_>) -> Result<model::Requirement> {
    let key = non_empty(r.key, at.field("key"))?;
    let operator = operator(&r.operator, at.field("operator"))?;
    match operator {
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
            let ok = r.values.len() == 1 && r.values[0].parse::<i64>().is_ok();
            if !ok {
                return Err(at
                    .field("values")
                    .err(format!("{operator:?} needs exactly one integer value")));
            }
        }
        Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => {
            return Err(at
                .field("values")
                .err(format!("{operator:?} takes no values")));
        }
        _ => {}
    }
    Ok(model::Requirement {
        key,
        operator,
        values: r.values,
        min_values: r.min_values,
    })
}

fn requirements(rs: Vec<pb::Requirement>, at: At<'_>) -> Result<Vec<model::Requirement>> {
    list(rs, at, requirement)
}

fn term(t: pb::NodeSelectorTerm, at: At<'_>) -> Result<model::NodeSelectorTerm> {
    Ok(model::NodeSelectorTerm {
        requirements: requirements(t.requirements, at.field("requirements"))?,
    })
}

fn preferred_term(t: pb::PreferredTerm, at: At<'_>) -> Result<model::PreferredTerm> {
    Ok(model::PreferredTerm {
        weight: weight(t.weight, at.field("weight"))?,
        term: term(t.term.unwrap_or_default(), at.field("term"))?,
    })
}

fn weight(w: i32, at: At<'_>) -> Result<i32> {
    if (1..=100).contains(&w) {
        Ok(w)
    } else {
        Err(at.err(format!("must be between 1 and 100, got {w}")))
    }
}

fn selector(s: pb::LabelSelector, at: At<'_>) -> Result<model::LabelSelector> {
    let match_expressions = list(
        s.match_expressions,
        at.field("match_expressions"),
        |e, at| {
            Ok(model::SelectorExpression {
                key: non_empty(e.key, at.field("key"))?,
                operator: one_of(
                    &e.operator,
                    at.field("operator"),
                    &[
                        ("In", SelectorOperator::In),
                        ("NotIn", SelectorOperator::NotIn),
                        ("Exists", SelectorOperator::Exists),
                        ("DoesNotExist", SelectorOperator::DoesNotExist),
                    ],
                )?,
                values: e.values,
            })
        },
    )?;
    Ok(model::LabelSelector {
        match_labels: s.match_labels,
        match_expressions,
    })
}

fn opt_selector(s: Option<pb::LabelSelector>, at: At<'_>) -> Result<Option<model::LabelSelector>> {
    s.map(|s| selector(s, at)).transpose()
}

fn effect(s: &str, at: At<'_>) -> Result<TaintEffect> {
    one_of(
        s,
        at,
        &[
            ("NoSchedule", TaintEffect::NoSchedule),
            ("PreferNoSchedule", TaintEffect::PreferNoSchedule),
            ("NoExecute", TaintEffect::NoExecute),
        ],
    )
}

fn taint(t: pb::Taint, at: At<'_>) -> Result<model::Taint> {
    Ok(model::Taint {
        key: non_empty(t.key, at.field("key"))?,
        effect: effect(&t.effect, at.field("effect"))?,
        value: t.value,
    })
}

fn taints(ts: Vec<pb::Taint>, at: At<'_>) -> Result<Vec<model::Taint>> {
    list(ts, at, taint)
}

fn toleration(t: pb::Toleration, at: At<'_>) -> Result<model::Toleration> {
    let operator = match t.operator.as_str() {
        "" => TolerationOperator::Equal,
        s => one_of(
            s,
            at.field("operator"),
            &[
                ("Equal", TolerationOperator::Equal),
                ("Exists", TolerationOperator::Exists),
            ],
        )?,
    };
    let effect = match t.effect.as_str() {
        "" => None,
        s => Some(effect(s, at.field("effect"))?),
    };
    Ok(model::Toleration {
        key: t.key,
        operator,
        value: t.value,
        effect,
    })
}

fn inclusion(s: &str, default: NodeInclusionPolicy, at: At<'_>) -> Result<NodeInclusionPolicy> {
    match s {
        "" => Ok(default),
        s => one_of(
            s,
            at,
            &[
                ("Honor", NodeInclusionPolicy::Honor),
                ("Ignore", NodeInclusionPolicy::Ignore),
            ],
        ),
    }
}

fn spread(t: pb::TopologySpreadConstraint, at: At<'_>) -> Result<model::TopologySpreadConstraint> {
    if t.max_skew < 1 {
        return Err(at
            .field("max_skew")
            .err(format!("must be at least 1, got {}", t.max_skew)));
    }
    Ok(model::TopologySpreadConstraint {
        max_skew: t.max_skew,
        topology_key: non_empty(t.topology_key, at.field("topology_key"))?,
        when_unsatisfiable: one_of(
            &t.when_unsatisfiable,
            at.field("when_unsatisfiable"),
            &[
                ("DoNotSchedule", WhenUnsatisfiable::DoNotSchedule),
                ("ScheduleAnyway", WhenUnsatisfiable::ScheduleAnyway),
            ],
        )?,
        label_selector: opt_selector(t.label_selector, at.field("label_selector"))?,
        min_domains: t.min_domains,
        match_label_keys: t.match_label_keys,
        node_affinity_policy: inclusion(
            &t.node_affinity_policy,
            NodeInclusionPolicy::Honor,
            at.field("node_affinity_policy"),
        )?,
        node_taints_policy: inclusion(
            &t.node_taints_policy,
            NodeInclusionPolicy::Ignore,
            at.field("node_taints_policy"),
        )?,
    })
}

fn affinity_term(t: pb::PodAffinityTerm, at: At<'_>) -> Result<model::PodAffinityTerm> {
    Ok(model::PodAffinityTerm {
        label_selector: opt_selector(t.label_selector, at.field("label_selector"))?,
        namespaces: t.namespaces,
        namespace_selector: opt_selector(t.namespace_selector, at.field("namespace_selector"))?,
        topology_key: non_empty(t.topology_key, at.field("topology_key"))?,
        match_label_keys: t.match_label_keys,
        mismatch_label_keys: t.mismatch_label_keys,
    })
}

fn weighted_term(
    t: pb::WeightedPodAffinityTerm,
    at: At<'_>,
) -> Result<model::WeightedPodAffinityTerm> {
    Ok(model::WeightedPodAffinityTerm {
        weight: weight(t.weight, at.field("weight"))?,
        term: affinity_term(required(t.term, at.field("term"))?, at.field("term"))?,
    })
}

/// Decodes a wire `Pod`; errors name the field below `at`.
pub fn pod(p: pb::Pod, at: At<'_>) -> Result<model::Pod> {
    let namespace = non_empty(p.namespace, at.field("namespace"))?;
    let name = non_empty(p.name, at.field("name"))?;
    let uid = common::key::object(&p.uid, Some(&namespace), &name);
    let phase = match p.phase.as_str() {
        "" => PodPhase::Pending,
        s => one_of(
            s,
            at.field("phase"),
            &[
                ("Pending", PodPhase::Pending),
                ("Running", PodPhase::Running),
                ("Succeeded", PodPhase::Succeeded),
                ("Failed", PodPhase::Failed),
                ("Unknown", PodPhase::Unknown),
            ],
        )?,
    };
    let host_ports = list(p.host_ports, at.field("host_ports"), |h, at| {
        if !(1..=65535).contains(&h.port) {
            return Err(at
                .field("port")
                .err(format!("must be between 1 and 65535, got {}", h.port)));
        }
        Ok(model::HostPort {
            ip: h.ip,
            protocol: if h.protocol.is_empty() {
                "TCP".to_string()
            } else {
                h.protocol
            },
            port: h.port,
        })
    })?;
    Ok(model::Pod {
        namespace,
        name,
        uid,
        labels: p.labels,
        annotations: p.annotations,
        owner: p.owner.map(|o| model::OwnerRef {
            kind: o.kind,
            name: o.name,
            controller: o.controller,
        }),
        requests: {
            let mut r = amounts(
                p.requests,
                at.field("requests"),
                p.requests_milli,
                at.field("requests_milli"),
            )?;
            // Every pod takes one pod slot; callers may leave it out.
            if r.pods == 0 {
                r.pods = 1;
            }
            r
        },
        node_selector: p.node_selector,
        required_node_affinity: list(
            p.required_node_affinity,
            at.field("required_node_affinity"),
            term,
        )?,
        preferred_node_affinity: list(
            p.preferred_node_affinity,
            at.field("preferred_node_affinity"),
            preferred_term,
        )?,
        tolerations: list(p.tolerations, at.field("tolerations"), toleration)?,
        topology_spread: list(p.topology_spread, at.field("topology_spread"), spread)?,
        pod_affinity: list(p.pod_affinity, at.field("pod_affinity"), affinity_term)?,
        preferred_pod_affinity: list(
            p.preferred_pod_affinity,
            at.field("preferred_pod_affinity"),
            weighted_term,
        )?,
        pod_anti_affinity: list(
            p.pod_anti_affinity,
            at.field("pod_anti_affinity"),
            affinity_term,
        )?,
        preferred_pod_anti_affinity: list(
            p.preferred_pod_anti_affinity,
            at.field("preferred_pod_anti_affinity"),
            weighted_term,
        )?,
        host_ports,
        priority: p.priority,
        volume_claims: p.volume_claims,
        node_name: p.node_name.filter(|n| !n.is_empty()),
        phase,
        creation_time: p.creation_time,
        start_time: p.start_time,
        deletion_time: p.deletion_time,
        resource_claims: p.resource_claims,
        resource_claim_objects: p.resource_claim_objects,
        dra_unsatisfiable: None,
    })
}

/// Decodes a wire `Node`; errors name the field below `at`.
pub fn node(n: pb::Node, at: At<'_>) -> Result<model::Node> {
    Ok(model::Node {
        name: non_empty(n.name, at.field("name"))?,
        labels: n.labels,
        annotations: n.annotations,
        taints: taints(n.taints, at.field("taints"))?,
        allocatable: amounts(
            n.allocatable,
            at.field("allocatable"),
            n.allocatable_milli,
            at.field("allocatable_milli"),
        )?,
        capacity: amounts(
            n.capacity,
            at.field("capacity"),
            n.capacity_milli,
            at.field("capacity_milli"),
        )?,
        unschedulable: n.unschedulable,
        provider_id: n.provider_id,
        ready: n.ready,
        creation_time: n.creation_time,
        deletion_time: n.deletion_time,
    })
}

/// Decodes a wire `NodeClaim`; errors name the field below `at`.
pub fn node_claim(c: pb::NodeClaim, at: At<'_>) -> Result<model::NodeClaim> {
    Ok(model::NodeClaim {
        name: non_empty(c.name, at.field("name"))?,
        labels: c.labels,
        annotations: c.annotations,
        requirements: requirements(c.requirements, at.field("requirements"))?,
        taints: taints(c.taints, at.field("taints"))?,
        startup_taints: taints(c.startup_taints, at.field("startup_taints"))?,
        requests: amounts(
            c.requests,
            at.field("requests"),
            c.requests_milli,
            at.field("requests_milli"),
        )?,
        node_class: c.node_class,
        expire_after: c
            .expire_after
            .map(|v| non_negative(v, at.field("expire_after")))
            .transpose()?,
        node_name: c.node_name.filter(|n| !n.is_empty()),
        provider_id: c.provider_id,
        capacity: amounts(
            c.capacity,
            at.field("capacity"),
            c.capacity_milli,
            at.field("capacity_milli"),
        )?,
        allocatable: amounts(
            c.allocatable,
            at.field("allocatable"),
            c.allocatable_milli,
            at.field("allocatable_milli"),
        )?,
        last_pod_event_time: c.last_pod_event_time,
        creation_time: c.creation_time,
        deletion_time: c.deletion_time,
        image_id: c.image_id.filter(|i| !i.is_empty()),
    })
}

fn budget_nodes(s: &str, at: At<'_>) -> Result<BudgetNodes> {
    let bad = || {
        at.err(format!(
            "{s:?} is neither a count nor a percentage like \"10%\""
        ))
    };
    match s.strip_suffix('%') {
        Some(p) => p.parse().map(BudgetNodes::Percent).map_err(|_| bad()),
        None => s.parse().map(BudgetNodes::Count).map_err(|_| bad()),
    }
}

fn int_or_percent(s: &str, at: At<'_>) -> Result<IntOrPercent> {
    let bad = || {
        at.err(format!(
            "{s:?} is neither an integer nor a percentage like \"50%\""
        ))
    };
    match s.strip_suffix('%') {
        Some(p) => p
            .parse()
            .ok()
            .filter(|v| *v >= 0)
            .map(IntOrPercent::Percent)
            .ok_or_else(bad),
        None => s
            .parse()
            .ok()
            .filter(|v| *v >= 0)
            .map(IntOrPercent::Int)
            .ok_or_else(bad),
    }
}

fn disruption(d: Option<pb::Disruption>, at: At<'_>) -> Result<model::Disruption> {
    let Some(d) = d else {
        return Ok(model::Disruption::default());
    };
    let consolidation_policy = match d.consolidation_policy.as_str() {
        "" => ConsolidationPolicy::default(),
        s => one_of(
            s,
            at.field("consolidation_policy"),
            &[
                ("WhenEmpty", ConsolidationPolicy::WhenEmpty),
                (
                    "WhenEmptyOrUnderutilized",
                    ConsolidationPolicy::WhenEmptyOrUnderutilized,
                ),
                ("Balanced", ConsolidationPolicy::Balanced),
            ],
        )?,
    };
    let budgets = list(d.budgets, at.field("budgets"), |b, at| {
        Ok(model::Budget {
            nodes: budget_nodes(&b.nodes, at.field("nodes"))?,
            reasons: b.reasons,
            schedule: b.schedule,
            duration: b
                .duration
                .map(|v| non_negative(v, at.field("duration")))
                .transpose()?,
        })
    })?;
    Ok(model::Disruption {
        consolidation_policy,
        consolidate_after: d
            .consolidate_after
            .map(|v| non_negative(v, at.field("consolidate_after")))
            .transpose()?,
        budgets,
    })
}

/// `NodePool.weight`: absent is the model's 0 ("not set"); a value present must be 1-100 as
/// in Karpenter's schema, so an explicit 0 is refused here as the manifests door refuses it.
fn node_pool_weight(w: Option<i32>, at: At<'_>) -> Result<i32> {
    w.map_or(Ok(0), |w| weight(w, at))
}

/// Decodes a wire `NodePool`; errors name the field below `at`.
pub fn node_pool(p: pb::NodePool, at: At<'_>) -> Result<model::NodePool> {
    Ok(model::NodePool {
        name: non_empty(p.name, at.field("name"))?,
        weight: node_pool_weight(p.weight, at.field("weight"))?,
        labels: p.labels,
        annotations: p.annotations,
        taints: taints(p.taints, at.field("taints"))?,
        startup_taints: taints(p.startup_taints, at.field("startup_taints"))?,
        requirements: requirements(p.requirements, at.field("requirements"))?,
        node_class: p.node_class,
        expire_after: p
            .expire_after
            .map(|v| non_negative(v, at.field("expire_after")))
            .transpose()?,
        limits: resource_list(p.limits, at.field("limits"))?,
        limited_resources: p.limited_resources,
        disruption: disruption(p.disruption, at.field("disruption"))?,
        template_hash: p.template_hash,
        metadata_annotations: p.metadata_annotations,
        deletion_time: p.deletion_time,
        replicas: p.replicas,
    })
}

/// Decodes a wire `NodeClass`; errors name the field below `at`.
pub fn node_class(c: pb::NodeClass, at: At<'_>) -> Result<model::NodeClass> {
    let k = c.kubelet.unwrap_or_default();
    let ka = at.field("kubelet");
    Ok(model::NodeClass {
        name: non_empty(c.name, at.field("name"))?,
        ami_family: c.ami_family,
        kubelet: model::KubeletConfig {
            max_pods: k
                .max_pods
                .map(|v| non_negative(v, ka.field("max_pods")))
                .transpose()?,
            pods_per_core: k
                .pods_per_core
                .map(|v| non_negative(v, ka.field("pods_per_core")))
                .transpose()?,
            kube_reserved: resource_list(k.kube_reserved, ka.field("kube_reserved"))?,
            system_reserved: resource_list(k.system_reserved, ka.field("system_reserved"))?,
            eviction_hard: resource_list(k.eviction_hard, ka.field("eviction_hard"))?,
            eviction_hard_percent: percentages(
                k.eviction_hard_percent,
                ka.field("eviction_hard_percent"),
                k.eviction_hard_percent_milli,
                ka.field("eviction_hard_percent_milli"),
            )?,
        },
        spec_hash: c.spec_hash,
        root_volume_size: c
            .root_volume_size
            .map(|q| {
                let a = at.field("root_volume_size");
                quantity::parse_units(&q)
                    .map_err(|e| a.err(e.to_string()))
                    .and_then(|v| non_negative(v, a))
            })
            .transpose()?,
        metadata_annotations: c.metadata_annotations,
        resolved_amis: (!c.resolved_amis.is_empty()).then_some(c.resolved_amis),
        resolved_subnets: (!c.resolved_subnets.is_empty()).then_some(c.resolved_subnets),
        resolved_security_groups: (!c.resolved_security_groups.is_empty())
            .then_some(c.resolved_security_groups),
        not_ready: c.not_ready,
    })
}

/// `{"memory": "7.5%"}` and `{"memory": 7500}` → milli-percent by resource name; a resource is
/// in one of the two maps.
fn percentages(
    text: BTreeMap<String, String>,
    at: At<'_>,
    milli: BTreeMap<String, i64>,
    at_milli: At<'_>,
) -> Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for (k, v) in &text {
        let a = at.key(k);
        let n = v
            .strip_suffix('%')
            .ok_or_else(|| a.err(format!("{v:?} is not a percentage like \"10%\"")))
            .and_then(|p| quantity::parse_milli(p).map_err(|e| a.err(e.to_string())))?;
        if !(0..=100_000).contains(&n) {
            return Err(a.err(format!("{v:?} is not between 0% and 100%")));
        }
        out.insert(k.clone(), n);
    }
    for (k, n) in milli {
        let a = at_milli.key(&k);
        if out.contains_key(&k) {
            return Err(a.err(format!(
                "{k} is also given as a percentage ({}); a resource is given once",
                at.key(&k).render()
            )));
        }
        if !(0..=100_000).contains(&n) {
            return Err(a.err(format!(
                "{n} thousandths of a percent is not between 0% and 100%"
            )));
        }
        out.insert(k, n);
    }
    Ok(out)
}

/// Decodes a wire `DaemonSet`; errors name the field below `at`.
pub fn daemon_set(d: pb::DaemonSet, at: At<'_>) -> Result<model::DaemonSet> {
    let namespace = non_empty(d.namespace, at.field("namespace"))?;
    let name = non_empty(d.name, at.field("name"))?;
    let mut template = required(d.template, at.field("template"))?;
    // A template needs no identity of its own; give it the DaemonSet's.
    if template.namespace.is_empty() {
        template.namespace.clone_from(&namespace);
    }
    if template.name.is_empty() {
        template.name.clone_from(&name);
    }
    Ok(model::DaemonSet {
        template: pod(template, at.field("template"))?,
        namespace,
        name,
    })
}

/// Decodes a wire `PodDisruptionBudget`; errors name the field below `at`.
pub fn pdb(p: pb::PodDisruptionBudget, at: At<'_>) -> Result<model::PodDisruptionBudget> {
    Ok(model::PodDisruptionBudget {
        namespace: non_empty(p.namespace, at.field("namespace"))?,
        name: non_empty(p.name, at.field("name"))?,
        selector: opt_selector(p.selector, at.field("selector"))?,
        min_available: p
            .min_available
            .map(|s| int_or_percent(&s, at.field("min_available")))
            .transpose()?,
        max_unavailable: p
            .max_unavailable
            .map(|s| int_or_percent(&s, at.field("max_unavailable")))
            .transpose()?,
        disruptions_allowed: p.disruptions_allowed,
    })
}

/// Decodes a wire `Namespace`; errors name the field below `at`.
pub fn namespace(n: pb::Namespace, at: At<'_>) -> Result<model::Namespace> {
    Ok(model::Namespace {
        name: non_empty(n.name, at.field("name"))?,
        labels: n.labels,
    })
}

/// Decodes a wire `PersistentVolumeClaim`; errors name the field below `at`.
pub fn pvc(c: pb::PersistentVolumeClaim, at: At<'_>) -> Result<model::PersistentVolumeClaim> {
    Ok(model::PersistentVolumeClaim {
        namespace: non_empty(c.namespace, at.field("namespace"))?,
        name: non_empty(c.name, at.field("name"))?,
        storage_class: c.storage_class,
        volume_name: c.volume_name,
    })
}

/// Decodes a wire `PersistentVolume`; errors name the field below `at`.
pub fn pv(v: pb::PersistentVolume, at: At<'_>) -> Result<model::PersistentVolume> {
    Ok(model::PersistentVolume {
        name: non_empty(v.name, at.field("name"))?,
        storage_class: v.storage_class,
        node_affinity: list(v.node_affinity, at.field("node_affinity"), term)?,
        node_local: v.node_local,
    })
}

/// Decodes a wire `CapacityBuffer`; errors name the field below `at`.
pub fn capacity_buffer(b: pb::CapacityBuffer, at: At<'_>) -> Result<model::CapacityBuffer> {
    let namespace = non_empty(b.namespace, at.field("namespace"))?;
    let name = non_empty(b.name, at.field("name"))?;
    let uid = common::key::object(&b.uid, Some(&namespace), &name);
    let opt = |s: String| (!s.is_empty()).then_some(s);
    for (v, field) in [(b.replicas, "replicas"), (b.percentage, "percentage")] {
        if let Some(v) = v
            && v < 0
        {
            return Err(at
                .field(field)
                .err(format!("{v} is negative; the CRD's minimum is 0")));
        }
    }
    let template = b
        .template
        .map(|t| pod(t, at.field("template")))
        .transpose()?;
    let unresolved = opt(b.unresolved_reason).map(|r| (r, b.unresolved_message));
    Ok(model::CapacityBuffer {
        namespace,
        name,
        uid,
        provisioning_strategy: opt(b.provisioning_strategy),
        pod_template_ref: opt(b.pod_template_ref),
        scalable_ref: opt(b.scalable_ref),
        replicas: b.replicas,
        percentage: b.percentage,
        limits: resource_list(b.limits, at.field("limits"))?,
        template,
        pod_template_generation: b.pod_template_generation,
        scalable_replicas: b.scalable_replicas,
        unresolved,
    })
}

/// Decodes a wire `StorageClass`; errors name the field below `at`.
pub fn storage_class(s: pb::StorageClass, at: At<'_>) -> Result<model::StorageClass> {
    let volume_binding_mode = match s.volume_binding_mode.as_str() {
        "" => VolumeBindingMode::Immediate,
        m => one_of(
            m,
            at.field("volume_binding_mode"),
            &[
                ("Immediate", VolumeBindingMode::Immediate),
                (
                    "WaitForFirstConsumer",
                    VolumeBindingMode::WaitForFirstConsumer,
                ),
            ],
        )?,
    };
    Ok(model::StorageClass {
        name: non_empty(s.name, at.field("name"))?,
        volume_binding_mode,
        allowed_topologies: list(s.allowed_topologies, at.field("allowed_topologies"), term)?,
    })
}

/// Decodes a wire `NodeOverlay` (the CRD's rules: price and priceAdjustment patterns, not
/// both, weight 1-10000, extended resources only); errors name the field below `at`.
pub fn node_overlay(o: pb::NodeOverlay, at: At<'_>) -> Result<model::NodeOverlay> {
    let name = non_empty(o.name, at.field("name"))?;
    let price = match (o.price, o.price_adjustment) {
        (Some(_), Some(_)) => {
            return Err(at
                .field("price_adjustment")
                .err("cannot set both 'price' and 'priceAdjustment'"));
        }
        (Some(p), None) => {
            Some(model::PriceChange::price(&p).map_err(|e| at.field("price").err(e))?)
        }
        (None, Some(p)) => Some(
            model::PriceChange::adjustment(&p).map_err(|e| at.field("price_adjustment").err(e))?,
        ),
        (None, None) => None,
    };
    if let Some(w) = o.weight
        && !(1..=10_000).contains(&w)
    {
        return Err(at.field("weight").err(format!("must be 1-10000, got {w}")));
    }
    let caps = at.field("capacity");
    let caps_milli = at.field("capacity_milli");
    for (k, a) in o
        .capacity
        .keys()
        .map(|k| (k, caps.key(k)))
        .chain(o.capacity_milli.keys().map(|k| (k, caps_milli.key(k))))
    {
        if matches!(
            k.as_str(),
            names::CPU | names::MEMORY | names::EPHEMERAL_STORAGE | names::PODS
        ) {
            return Err(
                a.err("invalid resource restricted (capacity adds extended resources only)")
            );
        }
    }
    let requirements = requirements(o.requirements, at.field("requirements"))?;
    for (i, r) in requirements.iter().enumerate() {
        if matches!(r.operator, Operator::In | Operator::NotIn) && r.values.is_empty() {
            return Err(at
                .field("requirements")
                .index(i)
                .field("values")
                .err(format!(
                    "requirements with operator '{:?}' must have a value defined",
                    r.operator
                )));
        }
    }
    Ok(model::NodeOverlay {
        name,
        requirements,
        price,
        capacity: amounts(o.capacity, caps, o.capacity_milli, caps_milli)?,
        weight: o.weight,
    })
}
