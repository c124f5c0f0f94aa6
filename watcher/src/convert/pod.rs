//! Pods and DaemonSets: effective requests as Kubernetes computes them, affinity, tolerations,
//! topology spread, host ports, volume claims and the resolved priority.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use proto::v1 as pb;

use super::{
    PriorityClasses, Result, field_err, label_selector, labels, name, node_selector_term,
    node_selector_terms, seconds, uid,
};
use crate::pending;
use crate::quantity;

/// What the watcher does with a pod.
#[derive(Debug, Clone, PartialEq)]
pub enum PodDisposition {
    /// Mirrored: bound to a node, or pending as Karpenter defines it.
    Keep(Box<pb::Pod>),
    /// Not mirrored: finished, or unbound without being provisionable (not yet seen by the
    /// scheduler, a DaemonSet or mirror pod, being preempted onto a node).
    Ignore,
    /// Pending, but it can never be planned; the reason goes on the pod as an Event once.
    Invalid(super::Error),
}

/// Converts a pod, deciding whether the planner sees it at all.
pub fn pod(p: &core::Pod, priorities: &PriorityClasses) -> PodDisposition {
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    if matches!(phase, "Succeeded" | "Failed") {
        return PodDisposition::Ignore;
    }
    let bound = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !bound && !pending::is_provisionable(p) {
        return PodDisposition::Ignore;
    }
    let Some(spec) = &p.spec else {
        return PodDisposition::Invalid(field_err("spec", "is required"));
    };
    match pod_spec(spec, "spec", priorities) {
        Ok(mut out) => {
            let m = &p.metadata;
            out.namespace = m.namespace.clone().unwrap_or_else(|| "default".into());
            out.name = name(m);
            out.uid = uid(m);
            out.labels = labels(m).into_iter().collect();
            // Only the annotations the planner reads: an empty map allocates nothing, which
            // matters at 100,000 pods.
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
            out.phase = phase.to_string();
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
            PodDisposition::Keep(Box::new(out))
        }
        Err(e) if bound => {
            // A bound pod still occupies its node; keep what can be read of it.
            tracing::debug!(error = %e, "Bound pod with an unreadable spec");
            PodDisposition::Ignore
        }
        Err(e) => PodDisposition::Invalid(e),
    }
}

