//! Node repair, behind Karpenter's `NodeRepair` feature gate (off by default, as in Karpenter
//! v1.14): a Node whose conditions match one of the cloud provider's repair policies for longer
//! than the policy's toleration has its NodeClaim deleted, forcefully.
//!
//! Read from kubernetes-sigs/karpenter v1.14.1 `pkg/controllers/node/health/controller.go`
//! (with `events.go`, `suite_test.go`) and aws/karpenter-provider-aws v1.14.1
//! `pkg/cloudprovider/cloudprovider.go` (`RepairPolicies`):
//!
//! - [`POLICIES`]: `Ready` False or Unknown for 30 minutes (kubelet); the Node Monitoring
//!   Agent's `AcceleratedHardwareReady` False for 10 minutes, `StorageReady`, `NetworkingReady`,
//!   `KernelReady`, `ContainerRuntimeReady` False for 30 minutes. A condition's
//!   `lastTransitionTime` starts its toleration; when several match, the one whose toleration
//!   ends first decides.
//! - Circuit breaker: no repair in a NodePool when more than 20% of its Nodes (rounded up, as a
//!   PodDisruptionBudget's percentage: one of three Nodes may be unhealthy) match a policy, or,
//!   for a NodeClaim of no NodePool, more than 20% of the cluster's Nodes. A blocked repair is a
//!   `NodeRepairBlocked` Warning Event on the Node, at most every 15 minutes per Node.
//! - Repair: the NodeClaim gets `karpenter.sh/nodeclaim-termination-timestamp` = now (kept when
//!   it is already in the past), then is deleted. The NodeClaim lifecycle
//!   ([`crate::lifecycle`]) terminates it like any deleted NodeClaim, and its drain takes the
//!   annotation as the deadline ([`forced_deadline`]): every pod left is deleted at once,
//!   whatever its PodDisruptionBudget or `karpenter.sh/do-not-disrupt` annotation, and the
//!   NodePool's disruption budgets are not consulted (Karpenter's "Forceful termination" tests).
//!   The pods go pending and the planners launch their replacement.
//!
//! The decision ([`assess`]) is a pure function of the Nodes, the NodeClaims and the time, so
//! that its rules are unit-tested; [`Repairer::pass`] reads, decides and acts. A runtime
//! controller reacting to node conditions with the clock belongs here with the lifecycle
//! controllers (the actuator executes), not in the planner, which stays a pure function of a
//! snapshot.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crds::NodeClaim;
use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

use crate::interruption::{COMPONENT, EVENT_NAMESPACE};
use crate::lifecycle::nodeclaim::{error_chain, rfc3339};
use crate::lifecycle::termination::forced_deadline;
pub use crate::lifecycle::termination::{TERMINATION_TIMESTAMP_ANNOTATION, effective_grace};
use crate::lifecycle::{Result, kube_err};
use service_shell::clock::{Clock, Millis, millis};
/// The Event reason of a repair the circuit breaker holds back.
pub const NODE_REPAIR_BLOCKED: &str = "NodeRepairBlocked";
/// Percentage of a NodePool's (or the cluster's) Nodes that may be unhealthy with repair going
/// on.
pub const ALLOWED_UNHEALTHY_PERCENT: usize = 20;
/// How long a `NodeRepairBlocked` Event of a Node is not repeated.
pub const BLOCKED_EVENT_DEDUPE: Duration = Duration::from_secs(15 * 60);

/// One repair policy: a condition in a status held past a toleration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The Node condition type.
    pub condition: &'static str,
    /// The status that is unhealthy.
    pub status: &'static str,
    /// How long the condition may hold before the Node is repaired.
    pub toleration: Duration,
}

/// A policy of `condition` in `status` tolerated for `minutes`.
const fn policy(condition: &'static str, status: &'static str, minutes: u64) -> Policy {
    Policy {
        condition,
        status,
        toleration: Duration::from_secs(minutes * 60),
    }
}

