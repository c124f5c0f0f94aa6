//! Pods and DaemonSets: effective requests as Kubernetes computes them, affinity, tolerations,
//! topology spread, host ports, volume claims and the resolved priority.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use proto::v1 as pb;

use super::{
    PriorityClasses, Result, TAINT_EFFECTS, field_err, labels, name, node_selector_term,
    node_selector_terms, one_of, opt_label_selector, seconds, uid,
};
use crate::quantity;
use common::labels::{MIRROR_POD, POD_DELETION_COST};
use common::pod_requests;

/// Converts a pod: its spec as the planner reads it, with the metadata the planner keys,
/// selects and disrupts by. Whether the pod is pending, bound or not worth planning is the
/// caller's to decide.
///
/// # Errors
/// A missing `spec`, or a field the planner cannot use.
pub fn pod(p: &core::Pod, priorities: &PriorityClasses) -> Result<pb::Pod> {
    let Some(spec) = &p.spec else {
        return Err(field_err("spec", "is required"));
    };
    let mut out = pod_spec(spec, "spec", priorities)?;
    let m = &p.metadata;
    out.namespace = m.namespace.clone().unwrap_or_else(|| "default".into());
    out.name = name(m);
    out.uid = uid(m);
    out.resource_claim_objects = resource_claim_objects(p);
    out.labels = labels(m).into_iter().collect();
    // Only the annotations the planner reads: an empty map allocates nothing, which matters
    // at 100,000 pods.
    out.annotations = m
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| is_planner_annotation(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.owner = m
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| pb::OwnerRef {
            kind: o.kind.clone(),
            name: o.name.clone(),
            controller: true,
        });
    out.phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    out.creation_time = m.creation_timestamp.as_ref().map(seconds);
    out.deletion_time = m.deletion_timestamp.as_ref().map(seconds);
    out.start_time = p
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(seconds);
    // Generic ephemeral volumes are claimed as `<pod>-<volume>`.
    for v in spec.volumes.iter().flatten() {
        if v.ephemeral.is_some() {
            out.volume_claims.push(format!("{}-{}", out.name, v.name));
        }
    }
    Ok(out)
}

/// Pod annotations the planner reads: Karpenter's (`karpenter.sh/do-not-disrupt`), the
/// mirror-pod marker and the pod deletion cost.
fn is_planner_annotation(key: &str) -> bool {
    key.starts_with("karpenter.sh/") || key == MIRROR_POD || key == POD_DELETION_COST
}

/// Converts a DaemonSet: its pod template, as a pod.
///
/// # Errors
/// A template field the planner cannot use.
pub fn daemon_set(d: &apps::DaemonSet, priorities: &PriorityClasses) -> Result<pb::DaemonSet> {
    let m = &d.metadata;
    let template = d.spec.as_ref().map(|s| &s.template);
    let mut t = match template.and_then(|t| t.spec.as_ref()) {
        Some(spec) => pod_spec(spec, "spec.template.spec", priorities)?,
        None => pb::Pod::default(),
    };
    let namespace = m.namespace.clone().unwrap_or_default();
    t.namespace = namespace.clone();
    t.name = name(m);
    if let Some(tm) = template.and_then(|t| t.metadata.as_ref()) {
        t.labels = labels(tm).into_iter().collect();
    }
    t.owner = Some(pb::OwnerRef {
        kind: "DaemonSet".into(),
        name: name(m),
        controller: true,
    });
    Ok(pb::DaemonSet {
        namespace,
        name: name(m),
        template: Some(t),
        uid: uid(m),
    })
}

/// Converts a pod template found at `base` (its spec's path) into the pod it describes: its
/// labels and spec; namespace and name are the caller's.
pub(crate) fn template_pod(
    t: &core::PodTemplateSpec,
    base: &str,
    priorities: &PriorityClasses,
) -> Result<pb::Pod> {
    let mut out = match &t.spec {
        Some(spec) => pod_spec(spec, base, priorities)?,
        None => pb::Pod::default(),
    };
    if let Some(m) = &t.metadata {
        out.labels = labels(m).into_iter().collect();
    }
    Ok(out)
}

