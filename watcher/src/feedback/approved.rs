//! Karpenter v1.14's `ConsolidationApproved` Events from the latest plan's `consolidationMoves`
//! (kubernetes-sigs/karpenter `pkg/controllers/disruption/balanced.go`, `ApproveCommand` and
//! `EmitMultiNodeEvents`; `pkg/controllers/disruption/events/events.go`):
//!
//! - an approved single-node move whose NodePool is Balanced: on the Node and on its NodeClaim;
//! - an approved multi-node move: on each Balanced NodePool of its nodes;
//!
//! each with `consolidationScoreMessage`'s words. Rejected moves and pools of other policies
//! get no Event (Karpenter: "Rejections emit metrics only"). They are written by
//! [`super::Events::publish_disruption`], so deduplicated as the other disruption Events: once
//! per object and message.

use proto::v1 as pb;

use super::claims::reference;
use super::events::DisruptionEvent;

/// The Event's reason.
pub(crate) const REASON: &str = "ConsolidationApproved";

/// Karpenter's `consolidationScoreMessage` (`%.2f`, `%d`, `%.1f%%` as Go prints them; an
/// infinite score as Go's `+Inf`).
pub(crate) fn message(s: &pb::ConsolidationPoolScore) -> String {
    let score = if s.score.is_infinite() && s.score > 0.0 {
        "+Inf".to_string()
    } else {
        format!("{:.2}", s.score)
    };
    format!(
        "score {score} >= threshold {:.2} (k: {}, savings {:.1}%, disruption {:.1}%)",
        s.threshold, s.k, s.savings_percent, s.disruption_percent
    )
}

/// The `ConsolidationApproved` Events of `plan`; `uid(kind, name)` finds an object's uid
/// (`Node`, `NodeClaim`, `NodePool`), `None` when the cluster does not have it (no Event).
pub(crate) fn events(
    plan: &pb::PlanResponse,
    uid: &dyn Fn(&str, &str) -> Option<String>,
) -> Vec<DisruptionEvent> {
    let mut out = Vec::new();
    for mv in plan
        .consolidation_moves
        .iter()
        .filter(|m| m.decision == "approved")
    {
        let approved = mv
            .node_pools
            .iter()
            .filter(|p| p.scored && p.score >= p.threshold);
        if let ([node], [claim]) = (mv.nodes.as_slice(), mv.node_claims.as_slice()) {
            let Some(pool) = approved.into_iter().next() else {
                continue;
            };
            let note = message(pool);
            let objects = [
                ("v1", "Node", node),
                ("karpenter.sh/v1", "NodeClaim", claim),
            ];
            for (api, kind, name) in objects {
                if let Some(u) = (!name.is_empty()).then(|| uid(kind, name)).flatten() {
                    out.push(DisruptionEvent {
                        object: reference(api, kind, name, &u),
                        reason: REASON,
                        note: note.clone(),
                    });
                }
            }
        } else {
            for pool in approved {
                if let Some(u) = uid("NodePool", &pool.node_pool) {
                    out.push(DisruptionEvent {
                        object: reference("karpenter.sh/v1", "NodePool", &pool.node_pool, &u),
                        reason: REASON,
                        note: message(pool),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(pool: &str, policy: &str, score: f64) -> pb::ConsolidationPoolScore {
        pb::ConsolidationPoolScore {
            node_pool: pool.into(),
            policy: policy.into(),
            scored: policy == "Balanced",
            score,
            threshold: 0.5,
            k: 2,
            savings_percent: 75.0,
            disruption_percent: 100.0,
        }
    }

    fn mv(
        decision: &str,
        nodes: &[&str],
        claims: &[&str],
        pools: Vec<pb::ConsolidationPoolScore>,
    ) -> pb::ConsolidationMove {
        pb::ConsolidationMove {
            decision: decision.into(),
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
            node_claims: claims.iter().map(|s| s.to_string()).collect(),
            node_pools: pools,
        }
    }

    // events.go consolidationScoreMessage; balanced_integration_test.go "should approve
    // replacing an oversized node" looks for "k: 2" and ">= threshold 0.50".
    #[test]
    fn the_message_is_karpenters() {
        let s = pb::ConsolidationPoolScore {
            score: 0.7734,
            threshold: 0.5,
            k: 2,
            savings_percent: 77.34,
            disruption_percent: 100.0,
            ..Default::default()
        };
        assert_eq!(
            message(&s),
            "score 0.77 >= threshold 0.50 (k: 2, savings 77.3%, disruption 100.0%)"
        );
        let inf = pb::ConsolidationPoolScore {
            score: f64::INFINITY,
            ..s
        };
        assert!(message(&inf).starts_with("score +Inf >= threshold 0.50"));
    }

    // balanced.go ApproveCommand (single node: Node and NodeClaim), EmitMultiNodeEvents (one
    // per approved Balanced NodePool; balanced_scoring_test.go "should skip pools missing from
    // perPoolResults"), and no Event for a rejection ("should not emit events for rejected pool
    // results") or a pool that is not Balanced.
    #[test]
    fn approved_balanced_moves_are_announced_where_karpenter_announces_them() {
        let plan = pb::PlanResponse {
            consolidation_moves: vec![
                mv(
                    "approved",
                    &["n1"],
                    &["c1"],
                    vec![score("bal", "Balanced", 0.75)],
                ),
                mv(
                    "approved",
                    &["n2", "n3"],
                    &["c2", "c3"],
                    vec![
                        score("bal", "Balanced", 2.0),
                        score("other", "WhenEmptyOrUnderutilized", 0.0),
                    ],
                ),
                mv(
                    "approved",
                    &["n4"],
                    &["c4"],
                    vec![score("other", "WhenEmptyOrUnderutilized", 0.0)],
                ),
                mv(
                    "rejected",
                    &["n5"],
                    &["c5"],
                    vec![score("bal", "Balanced", 0.3)],
                ),
                // Not in the cluster: no Event.
                mv(
                    "approved",
                    &["gone"],
                    &[""],
                    vec![score("bal", "Balanced", 0.75)],
                ),
            ],
            ..Default::default()
        };
        let uid = |kind: &str, name: &str| (name != "gone").then(|| format!("{kind}/{name}"));
        let got: Vec<(String, String)> = events(&plan, &uid)
            .into_iter()
            .map(|e| {
                assert_eq!(e.reason, "ConsolidationApproved");
                (e.object.uid.unwrap_or_default(), e.note)
            })
            .collect();
        let single = "score 0.75 >= threshold 0.50 (k: 2, savings 75.0%, disruption 100.0%)";
        let multi = "score 2.00 >= threshold 0.50 (k: 2, savings 75.0%, disruption 100.0%)";
        assert_eq!(
            got,
            vec![
                ("Node/n1".to_string(), single.to_string()),
                ("NodeClaim/c1".to_string(), single.to_string()),
                ("NodePool/bal".to_string(), multi.to_string()),
            ]
        );
    }
}
