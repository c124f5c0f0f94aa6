//! Pod specs (of Pods, workload templates and DaemonSets) into [`Pod`]s: effective requests as
//! Kubernetes computes them, node and pod affinity, tolerations, topology spread, host ports and
//! volume claims.

use std::collections::BTreeMap;

use super::FieldError;
use super::raw;
use crate::labels;
use crate::model::{
    HostPort, LabelSelector, NodeInclusionPolicy, NodeSelectorTerm, Operator, Pod, PodAffinityTerm,
    PreferredTerm, Requirement, Resources, SelectorExpression, SelectorOperator, Taint,
    TaintEffect, Toleration, TolerationOperator, TopologySpreadConstraint, WeightedPodAffinityTerm,
    WhenUnsatisfiable,
};
use common::pod_requests;

/// How a pod's priority is to be resolved once every PriorityClass has been read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PriorityRef {
    /// `spec.priority` was given.
    Value(i32),
    /// `spec.priorityClassName` names a class.
    Class(String),
    /// Neither: the globalDefault class applies, else 0.
    Default,
}

/// A converted pod spec: the pod (without metadata), its priority reference and the names of
/// its generic ephemeral volumes (their claims are named `<pod>-<volume>`) with the storage
/// class their claim template names.
pub(super) struct PodParts {
    pub(super) pod: Pod,
    pub(super) priority: PriorityRef,
    pub(super) ephemeral_volumes: Vec<(String, Option<String>)>,
}

/// Converts a pod spec found at `base` (e.g. `spec.template.spec`) in its document.
pub(super) fn convert_pod_spec(spec: &raw::PodSpec, base: &str) -> Result<PodParts, FieldError> {
    let mut pod = Pod {
        requests: effective_requests(spec),
        node_selector: spec.node_selector.clone(),
        tolerations: spec.tolerations.iter().map(toleration).collect(),
        host_ports: host_ports(spec),
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        ..Pod::default()
    };
    if let Some(affinity) = &spec.affinity {
        let path = |p: &str| format!("{base}.affinity.{p}");
        if let Some(na) = &affinity.node_affinity {
            if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
                pod.required_node_affinity = node_selector_terms(
                    &req.node_selector_terms,
                    &path(
                        "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                    ),
                )?;
            }
            for (i, p) in na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .enumerate()
            {
                let at = path(&format!(
                    "nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
                ));
                pod.preferred_node_affinity.push(PreferredTerm {
                    weight: p.weight,
                    term: node_selector_term(&p.preference, &format!("{at}.preference"))?,
                });
            }
        }
        if let Some(pa) = &affinity.pod_affinity {
            let (req, pref) = pod_affinity(pa, &path("podAffinity"))?;
            pod.pod_affinity = req;
            pod.preferred_pod_affinity = pref;
        }
        if let Some(pa) = &affinity.pod_anti_affinity {
            let (req, pref) = pod_affinity(pa, &path("podAntiAffinity"))?;
            pod.pod_anti_affinity = req;
            pod.preferred_pod_anti_affinity = pref;
        }
    }
    for (i, c) in spec.topology_spread_constraints.iter().enumerate() {
        let at = format!("{base}.topologySpreadConstraints[{i}]");
        pod.topology_spread.push(TopologySpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            when_unsatisfiable: c.when_unsatisfiable,
            label_selector: c
                .label_selector
                .as_ref()
                .map(|s| label_selector(s, &format!("{at}.labelSelector")))
                .transpose()?,
            min_domains: c.min_domains,
            match_label_keys: c.match_label_keys.clone(),
            node_affinity_policy: c.node_affinity_policy.unwrap_or(NodeInclusionPolicy::Honor),
            node_taints_policy: c.node_taints_policy.unwrap_or(NodeInclusionPolicy::Ignore),
        });
        if c.max_skew < 1 {
            return Err(FieldError::new(
                format!("{at}.maxSkew"),
                format!("must be at least 1, got {}", c.max_skew),
            ));
        }
        if c.min_domains.is_some() && c.when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
            return Err(FieldError::new(
                format!("{at}.minDomains"),
                "may only be set with whenUnsatisfiable: DoNotSchedule",
            ));
        }
    }
    let mut ephemeral_volumes = Vec::new();
    for v in &spec.volumes {
        if let Some(pvc) = &v.persistent_volume_claim {
            pod.volume_claims.push(pvc.claim_name.clone());
        } else if let Some(e) = &v.ephemeral {
            let class = e
                .volume_claim_template
                .as_ref()
                .and_then(|t| t.spec.storage_class_name.clone())
                .filter(|c| !c.is_empty());
            ephemeral_volumes.push((v.name.clone(), class));
        }
    }
    let priority = match (&spec.priority, &spec.priority_class_name) {
        (Some(p), _) => PriorityRef::Value(*p),
        (None, Some(c)) if !c.is_empty() => PriorityRef::Class(c.clone()),
        _ => PriorityRef::Default,
    };
    Ok(PodParts {
        pod,
        priority,
        ephemeral_volumes,
    })
}