/// Converts a pod spec found at `base`.
fn pod_spec(spec: &core::PodSpec, base: &str, priorities: &PriorityClasses) -> Result<pb::Pod> {
    let mut pod = pb::Pod {
        requests_milli: effective_requests(spec, base)?,
        node_selector: spec
            .node_selector
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        tolerations: spec
            .tolerations
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| toleration(t, &format!("{base}.tolerations[{i}]")))
            .collect::<Result<_>>()?,
        host_ports: host_ports(spec),
        resource_claims: resource_claims(spec),
        resource_claim_objects: Vec::new(),
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        priority: match (&spec.priority, &spec.priority_class_name) {
            (Some(p), _) => *p,
            (None, Some(c)) if !c.is_empty() => priorities.value_of(c),
            _ => priorities.default_value(),
        },
        ..pb::Pod::default()
    };
    if let Some(a) = &spec.affinity {
        let path = |p: &str| format!("{base}.affinity.{p}");
        if let Some(na) = &a.node_affinity {
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
                .flatten()
                .enumerate()
            {
                let at = path(&format!(
                    "nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"
                ));
                preference_weight(
                    p.weight,
                    &path(&format!(
                        "nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].weight"
                    )),
                )?;
                pod.preferred_node_affinity.push(pb::PreferredTerm {
                    weight: p.weight,
                    term: Some(node_selector_term(&p.preference, &at)?),
                });
            }
        }
        if let Some(pa) = &a.pod_affinity {
            pod.pod_affinity = affinity_terms(
                pa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                &path("podAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
            )?;
            pod.preferred_pod_affinity = weighted_terms(
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
                &path("podAffinity.preferredDuringSchedulingIgnoredDuringExecution"),
            )?;
        }
        if let Some(pa) = &a.pod_anti_affinity {
            pod.pod_anti_affinity = affinity_terms(
                pa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                &path("podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
            )?;
            pod.preferred_pod_anti_affinity = weighted_terms(
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
                &path("podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"),
            )?;
        }
    }
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{base}.topologySpreadConstraints[{i}]");
        if c.max_skew < 1 {
            return Err(field_err(
                format!("{at}.maxSkew"),
                format!("must be at least 1, got {}", c.max_skew),
            ));
        }
        one_of(
            &c.when_unsatisfiable,
            &["DoNotSchedule", "ScheduleAnyway"],
            || format!("{at}.whenUnsatisfiable"),
        )?;
        for (field, policy) in [
            ("nodeAffinityPolicy", &c.node_affinity_policy),
            ("nodeTaintsPolicy", &c.node_taints_policy),
        ] {
            if let Some(policy) = policy {
                one_of(policy, &["Honor", "Ignore"], || format!("{at}.{field}"))?;
            }
        }
        if c.min_domains.is_some() && c.when_unsatisfiable != "DoNotSchedule" {
            return Err(field_err(
                format!("{at}.minDomains"),
                "may only be set with whenUnsatisfiable: DoNotSchedule",
            ));
        }
        pod.topology_spread.push(pb::TopologySpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            when_unsatisfiable: c.when_unsatisfiable.clone(),
            label_selector: opt_label_selector(
                c.label_selector.as_ref(),
                &format!("{at}.labelSelector"),
            )?,
            min_domains: c.min_domains,
            match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
            node_affinity_policy: c.node_affinity_policy.clone().unwrap_or_default(),
            node_taints_policy: c.node_taints_policy.clone().unwrap_or_default(),
        });
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(c) = &v.persistent_volume_claim {
            pod.volume_claims.push(c.claim_name.clone());
        }
    }
    Ok(pod)
}

/// A toleration; an empty operator is `Equal`, an empty effect every effect.
fn toleration(t: &core::Toleration, at: &str) -> Result<pb::Toleration> {
    let operator = t.operator.clone().unwrap_or_default();
    one_of(&operator, &["", "Equal", "Exists"], || {
        format!("{at}.operator")
    })?;
    let effect = t.effect.clone().unwrap_or_default();
    if !effect.is_empty() {
        one_of(&effect, &TAINT_EFFECTS, || format!("{at}.effect"))?;
    }
    Ok(pb::Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator,
        value: t.value.clone().unwrap_or_default(),
        effect,
    })
}

fn affinity_terms(
    terms: Option<&[core::PodAffinityTerm]>,
    at: &str,
) -> Result<Vec<pb::PodAffinityTerm>> {
    terms
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| affinity_term(t, &format!("{at}[{i}]")))
        .collect()
}

