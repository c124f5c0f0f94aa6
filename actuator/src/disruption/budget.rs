//! Disruption budgets re-checked at execution time (a small re-implementation; the planner's
//! own budget logic lives in the engine, which the actuator must not depend on).
//!
//! Per NodePool and reason: the minimum over the budgets that apply (`reasons` unset or naming
//! the reason) of `nodes` (a count, or a percentage of the pool's nodes rounded up, as
//! Karpenter's `GetScaledValueFromIntOrPercent(…, roundUp=true)`), minus the pool's nodes
//! already disrupting. No budget: unlimited. `Expired` ignores budgets (Karpenter v1 expires
//! forcefully). A budget with a `schedule` applies only while active: the schedule fired in
//! `(now − duration, now]`, UTC, evaluated by the same cron matcher as the planner's
//! (`common::cron`); a schedule without a duration is never active (Karpenter requires both).

use common::cron::Schedule;
use common::duration::parse_go_duration;
use crds::NodePool;

/// How many more nodes of `pool` may be disrupted for `reason` at `now` (seconds since the
/// epoch), given `total` nodes in the pool and `disrupting` of them already being disrupted;
/// `None` is unlimited.
///
/// # Errors
/// A budget whose `nodes` is neither a count nor a percentage, or whose `schedule` or
/// `duration` does not parse, naming it.
pub fn allowed(
    pool: &NodePool,
    reason: &str,
    total: usize,
    disrupting: usize,
    now: i64,
) -> Result<Option<usize>, String> {
    // Expiry and a static NodePool's scale-down are not held to budgets (Karpenter deletes
    // those NodeClaims outright; the drain still honours PDBs).
    if reason == "Expired" || reason == "ScaleDown" {
        return Ok(None);
    }
    let name = pool.metadata.name.clone().unwrap_or_default();
    let budgets = pool
        .spec
        .disruption
        .as_ref()
        .and_then(|d| d.budgets.as_ref());
    let mut min: Option<usize> = None;
    for (i, b) in budgets.into_iter().flatten().enumerate() {
        let applies = b.reasons.as_ref().is_none_or(|rs| {
            rs.iter().any(|r| {
                serde_json::to_value(r)
                    .ok()
                    .is_some_and(|v| v.as_str() == Some(reason))
            })
        });
        if !applies || !active(b.schedule.as_deref(), b.duration.as_deref(), now, &name, i)? {
            continue;
        }
        let n = nodes(&b.nodes, total).ok_or_else(|| {
            format!(
                "NodePool {name}: spec.disruption.budgets[{i}].nodes {:?} is neither a count nor a percentage",
                b.nodes
            )
        })?;
        min = Some(min.map_or(n, |m| m.min(n)));
    }
    Ok(min.map(|m| m.saturating_sub(disrupting)))
}

/// Whether budget `i` of NodePool `pool` with this schedule and duration is active at `now`.
fn active(
    schedule: Option<&str>,
    duration: Option<&str>,
    now: i64,
    pool: &str,
    i: usize,
) -> Result<bool, String> {
    let Some(schedule) = schedule else {
        return Ok(true);
    };
    let Some(duration) = duration else {
        return Ok(false);
    };
    let field = |f: &str, e: &dyn std::fmt::Display| {
        format!("NodePool {pool}: spec.disruption.budgets[{i}].{f}: {e}")
    };
    let s = Schedule::parse(schedule).map_err(|e| field("schedule", &e))?;
    let d = parse_go_duration(duration).map_err(|e| field("duration", &e))?;
    Ok(s.active_at(now, d))
}