/// The AWS provider's repair policies (v1.14.1 `RepairPolicies`): (condition, status,
/// toleration in minutes).
pub const POLICIES: [Policy; 7] = [
    policy("Ready", "False", 30),
    policy("Ready", "Unknown", 30),
    policy("AcceleratedHardwareReady", "False", 10),
    policy("StorageReady", "False", 30),
    policy("NetworkingReady", "False", 30),
    policy("KernelReady", "False", 30),
    policy("ContainerRuntimeReady", "False", 30),
];

/// A Node's condition that matches a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unhealthy {
    /// The condition type.
    pub condition: String,
    /// When its toleration ends (its `lastTransitionTime` plus the toleration; a condition
    /// without a transition time counts from the epoch, as Karpenter's zero time).
    pub due: Millis,
}

/// What to do about one Node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Unhealthy, but its toleration has not run out; look again at `due`.
    Tolerated {
        /// The condition.
        condition: String,
        /// When its toleration ends.
        due: Millis,
    },
    /// Repair: delete the NodeClaim, forcefully.
    Repair {
        /// The condition.
        condition: String,
    },
    /// Unhealthy past its toleration, but too many Nodes of its NodePool (or of the cluster)
    /// are unhealthy.
    Blocked {
        /// The condition.
        condition: String,
        /// The Event's message.
        message: String,
    },
}

/// A verdict on a managed Node (one with a NodeClaim).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assessment {
    /// The Node.
    pub node: String,
    /// Its NodeClaim.
    pub nodeclaim: String,
    /// The NodeClaim's NodePool (`karpenter.sh/nodepool` label), if any.
    pub nodepool: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
}

fn condition_time(t: &Time) -> Option<Millis> {
    let v = serde_json::to_value(t).ok()?;
    chrono::DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|d| d.timestamp_millis())
}

/// The policy match of `node` whose toleration ends first, if any (Karpenter's
/// `findUnhealthyConditions`).
pub fn unhealthy(node: &Node) -> Option<Unhealthy> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let mut best: Option<Unhealthy> = None;
    for p in &POLICIES {
        let Some(c) = conditions
            .iter()
            .find(|c| c.type_ == p.condition && c.status == p.status)
        else {
            continue;
        };
        let since = c
            .last_transition_time
            .as_ref()
            .and_then(condition_time)
            .unwrap_or(0);
        let due = since.saturating_add(millis(p.toleration));
        if best.as_ref().is_none_or(|b| due < b.due) {
            best = Some(Unhealthy {
                condition: p.condition.to_string(),
                due,
            });
        }
    }
    best
}

/// How many of `total` Nodes may be unhealthy: 20%, rounded up (Karpenter's
/// `GetScaledValueFromIntOrPercent(20%, total, roundUp=true)`).
pub fn allowed_unhealthy(total: usize) -> usize {
    (total * ALLOWED_UNHEALTHY_PERCENT).div_ceil(100)
}

fn nodepool_of(labels: Option<&BTreeMap<String, String>>) -> Option<String> {
    labels
        .and_then(|l| l.get(common::labels::NODEPOOL))
        .cloned()
}

