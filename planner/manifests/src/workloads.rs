//! Workload controllers (Deployment, ReplicaSet, StatefulSet, Job) and the pods they would
//! create, as Kubernetes objects: what the controllers of a cluster do before the watcher sees
//! the pods. Pods are made from the template only once every object of the input is read, and
//! only after the count of all of them passed the pod limit.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use crate::typed::{FieldError, typed};

/// A workload controller waiting to be expanded.
#[derive(Debug)]
pub(crate) struct Controller {
    pub(crate) kind: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// Pods it wants running.
    pub(crate) desired: usize,
    /// Its pod template.
    pub(crate) template: core::PodTemplateSpec,
    /// StatefulSet claim templates: each pod mounts claim `<template>-<pod>` (with the
    /// template's storage class).
    pub(crate) claim_templates: Vec<(String, Option<String>)>,
    /// For a ReplicaSet: the Deployment that controls it.
    pub(crate) owner_deployment: Option<String>,
    /// For a StatefulSet: its first ordinal (`spec.ordinals.start`, default 0).
    pub(crate) first_ordinal: usize,
}

fn count(v: i32, path: &str) -> Result<usize, FieldError> {
    usize::try_from(v).map_err(|_| (path.to_string(), format!("must not be negative, got {v}")))
}

/// The controlling owner of an object: the reference marked `controller`, else the first.
fn controller_owner(m: &meta::ObjectMeta) -> Option<&meta::OwnerReference> {
    let refs = m.owner_references.as_deref().unwrap_or_default();
    refs.iter()
        .find(|r| r.controller == Some(true))
        .or_else(|| refs.first())
}

/// The parts of a controller the expansion needs.
struct Parts {
    metadata: meta::ObjectMeta,
    template: Option<core::PodTemplateSpec>,
    desired: Result<usize, FieldError>,
    claim_templates: Vec<(String, Option<String>)>,
    first_ordinal: Result<usize, FieldError>,
}

// === impl Controller ===

impl Controller {
    /// Reads a Deployment, ReplicaSet, StatefulSet or Job.
    pub(crate) fn read(api_version: &str, kind: &str, value: &Value) -> Result<Self, FieldError> {
        let replicas = |r: Option<i32>| count(r.unwrap_or(1), "spec.replicas");
        let parts = match kind {
            "Deployment" => {
                let d: apps::Deployment = typed(value, api_version)?;
                let s = d.spec.unwrap_or_default();
                Parts {
                    metadata: d.metadata,
                    desired: replicas(s.replicas),
                    template: Some(s.template),
                    claim_templates: Vec::new(),
                    first_ordinal: Ok(0),
                }
            }
            "ReplicaSet" => {
                let r: apps::ReplicaSet = typed(value, api_version)?;
                let s = r.spec.unwrap_or_default();
                Parts {
                    metadata: r.metadata,
                    desired: replicas(s.replicas),
                    template: s.template,
                    claim_templates: Vec::new(),
                    first_ordinal: Ok(0),
                }
            }
            "StatefulSet" => {
                let st: apps::StatefulSet = typed(value, api_version)?;
                let s = st.spec.unwrap_or_default();
                Parts {
                    metadata: st.metadata,
                    desired: replicas(s.replicas),
                    template: Some(s.template),
                    claim_templates: s
                        .volume_claim_templates
                        .into_iter()
                        .flatten()
                        .filter_map(|t| {
                            let class = t
                                .spec
                                .and_then(|s| s.storage_class_name)
                                .filter(|c| !c.is_empty());
                            t.metadata.name.map(|n| (n, class))
                        })
                        .collect(),
                    first_ordinal: match s.ordinals.and_then(|o| o.start) {
                        Some(start) => count(start, "spec.ordinals.start"),
                        None => Ok(0),
                    },
                }
            }
            _ => {
                let j: batch::Job = typed(value, api_version)?;
                let s = j.spec.unwrap_or_default();
                let desired = if s.suspend == Some(true) {
                    Ok(0)
                } else {
                    job_pods(&s, j.status.as_ref())
                };
                Parts {
                    metadata: j.metadata,
                    desired,
                    template: Some(s.template),
                    claim_templates: Vec::new(),
                    first_ordinal: Ok(0),
                }
            }
        };
        let m = parts.metadata;
        let name = m.name.clone().filter(|n| !n.is_empty());
        let Some(name) = name else {
            return Err(("metadata.name".into(), "missing".into()));
        };
        let desired = parts.desired?;
        let first_ordinal = parts.first_ordinal?;
        let template = parts.template.unwrap_or_default();
        if template
            .spec
            .as_ref()
            .is_none_or(|s| s.containers.is_empty())
        {
            // Kubernetes requires a template with at least one container; without one the
            // replicas would plan as pods that request nothing.
            return Err((
                "spec.template.spec.containers".into(),
                "a workload needs a pod template with at least one container".into(),
            ));
        }
        let owner_deployment = if kind == "ReplicaSet" {
            controller_owner(&m)
                .filter(|o| o.kind == "Deployment" && o.controller == Some(true))
                .map(|o| o.name.clone())
        } else {
            None
        };
        Ok(Self {
            kind: kind.to_string(),
            namespace: m
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".into()),
            name,
            desired,
            template,
            claim_templates: parts.claim_templates,
            owner_deployment,
            first_ordinal,
        })
    }