/// `5` → 5; `10%` of `total`, rounded up.
fn nodes(v: &str, total: usize) -> Option<usize> {
    let v = v.trim();
    match v.strip_suffix('%') {
        Some(p) => {
            let p: usize = p.parse().ok().filter(|p| *p <= 100)?;
            Some((p * total).div_ceil(100))
        }
        None => v.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Tuesday 2026-12-01 00:00:00 UTC.
    const MIDNIGHT: i64 = 1_796_083_200;
    /// Tuesday 2026-12-01 12:00:00 UTC.
    const NOON: i64 = MIDNIGHT + 12 * 3600;

    fn pool(budgets: serde_json::Value) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {
                "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}},
                "disruption": {"budgets": budgets}
            }
        }))
        .expect("pool")
    }

    #[test]
    fn counts_percentages_reasons_and_disrupting_nodes() {
        let p = pool(json!([{"nodes": "10%"}]));
        assert_eq!(
            allowed(&p, "Underutilized", 25, 0, NOON),
            Ok(Some(3)),
            "2.5 rounds up"
        );
        assert_eq!(allowed(&p, "Underutilized", 25, 2, NOON), Ok(Some(1)));
        assert_eq!(allowed(&p, "Underutilized", 25, 5, NOON), Ok(Some(0)));
        let p = pool(json!([{"nodes": "5"}, {"nodes": "0", "reasons": ["Drifted"]}]));
        assert_eq!(allowed(&p, "Underutilized", 10, 1, NOON), Ok(Some(4)));
        assert_eq!(allowed(&p, "Drifted", 10, 0, NOON), Ok(Some(0)));
        assert_eq!(
            allowed(&p, "Expired", 10, 0, NOON),
            Ok(None),
            "expiry ignores budgets"
        );
        assert_eq!(
            allowed(&p, "ScaleDown", 10, 0, NOON),
            Ok(None),
            "a static pool's scale-down ignores budgets"
        );
        // A schedule applies only while active: @daily for 1h is active from midnight to
        // 01:00 UTC, not at noon.
        let p =
            pool(json!([{"nodes": "20%"}, {"nodes": "0", "schedule": "@daily", "duration": "1h"}]));
        assert_eq!(
            allowed(&p, "Empty", 10, 0, NOON),
            Ok(Some(2)),
            "inactive at noon"
        );
        assert_eq!(
            allowed(&p, "Empty", 10, 0, MIDNIGHT + 30 * 60),
            Ok(Some(0)),
            "active at 00:30"
        );
        assert_eq!(
            allowed(&p, "Empty", 10, 0, MIDNIGHT + 3599),
            Ok(Some(0)),
            "active at 00:59:59"
        );
        assert_eq!(
            allowed(&p, "Empty", 10, 0, MIDNIGHT + 3600),
            Ok(Some(2)),
            "over at 01:00: the window (now - 1h, now] no longer holds 00:00"
        );
        // Business hours, the pattern Karpenter's docs show.
        let p = pool(json!([{"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]));
        assert_eq!(
            allowed(&p, "Drifted", 10, 0, NOON),
            Ok(Some(0)),
            "Tuesday noon"
        );
        assert_eq!(
            allowed(&p, "Drifted", 10, 0, NOON + 6 * 3600),
            Ok(None),
            "Tuesday 18:00"
        );
        // A schedule without a duration never applies.
        let p = pool(json!([{"nodes": "0", "schedule": "@daily"}]));
        assert_eq!(allowed(&p, "Empty", 10, 0, MIDNIGHT), Ok(None));
        // Bad schedules and durations name the field.
        let p = pool(json!([{"nodes": "0", "schedule": "0 25 * * *", "duration": "1h"}]));
        let e = allowed(&p, "Empty", 10, 0, NOON).expect_err("bad hour");
        assert!(
            e.contains("NodePool default: spec.disruption.budgets[0].schedule"),
            "{e}"
        );
        let p = pool(json!([{"nodes": "0", "schedule": "@daily", "duration": "soon"}]));
        let e = allowed(&p, "Empty", 10, 0, NOON).expect_err("bad duration");
        assert!(e.contains("budgets[0].duration"), "{e}");
        let p: NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "open"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
        }))
        .expect("pool");
        assert_eq!(
            allowed(&p, "Empty", 10, 9, NOON),
            Ok(None),
            "no budget: unlimited"
        );
        let p = pool(json!([{"nodes": "lots"}]));
        let e = allowed(&p, "Empty", 10, 0, NOON).expect_err("bad nodes");
        assert!(e.contains("budgets[0].nodes"), "{e}");
    }
}
