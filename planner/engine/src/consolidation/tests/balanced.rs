//! The consolidation moves a plan reports for Karpenter v1.14's balanced evaluator
//! (kubernetes-sigs/karpenter `pkg/controllers/disruption/balanced.go`: `ApproveCommand`,
//! `EmitMultiNodeEvents`), on hand-built snapshots run through [`FakeSim`].

use super::*;
use crate::plan::{ConsolidationMove, ConsolidationPoolScore};

/// `cluster(loads)` with every NodePool Balanced.
fn balanced(loads: &[&[i64]]) -> ClusterSnapshot {
    let mut s = cluster(loads);
    for p in &mut s.node_pools {
        p.disruption.consolidation_policy = ConsolidationPolicy::Balanced;
    }
    s
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn scored(mv: &ConsolidationMove) -> &ConsolidationPoolScore {
    assert_eq!(mv.node_pools.len(), 1, "{mv:?}");
    let s = &mv.node_pools[0];
    assert!(s.scored, "{mv:?}");
    assert_eq!((s.policy.as_str(), s.k), ("Balanced", 2), "{mv:?}");
    assert!(close(s.threshold, 0.5), "{mv:?}");
    s
}

// balanced_integration_test.go "should approve replacing an oversized node": one m.large
// (0.4/h) whose one pod fits an m.small (0.1/h) saves 75% of the pool's cost for all of its
// disruption (1 for the node, 1 for the pod): score 0.75, approved; the ConsolidationApproved
// Event of a single-node move goes on the Node and its NodeClaim.
#[test]
fn a_single_node_decision_is_an_approved_move_with_its_score() {
    let mut s = balanced(&[&[1500]]);
    s.node_claims.push(NodeClaim {
        name: "default-abc".into(),
        node_name: Some("n0".into()),
        labels: s.nodes[0].labels.clone(),
        creation_time: s.nodes[0].creation_time,
        ..NodeClaim::default()
    });
    let o = run(&s, &catalog(), &opts());
    assert_eq!(reasons(&o), vec![d("Underutilized", &["n0"])]);
    assert_eq!(o.moves.len(), 1, "{:?}", o.moves);
    let mv = &o.moves[0];
    assert_eq!(mv.decision, "approved");
    assert_eq!(mv.nodes, vec!["n0".to_string()]);
    assert_eq!(mv.node_claims, vec!["default-abc".to_string()]);
    let sc = scored(mv);
    assert_eq!(sc.node_pool, "default");
    assert!(close(sc.score, 0.75), "{sc:?}");
    assert!(close(sc.savings_percent, 75.0), "{sc:?}");
    assert!(close(sc.disruption_percent, 100.0), "{sc:?}");
}

// balanced_test.go "should reject a marginal move" / balanced_integration_test.go "should
// reject replacing a well-packed node": n0's pods (3.5 cpu, 2 pods) fit an m.medium (0.2/h)
// instead of its m.large (0.4/h): 0.2 of the pool's 1.2/h (16.7%) for 3 of its 7 disruption
// (42.9%), score 0.39 < 0.5. Nothing is disrupted; the refused single-node move is reported,
// rejected. n1 and n2 cannot be replaced more cheaply (Karpenter's NoOp), and the 3-node repack
// the search also tries is a trial group: neither is a move.
#[test]
fn a_refused_single_node_move_is_a_rejected_move() {
    let s = balanced(&[&[2000, 1500], &[7000], &[7000]]);
    let o = run(&s, &catalog(), &opts());
    assert!(o.decisions.is_empty(), "{:?}", o.decisions);
    assert_eq!(o.moves.len(), 1, "{:?}", o.moves);
    let mv = &o.moves[0];
    assert_eq!(mv.decision, "rejected");
    assert_eq!(mv.nodes, vec!["n0".to_string()]);
    assert_eq!(mv.node_claims, vec![String::new()]);
    let sc = scored(mv);
    let (savings, disruption) = (0.2 / 1.2, 3.0 / 7.0);
    assert!(close(sc.score, savings / disruption), "{sc:?}");
    assert!(close(sc.savings_percent, 100.0 * savings), "{sc:?}");
    assert!(close(sc.disruption_percent, 100.0 * disruption), "{sc:?}");

    // The same cluster under WhenEmptyOrUnderutilized consolidates (n0 alone, or the three
    // onto cheaper nodes): each decision an approved move, counted but not scored.
    let o = run(
        &cluster(&[&[2000, 1500], &[7000], &[7000]]),
        &catalog(),
        &opts(),
    );
    assert!(!o.decisions.is_empty());
    let want: Vec<ConsolidationMove> = o
        .decisions
        .iter()
        .map(|d| ConsolidationMove {
            decision: "approved".into(),
            nodes: d.nodes.clone(),
            node_claims: vec![String::new(); d.nodes.len()],
            node_pools: vec![ConsolidationPoolScore {
                node_pool: "default".into(),
                policy: "WhenEmptyOrUnderutilized".into(),
                ..ConsolidationPoolScore::default()
            }],
        })
        .collect();
    assert_eq!(o.moves, want);
}

// balanced_integration_test.go "should approve consolidating multiple underutilized nodes": a
// decision of several nodes is Karpenter's multi-node command, one approved move scored per
// pool with the whole move's savings and disruption.
#[test]
fn a_multi_node_decision_is_one_approved_move() {
    let s = balanced(&[&[1000], &[1000], &[1000]]);
    let o = run(&s, &catalog(), &opts());
    let multi: Vec<_> = o.decisions.iter().filter(|d| d.nodes.len() > 1).collect();
    assert_eq!(multi.len(), 1, "{:?}", o.decisions);
    assert_eq!(o.moves.len(), o.decisions.len(), "{:?}", o.moves);
    let mv = o
        .moves
        .iter()
        .find(|m| m.nodes == multi[0].nodes)
        .expect("the multi-node decision's move");
    assert_eq!(mv.decision, "approved");
    let sc = scored(mv);
    // Pool: 1.2/h, disruption 6 (3 nodes, 3 pods).
    let n = multi[0].nodes.len() as f64;
    let want = (multi[0].savings_per_hour / 1.2) / (2.0 * n / 6.0);
    assert!(close(sc.score, want), "{sc:?} vs {want}");
    assert!(sc.score >= 0.5);
}

// A node of a Balanced pool whose best case cannot pass is skipped before any command is formed
// (Karpenter's `CanPassThreshold`): no move. Empty decisions never reach the evaluator
// (`emptiness.go`): no move either.
#[test]
fn skipped_candidates_and_empty_decisions_are_no_moves() {
    // n0: 0.4 of 1.6/h (25%) for 11 of 16 disruption (69%) even deleted: 0.36 < 0.5; n1 and
    // n2 cannot go anywhere or be replaced more cheaply, nor can the three together.
    let s = balanced(&[&[100; 10], &[7500], &[7500], &[]]);
    let o = run(&s, &catalog(), &opts());
    assert_eq!(reasons(&o), vec![d("Empty", &["n3"])]);
    assert!(o.moves.is_empty(), "{:?}", o.moves);
}
