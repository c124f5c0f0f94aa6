//! Karpenter v1.14's `Balanced` consolidation policy: an underutilized move is taken only when
//! the share of its NodePool's cost it saves is at least half the share of the NodePool's
//! disruption it causes (kubernetes-sigs/karpenter `pkg/controllers/disruption/balanced.go`,
//! `designs/balanced-consolidation.md`).
//!
//! - A node's disruption cost is 1 (the node itself) plus `max(0, eviction cost)` of each of its
//!   reschedulable pods; a NodePool's totals are its nodes' prices and disruption costs, taken
//!   once per plan from the snapshot (nodes that are not candidates count too).
//! - A move's score is `(savings / pool cost) / (disruption / pool disruption)`; it passes when
//!   the score is at least `1 / k`, `k` = [`BALANCED_K`]. A move touching several Balanced pools
//!   passes only when each passes with its share of the savings (in proportion to its share of
//!   the removed nodes' price). Pools of other policies are not scored.
//! - A candidate whose best case (deleting it outright, nothing to pay for) cannot pass is not
//!   tried at all.

use std::collections::BTreeMap;

use super::candidate::{self, Candidate, PodsByNode};
use crate::labels;
use crate::model::{ClusterSnapshot, ConsolidationPolicy, Pod};
use crate::plan::ConsolidationPoolScore;

/// Karpenter's `BalancedK`: a move passes when its score is at least `1 / k`.
pub const BALANCED_K: f64 = K as f64;

/// [`BALANCED_K`] as the integer Karpenter prints (`k: 2` in `ConsolidationApproved`).
pub const K: u32 = 2;

/// Karpenter's `PerNodeBaseDisruptionCost`: what disrupting a node costs before its pods.
pub const PER_NODE_BASE_DISRUPTION_COST: f64 = 1.0;

/// A NodePool's cost and disruption totals.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PoolTotals {
    /// Hourly price of its nodes (those the catalog prices).
    pub cost: f64,
    /// Sum of its nodes' disruption costs.
    pub disruption: f64,
}

/// A move's score against one pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// Savings as a share of the pool's cost.
    pub savings_fraction: f64,
    /// Disruption as a share of the pool's disruption.
    pub disruption_fraction: f64,
}

// === impl Score ===

impl Score {
    /// Karpenter's `ScoreMove`: zero totals score nothing (the move is refused).
    pub fn of(savings: f64, disruption: f64, totals: PoolTotals) -> Self {
        if totals.cost <= 0.0 || totals.disruption <= 0.0 {
            return Score {
                savings_fraction: 0.0,
                disruption_fraction: 0.0,
            };
        }
        Score {
            savings_fraction: savings / totals.cost,
            disruption_fraction: disruption / totals.disruption,
        }
    }

    /// Savings share over disruption share; 0 without savings, infinite without disruption.
    pub fn value(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction == 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    /// Whether the move passes at [`BALANCED_K`].
    pub fn approved(&self) -> bool {
        self.value() >= threshold()
    }

    /// The plan's facts of this score for `pool` (Karpenter's `ScoreResult` as its metrics and
    /// Events print it).
    pub fn facts(&self, pool: &str) -> ConsolidationPoolScore {
        ConsolidationPoolScore {
            node_pool: pool.to_string(),
            policy: ConsolidationPolicy::Balanced.as_str().to_string(),
            scored: true,
            score: self.value(),
            threshold: threshold(),
            k: K,
            savings_percent: 100.0 * self.savings_fraction,
            disruption_percent: 100.0 * self.disruption_fraction,
        }
    }
}

/// Karpenter's `Threshold()`: `1 / k`.
pub fn threshold() -> f64 {
    1.0 / BALANCED_K
}

/// Disruption cost of a node whose reschedulable pods are `pods`.
pub fn node_disruption_cost<'p>(pods: impl IntoIterator<Item = &'p Pod>) -> f64 {
    PER_NODE_BASE_DISRUPTION_COST
        + pods
            .into_iter()
            .map(|p| candidate::eviction_cost(p).max(0.0))
            .sum::<f64>()
}

