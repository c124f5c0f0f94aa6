//! Termination: why a claim is being terminated ([`Cause`], recorded in its `terminating` entry
//! before anything is deleted) and how it ends: `terminated` when its NodeClaim was deleted (by
//! a user) or a confirmed disruption removes it ([`crate::disruption`]), `failed` for a
//! registration timeout or a vanished instance.
//!
//! The steps, each safe to repeat after a crash: drain the claim's Node through the eviction
//! API ([`super::drain`], each step in the history); delete the claim's Nodes; terminate the
//! instance until the cloud reports it gone (Karpenter retries the delete until NotFound); delete
//! the NodeClaim if it is not being deleted yet and remove the `karpenter.sh/termination`
//! finalizer; write the final state.
//!
//! A Node is deleted like its NodeClaim: registration puts Karpenter's
//! `karpenter.sh/termination` finalizer on it (`pkg/controllers/nodeclaim/lifecycle/
//! registration.go` of kubernetes-sigs/karpenter), so `kubectl delete node` only marks it; the
//! claim then terminates as if its NodeClaim were deleted (drain, instance terminated, NodeClaim
//! deleted), and the finalizer comes off once the instance is gone, as Karpenter's
//! `pkg/controllers/node/termination/controller.go` does. Without it the running instance's
//! kubelet would register the Node again at once.

use std::time::Duration;

use crds::NodeClaim;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::nodeclaim::TERMINATION_FINALIZER;
use super::{Controller, Result, kube_err, node_name};
use crate::ledger::{ClaimState, Event};
use service_shell::clock::Millis;

/// True when `node` carries the termination finalizer.
pub fn has_finalizer(node: &Node) -> bool {
    node.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == TERMINATION_FINALIZER))
}

/// The merge patch that sets `node`'s finalizers to `finalizers` (guarded by its
/// resourceVersion, since it replaces the list).
fn finalizers_patch(node: &Node, finalizers: &[&String]) -> serde_json::Value {
    json!({"metadata": {
        "resourceVersion": node.metadata.resource_version,
        "finalizers": if finalizers.is_empty() { serde_json::Value::Null } else { json!(finalizers) },
    }})
}

// === the Node finalizer steps of the Controller ===

