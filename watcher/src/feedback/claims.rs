//! What the latest plan says of each disruption candidate, written as Karpenter writes it
//! (kubernetes-sigs/karpenter v1.14 `pkg/controllers/nodeclaim/disruption/{drift,consolidation}.go`,
//! `pkg/controllers/disruption/events/events.go`):
//!
//! - NodeClaim conditions `Drifted` (True, reason and message the drift reason, e.g.
//!   `NodePoolDrifted`) and `Consolidatable` (True, reason `Consolidatable`), each present only
//!   while it holds and removed otherwise;
//! - Events `DisruptionBlocked` and `Unconsolidatable` (type Normal) on the Node and on its
//!   NodeClaim, with Karpenter's messages, each sent once per distinct message, and the
//!   `ConsolidationApproved` Events of Balanced moves (`super::approved`).
//!
//! The conditions are merged into the claim's status list with the claim's `resourceVersion`
//! (the actuator writes the lifecycle conditions of the same list): a conflict is retried on
//! the next reconcile, and every minute the written state is checked against a fresh list, so
//! a write of the list by someone else that dropped ours is repaired.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, ListParams};
use proto::v1 as pb;
use proto::v1::upsert::Object;
use serde_json::{Value, json};

use super::conditions::{condition, conditions_of, patch_status};
use super::events::{DisruptionEvent, Events};
use crate::informers::karpenter_resource;
use crate::mirror::{Kind, Mirror};

/// The two conditions a claim should show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    /// The drift reason, when drifted.
    pub drifted: Option<String>,
    /// Whether `Consolidatable` is True.
    pub consolidatable: bool,
}

/// The conditions every NodeClaim of the mirror should show after `plan`: those the plan names
/// as drifted or consolidatable, and none on every other claim.
pub fn wanted(plan: &pb::PlanResponse, mirror: &Mirror) -> BTreeMap<String, Wanted> {
    let mut out: BTreeMap<String, Wanted> = mirror
        .lock()
        .iter(Kind::NodeClaim)
        .filter_map(|o| match o {
            Object::NodeClaim(c) => Some((c.name.clone(), Wanted::default())),
            _ => None,
        })
        .collect();
    for n in plan.node_status.iter().filter(|n| !n.node_claim.is_empty()) {
        if let Some(w) = out.get_mut(&n.node_claim) {
            w.drifted = (!n.drifted.is_empty()).then(|| n.drifted.clone());
            w.consolidatable = n.consolidatable;
        }
    }
    out
}

/// The Events `plan` calls for on Nodes and NodeClaims of the mirror.
pub fn disruption_events(plan: &pb::PlanResponse, mirror: &Mirror) -> Vec<DisruptionEvent> {
    let state = mirror.lock();
    let node_uid = |name: &str| {
        state.iter(Kind::Node).find_map(|o| match o {
            Object::Node(n) if n.name == name => Some(n.uid.clone()),
            _ => None,
        })
    };
    let claim_uid = |name: &str| {
        state.iter(Kind::NodeClaim).find_map(|o| match o {
            Object::NodeClaim(c) if c.name == name => Some(c.uid.clone()),
            _ => None,
        })
    };
    let pool_uid = |name: &str| {
        state.iter(Kind::NodePool).find_map(|o| match o {
            Object::NodePool(p) if p.name == name => Some(p.uid.clone()),
            _ => None,
        })
    };
    let mut out = Vec::new();
    // Karpenter's `NodePoolBlockedForDisruptionReason` (`BuildDisruptionBudgetMapping`): the
    // pool has nodes and its budgets allow none for the reason.
    for b in plan
        .node_pool_budgets
        .iter()
        .filter(|b| b.nodes != 0 && b.allowed == 0)
    {
        if let Some(uid) = pool_uid(&b.node_pool) {
            out.push(DisruptionEvent {
                object: reference("karpenter.sh/v1", "NodePool", &b.node_pool, &uid),
                reason: "DisruptionBlocked",
                note: format!(
                    "No allowed disruptions for disruption reason {} due to blocking budget",
                    b.reason
                ),
            });
        }
    }
    for n in &plan.node_status {
        let (reason, note) = if !n.blocked.is_empty() {
            ("DisruptionBlocked", &n.blocked)
        } else if !n.unconsolidatable.is_empty() {
            ("Unconsolidatable", &n.unconsolidatable)
        } else {
            continue;
        };
        if let Some(uid) = node_uid(&n.node) {
            out.push(DisruptionEvent {
                object: reference("v1", "Node", &n.node, &uid),
                reason,
                note: note.clone(),
            });
        }
        if let Some(uid) = (!n.node_claim.is_empty())
            .then(|| claim_uid(&n.node_claim))
            .flatten()
        {
            out.push(DisruptionEvent {
                object: reference("karpenter.sh/v1", "NodeClaim", &n.node_claim, &uid),
                reason,
                note: note.clone(),
            });
        }
    }
    out.extend(super::approved::events(plan, &|kind, name| match kind {
        "Node" => node_uid(name),
        "NodeClaim" => claim_uid(name),
        _ => pool_uid(name),
    }));
    out
}

