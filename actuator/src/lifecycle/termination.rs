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

use cloud::{InstanceState, ProviderId};
use crds::{ConditionStatus, NodeClaim};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::nodeclaim::{INSTANCE_TERMINATING, TERMINATION_FINALIZER, rfc3339, set_condition};
use super::{
    Controller, Result, cloud_err, deleting, drain, kube_err, node_name, nodeclaim, provider_id,
};
use crate::ledger::{self, ClaimRecord, ClaimState, Event, Transition};
use service_shell::clock::{Millis, millis};

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

// === impl Controller ===

impl Controller {
    /// Writes `terminating` with `cause` (before anything is deleted), then starts terminating.
    pub(crate) async fn begin_termination(
        &self,
        claim: &ClaimRecord,
        cause: Cause,
        message: &str,
    ) -> Result<Option<ClaimState>> {
        let failure = (cause.end_state() == ClaimState::Failed).then(|| cause.detail(message));
        if !self
            .write(
                claim,
                ClaimState::Terminating,
                cause.detail(message),
                failure,
                false,
            )
            .await?
        {
            return Ok(None);
        }
        tracing::info!(claim = %claim.name, cause = cause.as_str(), message, "Terminating");
        if cause == Cause::RegistrationTimeout {
            // Karpenter's liveness controller counts the claim it deletes as disrupted.
            self.metrics.nodeclaim_disrupted(
                "registration_timeout",
                &claim.node_pool,
                "",
                "",
                "graceful",
            );
            self.registration
                .record(
                    &self.client,
                    &claim.node_pool,
                    false,
                    &rfc3339(self.clock.now_ms()),
                )
                .await;
        }
        if cause.end_state() == ClaimState::Failed {
            self.metrics.failure(cause.as_str());
        }
        // `terminating` is written: whatever happens now, passes carry the termination on.
        match self.terminate(&claim.name).await {
            Ok(end) => Ok(end.or(Some(ClaimState::Terminating))),
            Err(e) => {
                tracing::warn!(claim = %claim.name, error = %nodeclaim::error_chain(&e), "Termination step failed; retrying next pass");
                Ok(Some(ClaimState::Terminating))
            }
        }
    }