/// The weight of a preferred term: 1-100, as the API server's validation requires.
fn preference_weight(w: i32, at: &str) -> Result<()> {
    if (1..=100).contains(&w) {
        Ok(())
    } else {
        Err(crate::field_err(
            at,
            format!("must be between 1 and 100, got {w}"),
        ))
    }
}

fn weighted_terms(
    terms: Option<&[core::WeightedPodAffinityTerm]>,
    at: &str,
) -> Result<Vec<pb::WeightedPodAffinityTerm>> {
    terms
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, w)| {
            preference_weight(w.weight, &format!("{at}[{i}].weight"))?;
            Ok(pb::WeightedPodAffinityTerm {
                weight: w.weight,
                term: Some(affinity_term(
                    &w.pod_affinity_term,
                    &format!("{at}[{i}].podAffinityTerm"),
                )?),
            })
        })
        .collect()
}

fn affinity_term(t: &core::PodAffinityTerm, at: &str) -> Result<pb::PodAffinityTerm> {
    Ok(pb::PodAffinityTerm {
        label_selector: opt_label_selector(
            t.label_selector.as_ref(),
            &format!("{at}.labelSelector"),
        )?,
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector: opt_label_selector(
            t.namespace_selector.as_ref(),
            &format!("{at}.namespaceSelector"),
        )?,
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone().unwrap_or_default(),
        mismatch_label_keys: t.mismatch_label_keys.clone().unwrap_or_default(),
    })
}

type Amounts = pod_requests::Amounts<i128>;

/// A resource list in milli-units (`at` is its path).
fn amounts(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    at: &str,
) -> Result<Amounts> {
    let mut out = Amounts::new();
    for (k, q) in list.into_iter().flatten() {
        let v = quantity::parse_milli(&q.0)
            .map_err(|e| field_err(format!("{at}.{k}"), e.to_string()))?;
        out.insert(k.clone(), i128::from(v));
    }
    Ok(out)
}

/// The ResourceClaim objects a pod's `spec.resourceClaims` resolve to (Karpenter's
/// `resourceClaimName`): a `resourceClaimName` as given; a template's claim by the pod's
/// `status.resourceClaimStatuses`; none for a template whose claim is not generated (yet).
fn resource_claim_objects(p: &core::Pod) -> Vec<String> {
    let Some(spec) = p.spec.as_ref() else {
        return Vec::new();
    };
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let mut out = Vec::new();
    for c in spec.resource_claims.iter().flatten() {
        let name = match &c.resource_claim_name {
            Some(n) => Some(n.clone()),
            None => statuses
                .into_iter()
                .flatten()
                .find(|s| s.name == c.name)
                .and_then(|s| s.resource_claim_name.clone()),
        };
        if let Some(n) = name.filter(|n| !n.is_empty())
            && !out.contains(&n)
        {
            out.push(n);
        }
    }
    out
}

/// The names of a pod's Dynamic Resource Allocation claims: `spec.resourceClaims[].name`, then
/// any other name an (init) container lists in `resources.claims`, each once. Non-empty is
/// Karpenter's `HasDRARequirements` (kubernetes-sigs/karpenter `pkg/utils/pod/scheduling.go`).
fn resource_claims(spec: &core::PodSpec) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |name: &str| {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    };
    for c in spec.resource_claims.iter().flatten() {
        push(&c.name);
    }
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    for c in containers {
        let claims = c.resources.as_ref().and_then(|r| r.claims.as_ref());
        for claim in claims.into_iter().flatten() {
            push(&claim.name);
        }
    }
    out
}

/// Requests after defaulting, of a container's or the pod's `resources` at `at`.
fn requests(r: Option<&core::ResourceRequirements>, at: &str) -> Result<Amounts> {
    let Some(r) = r else {
        return Ok(Amounts::new());
    };
    let limits = amounts(r.limits.as_ref(), &format!("{at}.resources.limits"))?;
    let requests = amounts(r.requests.as_ref(), &format!("{at}.resources.requests"))?;
    Ok(pod_requests::container(&limits, &requests))
}

