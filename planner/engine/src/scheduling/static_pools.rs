//! Static NodePools (Karpenter v1.14 `spec.replicas`; kubernetes-sigs/karpenter
//! `pkg/controllers/static/provisioning/controller.go`): a static pool keeps `replicas`
//! NodeClaims, at most `limits.nodes`, each launched from the pool's template whatever is
//! pending, while Karpenter's `StaticCapacity` feature gate is on (`PlanOptions::static_capacity`).
//! Dynamic provisioning never opens a claim from a static pool (`provisioner.go`
//! filters them out), but pods may land on its nodes once they exist. Scaling down is the
//! disruption side's (`consolidation`, reason `ScaleDown`).

use std::collections::BTreeMap;

use crate::labels;
use crate::model::{ClaimIndex, ClusterSnapshot, NodePool, PodKey};

use super::node_claim::Claim;
use super::results::{Results, claim_name, planned_claim};
use super::scheduler::Scheduler;

/// How many NodeClaims each static NodePool has: its NodeClaims and its Nodes that no
/// NodeClaim owns, neither being deleted (Karpenter's running NodeClaims of the pool).
pub fn static_pool_sizes(snapshot: &ClusterSnapshot) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = snapshot
        .node_pools
        .iter()
        .filter(|p| p.replicas.is_some())
        .map(|p| (p.name.clone(), 0))
        .collect();
    if out.is_empty() {
        return out;
    }
    for c in &snapshot.node_claims {
        if c.deletion_time.is_none()
            && let Some(n) = c.labels.get(labels::NODEPOOL).and_then(|p| out.get_mut(p))
        {
            *n += 1;
        }
    }
    let claims = ClaimIndex::new(&snapshot.node_claims);
    for node in &snapshot.nodes {
        let owned = claims.claim_of(node).is_some();
        if !owned
            && node.deletion_time.is_none()
            && let Some(n) = node
                .labels
                .get(labels::NODEPOOL)
                .and_then(|p| out.get_mut(p))
        {
            *n += 1;
        }
    }
    out
}

/// The number of NodeClaims a static pool should have: `replicas`, at most `limits.nodes`
/// (quantities are kept in thousandths).
pub fn static_target(pool: &NodePool) -> Option<usize> {
    let replicas = usize::try_from(pool.replicas?.max(0)).unwrap_or(usize::MAX);
    let limit = pool
        .limited_resources
        .iter()
        .any(|r| r == super::dims::NODES)
        .then(|| pool.limits.as_ref().map(|l| l.get(super::dims::NODES)))
        .flatten()
        .map(|n| usize::try_from(n.max(0) / 1000).unwrap_or(usize::MAX));
    Some(limit.map_or(replicas, |l| replicas.min(l)))
}

// === impl Scheduler ===

impl Scheduler<'_> {
    /// The NodeClaims that bring every static NodePool up to its replicas: empty claims of the
    /// pool's template, listing every type the pool can launch, cheapest first. A static pool
    /// that cannot launch (no type matches, its node class is missing, ...) gets a note instead,
    /// and so does every static pool while the `StaticCapacity` feature gate is off.
    pub fn static_claims(&self) -> Results {
        let t = &self.tables;
        let mut out = Results::default();
        if !t.options.static_capacity {
            for pool in t.pools.iter().filter(|p| p.np.replicas.is_some()) {
                out.notes.push(format!(
                    "NodePool {} sets spec.replicas, but the StaticCapacity feature gate is off (Karpenter's default): it launches nothing",
                    pool.name()
                ));
            }
            return out;
        }
        let sizes = static_pool_sizes(t.snapshot);
        for (p, pool) in t.pools.iter().enumerate() {
            let Some(target) = static_target(&pool.np) else {
                continue;
            };
            let have = sizes.get(pool.name()).copied().unwrap_or(0);
            if have >= target {
                continue;
            }
            let missing = target - have;
            if let Some(why) = &pool.unusable {
                out.notes.push(format!(
                    "static NodePool {} is short of {missing} NodeClaim(s) and cannot launch: {why}",
                    pool.name()
                ));
                continue;
            }
            if pool.np.replicas.unwrap_or(0) > target as i64 {
                out.notes.push(format!(
                    "static NodePool {}: replicas {} capped at limits.nodes {target}",
                    pool.name(),
                    pool.np.replicas.unwrap_or(0)
                ));
            }
            let types: Vec<u32> = (0..pool.types.len() as u32).collect();
            for i in 0..missing {
                let claim = Claim::new(p, pool, types.clone(), format!("static-placeholder-{i}"));
                // Named from the pool, the clock and the claim's rank, so that a claim created
                // to replace a deleted one never takes its name.
                let seed: PodKey = format!("static:{}:{}", t.options.now, have + i);
                let name = claim_name(pool.name(), have + i, std::slice::from_ref(&seed));
                out.new_claims
                    .push(planned_claim(pool, &claim, name, Vec::new()));
            }
        }
        out.lower_bound = out.cost();
        out
    }
}