pub(super) fn reference(api_version: &str, kind: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        uid: (!uid.is_empty()).then(|| uid.to_string()),
        ..Default::default()
    }
}

/// The claim's conditions with `Drifted` and `Consolidatable` as `want` says, other conditions
/// untouched; `None` when nothing changes. Transition times are kept while a condition holds.
pub fn merged_conditions(
    current: &[Value],
    want: &Wanted,
    generation: Option<i64>,
    now: &str,
) -> Option<Vec<Value>> {
    let mut out: Vec<Value> = current
        .iter()
        .filter(|c| c["type"] != "Drifted" && c["type"] != "Consolidatable")
        .cloned()
        .collect();
    let mut set = |type_: &str, reason: &str, message: &str| {
        out.push(condition(
            current, type_, "True", reason, message, generation, now,
        ));
    };
    if let Some(reason) = &want.drifted {
        set("Drifted", reason, reason);
    }
    if want.consolidatable {
        set("Consolidatable", "Consolidatable", "");
    }
    if shown(current) == *want {
        return None;
    }
    Some(out)
}

/// What a claim's conditions show now.
fn shown(conditions: &[Value]) -> Wanted {
    let is_true = |t: &str| {
        conditions
            .iter()
            .find(|c| c["type"] == t && c["status"] == "True")
    };
    Wanted {
        drifted: is_true("Drifted").map(|c| c["reason"].as_str().unwrap_or_default().to_string()),
        consolidatable: is_true("Consolidatable").is_some(),
    }
}

/// How often the written state is checked against a fresh list of the claims.
const VERIFY_EVERY: Duration = Duration::from_secs(60);

/// Writes the two conditions on NodeClaims, and the disruption Events.
pub struct ClaimStatus {
    api: Api<DynamicObject>,
    wanted: BTreeMap<String, Wanted>,
    /// What each claim showed when last listed or written.
    known: HashMap<String, Wanted>,
    verified: Option<Instant>,
}

// === impl ClaimStatus ===

impl ClaimStatus {
    /// A writer over the cluster's NodeClaims.
    pub fn new(client: kube::Client) -> Self {
        let ar = karpenter_resource("karpenter.sh", "NodeClaim");
        Self {
            api: Api::all_with(client, &ar),
            wanted: BTreeMap::new(),
            known: HashMap::new(),
            verified: None,
        }
    }

    /// Records what the latest plan says, and writes its Events.
    pub async fn note_plan(
        &mut self,
        plan: &pb::PlanResponse,
        mirror: &Mirror,
        events: &mut Events,
    ) {
        self.wanted = wanted(plan, mirror);
        events
            .publish_disruption(disruption_events(plan, mirror))
            .await;
    }

