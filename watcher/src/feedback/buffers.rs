//! CapacityBuffer status as Karpenter v1.14 writes it (kubernetes-sigs/karpenter
//! `pkg/controllers/capacitybuffer/controller.go` and `pkg/controllers/provisioning/buffers.go`):
//! `status.replicas`, `status.podTemplateRef`, `status.podTemplateGeneration`,
//! `status.provisioningStrategy`, and the conditions `ReadyForProvisioning` and `Provisioning`,
//! all from the plan's `capacityBuffers`. Other conditions are left as they are. Writes carry
//! the buffer's `resourceVersion`; a conflict is retried on the next reconcile.

use std::collections::BTreeMap;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use proto::v1 as pb;
use serde_json::{Value, json};

use super::conditions::{condition, patch_status};

/// The API resource of CapacityBuffers.
pub fn resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        k8s_reader::buffer::GROUP,
        k8s_reader::buffer::VERSION,
        "CapacityBuffer",
    ))
}

/// The status a plan asks for, merged into the buffer's current status; `None` when nothing
/// changes.
pub(super) fn merged_status(
    current: &Value,
    want: &pb::CapacityBufferStatus,
    generation: Option<i64>,
    now: &str,
) -> Option<Value> {
    let conditions: Vec<Value> = current
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<Value> = conditions
        .iter()
        // An empty `provisioning` leaves that condition as it is (Karpenter's
        // `computeProvisioningCondition` returning nil).
        .filter(|c| {
            c["type"] != "ReadyForProvisioning"
                && (want.provisioning.is_empty() || c["type"] != "Provisioning")
        })
        .cloned()
        .collect();
    let status = |b: bool| if b { "True" } else { "False" };
    out.push(condition(
        &conditions,
        "ReadyForProvisioning",
        status(want.ready_for_provisioning),
        &want.ready_reason,
        &want.ready_message,
        generation,
        now,
    ));
    if !want.provisioning.is_empty() {
        out.push(condition(
            &conditions,
            "Provisioning",
            &want.provisioning,
            &want.provisioning_reason,
            &want.provisioning_message,
            generation,
            now,
        ));
    }
    let mut next = current.clone();
    if !next.is_object() {
        next = json!({});
    }
    next["conditions"] = Value::Array(out);
    let strategy =
        (!want.provisioning_strategy.is_empty()).then(|| want.provisioning_strategy.clone());
    next["provisioningStrategy"] = json!(strategy);
    if want.ready_for_provisioning {
        next["replicas"] = json!(want.replicas);
        if want.pod_template.is_empty() {
            next["podTemplateRef"] = Value::Null;
            next["podTemplateGeneration"] = Value::Null;
        } else {
            next["podTemplateRef"] = json!({"name": want.pod_template});
            next["podTemplateGeneration"] = json!(want.pod_template_generation);
        }
    }
    // Nulls are absent fields: compare without them.
    let strip = |v: &Value| -> Value {
        match v.as_object() {
            Some(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            None => json!({}),
        }
    };
    (strip(&next) != strip(current)).then_some(next)
}

/// Writes CapacityBuffer status from the latest plan.
pub(super) struct BufferStatus {
    client: kube::Client,
    wanted: BTreeMap<(String, String), pb::CapacityBufferStatus>,
}

// === impl BufferStatus ===

impl BufferStatus {
    /// A writer over the cluster's CapacityBuffers.
    pub(super) fn new(client: kube::Client) -> Self {
        Self {
            client,
            wanted: BTreeMap::new(),
        }
    }

    /// Records what a plan says of each buffer (replacing the previous plan's).
    pub(super) fn note_plan(&mut self, plan: &pb::PlanResponse) {
        self.wanted = plan
            .capacity_buffers
            .iter()
            .map(|b| ((b.namespace.clone(), b.name.clone()), b.clone()))
            .collect();
    }

    /// Writes each buffer's status where it differs from what the plan says.
    pub(super) async fn reconcile(&mut self) {
        for ((ns, name), want) in &self.wanted {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), ns, &resource());
            match write(&api, name, want).await {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => {
                    tracing::warn!(namespace = %ns, buffer = %name, error = %e, "Cannot write CapacityBuffer status")
                }
            }
        }
    }
}

async fn write(
    api: &Api<DynamicObject>,
    name: &str,
    want: &pb::CapacityBufferStatus,
) -> Result<(), kube::Error> {
    let written = patch_status(api, name, |current, now| {
        let status = current.data.get("status").cloned().unwrap_or(json!({}));
        merged_status(&status, want, current.metadata.generation, now)
    })
    .await?;
    if written {
        tracing::info!(buffer = %name, provisioning = %want.provisioning_reason, "CapacityBuffer status written");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want() -> pb::CapacityBufferStatus {
        pb::CapacityBufferStatus {
            namespace: "default".into(),
            name: "spare".into(),
            ready_for_provisioning: true,
            ready_reason: "Resolved".into(),
            ready_message: "Pod template resolved successfully".into(),
            replicas: Some(2),
            pod_template: "chunk".into(),
            pod_template_generation: Some(1),
            provisioning: "False".into(),
            provisioning_reason: "RequiresNewCapacity".into(),
            provisioning_message: "2/2 virtual pods required new capacity, 0 failed".into(),
            ..Default::default()
        }
    }

    #[test]
    fn status_is_written_once_and_transitions_keep_their_time() {
        let s = merged_status(&json!({}), &want(), Some(3), "t1").expect("changed");
        assert_eq!(s["replicas"], 2);
        assert_eq!(s["podTemplateRef"]["name"], "chunk");
        assert_eq!(s["conditions"][0]["type"], "ReadyForProvisioning");
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["conditions"][0]["observedGeneration"], 3);
        assert_eq!(s["conditions"][1]["reason"], "RequiresNewCapacity");
        // Written: nothing more to do.
        assert!(merged_status(&s, &want(), Some(3), "t2").is_none());
        // Fits now: Provisioning turns True at t3, ReadyForProvisioning keeps t1.
        let mut fits = want();
        fits.provisioning = "True".into();
        fits.provisioning_reason = "FitsExistingCapacity".into();
        fits.provisioning_message = "All 2 virtual pods fit on existing capacity".into();
        let s = merged_status(&s, &fits, Some(3), "t3").expect("changed");
        assert_eq!(s["conditions"][0]["lastTransitionTime"], "t1");
        assert_eq!(s["conditions"][1]["lastTransitionTime"], "t3");
        assert_eq!(s["conditions"][1]["status"], "True");
    }

    #[test]
    fn an_unresolved_buffer_keeps_its_replicas() {
        let s = merged_status(&json!({}), &want(), None, "t1").expect("changed");
        let lost = pb::CapacityBufferStatus {
            ready_for_provisioning: false,
            ready_reason: "PodTemplateNotFound".into(),
            ready_message: "podtemplates \"chunk\" not found".into(),
            replicas: None,
            provisioning: "False".into(),
            provisioning_reason: "NotReadyForProvisioning".into(),
            provisioning_message: "Buffer is not ReadyForProvisioning".into(),
            ..want()
        };
        let s = merged_status(&s, &lost, None, "t2").expect("changed");
        assert_eq!(s["replicas"], 2);
        assert_eq!(s["conditions"][0]["status"], "False");
        assert_eq!(s["conditions"][0]["reason"], "PodTemplateNotFound");
    }
}