// === requests ===

/// A container's requests after defaulting (`common::pod_requests::container`).
fn container_requests(r: &raw::ResourceRequirements) -> BTreeMap<String, i64> {
    pod_requests::container(&r.limits.0, &r.requests.0)
}

fn to_resources(m: &BTreeMap<String, i64>) -> Resources {
    let mut r = Resources::default();
    for (k, v) in m {
        r.set(k, *v);
    }
    r
}

/// The effective requests of a pod, by Kubernetes' rule (`common::pod_requests::pod`), in the
/// planner's units.
pub(super) fn effective_requests(spec: &raw::PodSpec) -> Resources {
    let containers: Vec<_> = spec
        .containers
        .iter()
        .map(|c| container_requests(&c.resources))
        .collect();
    let init: Vec<_> = spec
        .init_containers
        .iter()
        .map(|c| pod_requests::InitContainer {
            requests: container_requests(&c.resources),
            restartable: c.restart_policy.as_deref() == Some("Always"),
        })
        .collect();
    let pod_level = spec.resources.as_ref().map(container_requests);
    to_resources(&pod_requests::pod(
        &containers,
        &init,
        pod_level.as_ref(),
        spec.overhead.as_ref().map(|o| &o.0),
        1,
    ))
}

fn host_ports(spec: &raw::PodSpec) -> Vec<HostPort> {
    let mut out: Vec<HostPort> = Vec::new();
    for c in spec.init_containers.iter().chain(&spec.containers) {
        for p in &c.ports {
            // With hostNetwork the API server defaults hostPort to containerPort.
            let port = match p.host_port {
                Some(hp) if hp > 0 => hp,
                None if spec.host_network && p.container_port > 0 => p.container_port,
                _ => continue,
            };
            let ip = match p.host_ip.as_deref() {
                None | Some("") => "0.0.0.0".to_string(),
                Some(ip) => ip.to_string(),
            };
            let protocol = match p.protocol.as_deref() {
                None | Some("") => "TCP".to_string(),
                Some(proto) => proto.to_string(),
            };
            let hp = HostPort { ip, protocol, port };
            if !out.contains(&hp) {
                out.push(hp);
            }
        }
    }
    out
}

// === selectors ===

fn toleration(t: &raw::Toleration) -> Toleration {
    Toleration {
        key: t.key.clone(),
        operator: match t.operator {
            raw::TolerationOperator::Exists => TolerationOperator::Exists,
            raw::TolerationOperator::Empty | raw::TolerationOperator::Equal => {
                TolerationOperator::Equal
            }
        },
        value: t.value.clone(),
        effect: match t.effect {
            raw::TolerationEffect::All => None,
            raw::TolerationEffect::NoSchedule => Some(TaintEffect::NoSchedule),
            raw::TolerationEffect::PreferNoSchedule => Some(TaintEffect::PreferNoSchedule),
            raw::TolerationEffect::NoExecute => Some(TaintEffect::NoExecute),
        },
    }
}

/// Converts taints.
pub(super) fn taints(t: &[raw::Taint]) -> Vec<Taint> {
    t.iter()
        .map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect,
        })
        .collect()
}

/// Converts and validates one requirement found at `at`.
pub(super) fn requirement(
    r: &raw::NodeSelectorRequirement,
    at: &str,
) -> Result<Requirement, FieldError> {
    let err = |field: &str, msg: String| FieldError::new(format!("{at}.{field}"), msg);
    match r.operator {
        Operator::In | Operator::NotIn if r.values.is_empty() => {
            return Err(err(
                "values",
                format!("operator {:?} needs at least one value", r.operator),
            ));
        }
        Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => {
            return Err(err(
                "values",
                format!("operator {:?} takes no values", r.operator),
            ));
        }
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte
            if r.values.len() != 1 || r.values[0].trim().parse::<i64>().is_err() =>
        {
            return Err(err(
                "values",
                format!(
                    "operator {:?} needs exactly one integer value, got {:?}",
                    r.operator, r.values
                ),
            ));
        }
        _ => {}
    }
    if let Some(min) = r.min_values {
        if min < 1 {
            return Err(err("minValues", "must be at least 1".to_string()));
        }
        if r.operator == Operator::In && (r.values.len() as u64) < u64::from(min) {
            return Err(err(
                "minValues",
                format!(
                    "minValues {min} is more than the {} values given",
                    r.values.len()
                ),
            ));
        }
    }
    if r.key.is_empty() {
        return Err(err("key", "must not be empty".to_string()));
    }
    Ok(Requirement {
        key: r.key.clone(),
        operator: r.operator,
        values: r.values.clone(),
        min_values: r.min_values,
    })
}