/// The verdict on every managed, unhealthy Node at `now`. A Node is managed when a NodeClaim's
/// `status.providerID` is its `spec.providerID`; the circuit breaker counts every Node of the
/// NodePool (by the Node's `karpenter.sh/nodepool` label), or every Node of the cluster for a
/// NodeClaim of no NodePool.
pub fn assess(nodes: &[Node], nodeclaims: &[NodeClaim], now: Millis) -> Vec<Assessment> {
    let by_provider: HashMap<&str, &NodeClaim> = nodeclaims
        .iter()
        .filter_map(|nc| Some((nc.status.as_ref()?.provider_id.as_deref()?, nc)))
        .collect();
    let health: Vec<(&Node, Option<Unhealthy>)> = nodes.iter().map(|n| (n, unhealthy(n))).collect();
    let healthy_enough = |pool: Option<&str>| {
        let members = health.iter().filter(|(n, _)| {
            pool.is_none_or(|p| nodepool_of(n.metadata.labels.as_ref()).as_deref() == Some(p))
        });
        let (total, sick) = members.fold((0, 0), |(t, s), (_, u)| {
            (t + 1, s + usize::from(u.is_some()))
        });
        sick <= allowed_unhealthy(total)
    };
    let mut out = Vec::new();
    for (node, u) in &health {
        let Some(u) = u else { continue };
        let Some(nc) = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(|p| by_provider.get(p))
        else {
            continue;
        };
        let nodepool = nodepool_of(nc.metadata.labels.as_ref());
        let verdict = if now < u.due {
            Verdict::Tolerated {
                condition: u.condition.clone(),
                due: u.due,
            }
        } else if !healthy_enough(nodepool.as_deref()) {
            let scope = if nodepool.is_some() {
                "nodepool"
            } else {
                "cluster"
            };
            Verdict::Blocked {
                condition: u.condition.clone(),
                message: format!(
                    "more than {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the {scope}"
                ),
            }
        } else {
            Verdict::Repair {
                condition: u.condition.clone(),
            }
        };
        out.push(Assessment {
            node: node.metadata.name.clone().unwrap_or_default(),
            nodeclaim: nc.metadata.name.clone().unwrap_or_default(),
            nodepool,
            verdict,
        });
    }
    out
}

/// One repair, with what Karpenter labels its metrics with
/// (`karpenter_nodeclaims_disrupted_total{reason="unhealthy"}`,
/// `karpenter_nodeclaims_unhealthy_disrupted_total`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// The NodeClaim deleted.
    pub nodeclaim: String,
    /// Its Node.
    pub node: String,
    /// The condition that decided (`KernelReady`, ...).
    pub condition: String,
    /// The Node's `karpenter.sh/nodepool`.
    pub nodepool: String,
    /// The Node's `karpenter.sh/capacity-type`.
    pub capacity_type: String,
    /// The NodeClaim's `status.imageID`.
    pub image_id: String,
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// NodeClaims deleted.
    pub repaired: Vec<Repaired>,
    /// Nodes whose repair the circuit breaker held back.
    pub blocked: Vec<String>,
    /// Failures, as `(object, error)`.
    pub errors: Vec<(String, String)>,
}

/// The node repair controller.
#[derive(Clone)]
pub struct Repairer {
    client: kube::Client,
    clock: Clock,
    interval: Duration,
    /// Last `NodeRepairBlocked` Event per Node (deduplication).
    blocked_events: Arc<Mutex<HashMap<String, Millis>>>,
    /// Where repairs are counted (Karpenter's repair metrics).
    metrics: Option<crate::metrics::Metrics>,
}

// === impl Repairer ===

impl Repairer {
    /// A controller over the cluster behind `client`, passing every `interval`.
    pub fn new(client: kube::Client, clock: Clock, interval: Duration) -> Self {
        Self {
            client,
            clock,
            interval,
            blocked_events: Arc::default(),
            metrics: None,
        }
    }