/// Totals of every Balanced NodePool: prices from the candidates, disruption from every node
/// labelled with the pool.
pub fn pool_totals(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    pods_on: &PodsByNode,
) -> BTreeMap<String, PoolTotals> {
    let mut out: BTreeMap<String, PoolTotals> = snapshot
        .node_pools
        .iter()
        .filter(|p| p.disruption.consolidation_policy == ConsolidationPolicy::Balanced)
        .map(|p| (p.name.clone(), PoolTotals::default()))
        .collect();
    if out.is_empty() {
        return out;
    }
    for c in candidates {
        if let (Some(t), Some(price)) = (out.get_mut(&c.node_pool), c.price) {
            t.cost += price;
        }
    }
    for n in &snapshot.nodes {
        let Some(t) = n
            .labels
            .get(labels::NODEPOOL)
            .and_then(|pool| out.get_mut(pool))
        else {
            continue;
        };
        let pods = pods_on.get(&n.name).map(Vec::as_slice).unwrap_or_default();
        t.disruption += node_disruption_cost(
            pods.iter()
                .map(|&i| &snapshot.pods[i])
                .filter(|p| candidate::is_reschedulable(p)),
        );
    }
    out
}

/// The score of a move in each Balanced pool it touches, by pool name (Karpenter's
/// `EvaluateBalancedMove`): each pool gets the savings in proportion to its share of the
/// removed nodes' price when the move spans several pools.
///
/// `nodes`: per removed node, its pool, its price and its disruption cost; `savings`: the
/// move's net hourly savings.
pub fn scores(
    nodes: &[(&str, f64, f64)],
    savings: f64,
    totals: &BTreeMap<String, PoolTotals>,
) -> Vec<(String, Score)> {
    let mut by_pool: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for &(pool, price, disruption) in nodes {
        if totals.contains_key(pool) {
            let e = by_pool.entry(pool).or_default();
            e.0 += price;
            e.1 += disruption;
        }
    }
    let source: f64 = nodes.iter().map(|n| n.1).sum();
    let pools = nodes
        .iter()
        .map(|n| n.0)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    by_pool
        .into_iter()
        .map(|(pool, (price, disruption))| {
            let share = if pools > 1 && source > 0.0 {
                savings * price / source
            } else {
                savings
            };
            (pool.to_string(), Score::of(share, disruption, totals[pool]))
        })
        .collect()
}

