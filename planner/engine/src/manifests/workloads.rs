//! Pods, workload controllers (Deployment, ReplicaSet, StatefulSet, Job) and DaemonSets.
//!
//! Controllers are kept as templates until [`expand`] turns them into the pending pods that are
//! missing, once every object of the input has been read.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::pods::{PriorityRef, convert_pod_spec};
use super::raw;
use super::{FieldError, de, namespace_or_default, require_name};
use crate::model::{DaemonSet, OwnerRef, Pod, PodPhase};

/// A workload controller waiting to be expanded.
#[derive(Debug)]
pub(super) struct Controller {
    pub(super) kind: String,
    pub(super) namespace: String,
    pub(super) name: String,
    /// Pods it wants running.
    pub(super) desired: usize,
    /// The pod template as a pod (namespace, labels, owner set; no name).
    pub(super) template: Pod,
    pub(super) priority: PriorityRef,
    /// Generic ephemeral volumes: each pod mounts claim `<pod>-<volume>` (with the template's
    /// storage class).
    pub(super) ephemeral_volumes: Vec<(String, Option<String>)>,
    /// StatefulSet claim templates: each pod mounts claim `<template>-<pod>` (with the
    /// template's storage class).
    pub(super) claim_templates: Vec<(String, Option<String>)>,
    /// For a ReplicaSet: the Deployment that controls it.
    pub(super) owner_deployment: Option<String>,
    /// For a StatefulSet: its first ordinal (`spec.ordinals.start`, default 0).
    pub(super) first_ordinal: usize,
}

fn controller_owner(refs: &[raw::OwnerReference]) -> Option<OwnerRef> {
    let r = refs
        .iter()
        .find(|r| r.controller == Some(true))
        .or_else(|| refs.first())?;
    Some(OwnerRef {
        kind: r.kind.clone(),
        name: r.name.clone(),
        controller: r.controller == Some(true),
    })
}

/// Converts a Pod.
pub(super) fn pod(value: &Value) -> Result<(Pod, PriorityRef), FieldError> {
    pod_from(de(value)?)
}

/// [`pod`] from an already deserialized object.
pub(super) fn pod_from(raw: raw::Pod) -> Result<(Pod, PriorityRef), FieldError> {
    let meta = raw.metadata;
    require_name(&meta.name)?;
    let parts = convert_pod_spec(&raw.spec, "spec")?;
    let mut pod = parts.pod;
    pod.namespace = namespace_or_default(&meta.namespace);
    pod.uid = common::key::object(
        meta.uid.as_deref().unwrap_or_default(),
        Some(&pod.namespace),
        &meta.name,
    );
    pod.owner = controller_owner(&meta.owner_references);
    for (v, _) in &parts.ephemeral_volumes {
        pod.volume_claims.push(format!("{}-{v}", meta.name));
    }
    pod.name = meta.name;
    pod.labels = meta.labels;
    pod.annotations = meta.annotations;
    pod.phase = raw.status.phase.unwrap_or(PodPhase::Pending);
    pod.creation_time = meta.creation_timestamp.map(|t| t.0);
    pod.deletion_time = meta.deletion_timestamp.map(|t| t.0);
    pod.start_time = raw.status.start_time.map(|t| t.0);
    Ok((pod, parts.priority))
}

fn non_negative(v: i32, path: &str) -> Result<usize, FieldError> {
    usize::try_from(v).map_err(|_| FieldError::new(path, format!("must not be negative, got {v}")))
}

/// Converts a Deployment, ReplicaSet, StatefulSet or Job.
pub(super) fn controller(kind: &str, value: &Value) -> Result<Controller, FieldError> {
    controller_from(kind, de(value)?)
}

/// [`controller`] from an already deserialized object.
pub(super) fn controller_from(kind: &str, raw: raw::Workload) -> Result<Controller, FieldError> {
    let meta = raw.metadata;
    require_name(&meta.name)?;
    let namespace = namespace_or_default(&meta.namespace);
    let spec = raw.spec;
    let desired = if kind == "Job" && spec.suspend {
        0
    } else if kind == "Job" {
        let parallelism = non_negative(spec.parallelism.unwrap_or(1), "spec.parallelism")?;
        match spec.completions {
            Some(c) => {
                let completions = non_negative(c, "spec.completions")?;
                let succeeded = usize::try_from(raw.status.succeeded.unwrap_or(0)).unwrap_or(0);
                parallelism.min(completions.saturating_sub(succeeded))
            }
            None => parallelism,
        }
    } else {
        non_negative(spec.replicas.unwrap_or(1), "spec.replicas")?
    };
    if spec.template.spec.containers.is_empty() {
        // Kubernetes requires a template with at least one container; without one the
        // replicas would plan as pods that request nothing.
        return Err(FieldError::new(
            "spec.template.spec.containers",
            "a workload needs a pod template with at least one container",
        ));
    }
    let parts = convert_pod_spec(&spec.template.spec, "spec.template.spec")?;
    let mut template = parts.pod;
    template.namespace = namespace.clone();
    template.labels = spec.template.metadata.labels;
    template.annotations = spec.template.metadata.annotations;
    template.owner = Some(OwnerRef {
        kind: kind.to_string(),
        name: meta.name.clone(),
        controller: true,
    });
    let owner_deployment = if kind == "ReplicaSet" {
        controller_owner(&meta.owner_references)
            .filter(|o| o.kind == "Deployment" && o.controller)
            .map(|o| o.name)
    } else {
        None
    };
    let claim_templates = if kind == "StatefulSet" {
        spec.volume_claim_templates
            .into_iter()
            .filter_map(|t| {
                let class = t.spec.storage_class_name.filter(|c| !c.is_empty());
                t.metadata.name.map(|n| (n, class))
            })
            .collect()
    } else {
        Vec::new()
    };
    let first_ordinal = match spec.ordinals.as_ref().map(|o| o.start) {
        Some(start) => non_negative(start, "spec.ordinals.start")?,
        None => 0,
    };
    Ok(Controller {
        first_ordinal,
        kind: kind.to_string(),
        namespace,
        name: meta.name,
        desired,
        template,
        priority: parts.priority,
        ephemeral_volumes: parts.ephemeral_volumes,
        claim_templates,
        owner_deployment,
    })
}