    /// Counts every repair in `metrics`: `karpenter_nodeclaims_disrupted_total{reason="unhealthy"}`
    /// and `karpenter_nodeclaims_unhealthy_disrupted_total`.
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Passes until `shutdown` turns true.
    pub async fn run(&self, mut shutdown: watch::Receiver<bool>) {
        tracing::info!(interval = ?self.interval, "Node repair on (feature gate NodeRepair)");
        loop {
            if *shutdown.borrow() {
                break;
            }
            match self.pass().await {
                Ok(p) => {
                    if let Some(m) = &self.metrics {
                        for r in &p.repaired {
                            m.nodeclaim_repaired(
                                &r.condition,
                                &r.nodepool,
                                &r.capacity_type,
                                &r.image_id,
                            );
                        }
                    }
                    for (object, e) in &p.errors {
                        tracing::warn!(%object, error = %e, "Node repair step failed; retrying next pass");
                    }
                }
                Err(e) => tracing::warn!(error = %error_chain(&e), "Node repair pass failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// One pass: read the Nodes and NodeClaims, [`assess`] them, repair and record.
    ///
    /// # Errors
    /// When the Nodes or the NodeClaims cannot be listed; a failing repair is in
    /// [`Pass::errors`] and the others go on.
    pub async fn pass(&self) -> Result<Pass> {
        let nodes = Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing Nodes".into()))?
            .items;
        let ncs = Api::<NodeClaim>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing NodeClaims".into()))?
            .items;
        let now = self.clock.now_ms();
        let mut pass = Pass::default();
        for a in assess(&nodes, &ncs, now) {
            match &a.verdict {
                Verdict::Tolerated { .. } => {}
                Verdict::Blocked { condition, message } => {
                    pass.blocked.push(a.node.clone());
                    tracing::info!(node = %a.node, nodeclaim = %a.nodeclaim, %condition, %message, "Node repair blocked");
                    if let Err(e) = self.blocked_event(&a.node, message, now).await {
                        pass.errors.push((a.node.clone(), error_chain(&e)));
                    }
                }
                Verdict::Repair { condition } => {
                    let Some(nc) = ncs
                        .iter()
                        .find(|nc| nc.metadata.name.as_deref() == Some(a.nodeclaim.as_str()))
                    else {
                        continue;
                    };
                    match self.repair(nc, now).await {
                        Ok(true) => {
                            tracing::info!(node = %a.node, nodeclaim = %a.nodeclaim, %condition, nodepool = ?a.nodepool, "Deleting unhealthy node");
                            let labels = nodes
                                .iter()
                                .find(|n| n.metadata.name.as_deref() == Some(a.node.as_str()))
                                .and_then(|n| n.metadata.labels.as_ref());
                            let label = |k: &str| {
                                labels.and_then(|l| l.get(k)).cloned().unwrap_or_default()
                            };
                            pass.repaired.push(Repaired {
                                nodeclaim: a.nodeclaim.clone(),
                                node: a.node.clone(),
                                condition: condition.clone(),
                                nodepool: label(common::labels::NODEPOOL),
                                capacity_type: label(common::labels::CAPACITY_TYPE),
                                image_id: nc
                                    .status
                                    .as_ref()
                                    .and_then(|s| s.image_id.clone())
                                    .unwrap_or_default(),
                            });
                        }
                        Ok(false) => {}
                        Err(e) => pass.errors.push((a.nodeclaim.clone(), error_chain(&e))),
                    }
                }
            }
        }
        Ok(pass)
    }

    /// Annotates the termination deadline (now, unless one already passed) and deletes the
    /// NodeClaim; `false` when it was being deleted already or is gone.
    async fn repair(&self, nc: &NodeClaim, now: Millis) -> Result<bool> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        if nc.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let api = Api::<NodeClaim>::all(self.client.clone());
        if forced_deadline(nc).is_none_or(|d| d > now) {
            let patch = json!({"metadata": {"annotations": {TERMINATION_TIMESTAMP_ANNOTATION: rfc3339(now)}}});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
                Err(e) => {
                    return Err(kube_err(format!(
                        "annotating NodeClaim {name} with its termination timestamp"
                    ))(e));
                }
            }
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(kube_err(format!("deleting unhealthy NodeClaim {name}"))(e)),
        }
    }

    async fn blocked_event(&self, node: &str, message: &str, now: Millis) -> Result<()> {
        {
            let mut last = self
                .blocked_events
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if last
                .get(node)
                .is_some_and(|t| now - t < millis(BLOCKED_EVENT_DEDUPE))
            {
                return Ok(());
            }
            last.insert(node.to_string(), now);
        }
        let at = k8s_openapi::jiff::Timestamp::from_millisecond(now)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{node}.noderepairblocked.{}", now / 1000)),
                namespace: Some(EVENT_NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..ObjectReference::default()
            },
            reason: Some(NODE_REPAIR_BLOCKED.into()),
            message: Some(message.into()),
            type_: Some("Warning".into()),
            count: Some(1),
            first_timestamp: Some(Time(at)),
            last_timestamp: Some(Time(at)),
            source: Some(EventSource {
                component: Some(COMPONENT.into()),
                host: None,
            }),
            reporting_component: Some(COMPONENT.into()),
            ..Event::default()
        };
        match Api::<Event>::namespaced(self.client.clone(), EVENT_NAMESPACE)
            .create(&PostParams::default(), &event)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(kube_err(format!(
                "recording NodeRepairBlocked on Node {node}"
            ))(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = 1_800_000_000_000;

    fn node(name: &str, pool: &str, conditions: &[(&str, &str, Millis)]) -> Node {
        let conditions: Vec<_> = conditions
            .iter()
            .map(|(t, s, at)| json!({"type": t, "status": s, "lastTransitionTime": rfc3339(*at)}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
            "status": {"conditions": conditions},
        }))
        .expect("node")
    }

    fn claim(node: &str, pool: Option<&str>) -> NodeClaim {
        let labels = pool.map(|p| json!({"karpenter.sh/nodepool": p}));
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("nc-{node}"), "labels": labels},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": format!("aws:///us-east-1a/i-{node}")},
        }))
        .expect("nodeclaim")
    }

    fn healthy(name: &str) -> Node {
        node(name, "default", &[("Ready", "True", T0)])
    }

    fn verdicts(nodes: &[Node], ncs: &[NodeClaim], now: Millis) -> Vec<(String, Verdict)> {
        assess(nodes, ncs, now)
            .into_iter()
            .map(|a| (a.node, a.verdict))
            .collect()
    }

    /// suite_test.go "should delete nodes that are unhealthy by the cloud provider" and
    /// "should not delete node when health duration is not reached".
    #[test]
    fn repairs_after_the_toleration_only() {
        let sick = node("a", "default", &[("Ready", "False", T0)]);
        let nodes = [sick, healthy("b"), healthy("c"), healthy("d"), healthy("e")];
        let ncs: Vec<_> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| claim(n, Some("default")))
            .collect();
        let due = T0 + 30 * 60_000;
        assert_eq!(
            verdicts(&nodes, &ncs, due - 1),
            [(
                "a".into(),
                Verdict::Tolerated {
                    condition: "Ready".into(),
                    due
                }
            )]
        );
        assert_eq!(
            verdicts(&nodes, &ncs, due),
            [(
                "a".into(),
                Verdict::Repair {
                    condition: "Ready".into()
                }
            )]
        );
    }

    /// "should not delete node when unhealthy type does not match" / "... health status does
    /// not match cloud provider passed in value".
    #[test]
    fn only_the_policies_conditions_and_statuses_count() {
        let nodes = [
            node("a", "default", &[("BadNode", "True", T0)]),
            node(
                "b",
                "default",
                &[("AcceleratedHardwareReady", "Unknown", T0)],
            ),
            node("c", "default", &[("Ready", "True", T0)]),
        ];
        let ncs: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|n| claim(n, Some("default")))
            .collect();
        assert!(assess(&nodes, &ncs, T0 + 86_400_000).is_empty());
    }

    /// "should return the requeue interval for the condition closest to its terminationDuration".
    #[test]
    fn the_condition_whose_toleration_ends_first_decides() {
        let n = node(
            "a",
            "default",
            &[
                ("Ready", "False", T0),
                ("AcceleratedHardwareReady", "False", T0 + 5 * 60_000),
            ],
        );
        let u = unhealthy(&n).expect("unhealthy");
        assert_eq!(u.condition, "AcceleratedHardwareReady");
        assert_eq!(u.due, T0 + 15 * 60_000);
    }

    /// "should ignore unhealthy nodes if more then 20% of the nodes are unhealthy in a nodepool"
    /// and "should consider round up when there is a low number of nodes for a nodepool".
    #[test]
    fn the_circuit_breaker_counts_the_nodepool_rounding_up() {
        assert_eq!(allowed_unhealthy(3), 1);
        assert_eq!(allowed_unhealthy(10), 2);
        assert_eq!(allowed_unhealthy(11), 3);
        assert_eq!(allowed_unhealthy(0), 0);
        let now = T0 + 31 * 60_000;
        let sick = |n: &str| node(n, "default", &[("Ready", "False", T0)]);
        // One of three: 33% but within the rounded-up 20%.
        let nodes = [sick("a"), healthy("b"), healthy("c")];
        let ncs: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|n| claim(n, Some("default")))
            .collect();
        assert!(matches!(
            verdicts(&nodes, &ncs, now)[0].1,
            Verdict::Repair { .. }
        ));
        // Two of three: blocked, both.
        let nodes = [sick("a"), sick("b"), healthy("c")];
        let v = verdicts(&nodes, &ncs, now);
        assert_eq!(v.len(), 2);
        for (_, verdict) in v {
            assert_eq!(
                verdict,
                Verdict::Blocked {
                    condition: "Ready".into(),
                    message: "more than 20% nodes are unhealthy in the nodepool".into()
                }
            );
        }
        // Healthy Nodes of another pool do not dilute this pool's count.
        let mut nodes = vec![sick("a"), sick("b"), healthy("c")];
        nodes.extend((0..10).map(|i| node(&format!("o{i}"), "other", &[("Ready", "True", T0)])));
        assert!(
            verdicts(&nodes, &ncs, now)
                .iter()
                .all(|(_, v)| matches!(v, Verdict::Blocked { .. }))
        );
    }

    /// "should ignore unhealthy nodes if more then 20% of the nodes are unhealthy in a cluster"
    /// (a NodeClaim of no NodePool).
    #[test]
    fn standalone_nodeclaims_count_the_cluster() {
        let now = T0 + 31 * 60_000;
        let nodes = [
            node("a", "x", &[("Ready", "False", T0)]),
            node("b", "y", &[("Ready", "False", T0)]),
            healthy("c"),
        ];
        let ncs = [claim("a", None), claim("b", Some("y")), claim("c", None)];
        let v = verdicts(&nodes, &ncs, now);
        assert_eq!(
            v[0].1,
            Verdict::Blocked {
                condition: "Ready".into(),
                message: "more than 20% nodes are unhealthy in the cluster".into()
            }
        );
        // b's own pool y has one Node, unhealthy: 1 ≤ ceil(0.2) = 1.
        assert!(matches!(v[1].1, Verdict::Repair { .. }));
    }

    #[test]
    fn unmanaged_nodes_are_left_alone() {
        let nodes = [node("a", "default", &[("Ready", "False", T0)])];
        assert!(assess(&nodes, &[], T0 + 86_400_000).is_empty());
    }

    /// "should set annotation termination grace period when force termination is started" and
    /// "should not respect termination grace period if set on the nodepool".
    #[test]
    fn the_termination_timestamp_ends_the_drain() {
        let mut nc = claim("a", Some("default"));
        assert_eq!(
            effective_grace(Some(&nc), Some(Duration::from_secs(600)), T0),
            Some(Duration::from_secs(600))
        );
        assert_eq!(effective_grace(None, None, T0), None);
        nc.metadata.annotations = Some(BTreeMap::from([(
            TERMINATION_TIMESTAMP_ANNOTATION.to_string(),
            rfc3339(T0),
        )]));
        assert_eq!(forced_deadline(&nc), Some(T0));
        assert_eq!(
            effective_grace(Some(&nc), Some(Duration::from_secs(600)), T0 + 5_000),
            Some(Duration::ZERO)
        );
        assert_eq!(
            effective_grace(Some(&nc), None, T0 - 5_000),
            Some(Duration::from_secs(5))
        );
    }
}