impl Controller {
    /// Puts the termination finalizer on a registered claim's Node when it lacks it (a Node
    /// registered before the finalizer was written, or whose finalizers were edited).
    pub(crate) async fn ensure_node_finalizer(&self, node: &Node) -> Result<()> {
        if has_finalizer(node) || node.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let name = node_name(node);
        let finalizer = TERMINATION_FINALIZER.to_string();
        let current = node.metadata.finalizers.clone().unwrap_or_default();
        let mut all: Vec<&String> = current.iter().collect();
        all.push(&finalizer);
        Api::<Node>::all(self.client.clone())
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(finalizers_patch(node, &all)),
            )
            .await
            .map_err(kube_err(format!("adding the finalizer to Node {name}")))?;
        Ok(())
    }

    /// Removes the termination finalizer from `nodes` (the instance is gone), so that they go.
    /// Each is read again first: deleting it changed its resourceVersion.
    pub(crate) async fn release_nodes(&self, nodes: &[&Node]) -> Result<()> {
        let api = Api::<Node>::all(self.client.clone());
        for listed in nodes.iter().filter(|n| has_finalizer(n)) {
            let name = node_name(listed);
            let Some(node) = api
                .get_opt(&name)
                .await
                .map_err(kube_err(format!("reading Node {name}")))?
            else {
                continue;
            };
            let node = &node;
            let current = node.metadata.finalizers.clone().unwrap_or_default();
            let rest: Vec<&String> = current
                .iter()
                .filter(|f| *f != TERMINATION_FINALIZER)
                .collect();
            match api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(finalizers_patch(node, &rest)),
                )
                .await
            {
                Ok(_) => {
                    let label = |k: &str| {
                        node.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(k))
                            .cloned()
                            .unwrap_or_default()
                    };
                    self.metrics.node_terminated(
                        &label(common::labels::NODEPOOL),
                        &label("topology.kubernetes.io/zone"),
                    );
                    let now = self.clock.since_epoch().as_secs_f64();
                    let since =
                        |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
                            t.as_ref()
                                .map(|t| now - t.0.as_millisecond() as f64 / 1000.0)
                        };
                    self.metrics.node_termination_times(
                        &label(common::labels::NODEPOOL),
                        since(&node.metadata.deletion_timestamp),
                        since(&node.metadata.creation_timestamp),
                    );
                    tracing::info!(node = %name, "Released the Node")
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    return Err(kube_err(format!("removing the finalizer of Node {name}"))(
                        e,
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Why a claim is terminated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Its NodeClaim was deleted (its deletionTimestamp is set).
    Deleted,
    /// No Node registered within the registration timeout.
    RegistrationTimeout,
    /// The instance vanished from the cloud (garbage collection).
    InstanceVanished,
    /// A confirmed disruption (consolidation, drift, expiry) removes it.
    Disrupted,
}

// === impl Cause ===

impl Cause {
    /// Every cause.
    pub const ALL: [Cause; 4] = [
        Cause::Deleted,
        Cause::RegistrationTimeout,
        Cause::InstanceVanished,
        Cause::Disrupted,
    ];

    /// Its name, which starts the detail of the `terminating` history entry (and is the metric
    /// reason, as Karpenter's `nodeclaims_disrupted_total` reasons).
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Deleted => "nodeclaim_deleted",
            Cause::RegistrationTimeout => "registration_timeout",
            Cause::InstanceVanished => "instance_vanished",
            Cause::Disrupted => "disrupted",
        }
    }

    /// The state the claim ends in.
    pub fn end_state(self) -> ClaimState {
        match self {
            Cause::Deleted | Cause::Disrupted => ClaimState::Terminated,
            Cause::RegistrationTimeout | Cause::InstanceVanished => ClaimState::Failed,
        }
    }

    /// The history detail for the `terminating` entry.
    pub fn detail(self, message: &str) -> String {
        format!("{}: {message}", self.as_str())
    }

    /// The cause recorded in the claim's last `terminating` entry (`Deleted` when none is
    /// readable: ending as terminated never hides a failure that was recorded).
    pub fn of(events: &[Event]) -> Cause {
        events
            .iter()
            .rev()
            .find(|e| e.to == ClaimState::Terminating && e.from != Some(ClaimState::Terminating))
            .and_then(|e| {
                Cause::ALL
                    .into_iter()
                    .find(|c| e.detail.starts_with(&format!("{}:", c.as_str())))
            })
            .unwrap_or(Cause::Deleted)
    }
}

pub use super::drain::TERMINATION_TIMESTAMP_ANNOTATION;

/// The deadline a NodeClaim's `karpenter.sh/nodeclaim-termination-timestamp` sets, if it has
/// a valid one: the drain deletes every pod still there by then.
pub fn forced_deadline(nc: &NodeClaim) -> Option<Millis> {
    let v = nc
        .metadata
        .annotations
        .as_ref()?
        .get(TERMINATION_TIMESTAMP_ANNOTATION)?;
    chrono::DateTime::parse_from_rfc3339(v)
        .ok()
        .map(|d| d.timestamp_millis())
}

/// The drain's grace period (counted from `drain_start`) a termination gets: the NodeClaim's
/// own `grace`, shortened to end at its [`forced_deadline`] when it has one.
pub fn effective_grace(
    nc: Option<&NodeClaim>,
    grace: Option<Duration>,
    drain_start: Millis,
) -> Option<Duration> {
    let Some(deadline) = nc.and_then(forced_deadline) else {
        return grace;
    };
    let forced = Duration::from_millis(u64::try_from(deadline - drain_start).unwrap_or(0));
    Some(grace.map_or(forced, |g| g.min(forced)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_read_back_from_the_history() {
        for c in Cause::ALL {
            let e = Event {
                claim: "c".into(),
                from: Some(ClaimState::Launched),
                to: ClaimState::Terminating,
                actor: "a".into(),
                detail: c.detail("why"),
                at: 1,
            };
            assert_eq!(Cause::of(&[e]), c);
        }
        assert_eq!(Cause::of(&[]), Cause::Deleted);
        assert_eq!(Cause::RegistrationTimeout.end_state(), ClaimState::Failed);
    }
}
