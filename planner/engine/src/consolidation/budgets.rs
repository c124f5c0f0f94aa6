//! NodePool disruption budgets (Karpenter's `GetAllowedDisruptionsByReason`).
//!
//! For each NodePool and reason the allowed number of nodes disrupting at once is the minimum of
//! the budgets active at `now` that apply to the reason (`nodes` as a count, or a percentage of
//! the pool's nodes rounded up); with no active budget it is unlimited. Nodes already disrupting
//! (deleting, tainted `karpenter.sh/disrupted`) or NotReady count against it, and so does every
//! node a decision of this plan disrupts, whatever its reason (decisions run concurrently).

use std::collections::BTreeMap;

use super::cron::Schedule;
use super::{Error, Reason};
use crate::model::{Budget, BudgetNodes, NodePool, Timestamp};

/// Budget accounting for every NodePool of a plan.
#[derive(Debug, Clone, Default)]
pub(crate) struct Budgets {
    pools: BTreeMap<String, PoolBudget>,
}

#[derive(Debug, Clone, Default)]
struct PoolBudget {
    /// Allowed disruptions per graceful reason before this plan (already net of nodes
    /// disrupting); `None` is unlimited.
    allowed: BTreeMap<Reason, Option<u32>>,
    /// Nodes this plan disrupts.
    used: u32,
}

// === impl Budgets ===

impl Budgets {
    /// Evaluates every pool's budgets at `now`. `nodes` and `disrupting` count the pool's
    /// managed, initialized nodes and how many of them are disrupting or NotReady.
    ///
    /// # Errors
    /// [`Error::Schedule`] when a budget's cron schedule cannot be parsed.
    pub(crate) fn new(
        pools: &[NodePool],
        counts: &BTreeMap<String, (u32, u32)>,
        now: Timestamp,
    ) -> Result<Self, Error> {
        let mut out = Self::default();
        for pool in pools {
            let (nodes, disrupting) = counts.get(&pool.name).copied().unwrap_or((0, 0));
            let allowed = allowed_by_reason(pool, nodes, now)?
                .into_iter()
                .map(|(reason, min)| (reason, min.map(|m| m.saturating_sub(disrupting))))
                .collect();
            out.pools
                .insert(pool.name.clone(), PoolBudget { allowed, used: 0 });
        }
        Ok(out)
    }

    /// How many more nodes of `pool` this plan may disrupt for `reason` (`u32::MAX` when no
    /// budget limits it). Expiry and a static pool's scale-down are not limited by budgets.
    pub(crate) fn remaining(&self, pool: &str, reason: Reason) -> u32 {
        if reason.is_forceful() {
            return u32::MAX;
        }
        let Some(p) = self.pools.get(pool) else {
            return 0;
        };
        match p.allowed.get(&reason).copied().flatten() {
            None => u32::MAX,
            Some(a) => a.saturating_sub(p.used),
        }
    }

    /// Records that this plan disrupts `n` nodes of `pool`.
    pub(crate) fn consume(&mut self, pool: &str, n: u32) {
        if let Some(p) = self.pools.get_mut(pool) {
            p.used += n;
        }
    }
}

/// The graceful reasons budgets limit, in Karpenter's order of disruption methods.
pub(crate) const GRACEFUL: [Reason; 3] = [Reason::Empty, Reason::Drifted, Reason::Underutilized];

/// Per graceful reason, the least `nodes` of the pool's budgets active at `now` that apply to
/// it, scaled to the pool's `nodes` (Karpenter's `GetAllowedDisruptionsByReason`, before nodes
/// already disrupting are taken off); `None` when no budget limits it.
///
/// # Errors
/// [`Error::Schedule`] when a budget's cron schedule cannot be parsed.
pub(crate) fn allowed_by_reason(
    pool: &NodePool,
    nodes: u32,
    now: Timestamp,
) -> Result<BTreeMap<Reason, Option<u32>>, Error> {
    let mut allowed = BTreeMap::new();
    for reason in GRACEFUL {
        let mut min: Option<u32> = None;
        for budget in &pool.disruption.budgets {
            if !applies(budget, reason) || !is_active(budget, now, &pool.name)? {
                continue;
            }
            let n = scaled(budget.nodes, nodes);
            min = Some(min.map_or(n, |m| m.min(n)));
        }
        allowed.insert(reason, min);
    }
    Ok(allowed)
}

/// What Karpenter's `BuildDisruptionBudgetMapping` reports per NodePool and graceful reason:
/// the allowed disruptions (its `karpenter_nodepools_allowed_disruptions` gauge; Go's
/// `math.MaxInt32` when no budget limits them, 0 when a schedule cannot be read, as Karpenter
/// fails closed), and the pool's counted and disrupting nodes. Sorted by pool, then reason.
pub(crate) fn status(
    pools: &[NodePool],
    counts: &BTreeMap<String, (u32, u32)>,
    now: Timestamp,
) -> Vec<crate::plan::NodePoolBudgetStatus> {
    let mut pools: Vec<&NodePool> = pools.iter().collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = Vec::new();
    for pool in pools {
        let (nodes, disrupting) = counts.get(&pool.name).copied().unwrap_or((0, 0));
        let allowed = allowed_by_reason(pool, nodes, now).ok();
        for reason in GRACEFUL {
            let a = match &allowed {
                None => 0,
                Some(m) => m
                    .get(&reason)
                    .copied()
                    .flatten()
                    .map_or(i32::MAX, |n| i32::try_from(n).unwrap_or(i32::MAX)),
            };
            out.push(crate::plan::NodePoolBudgetStatus {
                node_pool: pool.name.clone(),
                reason: reason.as_str().to_string(),
                allowed: a,
                nodes,
                disrupting,
            });
        }
    }
    out
}