    /// The termination steps of a `terminating` claim (see [`termination`]); returns the final
    /// state once written, `None` while the instance is still shutting down.
    pub(super) async fn terminate(&self, name: &str) -> Result<Option<ClaimState>> {
        let now = self.clock.now_ms();
        let owner = &self.options.owner;
        let Some(claim) = self
            .ledger
            .acquire_claim(owner, name, now, millis(self.options.lease))
            .await?
        else {
            return Ok(None);
        };
        if claim.state != ClaimState::Terminating {
            return Ok(None);
        }
        let mut nc = self
            .nodeclaims()
            .get_opt(name)
            .await
            .map_err(kube_err(format!("reading NodeClaim {name}")))?;
        if let Some(inst) = &claim.instance {
            let nodes = self
                .nodes()
                .list(&ListParams::default())
                .await
                .map_err(kube_err("listing Nodes".into()))?
                .items;
            let of_claim: Vec<&Node> = nodes
                .iter()
                .filter(|n| provider_id(n) == Some(inst.provider_id.as_str()))
                .collect();
            // Drain first (every path that deletes a NodeClaim or a Node comes through here),
            // unless the history says this termination drained already.
            if let Some(node) = of_claim
                .iter()
                .find(|n| n.metadata.deletion_timestamp.is_none())
                .or(of_claim.first())
            {
                let progress = drain::Progress::of(&self.ledger.events(name).await?);
                if !progress.done {
                    let grace = nc
                        .as_ref()
                        .and_then(|nc| nc.spec.termination_grace_period.as_deref())
                        .and_then(|g| common::duration::parse_std_duration(g).ok())
                        .or_else(|| {
                            claim
                                .spec
                                .termination_grace_period
                                .and_then(|s| u64::try_from(s).ok())
                                .map(Duration::from_secs)
                        });
                    // Node repair's `karpenter.sh/nodeclaim-termination-timestamp` ends the
                    // drain at that time (see [`crate::repair`]).
                    let grace =
                        effective_grace(nc.as_ref(), grace, progress.started_at.unwrap_or(now));
                    if !self
                        .drain(name, node, nc.as_ref(), grace, &progress)
                        .await?
                    {
                        return Ok(None);
                    }
                }
            }
            for n in of_claim
                .iter()
                .filter(|n| n.metadata.deletion_timestamp.is_none())
            {
                let node = node_name(n);
                match self.nodes().delete(&node, &DeleteParams::default()).await {
                    Ok(_) => tracing::info!(claim = %name, %node, "Deleted the Node"),
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(kube_err(format!("deleting Node {node}"))(e)),
                }
            }
            let pid: ProviderId = match inst.provider_id.parse() {
                Ok(p) => p,
                Err(e) => {
                    return Err(cloud_err(format!("claim {name}: provider ID"))(
                        cloud::Error::ProviderId(e),
                    ));
                }
            };
            match self.cloud.delete(&pid).await {
                Ok(()) => {
                    // Shutting down: look again next pass, until the cloud reports it gone.
                    if let Some(nc) = &mut nc {
                        self.update_status(nc, |s, now| {
                            set_condition(
                                s.conditions.get_or_insert_with(Vec::new),
                                INSTANCE_TERMINATING,
                                ConditionStatus::True,
                                INSTANCE_TERMINATING,
                                "",
                                now,
                            )
                        })
                        .await?;
                    }
                    let gone = matches!(
                        self.cloud.get(&pid).await,
                        Ok(cloud::Instance {
                            state: InstanceState::Terminated,
                            ..
                        }) | Err(cloud::Error::NotFound { .. })
                    );
                    if !gone {
                        return Ok(None);
                    }
                }
                Err(cloud::Error::NotFound { .. }) => {}
                Err(e) => return Err(cloud_err(format!("terminating instance {pid}"))(e)),
            }
            // The instance is gone: its Nodes may go too.
            self.release_nodes(&of_claim).await?;
        }
        if let Some(nc) = &nc {
            self.release_nodeclaim(nc).await?;
        }
        let cause = Cause::of(&self.ledger.events(name).await?);
        let end = cause.end_state();
        let mut t = Transition::new(
            name,
            owner,
            ClaimState::Terminating,
            end,
            format!("{}: instance gone, NodeClaim released", cause.as_str()),
        );
        t.release = true;
        match self.ledger.transition(&t, self.clock.now_ms()).await {
            Ok(()) => {}
            Err(ledger::Error::LeaseLost { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        tracing::info!(claim = %name, state = %end, "Terminated");
        Ok(Some(end))
    }

    /// Deletes the NodeClaim (when it is not being deleted yet) and removes the
    /// `karpenter.sh/termination` finalizer, so that it goes away.
    pub(super) async fn release_nodeclaim(&self, nc: &NodeClaim) -> Result<()> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let api = self.nodeclaims();
        let mut current = nc.clone();
        let nc = &mut current;
        if !deleting(nc) {
            match api.delete(&name, &DeleteParams::default()).await {
                // Held by finalizers: it is now being deleted, with a new resourceVersion.
                Ok(res) => match res.left() {
                    Some(held) => *nc = held,
                    None => return Ok(()),
                },
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(kube_err(format!("deleting NodeClaim {name}"))(e)),
            }
        }
        let finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
        if finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
            let rest: Vec<&String> = finalizers
                .iter()
                .filter(|f| *f != TERMINATION_FINALIZER)
                .collect();
            let patch = json!({"metadata": {
                "resourceVersion": nc.metadata.resource_version,
                "finalizers": if rest.is_empty() { serde_json::Value::Null } else { json!(rest) },
            }});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => {
                    let label = |k: &str| crate::lifecycle::nodeclaim::label(nc, k);
                    self.metrics.nodeclaim_terminated(
                        &label(common::labels::NODEPOOL),
                        &label("karpenter.sh/capacity-type"),
                        &label("topology.kubernetes.io/zone"),
                    );
                    let now = self.clock.since_epoch().as_secs_f64();
                    let secs =
                        |t: &k8s_openapi::jiff::Timestamp| t.as_millisecond() as f64 / 1000.0;
                    let terminating = nc
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .and_then(|cs| cs.iter().find(|c| c.type_ == INSTANCE_TERMINATING))
                        .and_then(|c| {
                            c.last_transition_time
                                .parse::<k8s_openapi::jiff::Timestamp>()
                                .ok()
                        });
                    self.metrics.nodeclaim_termination_times(
                        &label(common::labels::NODEPOOL),
                        nc.metadata
                            .deletion_timestamp
                            .as_ref()
                            .map(|t| now - secs(&t.0)),
                        terminating.map(|t| now - secs(&t)),
                    );
                    tracing::info!(nodeclaim = %name, "Released the NodeClaim")
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    return Err(kube_err(format!(
                        "removing the finalizer of NodeClaim {name}"
                    ))(e));
                }
            }
        }
        Ok(())
    }

    /// A terminal claim's NodeClaim (a failed launch, or a crash before its release) goes away.
    pub(super) async fn sweep(&self, claim: &ClaimRecord, nc: Option<&NodeClaim>) -> Result<()> {
        let Some(nc) = nc else {
            return Ok(());
        };
        tracing::info!(claim = %claim.name, state = %claim.state, "Removing the NodeClaim of a finished claim");
        self.release_nodeclaim(nc).await
    }
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