/// Pod annotations the planner reads: Karpenter's (`karpenter.sh/do-not-disrupt`), the
/// mirror-pod marker and the pod deletion cost.
fn is_planner_annotation(key: &str) -> bool {
    key.starts_with("karpenter.sh/")
        || key == "kubernetes.io/config.mirror"
        || key == "controller.kubernetes.io/pod-deletion-cost"
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

/// Converts a pod spec found at `base`.
fn pod_spec(spec: &core::PodSpec, base: &str, priorities: &PriorityClasses) -> Result<pb::Pod> {
    let mut pod = pb::Pod {
        requests: effective_requests(spec, base)?,
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
            .map(|t| pb::Toleration {
                key: t.key.clone().unwrap_or_default(),
                operator: t.operator.clone().unwrap_or_default(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone().unwrap_or_default(),
            })
            .collect(),
        host_ports: host_ports(spec),
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
            );
            pod.preferred_pod_affinity = weighted_terms(
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
            );
        }
        if let Some(pa) = &a.pod_anti_affinity {
            pod.pod_anti_affinity = affinity_terms(
                pa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
            );
            pod.preferred_pod_anti_affinity = weighted_terms(
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
            );
        }
    }
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        if c.max_skew < 1 {
            return Err(field_err(
                format!("{base}.topologySpreadConstraints[{i}].maxSkew"),
                format!("must be at least 1, got {}", c.max_skew),
            ));
        }
        pod.topology_spread.push(pb::TopologySpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            when_unsatisfiable: c.when_unsatisfiable.clone(),
            label_selector: c.label_selector.as_ref().map(label_selector),
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

fn affinity_terms(terms: Option<&[core::PodAffinityTerm]>) -> Vec<pb::PodAffinityTerm> {
    terms.into_iter().flatten().map(affinity_term).collect()
}

fn weighted_terms(
    terms: Option<&[core::WeightedPodAffinityTerm]>,
) -> Vec<pb::WeightedPodAffinityTerm> {
    terms
        .into_iter()
        .flatten()
        .map(|w| pb::WeightedPodAffinityTerm {
            weight: w.weight,
            term: Some(affinity_term(&w.pod_affinity_term)),
        })
        .collect()
}

fn affinity_term(t: &core::PodAffinityTerm) -> pb::PodAffinityTerm {
    pb::PodAffinityTerm {
        label_selector: t.label_selector.as_ref().map(label_selector),
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector: t.namespace_selector.as_ref().map(label_selector),
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone().unwrap_or_default(),
        mismatch_label_keys: t.mismatch_label_keys.clone().unwrap_or_default(),
    }
}

type Amounts = BTreeMap<String, i128>;

/// A container's requests after defaulting: a resource with a limit but no request requests
/// its limit.
fn container_requests(c: &core::Container, at: &str) -> Result<Amounts> {
    let mut out = Amounts::new();
    let Some(r) = &c.resources else {
        return Ok(out);
    };
    for (field, list) in [("limits", &r.limits), ("requests", &r.requests)] {
        for (k, q) in list.iter().flatten() {
            let v = quantity::parse_milli(&q.0)
                .map_err(|e| field_err(format!("{at}.resources.{field}.{k}"), e.to_string()))?;
            out.insert(k.clone(), v);
        }
    }
    Ok(out)
}

fn add(to: &mut Amounts, more: &Amounts) {
    for (k, v) in more {
        *to.entry(k.clone()).or_default() += v;
    }
}

fn max(to: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        let e = to.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

/// The effective requests of a pod, as `k8s.io/component-helpers/resource.PodRequests`
/// computes them: app containers summed; restartable init containers (sidecars) added and
/// accumulated; each regular init container needs its own requests plus the sidecars before
/// it; the larger of the two per resource; pod-level resources replace cpu, memory and
/// hugepages; overhead added last; `pods` is 1.
fn effective_requests(spec: &core::PodSpec, base: &str) -> Result<BTreeMap<String, String>> {
    let mut reqs = Amounts::new();
    for (i, c) in spec.containers.iter().enumerate() {
        add(
            &mut reqs,
            &container_requests(c, &format!("{base}.containers[{i}]"))?,
        );
    }
    let mut sidecars = Amounts::new();
    let mut init_max = Amounts::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let own = container_requests(c, &format!("{base}.initContainers[{i}]"))?;
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut reqs, &own);
            add(&mut sidecars, &own);
            max(&mut init_max, &sidecars);
        } else {
            let mut need = own;
            add(&mut need, &sidecars);
            max(&mut init_max, &need);
        }
    }
    max(&mut reqs, &init_max);
    if let Some(r) = &spec.resources {
        let pseudo = core::Container {
            resources: Some(r.clone()),
            ..Default::default()
        };
        for (k, v) in container_requests(&pseudo, base)? {
            if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
                reqs.insert(k, v);
            }
        }
    }
    for (k, q) in spec.overhead.iter().flatten() {
        let v = quantity::parse_milli(&q.0)
            .map_err(|e| field_err(format!("{base}.overhead.{k}"), e.to_string()))?;
        *reqs.entry(k.clone()).or_default() += v;
    }
    reqs.insert("pods".into(), 1000);
    Ok(reqs
        .into_iter()
        .filter(|(_, v)| *v != 0)
        .map(|(k, v)| (k, quantity::format_milli(v)))
        .collect())
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

    fn pending_pod(json: serde_json::Value) -> core::Pod {
        let mut p: core::Pod = serde_json::from_value(json).expect("pod");
        p.status = Some(core::PodStatus {
            conditions: Some(vec![core::PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    #[test]
    fn effective_requests_fold_sidecars_init_containers_and_overhead() {
        let p = pending_pod(serde_json::json!({
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
        let PodDisposition::Keep(p) = pod(&p, &PriorityClasses::default()) else {
            panic!("kept");
        };
        // max(500+250+100, 2000+100) + 10 overhead.
        assert_eq!(p.requests["cpu"], "2110m");
        assert_eq!(p.requests["memory"], "1073741824");
        assert_eq!(p.requests["pods"], "1");
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
        let p = pending_pod(serde_json::json!({
            "metadata": {"name": "bad", "namespace": "default", "uid": "u2"},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}
        }));
        let PodDisposition::Invalid(e) = pod(&p, &PriorityClasses::default()) else {
            panic!("invalid");
        };
        assert_eq!(
            e.to_string(),
            "spec.containers[0].resources.requests.cpu: invalid quantity \"lots\": expected a number"
        );
    }

    #[test]
    fn finished_and_unmarked_unbound_pods_are_not_mirrored() {
        let mut p = pending_pod(serde_json::json!({
            "metadata": {"name": "x", "namespace": "default"},
            "spec": {"containers": []}
        }));
        p.status.as_mut().expect("status").conditions = None;
        assert_eq!(pod(&p, &PriorityClasses::default()), PodDisposition::Ignore);
        let mut done = pending_pod(serde_json::json!({
            "metadata": {"name": "y", "namespace": "default"},
            "spec": {"containers": [], "nodeName": "n1"}
        }));
        done.status.as_mut().expect("status").phase = Some("Succeeded".into());
        assert_eq!(
            pod(&done, &PriorityClasses::default()),
            PodDisposition::Ignore
        );
    }
}