/// Converts a list of requirements found at `at`.
pub(super) fn requirements(
    rs: &[raw::NodeSelectorRequirement],
    at: &str,
) -> Result<Vec<Requirement>, FieldError> {
    rs.iter()
        .enumerate()
        .map(|(i, r)| requirement(r, &format!("{at}[{i}]")))
        .collect()
}

/// Converts a node selector term; `matchFields` on `metadata.name` becomes a requirement on
/// `kubernetes.io/hostname`.
pub(super) fn node_selector_term(
    t: &raw::NodeSelectorTerm,
    at: &str,
) -> Result<NodeSelectorTerm, FieldError> {
    let mut reqs = requirements(&t.match_expressions, &format!("{at}.matchExpressions"))?;
    for (i, f) in t.match_fields.iter().enumerate() {
        let fat = format!("{at}.matchFields[{i}]");
        if f.key != "metadata.name" {
            return Err(FieldError::new(
                format!("{fat}.key"),
                format!(
                    "unsupported field {:?}: only metadata.name is supported",
                    f.key
                ),
            ));
        }
        if !matches!(f.operator, Operator::In | Operator::NotIn) {
            return Err(FieldError::new(
                format!("{fat}.operator"),
                format!(
                    "operator {:?} is not supported for fields (In or NotIn)",
                    f.operator
                ),
            ));
        }
        let mut r = requirement(f, &fat)?;
        r.key = labels::HOSTNAME.to_string();
        reqs.push(r);
    }
    Ok(NodeSelectorTerm { requirements: reqs })
}

/// Converts node selector terms found at `at` (a list).
pub(super) fn node_selector_terms(
    terms: &[raw::NodeSelectorTerm],
    at: &str,
) -> Result<Vec<NodeSelectorTerm>, FieldError> {
    terms
        .iter()
        .enumerate()
        .map(|(i, t)| node_selector_term(t, &format!("{at}[{i}]")))
        .collect()
}

/// Converts and validates a label selector found at `at`.
pub(super) fn label_selector(
    s: &raw::LabelSelector,
    at: &str,
) -> Result<LabelSelector, FieldError> {
    let mut out = LabelSelector {
        match_labels: s.match_labels.clone(),
        match_expressions: Vec::with_capacity(s.match_expressions.len()),
    };
    for (i, e) in s.match_expressions.iter().enumerate() {
        let needs_values = matches!(e.operator, SelectorOperator::In | SelectorOperator::NotIn);
        if needs_values == e.values.is_empty() {
            return Err(FieldError::new(
                format!("{at}.matchExpressions[{i}].values"),
                if needs_values {
                    format!("operator {:?} needs at least one value", e.operator)
                } else {
                    format!("operator {:?} takes no values", e.operator)
                },
            ));
        }
        out.match_expressions.push(SelectorExpression {
            key: e.key.clone(),
            operator: e.operator,
            values: e.values.clone(),
        });
    }
    Ok(out)
}

fn pod_affinity_term(t: &raw::PodAffinityTerm, at: &str) -> Result<PodAffinityTerm, FieldError> {
    if t.topology_key.is_empty() {
        return Err(FieldError::new(
            format!("{at}.topologyKey"),
            "must not be empty",
        ));
    }
    Ok(PodAffinityTerm {
        label_selector: t
            .label_selector
            .as_ref()
            .map(|s| label_selector(s, &format!("{at}.labelSelector")))
            .transpose()?,
        namespaces: t.namespaces.clone(),
        namespace_selector: t
            .namespace_selector
            .as_ref()
            .map(|s| label_selector(s, &format!("{at}.namespaceSelector")))
            .transpose()?,
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone(),
        mismatch_label_keys: t.mismatch_label_keys.clone(),
    })
}

type AffinityTerms = (Vec<PodAffinityTerm>, Vec<WeightedPodAffinityTerm>);

fn pod_affinity(a: &raw::PodAffinity, at: &str) -> Result<AffinityTerms, FieldError> {
    let required = a
        .required_during_scheduling_ignored_during_execution
        .iter()
        .enumerate()
        .map(|(i, t)| {
            pod_affinity_term(
                t,
                &format!("{at}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let preferred = a
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let wat = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            Ok(WeightedPodAffinityTerm {
                weight: w.weight,
                term: pod_affinity_term(&w.pod_affinity_term, &format!("{wat}.podAffinityTerm"))?,
            })
        })
        .collect::<Result<Vec<_>, FieldError>>()?;
    Ok((required, preferred))
}
