//! Draining a Node before its instance is terminated, as Karpenter's termination controller
//! does, through the eviction API only (a PodDisruptionBudget is never bypassed before the
//! NodeClaim's `terminationGracePeriod` runs out).
//!
//! - The Node is tainted `karpenter.sh/disrupted:NoSchedule`, so nothing new lands on it.
//! - Pods left alone: terminal ones (Succeeded, Failed), mirror pods (static pods of the
//!   kubelet), DaemonSet pods, and pods that tolerate the disrupted taint (they would only come
//!   back).
//! - Non-critical pods are evicted first; critical ones (priority class
//!   `system-cluster-critical` or `system-node-critical`) only once every non-critical pod is
//!   gone, so that the cluster's plumbing serves the others to the end.
//! - A 429 (a PDB allows no disruption now) is retried with a per-pod exponential backoff owned
//!   here: the eviction client is built with kube's default retry off (it would retry a 429
//!   itself for minutes inside one call).
//! - A pod with an active `karpenter.sh/do-not-disrupt` annotation (`true`, or a duration not
//!   yet run out since the pod started) is never evicted: the drain waits for it, as Karpenter's
//!   (`IsEvictable`, `IsDoNotDisruptActive` in `pkg/utils/pod/scheduling.go`; the eviction
//!   queue in `pkg/controllers/node/termination/terminator/eviction.go`). Without a
//!   `terminationGracePeriod` it holds the Node until it goes.
//! - With a `terminationGracePeriod` (counted from the drain's start) each pod left is deleted
//!   once the time left is within its own `terminationGracePeriodSeconds` (Karpenter's
//!   `needsForceDelete`), whatever its PDB or do-not-disrupt annotation, so that it is gone by
//!   the deadline.
//! - The drain is done when no pod it waits for is left (pods being deleted count until gone).
//!
//! Every step is in the claim's history as a `terminating → terminating` entry ([`STARTED`],
//! [`EVICTED`], [`DELETED`], [`DONE`]), written before the next action; [`Progress::of`] reads
//! them back, so a restarted actuator resumes the drain where it was and never drains a Node
//! that its history says is drained.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use serde_json::{Value, json};

use crate::ledger::{ClaimState, Event};
use service_shell::clock::Millis;

/// The taint that keeps new pods off a Node being disrupted.
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
/// The annotation of a mirror pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Priority classes whose pods are evicted last.
pub const CRITICAL_PRIORITY_CLASSES: [&str; 2] =
    ["system-cluster-critical", "system-node-critical"];

/// The NodeClaim annotation holding the time its termination deletes every pod left.
pub const TERMINATION_TIMESTAMP_ANNOTATION: &str = "karpenter.sh/nodeclaim-termination-timestamp";
/// The `reason` of `karpenter_pods_drained_total`: the NodeClaim's `DisruptionReason`
/// condition's reason when it is True, else `Forceful Termination` (Karpenter's
/// `evictionReason`, `pkg/controllers/node/termination/terminator/eviction.go`); empty when the
/// node has no NodeClaim.
fn eviction_reason(nc: Option<&crds::NodeClaim>) -> String {
    let Some(nc) = nc else {
        return String::new();
    };
    nc.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter().find(|c| {
                c.type_ == "DisruptionReason" && c.status == crds::common::ConditionStatus::True
            })
        })
        .map_or_else(
            || "Forceful Termination".to_string(),
            |c| c.reason.clone().unwrap_or_default(),
        )
}

/// Karpenter's Event reason announcing that time.
pub const TERMINATION_GRACE_PERIOD_EXPIRING: &str = "TerminationGracePeriodExpiring";

/// History detail of the drain's start (the taint follows).
pub const STARTED: &str = "drain: started";
/// History detail prefix of one evicted pod (`drain: evicted NAMESPACE/NAME`).
pub const EVICTED: &str = "drain: evicted ";
/// History detail prefix of a pod deleted past the grace period.
pub const DELETED: &str = "drain: deleted after terminationGracePeriod ";
/// History detail of the drain's end.
pub const DONE: &str = "drain: done";