fn applies(budget: &Budget, reason: Reason) -> bool {
    budget.reasons.is_empty() || budget.reasons.iter().any(|r| r == reason.as_str())
}

/// `nodes` against the pool size, percentages rounded up as Karpenter does.
pub(crate) fn scaled(nodes: BudgetNodes, pool_nodes: u32) -> u32 {
    match nodes {
        BudgetNodes::Count(n) => n,
        BudgetNodes::Percent(p) => (u64::from(pool_nodes) * u64::from(p)).div_ceil(100) as u32,
    }
}

fn is_active(budget: &Budget, now: Timestamp, pool: &str) -> Result<bool, Error> {
    match (&budget.schedule, budget.duration) {
        (None, _) => Ok(true),
        // Karpenter requires both; a schedule without a duration is never active.
        (Some(_), None) => Ok(false),
        (Some(s), Some(d)) => {
            let schedule = Schedule::parse(s).map_err(|source| Error::Schedule {
                pool: pool.to_string(),
                source,
            })?;
            Ok(schedule.active_at(now, d))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Disruption;

    fn pool(budgets: Vec<Budget>) -> NodePool {
        NodePool {
            name: "p".into(),
            disruption: Disruption {
                budgets,
                ..Disruption::default()
            },
            ..NodePool::default()
        }
    }

    fn b(nodes: BudgetNodes, reasons: &[&str], sched: Option<(&str, i64)>) -> Budget {
        Budget {
            nodes,
            reasons: reasons.iter().map(|s| s.to_string()).collect(),
            schedule: sched.map(|(s, _)| s.to_string()),
            duration: sched.map(|(_, d)| d),
        }
    }

    fn counts(n: u32, d: u32) -> BTreeMap<String, (u32, u32)> {
        [("p".to_string(), (n, d))].into_iter().collect()
    }

    // Monday 2026-11-30 10:00 UTC.
    const NOW: Timestamp = 1_795_996_800 + 10 * 3600;

    #[test]
    fn default_is_ten_percent_rounded_up() {
        let p = pool(Disruption::default().budgets);
        let bud = Budgets::new(&[p], &counts(11, 0), NOW).unwrap();
        assert_eq!(bud.remaining("p", Reason::Underutilized), 2);
        let p = pool(Disruption::default().budgets);
        let bud = Budgets::new(&[p], &counts(11, 1), NOW).unwrap();
        assert_eq!(bud.remaining("p", Reason::Empty), 1);
        assert_eq!(bud.remaining("p", Reason::Expired), u32::MAX);
        assert_eq!(bud.remaining("unknown", Reason::Empty), 0);
    }

    #[test]
    fn minimum_of_active_budgets_per_reason_and_schedule() {
        let p = pool(vec![
            b(BudgetNodes::Count(5), &[], None),
            b(BudgetNodes::Count(0), &["Drifted"], None),
            // Business hours on weekdays: nothing underutilized.
            b(
                BudgetNodes::Count(0),
                &["Underutilized"],
                Some(("0 9 * * mon-fri", 8 * 3600)),
            ),
            // Saturdays only: would allow 1 empty.
            b(
                BudgetNodes::Count(1),
                &["Empty"],
                Some(("0 0 * * sat", 86_400)),
            ),
        ]);
        let mut bud = Budgets::new(&[p], &counts(100, 2), NOW).unwrap();
        assert_eq!(bud.remaining("p", Reason::Underutilized), 0);
        assert_eq!(bud.remaining("p", Reason::Drifted), 0);
        assert_eq!(bud.remaining("p", Reason::Empty), 3);
        bud.consume("p", 2);
        assert_eq!(bud.remaining("p", Reason::Empty), 1);
    }

    #[test]
    fn bad_schedule_is_an_error_naming_the_pool() {
        let p = pool(vec![b(
            BudgetNodes::Count(1),
            &[],
            Some(("61 * * * *", 60)),
        )]);
        let e = Budgets::new(&[p], &counts(1, 0), NOW).unwrap_err();
        assert!(e.to_string().contains("NodePool p"), "{e}");
        assert!(e.to_string().contains("minute"), "{e}");
    }

    #[test]
    fn percent_rounding() {
        assert_eq!(scaled(BudgetNodes::Percent(10), 0), 0);
        assert_eq!(scaled(BudgetNodes::Percent(10), 1), 1);
        assert_eq!(scaled(BudgetNodes::Percent(10), 10), 1);
        assert_eq!(scaled(BudgetNodes::Percent(25), 10), 3);
        assert_eq!(scaled(BudgetNodes::Percent(100), 7), 7);
    }
}