/// Why a move is refused under Balanced, naming the first pool (by name) of [`scores`] that
/// refuses it; `None` when every Balanced pool of the move approves (or none is Balanced).
pub fn refusal(scores: &[(String, Score)]) -> Option<String> {
    for (pool, score) in scores {
        if !score.approved() {
            return Some(format!(
                "NodePool {pool} is Balanced: the move saves {:.1}% of its cost for {:.1}% of its disruption (score {:.2}, needs {:.2})",
                100.0 * score.savings_fraction,
                100.0 * score.disruption_fraction,
                score.value(),
                threshold()
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(pool: &str, cost: f64, disruption: f64) -> BTreeMap<String, PoolTotals> {
        BTreeMap::from([(pool.to_string(), PoolTotals { cost, disruption })])
    }

    // Cases of kubernetes-sigs/karpenter pkg/controllers/disruption/balanced_test.go
    // ("ScoreMove") and balanced_scoring_test.go ("ScoreMove (SavingsRatio)").
    #[test]
    fn scores_as_karpenter() {
        let t = PoolTotals {
            cost: 100.0,
            disruption: 100.0,
        };
        // Savings share, disruption share, score, approved.
        for (savings, disruption, score, approved) in [
            (20.0, 5.0, 4.0, true),
            (10.0, 10.0, 1.0, true),
            (5.0, 50.0, 0.10, false),
            (0.0, 10.0, 0.0, false),
            (-5.0, 10.0, 0.0, false),
        ] {
            let s = Score::of(savings, disruption, t);
            assert!((s.value() - score).abs() < 1e-9, "{savings}/{disruption}");
            assert_eq!(s.approved(), approved, "{savings}/{disruption}");
        }
        let s = Score::of(10.0, 0.0, t);
        assert!(s.value().is_infinite() && s.approved());
        // Zero pool cost: nothing to normalise against, refused.
        assert!(
            !Score::of(
                1.0,
                1.0,
                PoolTotals {
                    cost: 0.0,
                    disruption: 5.0
                }
            )
            .approved()
        );
        // Scale invariance: the same shares give the same score.
        let a = Score::of(
            1.0,
            2.0,
            PoolTotals {
                cost: 10.0,
                disruption: 20.0,
            },
        );
        let b = Score::of(
            100.0,
            200.0,
            PoolTotals {
                cost: 1000.0,
                disruption: 2000.0,
            },
        );
        assert!((a.value() - b.value()).abs() < 1e-12);
    }

    // kubernetes-sigs/karpenter v1.14 pkg/controllers/disruption/balanced_test.go ("ScoreMove"),
    // with its RFC pool: 8 m7i.xlarge ($4.84/day) and 2 m7i.2xlarge ($9.68/day), $58.08/day,
    // disruption 90 (10 nodes, 80 pods). The fractions are computed in Karpenter's order, so
    // the scores are the same doubles, and so are the verdicts at the threshold.
    #[test]
    fn scores_equal_karpenters_test_cases() {
        let rfc = PoolTotals {
            cost: 58.08,
            disruption: 90.0,
        };
        let uniform = PoolTotals {
            cost: 48.40,
            disruption: 90.0,
        };
        let heterogeneous = PoolTotals {
            cost: 58.08,
            disruption: 117.0,
        };
        // (totals, savings, disruption, approved): "should approve an oversized node
        // consolidation", "should approve a spare capacity delete", "should reject a marginal
        // move", "should reject a well-packed node with zero savings", "should approve a replace
        // in a uniform pool", "should approve low-disruption nodes and reject high-disruption
        // nodes" (A, B).
        for (t, savings, disruption, approved) in [
            (rfc, 7.26, 4.0, true),
            (rfc, 4.84, 5.0, true),
            (rfc, 2.42, 9.0, false),
            (rfc, 0.0, 11.0, false),
            (uniform, 2.42, 9.0, true),
            (heterogeneous, 4.84, 5.0, true),
            (heterogeneous, 4.84, 32.0, false),
        ] {
            let s = Score::of(savings, disruption, t);
            let want = if savings > 0.0 {
                (savings / t.cost) / (disruption / t.disruption)
            } else {
                0.0
            };
            assert_eq!(s.value(), want, "{savings}/{disruption}");
            assert_eq!(
                s.approved(),
                approved,
                "{savings}/{disruption}: {}",
                s.value()
            );
            // What the metrics and the ConsolidationApproved Event print.
            let f = s.facts("default");
            assert_eq!((f.k, f.threshold, f.scored), (2, 0.5, true));
            assert_eq!(f.policy, "Balanced");
            assert_eq!(f.score, want);
            assert!((f.savings_percent - 100.0 * savings / t.cost).abs() < 1e-12);
            assert!((f.disruption_percent - 100.0 * disruption / t.disruption).abs() < 1e-12);
        }
        // "should approve with +Inf score when move disruption is zero and savings positive",
        // "should reject when both savings and disruption are zero".
        assert!(Score::of(4.84, 0.0, rfc).value().is_infinite());
        assert!(Score::of(4.84, 0.0, rfc).approved());
        assert!(!Score::of(0.0, 0.0, rfc).approved());
        // "scale invariance": ten times the pool, the same score.
        let big = PoolTotals {
            cost: 580.80,
            disruption: 900.0,
        };
        assert!(
            (Score::of(7.26, 4.0, rfc).value() - Score::of(7.26, 4.0, big).value()).abs() < 0.01
        );
    }

    #[test]
    fn every_balanced_pool_must_approve_with_its_share() {
        let mut t = totals("a", 10.0, 10.0);
        t.insert(
            "b".to_string(),
            PoolTotals {
                cost: 10.0,
                disruption: 4.0,
            },
        );
        // 4/h saved from 2/h of pool a and 2/h of pool b: each gets 2/h, 20% of its cost.
        // Pool a: disruption 2 of 10 (20%): score 1, passes. Pool b: 2 of 4 (50%): 0.4, refused.
        let s = scores(&[("a", 2.0, 2.0), ("b", 2.0, 2.0)], 4.0, &t);
        assert_eq!(s.len(), 2);
        assert!((s[0].1.value() - 1.0).abs() < 1e-12 && s[0].1.approved());
        assert!((s[1].1.value() - 0.4).abs() < 1e-12 && !s[1].1.approved());
        let why = refusal(&s).expect("b refuses");
        assert!(why.starts_with("NodePool b is Balanced"), "{why}");
        // A pool that is not Balanced is not scored.
        let s = scores(&[("c", 2.0, 9.0)], 0.01, &t);
        assert!(s.is_empty());
        assert_eq!(refusal(&s), None);
    }
}