/// First and largest eviction retry delay after a 429 or a failure.
pub const BACKOFF_BASE_MS: Millis = 500;
/// See [`BACKOFF_BASE_MS`].
pub const BACKOFF_MAX_MS: Millis = 10_000;

/// What the claim's history says about its drain (entries after its last entry into
/// `terminating`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// When the drain started.
    pub started_at: Option<Millis>,
    /// Pods evicted (or deleted) so far, as `namespace/name`.
    pub evicted: BTreeSet<String>,
    /// True once the drain is done.
    pub done: bool,
}

// === impl Progress ===

impl Progress {
    /// Reads the drain's progress from a claim's history.
    pub fn of(events: &[Event]) -> Progress {
        let from = events
            .iter()
            .rposition(|e| {
                e.to == ClaimState::Terminating && e.from != Some(ClaimState::Terminating)
            })
            .map_or(0, |i| i + 1);
        let mut p = Progress::default();
        for e in &events[from..] {
            if e.to != ClaimState::Terminating {
                continue;
            }
            if e.detail.starts_with(STARTED) {
                p.started_at.get_or_insert(e.at);
            } else if let Some(pod) = e.detail.strip_prefix(EVICTED) {
                p.evicted.insert(pod.to_string());
            } else if let Some(pod) = e.detail.strip_prefix(DELETED) {
                p.evicted.insert(pod.to_string());
            } else if e.detail.starts_with(DONE) {
                p.done = true;
            }
        }
        p
    }
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn tolerates_disrupted(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some_and(|ts| {
            ts.iter().any(|t| {
                let op = t.operator.as_deref().unwrap_or("Equal");
                let key_ok = match t.key.as_deref() {
                    None | Some("") => op == "Exists",
                    Some(k) => k == DISRUPTED_TAINT,
                };
                let effect_ok = t
                    .effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == "NoSchedule");
                let value_ok = op == "Exists" || t.value.as_deref().unwrap_or("").is_empty();
                key_ok && effect_ok && value_ok
            })
        })
}

/// How the drain treats a pod: `None` when it is left alone (terminal, mirror, DaemonSet,
/// tolerating the disrupted taint), else `Some(critical)`.
pub fn classify(pod: &Pod) -> Option<bool> {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return None;
    }
    if pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
    {
        return None;
    }
    if pod
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|os| os.iter().any(|o| o.kind == "DaemonSet"))
    {
        return None;
    }
    if tolerates_disrupted(pod) {
        return None;
    }
    let class = pod
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref());
    Some(class.is_some_and(|c| CRITICAL_PRIORITY_CLASSES.contains(&c)))
}

/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// What to do with the pods on the Node now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Pods to evict now, as `(namespace, name)`.
    pub targets: Vec<(String, String)>,
    /// Pods to delete now (the grace period's deadline is within their own grace period).
    pub deletes: Vec<(String, String)>,
    /// Pods the drain still waits for (targets, pods kept by do-not-disrupt and pods being
    /// deleted included).
    pub remaining: usize,
}

fn millis_of(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Option<Millis> {
    let v = serde_json::to_value(t).ok()?;
    chrono::DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|d| d.timestamp_millis())
}

/// True while `pod`'s `karpenter.sh/do-not-disrupt` annotation protects it at `now`: `true`,
/// or a duration not yet run out since the pod started (active when the start is unknown); an
/// invalid value protects nothing (Karpenter's `IsDoNotDisruptActive`).
pub fn do_not_disrupt(pod: &Pod, now: Millis) -> bool {
    let Some(v) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(common::labels::DO_NOT_DISRUPT))
    else {
        return false;
    };
    if v == "true" {
        return true;
    }
    let Ok(d) = common::duration::parse_std_duration(v) else {
        return false;
    };
    match pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .and_then(millis_of)
    {
        Some(start) => now < start.saturating_add(service_shell::clock::millis(d)),
        None => true,
    }
}

