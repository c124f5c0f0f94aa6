//! The in-process controllers that make the simulated cluster behave like a real one: the
//! simulated kubelet ([`kubelet`]), the workload controllers ([`workloads`]: Deployments,
//! PodDisruptionBudget status, pod garbage collection), a minimal kube-scheduler
//! ([`scheduler`]), the NoExecute taint manager ([`taint_manager`]) and graceful pod
//! termination ([`termination`]).
//!
//! Every controller is level-triggered: it reads the whole store and the cloud, converges, and
//! sleeps until something changes. Writes that change nothing are not recorded, so the loops
//! settle.

pub mod ec2_kubelet;
pub mod kubelet;
pub mod scheduler;
pub mod taint_manager;
pub mod termination;
pub mod workloads;

use std::sync::Arc;

use serde_json::Value;

use crate::api::{KindInfo, Store};

/// Looks up a built-in kind the controllers rely on (always registered).
pub(crate) fn kind(store: &Store, group: &str, resource: &str) -> Option<KindInfo> {
    store.kinds().find(group, "v1", resource)
}

/// `metadata.name` of an object.
pub(crate) fn name_of(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or("")
}

/// `metadata.namespace` of an object (`""` for cluster-scoped objects).
pub(crate) fn namespace_of(o: &Value) -> &str {
    o["metadata"]["namespace"].as_str().unwrap_or("")
}

/// Shared context of the controllers.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub(crate) store: Arc<Store>,
    pub(crate) cloud: crate::cloud::SimCloud,
}