    /// A pod of this controller named `name`, as the controller would create it: the
    /// template's metadata and spec, owned by the controller, pending.
    fn pod(&self, name: String) -> core::Pod {
        let tm = self.template.metadata.clone().unwrap_or_default();
        let mut spec = self.template.spec.clone().unwrap_or_default();
        for (t, _) in &self.claim_templates {
            spec.volumes
                .get_or_insert_with(Vec::new)
                .push(core::Volume {
                    name: t.clone(),
                    persistent_volume_claim: Some(core::PersistentVolumeClaimVolumeSource {
                        claim_name: format!("{t}-{name}"),
                        read_only: None,
                    }),
                    ..Default::default()
                });
        }
        core::Pod {
            metadata: meta::ObjectMeta {
                name: Some(name),
                namespace: Some(self.namespace.clone()),
                labels: tm.labels,
                annotations: tm.annotations,
                owner_references: Some(vec![meta::OwnerReference {
                    api_version: String::new(),
                    kind: self.kind.clone(),
                    name: self.name.clone(),
                    uid: String::new(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        }
    }
}

/// `min(parallelism, completions - succeeded)` pods of a Job.
fn job_pods(s: &batch::JobSpec, status: Option<&batch::JobStatus>) -> Result<usize, FieldError> {
    let parallelism = count(s.parallelism.unwrap_or(1), "spec.parallelism")?;
    match s.completions {
        Some(c) => {
            let completions = count(c, "spec.completions")?;
            let succeeded = status
                .and_then(|s| s.succeeded)
                .and_then(|s| usize::try_from(s).ok())
                .unwrap_or(0);
            Ok(parallelism.min(completions.saturating_sub(succeeded)))
        }
        None => Ok(parallelism),
    }
}

/// A claim an expanded pod mounts that its controller creates from a template: namespace,
/// claim name and the template's storage class.
pub(crate) type TemplatedClaim = (String, String, Option<String>);

/// Whether a pod counts as one of its controller's running replicas.
fn is_active(p: &core::Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && p.metadata.deletion_timestamp.is_none()
}

/// Active pods per (namespace, controller kind, controller name); a pod of a ReplicaSet counts
/// for its Deployment too.
fn existing(
    pods: &[&core::Pod],
    replica_set_owner: &BTreeMap<(String, String), String>,
) -> BTreeMap<(String, String, String), usize> {
    let mut out: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for pod in pods.iter().filter(|p| is_active(p)) {
        let Some(owner) = controller_owner(&pod.metadata) else {
            continue;
        };
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        *out.entry((ns.clone(), owner.kind.clone(), owner.name.clone()))
            .or_default() += 1;
        if owner.kind == "ReplicaSet" {
            let deployment = replica_set_owner
                .get(&(ns.clone(), owner.name.clone()))
                .cloned()
                .or_else(|| {
                    // Without the ReplicaSet object: Deployments name theirs `<name>-<hash>`.
                    let hash = pod.metadata.labels.as_ref()?.get("pod-template-hash")?;
                    owner
                        .name
                        .strip_suffix(hash.as_str())?
                        .strip_suffix('-')
                        .map(str::to_string)
                });
            if let Some(d) = deployment {
                *out.entry((ns, "Deployment".to_string(), d)).or_default() += 1;
            }
        }
    }
    out
}

/// Calls `emit` with each pending pod the controllers still want, given the pods already in
/// the input (controller index, pod), and returns the claims those pods mount that the
/// controllers create from templates (StatefulSet `volumeClaimTemplates`, generic ephemeral
/// volumes). One pod exists at a time: the caller converts it before the next is made.
pub(crate) fn expand<E>(
    controllers: &[&Controller],
    pods: &[&core::Pod],
    mut emit: impl FnMut(usize, core::Pod) -> Result<(), E>,
) -> Result<Vec<TemplatedClaim>, E> {
    let replica_set_owner: BTreeMap<(String, String), String> = controllers
        .iter()
        .filter_map(|c| {
            let d = c.owner_deployment.clone()?;
            Some(((c.namespace.clone(), c.name.clone()), d))
        })
        .collect();
    let deployments: BTreeSet<(&str, &str)> = controllers
        .iter()
        .filter(|c| c.kind == "Deployment")
        .map(|c| (c.namespace.as_str(), c.name.as_str()))
        .collect();
    let mut taken: BTreeSet<(String, String)> = pods
        .iter()
        .map(|p| {
            (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    let existing = existing(pods, &replica_set_owner);
    let mut claims = Vec::new();
    for (i, c) in controllers.iter().enumerate() {
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
        let ephemeral: Vec<(String, Option<String>)> = c
            .template
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| {
                let e = v.ephemeral.as_ref()?;
                let class = e
                    .volume_claim_template
                    .as_ref()
                    .and_then(|t| t.spec.storage_class_name.clone())
                    .filter(|c| !c.is_empty());
                Some((v.name.clone(), class))
            })
            .collect();
        while missing > 0 {
            // StatefulSet ordinals stop at `start + desired`; others take the next free index.
            if c.kind == "StatefulSet" && index >= c.first_ordinal.saturating_add(c.desired) {
                break;
            }
            let name = format!("{}-{index}", c.name);
            index += 1;
            if !taken.insert((c.namespace.clone(), name.clone())) {
                continue;
            }
            missing -= 1;
            for (v, class) in &ephemeral {
                claims.push((c.namespace.clone(), format!("{name}-{v}"), class.clone()));
            }
            for (t, class) in &c.claim_templates {
                claims.push((c.namespace.clone(), format!("{t}-{name}"), class.clone()));
            }
            emit(i, c.pod(name))?;
        }
    }
    Ok(claims)
}