/// True when `pod` must be deleted now to be gone by `deadline`: the time left is within its
/// `terminationGracePeriodSeconds` (Karpenter's `needsForceDelete`).
fn force_delete(pod: &Pod, now: Millis, deadline: Option<Millis>) -> bool {
    let Some(deadline) = deadline else {
        return false;
    };
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_POD_GRACE_SECONDS);
    now >= deadline.saturating_sub(grace.saturating_mul(1000))
}

/// The pods of this round at `now`, with the NodeClaim's `terminationGracePeriod` ending at
/// `deadline` (if it has one): pods whose deadline is near are deleted, across every tier;
/// the others are evicted, the non-critical ones while any is left, else the critical ones,
/// except pods kept by do-not-disrupt, which are waited for. Pods already being deleted are
/// waited for, not evicted again.
pub fn round(pods: &[Pod], now: Millis, deadline: Option<Millis>) -> Round {
    let drained: Vec<(&Pod, bool)> = pods
        .iter()
        .filter_map(|p| classify(p).map(|c| (p, c)))
        .collect();
    let key = |p: &Pod| {
        (
            p.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            p.metadata.name.clone().unwrap_or_default(),
        )
    };
    let live: Vec<(&Pod, bool)> = drained
        .iter()
        .filter(|(p, _)| p.metadata.deletion_timestamp.is_none())
        .copied()
        .collect();
    let deletes: Vec<_> = live
        .iter()
        .filter(|(p, _)| force_delete(p, now, deadline))
        .map(|(p, _)| key(p))
        .collect();
    let graceful: Vec<(&Pod, bool)> = live
        .into_iter()
        .filter(|(p, _)| !force_delete(p, now, deadline))
        .collect();
    let any_non_critical = drained.iter().any(|(_, c)| !c);
    let targets = graceful
        .iter()
        .filter(|(p, critical)| (!critical || !any_non_critical) && !do_not_disrupt(p, now))
        .map(|(p, _)| key(p))
        .collect();
    Round {
        targets,
        deletes,
        remaining: drained.len(),
    }
}

/// The taints of `node` with `karpenter.sh/disrupted:NoSchedule` added; `None` when it has it.
pub fn with_disrupted_taint(node: &Node) -> Option<Vec<Taint>> {
    let mut taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if taints
        .iter()
        .any(|t| t.key == DISRUPTED_TAINT && t.effect == "NoSchedule")
    {
        return None;
    }
    taints.push(Taint {
        key: DISRUPTED_TAINT.into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    });
    Some(taints)
}

/// The merge patch that adds the disrupted taint to `node` (guarded by its resourceVersion,
/// since it replaces the taint list), or `None` when it has it.
pub fn taint_patch(node: &Node) -> Option<Value> {
    let taints = with_disrupted_taint(node)?;
    Some(json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {"taints": taints},
    }))
}

/// The merge patch that removes the disrupted taint from `node`, or `None` when it has none.
pub fn untaint_patch(node: &Node) -> Option<Value> {
    let taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let kept: Vec<&Taint> = taints.iter().filter(|t| t.key != DISRUPTED_TAINT).collect();
    if kept.len() == taints.len() {
        return None;
    }
    Some(json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {"taints": kept},
    }))
}

/// True when `node` carries the disrupted taint.
pub fn is_tainted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == DISRUPTED_TAINT))
}

/// Per-pod eviction backoff (in memory: after a restart the first attempt comes at once, which
/// is what a fresh drain would do too).
#[derive(Debug, Default)]
pub struct Backoff {
    pods: HashMap<String, (u32, Millis)>,
}

// === impl Backoff ===

impl Backoff {
    /// True when `pod` may be tried at `now`.
    pub fn ready(&self, pod: &str, now: Millis) -> bool {
        self.pods.get(pod).is_none_or(|(_, at)| *at <= now)
    }

    /// Records a failed attempt: the next comes after 0.5 s, 1 s, 2 s … up to 10 s.
    pub fn failed(&mut self, pod: &str, now: Millis) -> Millis {
        let e = self.pods.entry(pod.to_string()).or_insert((0, 0));
        let delay = (BACKOFF_BASE_MS << e.0.min(10)).min(BACKOFF_MAX_MS);
        e.0 += 1;
        e.1 = now + delay;
        delay
    }