/// Converts a DaemonSet; its template becomes a pod named after the DaemonSet.
pub(super) fn daemon_set(value: &Value) -> Result<(DaemonSet, PriorityRef), FieldError> {
    daemon_set_from(de(value)?)
}

/// [`daemon_set`] from an already deserialized object.
pub(super) fn daemon_set_from(raw: raw::Workload) -> Result<(DaemonSet, PriorityRef), FieldError> {
    let meta = raw.metadata;
    require_name(&meta.name)?;
    let namespace = namespace_or_default(&meta.namespace);
    let parts = convert_pod_spec(&raw.spec.template.spec, "spec.template.spec")?;
    let mut template = parts.pod;
    template.namespace = namespace.clone();
    template.name = meta.name.clone();
    template.uid = format!("{namespace}/{}", meta.name);
    template.labels = raw.spec.template.metadata.labels;
    template.annotations = raw.spec.template.metadata.annotations;
    template.owner = Some(OwnerRef {
        kind: "DaemonSet".to_string(),
        name: meta.name.clone(),
        controller: true,
    });
    Ok((
        DaemonSet {
            namespace,
            name: meta.name,
            template,
        },
        parts.priority,
    ))
}

/// A claim an expanded pod mounts that its controller creates from a template: namespace,
/// claim name and the template's storage class.
pub(super) type TemplatedClaim = (String, String, Option<String>);

/// The pending pods the controllers still want, given the pods already in the input, and the
/// claims those pods mount that the controllers create from templates (StatefulSet
/// `volumeClaimTemplates`, generic ephemeral volumes).
pub(super) fn expand(
    controllers: &[Controller],
    pods: &[Pod],
    replica_set_owner: &BTreeMap<(String, String), String>,
) -> (Vec<(Pod, PriorityRef)>, Vec<TemplatedClaim>) {
    let deployments: BTreeSet<(&str, &str)> = controllers
        .iter()
        .filter(|c| c.kind == "Deployment")
        .map(|c| (c.namespace.as_str(), c.name.as_str()))
        .collect();
    let mut taken: BTreeSet<(String, String)> = pods
        .iter()
        .map(|p| (p.namespace.clone(), p.name.clone()))
        .collect();
    // Active pods per (namespace, controller kind, controller name).
    let mut existing: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for pod in pods {
        let active = !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed)
            && pod.deletion_time.is_none();
        let Some(owner) = pod.owner.as_ref().filter(|_| active) else {
            continue;
        };
        let ns = pod.namespace.clone();
        *existing
            .entry((ns.clone(), owner.kind.clone(), owner.name.clone()))
            .or_default() += 1;
        if owner.kind == "ReplicaSet" {
            let deployment = replica_set_owner
                .get(&(ns.clone(), owner.name.clone()))
                .cloned()
                .or_else(|| {
                    // Without the ReplicaSet object: Deployments name theirs `<name>-<hash>`.
                    let hash = pod.labels.get("pod-template-hash")?;
                    owner
                        .name
                        .strip_suffix(hash.as_str())?
                        .strip_suffix('-')
                        .map(str::to_string)
                });
            if let Some(d) = deployment {
                *existing
                    .entry((ns, "Deployment".to_string(), d))
                    .or_default() += 1;
            }
        }
    }

    let mut out = Vec::new();
    let mut claims = Vec::new();
    for c in controllers {
        let governed = c
            .owner_deployment
            .as_deref()
            .is_some_and(|d| deployments.contains(&(c.namespace.as_str(), d)));
        if governed {
            continue;
        }
        let have = existing
            .get(&(c.namespace.clone(), c.kind.clone(), c.name.clone()))
            .copied()
            .unwrap_or(0);
        let mut missing = c.desired.saturating_sub(have);
        let mut index = c.first_ordinal;
        while missing > 0 {
            // StatefulSet ordinals stop at `start + desired`; others take the next free index.
            if c.kind == "StatefulSet" && index >= c.first_ordinal + c.desired {
                break;
            }
            let name = format!("{}-{index}", c.name);
            index += 1;
            if !taken.insert((c.namespace.clone(), name.clone())) {
                continue;
            }
            missing -= 1;
            let mut pod = c.template.clone();
            pod.uid = format!("{}/{name}", c.namespace);
            for (v, class) in &c.ephemeral_volumes {
                let claim = format!("{name}-{v}");
                claims.push((c.namespace.clone(), claim.clone(), class.clone()));
                pod.volume_claims.push(claim);
            }
            for (t, class) in &c.claim_templates {
                let claim = format!("{t}-{name}");
                claims.push((c.namespace.clone(), claim.clone(), class.clone()));
                pod.volume_claims.push(claim);
            }
            pod.name = name;
            out.push((pod, c.priority.clone()));
        }
    }
    (out, claims)
}
