//! Disruption budgets re-checked at execution time (a small re-implementation; the planner's
//! own budget logic lives in the engine, which the actuator must not depend on).
//!
//! Per NodePool and reason: the minimum over the budgets that apply (`reasons` unset or naming
//! the reason) of `nodes` (a count, or a percentage of the pool's nodes rounded up, as
//! Karpenter's `GetScaledValueFromIntOrPercent(…, roundUp=true)`), minus the pool's nodes
//! already disrupting. No budget: unlimited. `Expired` ignores budgets (Karpenter v1 expires
//! forcefully). A budget with a `schedule` is taken as always active: evaluating cron here would
//! be a second implementation of the planner's, and erring towards the stricter budget only
//! delays a disruption (the planner, which evaluates schedules, proposes it again).

use crds::NodePool;

/// How many more nodes of `pool` may be disrupted for `reason` now, given `total` nodes in the
/// pool and `disrupting` of them already being disrupted; `None` is unlimited.
///
/// # Errors
/// A budget whose `nodes` is neither a count nor a percentage, naming it.
pub fn allowed(
    pool: &NodePool,
    reason: &str,
    total: usize,
    disrupting: usize,
) -> Result<Option<usize>, String> {
    if reason == "Expired" {
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
        if !applies {
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
            allowed(&p, "Underutilized", 25, 0),
            Ok(Some(3)),
            "2.5 rounds up"
        );
        assert_eq!(allowed(&p, "Underutilized", 25, 2), Ok(Some(1)));
        assert_eq!(allowed(&p, "Underutilized", 25, 5), Ok(Some(0)));
        let p = pool(json!([{"nodes": "5"}, {"nodes": "0", "reasons": ["Drifted"]}]));
        assert_eq!(allowed(&p, "Underutilized", 10, 1), Ok(Some(4)));
        assert_eq!(allowed(&p, "Drifted", 10, 0), Ok(Some(0)));
        assert_eq!(
            allowed(&p, "Expired", 10, 0),
            Ok(None),
            "expiry ignores budgets"
        );
        let p = pool(json!([{"nodes": "0", "schedule": "@daily", "duration": "1h"}]));
        assert_eq!(
            allowed(&p, "Empty", 10, 0),
            Ok(Some(0)),
            "schedules count as active"
        );
        let p: NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "open"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
        }))
        .expect("pool");
        assert_eq!(
            allowed(&p, "Empty", 10, 9),
            Ok(None),
            "no budget: unlimited"
        );
        let p = pool(json!([{"nodes": "lots"}]));
        let e = allowed(&p, "Empty", 10, 0).expect_err("bad nodes");
        assert!(e.contains("budgets[0].nodes"), "{e}");
    }
}