    /// Forgets `pod` (evicted or gone).
    pub fn clear(&mut self, pod: &str) {
        self.pods.remove(pod);
    }
}

// === the drain step of the Controller ===

impl super::Controller {
    /// Writes one drain step into the claim's history (`terminating → terminating`, keeping the
    /// lease the termination holds).
    async fn note(&self, claim: &str, detail: String) -> super::Result<bool> {
        let t = crate::ledger::Transition::new(
            claim,
            &self.options.owner,
            ClaimState::Terminating,
            ClaimState::Terminating,
            detail,
        );
        match self.ledger.transition(&t, self.clock.now_ms()).await {
            Ok(()) => Ok(true),
            Err(crate::ledger::Error::LeaseLost { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// One drain round on `node` for the terminating claim `claim` (leased by the caller):
    /// `Ok(true)` once the drain is done (and recorded), `Ok(false)` while pods are left.
    ///
    /// # Errors
    /// When the ledger, the Node or the pods cannot be read or written.
    pub(crate) async fn drain(
        &self,
        claim: &str,
        node: &Node,
        nc: Option<&crds::NodeClaim>,
        termination_grace: Option<std::time::Duration>,
        progress: &Progress,
    ) -> super::Result<bool> {
        use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};

        let node_name = node.metadata.name.clone().unwrap_or_default();
        let now = self.clock.now_ms();
        let started_at = match progress.started_at {
            Some(t) => t,
            None => {
                if !self
                    .note(claim, format!("{STARTED} on node {node_name}"))
                    .await?
                {
                    return Ok(false);
                }
                tracing::info!(%claim, node = %node_name, "Draining");
                now
            }
        };
        if let Some(patch) = taint_patch(node) {
            Api::<Node>::all(self.client.clone())
                .patch(&node_name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(super::kube_err(format!(
                    "tainting Node {node_name} disrupted"
                )))?;
        }
        let pods = Api::<Pod>::all(self.client.clone())
            .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
            .await
            .map_err(super::kube_err(format!(
                "listing the pods of Node {node_name}"
            )))?
            .items;
        let deadline =
            termination_grace.map(|g| started_at.saturating_add(service_shell::clock::millis(g)));
        if let (Some(deadline), Some(nc)) = (deadline, nc) {
            self.announce_deadline(nc, node, deadline).await;
        }
        let r = round(&pods, now, deadline);
        if r.remaining == 0 {
            self.note(
                claim,
                format!(
                    "{DONE} (node {node_name}, {} pods evicted)",
                    progress.evicted.len()
                ),
            )
            .await?;
            // As Karpenter, only a node with a NodeClaim counts.
            if nc.is_some() {
                let pool = node
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(common::labels::NODEPOOL))
                    .map_or("", String::as_str);
                self.metrics.node_drained(pool);
            }
            tracing::info!(%claim, node = %node_name, "Drained");
            return Ok(true);
        }
        let targets = r
            .deletes
            .into_iter()
            .map(|t| (t, true))
            .chain(r.targets.into_iter().map(|t| (t, false)));
        for ((ns, name), delete) in targets {
            let key = format!("{ns}/{name}");
            let ready = self
                .backoff
                .lock()
                .map(|b| b.ready(&key, now))
                .unwrap_or(true);
            if !ready {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(self.evictions.clone(), &ns);
            let (result, outcome, record) = if delete {
                // As Karpenter's `forceDelete`: the pod's grace period is cut to the time left
                // before the deadline (at least 1 s), and an Event says so.
                let left_s = deadline.map_or(1, |d| (d.saturating_sub(now) / 1000).max(1));
                let grace = pods
                    .iter()
                    .find(|p| {
                        p.metadata.name.as_deref() == Some(name.as_str())
                            && p.metadata.namespace.as_deref() == Some(ns.as_str())
                    })
                    .and_then(|p| p.spec.as_ref()?.termination_grace_period_seconds)
                    .unwrap_or(30);
                let r = api
                    .delete(
                        &name,
                        &DeleteParams {
                            grace_period_seconds: Some(left_s.min(grace).max(1) as u32),
                            ..DeleteParams::default()
                        },
                    )
                    .await
                    .map(|_| ());
                if r.is_ok() {
                    self.disrupted_event(&ns, &name, left_s.min(grace).max(1), grace, deadline)
                        .await;
                }
                (r, "deleted", DELETED)
            } else {
                let r = api.evict(&name, &EvictParams::default()).await.map(|_| ());
                (r, "evicted", EVICTED)
            };
            match result {
                Ok(()) => {
                    self.metrics.eviction(outcome);
                    if !delete {
                        self.metrics.eviction_request(200);
                        self.metrics.pod_drained(&eviction_reason(nc));
                    }
                    if let Ok(mut b) = self.backoff.lock() {
                        b.clear(&key);
                    }
                    if !self.note(claim, format!("{record}{key}")).await? {
                        return Ok(false);
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    self.metrics.eviction("not_found");
                    if !delete {
                        self.metrics.eviction_request(404);
                    }
                    if let Ok(mut b) = self.backoff.lock() {
                        b.clear(&key);
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 429 => {
                    self.metrics.eviction("pdb_blocked");
                    if !delete {
                        self.metrics.eviction_request(429);
                    }
                    let delay = self
                        .backoff
                        .lock()
                        .map(|mut b| b.failed(&key, now))
                        .unwrap_or(BACKOFF_BASE_MS);
                    tracing::debug!(%claim, pod = %key, delay_ms = delay, message = %s.message, "Eviction refused by a PodDisruptionBudget; retrying later");
                }
                Err(e) => {
                    self.metrics.eviction("error");
                    if let (false, kube::Error::Api(s)) = (delete, &e) {
                        self.metrics.eviction_request(s.code);
                    }
                    let delay = self
                        .backoff
                        .lock()
                        .map(|mut b| b.failed(&key, now))
                        .unwrap_or(BACKOFF_BASE_MS);
                    tracing::warn!(%claim, pod = %key, delay_ms = delay, error = %e, "Eviction failed; retrying later");
                }
            }
        }
        Ok(false)
    }

    /// Karpenter's announcement of a termination deadline (`pkg/controllers/nodeclaim/
    /// lifecycle/controller.go` and `pkg/controllers/node/termination/controller.go`, Events
    /// from `pkg/controllers/node/termination/terminator/events/events.go`): the NodeClaim is
    /// annotated `karpenter.sh/nodeclaim-termination-timestamp`, and the NodeClaim and its Node
    /// each get a Warning `TerminationGracePeriodExpiring`, "All pods will be deleted by
    /// <time>". Once per termination: a NodeClaim that carries the annotation is left alone.
    async fn announce_deadline(&self, nc: &crds::NodeClaim, node: &Node, deadline: Millis) {
        use kube::api::{Api, Patch, PatchParams};
        if nc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(TERMINATION_TIMESTAMP_ANNOTATION))
        {
            return;
        }
        let name = nc.metadata.name.clone().unwrap_or_default();
        let at = super::rfc3339(deadline);
        let patch = json!({"metadata": {"annotations": {TERMINATION_TIMESTAMP_ANNOTATION: at}}});
        if let Err(e) = Api::<crds::NodeClaim>::all(self.client.clone())
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            tracing::warn!(nodeclaim = %name, error = %e, "Cannot annotate the termination time");
            return;
        }
        let note = format!("All pods will be deleted by {at}");
        let nc_ref = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("karpenter.sh/v1".into()),
            kind: Some("NodeClaim".into()),
            name: Some(name.clone()),
            uid: nc.metadata.uid.clone(),
            ..Default::default()
        };
        let node_ref = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: node.metadata.name.clone(),
            uid: node.metadata.uid.clone(),
            ..Default::default()
        };
        for r in [nc_ref, node_ref] {
            self.event(
                &r,
                kube::runtime::events::EventType::Warning,
                TERMINATION_GRACE_PERIOD_EXPIRING,
                note.clone(),
            )
            .await;
        }
    }

    /// Karpenter's `Disrupted` Event on a pod deleted for the deadline (`DisruptPodDelete`).
    async fn disrupted_event(
        &self,
        namespace: &str,
        name: &str,
        granted_s: i64,
        own_grace_s: i64,
        deadline: Option<Millis>,
    ) {
        let at = deadline
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S %z UTC").to_string())
            .unwrap_or_default();
        let r = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..Default::default()
        };
        self.event(
            &r,
            kube::runtime::events::EventType::Normal,
            "Disrupted",
            format!(
                "Deleting the pod to accommodate the terminationTime {at} of the node. The pod was granted {granted_s} seconds of grace-period of its {own_grace_s} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation."
            ),
        )
        .await;
    }

    async fn event(
        &self,
        r: &k8s_openapi::api::core::v1::ObjectReference,
        type_: kube::runtime::events::EventType,
        reason: &str,
        note: String,
    ) {
        let ev = kube::runtime::events::Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "Terminating".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, r).await {
            tracing::warn!(object = ?r.name, reason, error = %e, "Cannot write an Event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, extra: Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [], "nodeName": "n1"},
            "status": {"phase": "Running"}
        });
        merge(&mut v, extra);
        serde_json::from_value(v).expect("pod")
    }

    fn merge(a: &mut Value, b: Value) {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    #[test]
    fn pods_left_alone_and_critical_ones_last() {
        let web = pod("web", json!({}));
        let done = pod("job", json!({"status": {"phase": "Succeeded"}}));
        let mirror = pod(
            "kube-proxy",
            json!({"metadata": {"annotations": {MIRROR_ANNOTATION: "x"}}}),
        );
        let ds = pod(
            "agent",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "a", "uid": "u"}]}}),
        );
        let tolerant = pod(
            "tolerant",
            json!({"spec": {"tolerations": [{"key": DISRUPTED_TAINT, "operator": "Exists"}]}}),
        );
        let all = pod(
            "all",
            json!({"spec": {"tolerations": [{"operator": "Exists"}]}}),
        );
        let other_toleration = pod(
            "other",
            json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}}),
        );
        let dns = pod(
            "coredns",
            json!({"spec": {"priorityClassName": "system-cluster-critical"}}),
        );
        assert_eq!(classify(&web), Some(false));
        assert_eq!(classify(&other_toleration), Some(false));
        for p in [&done, &mirror, &ds, &tolerant, &all] {
            assert_eq!(classify(p), None, "{:?}", p.metadata.name);
        }
        assert_eq!(classify(&dns), Some(true));

        let pods = vec![web.clone(), dns.clone(), ds, mirror, done];
        let r = round(&pods, 0, None);
        assert_eq!(r.targets, [("default".to_string(), "web".to_string())]);
        assert_eq!(r.remaining, 2);
        let r = round(std::slice::from_ref(&dns), 0, None);
        assert_eq!(r.targets, [("default".to_string(), "coredns".to_string())]);
        // A non-critical pod still terminating holds the critical ones back.
        let leaving = pod(
            "leaving",
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        );
        let r = round(&[leaving.clone(), dns.clone()], 0, None);
        assert!(r.targets.is_empty());
        assert_eq!(r.remaining, 2);
        // At the deadline everything left is deleted, except pods already going.
        let r = round(&[web, dns, leaving], 1_000_000, Some(1_000_000));
        assert!(r.targets.is_empty());
        assert_eq!(r.deletes.len(), 2);
        assert_eq!(r.remaining, 3);
    }

    /// Karpenter's `pkg/controllers/node/termination/suite_test.go` ("should not evict pods
    /// that have the do-not-disrupt annotation" and the terminationGracePeriod cases):
    /// do-not-disrupt pods are waited for, not evicted, until the deadline is within their own
    /// grace period; a duration runs from the pod's start.
    #[test]
    fn do_not_disrupt_pods_wait_for_the_deadline_minus_their_grace() {
        let start = "2026-01-01T00:00:00Z";
        let t0 = chrono::DateTime::parse_from_rfc3339(start)
            .expect("time")
            .timestamp_millis();
        let kept = pod(
            "kept",
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}},
                   "spec": {"terminationGracePeriodSeconds": 60}}),
        );
        let for_5m = pod(
            "for-5m",
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "5m"}},
                   "status": {"startTime": start}}),
        );
        let bad = pod(
            "bad",
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "soon"}}}),
        );
        assert!(do_not_disrupt(&kept, t0));
        assert!(do_not_disrupt(&for_5m, t0 + 299_000));
        assert!(!do_not_disrupt(&for_5m, t0 + 300_000));
        assert!(!do_not_disrupt(&bad, t0));

        let pods = [kept.clone(), for_5m.clone(), bad.clone()];
        let name = |v: &[(String, String)]| v.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>();
        // No terminationGracePeriod: kept forever, the 5m one until its time is up.
        let r = round(&pods, t0 + 1_000, None);
        assert_eq!(name(&r.targets), ["bad"]);
        assert!(r.deletes.is_empty());
        assert_eq!(r.remaining, 3);
        let r = round(&pods, t0 + 300_000, None);
        assert_eq!(name(&r.targets), ["for-5m", "bad"]);
        // A deadline 10 minutes out: the 60 s pod is deleted 60 s before it, the others
        // (default 30 s) 30 s before.
        let deadline = t0 + 600_000;
        let r = round(
            std::slice::from_ref(&kept),
            deadline - 61_000,
            Some(deadline),
        );
        assert!(r.targets.is_empty() && r.deletes.is_empty());
        let r = round(
            std::slice::from_ref(&kept),
            deadline - 60_000,
            Some(deadline),
        );
        assert_eq!(name(&r.deletes), ["kept"]);
        let r = round(&pods, deadline - 30_000, Some(deadline));
        assert_eq!(name(&r.deletes), ["kept", "for-5m", "bad"]);
    }

    #[test]
    fn progress_is_read_from_the_latest_termination_only() {
        let ev = |from: ClaimState, to: ClaimState, detail: &str, at: Millis| Event {
            claim: "c".into(),
            from: Some(from),
            to,
            actor: "a".into(),
            detail: detail.into(),
            at,
        };
        use ClaimState::{Initialized as I, Terminating as T};
        let events = vec![
            ev(I, T, "disrupted: x", 1),
            ev(T, T, "drain: started on node n1", 2),
            ev(T, T, "drain: evicted default/a", 3),
            ev(
                T,
                T,
                "drain: deleted after terminationGracePeriod default/b",
                4,
            ),
        ];
        let p = Progress::of(&events);
        assert_eq!(p.started_at, Some(2));
        assert_eq!(p.evicted.len(), 2);
        assert!(!p.done);
        let mut more = events.clone();
        more.push(ev(T, T, "drain: done (2 pods)", 5));
        assert!(Progress::of(&more).done);
        assert_eq!(Progress::of(&[]), Progress::default());
    }

    #[test]
    fn taints_are_added_once_and_removed_and_backoff_doubles() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "resourceVersion": "3"},
            "spec": {"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]}
        }))
        .expect("node");
        let p = taint_patch(&node).expect("patch");
        assert_eq!(p["spec"]["taints"].as_array().map(Vec::len), Some(2));
        assert_eq!(p["metadata"]["resourceVersion"], "3");
        let tainted: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": p["spec"]["taints"]}
        }))
        .expect("node");
        assert!(is_tainted(&tainted));
        assert!(taint_patch(&tainted).is_none());
        let u = untaint_patch(&tainted).expect("untaint");
        assert_eq!(u["spec"]["taints"].as_array().map(Vec::len), Some(1));
        assert!(untaint_patch(&node).is_none());

        let mut b = Backoff::default();
        assert!(b.ready("p", 0));
        assert_eq!(b.failed("p", 0), 500);
        assert!(!b.ready("p", 499));
        assert!(b.ready("p", 500));
        assert_eq!(b.failed("p", 500), 1000);
        for _ in 0..10 {
            b.failed("p", 0);
        }
        assert_eq!(b.failed("p", 0), BACKOFF_MAX_MS);
        b.clear("p");
        assert!(b.ready("p", 0));
    }
}
