//! CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`, read as JSON) with the pod template their
//! reference resolves to, as kubernetes-sigs/karpenter v1.14 resolves it
//! (`pkg/utils/apps/resolve.go` `ResolveCapacityBuffer`): a PodTemplate in the buffer's
//! namespace, or the template and `spec.replicas` of an `apps` Deployment, StatefulSet or
//! ReplicaSet. Fetching the referent is the caller's; this reads what was fetched.

use k8s_openapi::api::core::v1 as core;
use proto::v1 as pb;
use serde_json::Value;

use super::karpenter::{at, resource_map, str_at};
use super::{PriorityClasses, Result, field_err};

/// `spec.provisioningStrategy`'s default.
pub const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";

/// The API group of CapacityBuffers.
pub const GROUP: &str = "autoscaling.x-k8s.io";

/// The API version of CapacityBuffers Karpenter v1.14 serves.
pub const VERSION: &str = "v1beta1";

/// What a buffer's spec refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// `spec.podTemplateRef`: a PodTemplate by name.
    PodTemplate(String),
    /// `spec.scalableRef` of a supported kind (`Deployment`, `StatefulSet`, `ReplicaSet` in
    /// `apps`).
    Workload {
        /// The kind.
        kind: String,
        /// The name.
        name: String,
    },
    /// A reference Karpenter refuses, with its message (`ResolutionFailed`).
    Unsupported(String),
}

/// The reference of a buffer's spec.
pub fn reference(buffer: &Value) -> Reference {
    if let Some(name) = str_at(buffer, &["spec", "podTemplateRef", "name"]) {
        return Reference::PodTemplate(name.to_string());
    }
    if at(buffer, &["spec", "scalableRef"]).is_some() {
        let group = str_at(buffer, &["spec", "scalableRef", "apiGroup"]).unwrap_or_default();
        let kind = str_at(buffer, &["spec", "scalableRef", "kind"]).unwrap_or_default();
        let name = str_at(buffer, &["spec", "scalableRef", "name"]).unwrap_or_default();
        if !group.is_empty() && group != "apps" {
            return Reference::Unsupported(format!("unsupported scalableRef API group {group:?}"));
        }
        return match kind {
            "Deployment" | "StatefulSet" | "ReplicaSet" => Reference::Workload {
                kind: kind.to_string(),
                name: name.to_string(),
            },
            other => Reference::Unsupported(format!("unsupported kind {other:?}")),
        };
    }
    Reference::Unsupported("Neither podTemplateRef nor scalableRef is set".to_string())
}

/// What the reference resolved to.
#[derive(Debug, Clone, Copy)]
pub enum Referent<'a> {
    /// The PodTemplate `spec.podTemplateRef` names.
    PodTemplate(&'a core::PodTemplate),
    /// The workload `spec.scalableRef` names: its pod template and `spec.replicas`.
    Workload {
        /// `spec.template`.
        template: &'a core::PodTemplateSpec,
        /// `spec.replicas` (Kubernetes defaults it to 1).
        replicas: Option<i32>,
    },
    /// Not found (the API's message), or [`Reference::Unsupported`].
    Unresolved(&'a str),
}

fn optional_int(buffer: &Value, field: &str) -> Result<Option<i32>> {
    match at(buffer, &["spec", field]) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| *n >= 0)
            .map(Some)
            .ok_or_else(|| {
                field_err(
                    format!("spec.{field}"),
                    format!("must be an integer of at least 0, got {v}"),
                )
            }),
    }
}

/// Converts a CapacityBuffer and what its reference resolved to.
///
/// # Errors
/// A field the planner cannot use (a negative `replicas`, a bad `limits` quantity, a bad
/// request in the template), named by its path.
pub fn capacity_buffer(
    buffer: &Value,
    referent: Referent<'_>,
    priorities: &PriorityClasses,
) -> Result<pb::CapacityBuffer> {
    let namespace = str_at(buffer, &["metadata", "namespace"])
        .unwrap_or_default()
        .to_string();
    let name = str_at(buffer, &["metadata", "name"])
        .unwrap_or_default()
        .to_string();
    let limits = match at(buffer, &["spec", "limits"]) {
        None | Some(Value::Null) => None,
        v => Some(pb::ResourceList {
            milli: resource_map(v, "spec.limits")?,
            ..pb::ResourceList::default()
        }),
    };
    let (pod_template_ref, scalable_ref) = match reference(buffer) {
        Reference::PodTemplate(t) => (t, String::new()),
        Reference::Workload { kind, name } => (String::new(), format!("{kind}/{name}")),
        Reference::Unsupported(_) => (String::new(), String::new()),
    };
    let mut out = pb::CapacityBuffer {
        uid: str_at(buffer, &["metadata", "uid"])
            .unwrap_or_default()
            .to_string(),
        provisioning_strategy: str_at(buffer, &["spec", "provisioningStrategy"])
            .unwrap_or_default()
            .to_string(),
        pod_template_ref,
        scalable_ref,
        replicas: optional_int(buffer, "replicas")?,
        percentage: optional_int(buffer, "percentage")?,
        limits,
        ..pb::CapacityBuffer::default()
    };
    let template = match referent {
        Referent::PodTemplate(pt) => {
            out.pod_template_generation = pt.metadata.generation;
            pt.template.as_ref()
        }
        Referent::Workload { template, replicas } => {
            out.scalable_replicas = Some(replicas.unwrap_or(1));
            Some(template)
        }
        Referent::Unresolved(message) => {
            let not_found = message.contains("not found");
            out.unresolved_reason = match (reference(buffer), not_found) {
                (Reference::PodTemplate(_), true) => "PodTemplateNotFound",
                (Reference::Workload { .. }, true) => "ScalableRefNotFound",
                _ => "ResolutionFailed",
            }
            .to_string();
            out.unresolved_message = message.to_string();
            None
        }
    };
    if let Some(t) = template {
        let base = match referent {
            Referent::PodTemplate(_) => "template.spec",
            _ => "spec.template.spec",
        };
        let mut pod = super::pod::template_pod(t, base, priorities)?;
        pod.namespace = namespace.clone();
        pod.name = name.clone();
        out.template = Some(pod);
    } else if out.unresolved_reason.is_empty() {
        // A PodTemplate without a template: one chunk of nothing.
        out.template = Some(pb::Pod {
            namespace: namespace.clone(),
            name: name.clone(),
            ..pb::Pod::default()
        });
    }
    out.namespace = namespace;
    out.name = name;
    Ok(out)
}

#[cfg(test)]
mod tests;
