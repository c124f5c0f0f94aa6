//! CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`, Karpenter v1.14 behind its `CapacityBuffer`
//! feature gate): spare capacity declared as N copies of a pod template.

use serde::{Deserialize, Serialize};

use super::{Pod, Resources};

/// A CapacityBuffer with the pod template its reference resolved to (kubernetes-sigs/karpenter
/// `pkg/apis/autoscaling/v1beta1/capacitybuffer.go`; the reference is resolved outside the
/// engine, as Karpenter's `pkg/utils/apps/resolve.go` does, and the engine does the rest).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityBuffer {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID (virtual pods' UIDs derive from it).
    pub uid: String,
    /// `spec.provisioningStrategy`; `None`: `buffer.x-k8s.io/active-capacity`.
    pub provisioning_strategy: Option<String>,
    /// `spec.podTemplateRef.name`.
    pub pod_template_ref: Option<String>,
    /// `spec.scalableRef` as `Kind/name` (for messages).
    pub scalable_ref: Option<String>,
    /// `spec.replicas`.
    pub replicas: Option<i32>,
    /// `spec.percentage` (of the scalable workload's replicas).
    pub percentage: Option<i32>,
    /// `spec.limits`: total requests the buffer's chunks may add up to.
    pub limits: Option<Resources>,
    /// One chunk: the pod the referenced PodTemplate or workload template describes.
    /// `None`: the reference did not resolve (see `unresolved`).
    pub template: Option<Pod>,
    /// `metadata.generation` of the referenced PodTemplate.
    pub pod_template_generation: Option<i64>,
    /// `spec.replicas` of the scalableRef workload (Kubernetes' default 1 when unset).
    pub scalable_replicas: Option<i32>,
    /// Why the reference did not resolve, as Karpenter's `ReadyForProvisioning` condition says
    /// it: reason (`PodTemplateNotFound`, `ScalableRefNotFound`, `ResolutionFailed`) and
    /// message.
    pub unresolved: Option<(String, String)>,
}