    /// Writes the conditions of every claim whose shown state differs from the plan's.
    pub async fn reconcile(&mut self) {
        if self.wanted.is_empty() {
            return;
        }
        if self.verified.is_none_or(|t| t.elapsed() >= VERIFY_EVERY) {
            match self.api.list(&ListParams::default()).await {
                Ok(list) => {
                    self.known = list
                        .items
                        .iter()
                        .filter_map(|o| Some((o.metadata.name.clone()?, shown(&conditions_of(o)))))
                        .collect();
                    self.verified = Some(Instant::now());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Cannot list NodeClaims to check their conditions")
                }
            }
        }
        let todo: Vec<(String, Wanted)> = self
            .wanted
            .iter()
            .filter(|(name, want)| self.known.get(*name).is_none_or(|k| k != *want))
            .map(|(n, w)| (n.clone(), w.clone()))
            .collect();
        for (name, want) in todo {
            match self.write(&name, &want).await {
                Ok(()) => {
                    self.known.insert(name, want);
                }
                Err(e) => {
                    // Conflicts and transient errors: the next reconcile tries again.
                    self.known.remove(&name);
                    tracing::debug!(nodeclaim = %name, error = %e, "Cannot write NodeClaim conditions");
                }
            }
        }
        self.known.retain(|name, _| self.wanted.contains_key(name));
    }