/// The effective requests of a pod, by Kubernetes' rule (`common::pod_requests::pod`), in
/// milli-units; resources that come to zero are left out.
fn effective_requests(spec: &core::PodSpec, base: &str) -> Result<BTreeMap<String, i64>> {
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| requests(c.resources.as_ref(), &format!("{base}.containers[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            Ok(pod_requests::InitContainer {
                requests: requests(c.resources.as_ref(), &format!("{base}.initContainers[{i}]"))?,
                restartable: c.restart_policy.as_deref() == Some("Always"),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let pod_level = spec
        .resources
        .as_ref()
        .map(|r| requests(Some(r), base))
        .transpose()?;
    let overhead = amounts(spec.overhead.as_ref(), &format!("{base}.overhead"))?;
    let reqs = pod_requests::pod(
        &containers,
        &init,
        pod_level.as_ref(),
        Some(&overhead),
        1000,
    );
    // Each amount fits a quantity; their sum (in i128, which cannot wrap) may not: refused
    // here, naming the pod's containers, rather than wrapping or failing later unnamed.
    reqs.into_iter()
        .filter(|(_, v)| *v != 0)
        .map(|(k, v)| {
            i64::try_from(v).map(|v| (k.clone(), v)).map_err(|_| {
                field_err(
                    format!("{base}.containers"),
                    format!(
                        "the requests of {k} sum to {v}m, more than a quantity can hold ({}m)",
                        i64::MAX
                    ),
                )
            })
        })
        .collect()
}

fn host_ports(spec: &core::PodSpec) -> Vec<pb::HostPort> {
    let host_network = spec.host_network == Some(true);
    let mut out: Vec<pb::HostPort> = Vec::new();
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        for p in c.ports.iter().flatten() {
            let port = match p.host_port {
                Some(hp) if hp > 0 => hp,
                None if host_network && p.container_port > 0 => p.container_port,
                _ => continue,
            };
            let hp = pb::HostPort {
                ip: p
                    .host_ip
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".into()),
                protocol: p
                    .protocol
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "TCP".into()),
                port,
            };
            if !out.contains(&hp) {
                out.push(hp);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a_pod(json: serde_json::Value) -> core::Pod {
        serde_json::from_value(json).expect("pod")
    }

    #[test]
    fn effective_requests_fold_sidecars_init_containers_and_overhead() {
        let p = a_pod(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                         "annotations": {"karpenter.sh/do-not-disrupt": "true", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"limits": {"cpu": "250m"}}}
                ],
                "initContainers": [
                    {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                    {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "100Mi"}}}
                ],
                "overhead": {"cpu": "10m"}
            }
        }));
        let p = pod(&p, &PriorityClasses::default()).expect("converts");
        // max(500+250+100, 2000+100) + 10 overhead.
        assert_eq!(p.requests_milli["cpu"], 2110);
        assert_eq!(p.requests_milli["memory"], 1_073_741_824_000);
        assert_eq!(p.requests_milli["pods"], 1000);
        assert!(
            p.requests.is_empty(),
            "each quantity parsed once, sent as milli-units"
        );
        assert_eq!(p.uid, "u1");
        let kept: Vec<&str> = p.annotations.keys().map(String::as_str).collect();
        assert_eq!(
            kept,
            ["karpenter.sh/do-not-disrupt"],
            "only what the planner reads"
        );
    }

    #[test]
    fn an_invalid_quantity_names_the_field() {
        let p = a_pod(serde_json::json!({
            "metadata": {"name": "bad", "namespace": "default", "uid": "u2"},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}
        }));
        let e = pod(&p, &PriorityClasses::default()).expect_err("invalid");
        assert_eq!(
            e.to_string(),
            "spec.containers[0].resources.requests.cpu: invalid quantity \"lots\": expected a number"
        );
    }

    #[test]
    fn resource_claims_of_the_pod_and_its_containers_once_each() {
        let p = a_pod(serde_json::json!({
            "metadata": {"name": "gpu", "namespace": "default", "uid": "u3"},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "single-gpu"}],
                "initContainers": [{"name": "warm", "resources": {"claims": [{"name": "scratch"}]}}],
                "containers": [
                    {"name": "a", "resources": {"claims": [{"name": "gpu"}]}},
                    {"name": "b"}
                ]
            }
        }));
        let p = pod(&p, &PriorityClasses::default()).expect("converts");
        assert_eq!(p.resource_claims, ["gpu", "scratch"]);
        let plain = a_pod(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "a"}]}
        }));
        let plain = pod(&plain, &PriorityClasses::default()).expect("converts");
        assert!(plain.resource_claims.is_empty());
    }
}