    async fn write(&self, name: &str, want: &Wanted) -> Result<(), kube::Error> {
        let written = patch_status(&self.api, name, |current, now| {
            if current.metadata.deletion_timestamp.is_some() {
                return None;
            }
            let conditions = merged_conditions(
                &conditions_of(current),
                want,
                current.metadata.generation,
                now,
            )?;
            Some(json!({ "conditions": conditions }))
        })
        .await?;
        if written {
            tracing::info!(nodeclaim = %name, drifted = ?want.drifted, consolidatable = want.consolidatable, "NodeClaim disruption conditions written");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launched() -> Value {
        json!({"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": "t0"})
    }

    #[test]
    fn the_plan_names_the_conditions_and_the_events_of_each_claim() {
        let mirror = Mirror::new();
        mirror.update(|s| {
            for (node, claim) in [("n1", "c1"), ("n2", "c2"), ("n3", "c3")] {
                s.upsert(Object::Node(pb::Node {
                    name: node.into(),
                    uid: format!("u-{node}"),
                    ..Default::default()
                }));
                s.upsert(Object::NodeClaim(pb::NodeClaim {
                    name: claim.into(),
                    uid: format!("u-{claim}"),
                    node_name: Some(node.into()),
                    ..Default::default()
                }));
            }
        });
        let plan = pb::PlanResponse {
            node_status: vec![
                pb::NodeDisruptionStatus {
                    node: "n1".into(),
                    node_claim: "c1".into(),
                    drifted: "NodePoolDrifted".into(),
                    consolidatable: true,
                    blocked: "Pdb prevents pod evictions (PodDisruptionBudget=[default/web])"
                        .into(),
                    ..Default::default()
                },
                pb::NodeDisruptionStatus {
                    node: "n2".into(),
                    node_claim: "c2".into(),
                    unconsolidatable: "NodePool \"default\" has consolidation disabled".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let w = wanted(&plan, &mirror);
        assert_eq!(
            w["c1"],
            Wanted {
                drifted: Some("NodePoolDrifted".into()),
                consolidatable: true
            }
        );
        assert_eq!(w["c2"], Wanted::default());
        // Not in the plan: its conditions go.
        assert_eq!(w["c3"], Wanted::default());
        let ev = disruption_events(&plan, &mirror);
        let got: Vec<(Option<String>, Option<String>, &str)> = ev
            .iter()
            .map(|e| (e.object.kind.clone(), e.object.uid.clone(), e.reason))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    Some("Node".into()),
                    Some("u-n1".into()),
                    "DisruptionBlocked"
                ),
                (
                    Some("NodeClaim".into()),
                    Some("u-c1".into()),
                    "DisruptionBlocked"
                ),
                (Some("Node".into()), Some("u-n2".into()), "Unconsolidatable"),
                (
                    Some("NodeClaim".into()),
                    Some("u-c2".into()),
                    "Unconsolidatable"
                ),
            ]
        );
        assert_eq!(ev[3].object.api_version.as_deref(), Some("karpenter.sh/v1"));
    }

    /// kubernetes-sigs/karpenter `pkg/controllers/disruption/helpers.go`
    /// `BuildDisruptionBudgetMapping`: a pool with nodes whose budget allows none for a reason
    /// gets `DisruptionBlocked` with `NodePoolBlockedForDisruptionReason`'s message; a pool
    /// without nodes, or with room, gets nothing.
    #[test]
    fn a_budget_that_allows_nothing_blocks_its_node_pool() {
        let mirror = Mirror::new();
        mirror.update(|s| {
            for pool in ["frozen", "open", "idle"] {
                s.upsert(Object::NodePool(pb::NodePool {
                    name: pool.into(),
                    uid: format!("u-{pool}"),
                    ..Default::default()
                }));
            }
        });
        let budget =
            |pool: &str, reason: &str, allowed: i32, nodes: u32| pb::NodePoolBudgetStatus {
                node_pool: pool.into(),
                reason: reason.into(),
                allowed,
                nodes,
                disrupting: 0,
            };
        let plan = pb::PlanResponse {
            node_pool_budgets: vec![
                budget("frozen", "Empty", 0, 3),
                budget("frozen", "Drifted", 1, 3),
                budget("frozen", "Underutilized", 0, 3),
                budget("open", "Empty", 2_147_483_647, 3),
                budget("idle", "Empty", 0, 0),
            ],
            ..Default::default()
        };
        let ev = disruption_events(&plan, &mirror);
        let got: Vec<(Option<String>, Option<String>, &str, &str)> = ev
            .iter()
            .map(|e| {
                (
                    e.object.kind.clone(),
                    e.object.uid.clone(),
                    e.reason,
                    e.note.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    Some("NodePool".into()),
                    Some("u-frozen".into()),
                    "DisruptionBlocked",
                    "No allowed disruptions for disruption reason Empty due to blocking budget"
                ),
                (
                    Some("NodePool".into()),
                    Some("u-frozen".into()),
                    "DisruptionBlocked",
                    "No allowed disruptions for disruption reason Underutilized due to blocking budget"
                ),
            ]
        );
    }

    #[test]
    fn conditions_are_added_kept_and_removed_leaving_the_others() {
        let want = Wanted {
            drifted: Some("NodePoolDrifted".into()),
            consolidatable: true,
        };
        let got = merged_conditions(&[launched()], &want, Some(1), "t1").expect("changed");
        assert_eq!(got[0], launched());
        assert_eq!(got[1]["type"], "Drifted");
        assert_eq!(got[1]["reason"], "NodePoolDrifted");
        assert_eq!(got[1]["message"], "NodePoolDrifted");
        assert_eq!(got[1]["lastTransitionTime"], "t1");
        assert_eq!(got[2]["type"], "Consolidatable");
        assert_eq!(got[2]["reason"], "Consolidatable");
        assert_eq!(got[2]["observedGeneration"], 1);
        // Unchanged: nothing to write.
        assert!(merged_conditions(&got, &want, Some(1), "t2").is_none());
        // Consolidatable goes, Drifted stays with its transition time.
        let want = Wanted {
            drifted: Some("NodePoolDrifted".into()),
            consolidatable: false,
        };
        let next = merged_conditions(&got, &want, Some(1), "t3").expect("changed");
        assert_eq!(next.len(), 2);
        assert_eq!(next[1]["lastTransitionTime"], "t1");
        let none = merged_conditions(&next, &Wanted::default(), Some(1), "t4").expect("changed");
        assert_eq!(none, vec![launched()]);
    }
}
