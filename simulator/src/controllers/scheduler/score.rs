//! Scoring of the nodes that pass the filters: NodeResourcesFit's `LeastAllocated` strategy,
//! kube-scheduler's default ("Resource Bin Packing": `score = Σ weight × (allocatable −
//! requested) × 100 / allocatable / Σ weight` over cpu and memory, weight 1 each, with the pod's
//! own request counted and containers without requests counted as 100m / 200Mi).
//!
//! Least-allocated rather than most-allocated because it is what a default kube-scheduler (and
//! so EKS, whose scheduler configuration cannot be changed) does: spreading pods over the nodes
//! that exist is what the planner must expect from the cluster. Ties go to the node whose name
//! sorts first (the real scheduler picks among ties at random), so runs are deterministic.

use serde_json::Value;

use super::filters::NodeInfo;
use crate::resources::pod_requests;

/// The `LeastAllocated` score (0–100) of `node` for `pod`.
pub(crate) fn least_allocated(pod: &Value, node: &NodeInfo) -> i64 {
    let want = pod_requests(pod, true);
    let part = |allocatable: i64, requested: i64| {
        if allocatable <= 0 || requested > allocatable {
            0
        } else {
            ((allocatable - requested) as i128 * 100 / allocatable as i128) as i64
        }
    };
    let cpu = part(
        node.allocatable.cpu,
        node.requested_non_zero.cpu.saturating_add(want.cpu),
    );
    let memory = part(
        node.allocatable.memory,
        node.requested_non_zero.memory.saturating_add(want.memory),
    );
    (cpu + memory) / 2
}

/// The best of `feasible` (indices into `nodes`) for `pod`: highest score, then first name.
pub(crate) fn best(pod: &Value, nodes: &[NodeInfo], feasible: &[usize]) -> Option<usize> {
    feasible.iter().copied().max_by(|&a, &b| {
        least_allocated(pod, &nodes[a])
            .cmp(&least_allocated(pod, &nodes[b]))
            .then_with(|| nodes[b].name.cmp(&nodes[a].name))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, cpu: &str) -> NodeInfo {
        NodeInfo::new(json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "110"}},
        }))
    }

    fn pod(cpu: &str) -> Value {
        json!({"spec": {"containers": [{"resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}})
    }

    /// "Resource Bin Packing" worked example shape: (allocatable − requested) × 100 /
    /// allocatable per resource, averaged with equal weights.
    #[test]
    fn least_allocated_scores_free_share() {
        let mut n = node("n", "4");
        // cpu: (4000 − 1000) × 100 / 4000 = 75; memory: (4 − 1) × 100 / 4 = 75.
        assert_eq!(least_allocated(&pod("1"), &n), 75);
        n.add_pod(pod("2"));
        // cpu: (4000 − 3000) / 4000 = 25; memory: (4 − 2) / 4 = 50.
        assert_eq!(least_allocated(&pod("1"), &n), 37);
        // Containers without requests count as 100m and 200Mi.
        let empty = json!({"spec": {"containers": [{"name": "c"}]}});
        let fresh = node("f", "1");
        assert_eq!(least_allocated(&empty, &fresh), (90 + 95) / 2);
    }

    #[test]
    fn the_emptier_node_wins_and_ties_go_to_the_first_name() {
        let mut busy = node("a", "4");
        busy.add_pod(pod("2"));
        let nodes = vec![busy, node("c", "4"), node("b", "4")];
        assert_eq!(
            best(&pod("1"), &nodes, &[0, 1, 2]),
            Some(2),
            "b: empty, sorts before c"
        );
        assert_eq!(best(&pod("1"), &nodes, &[0]), Some(0));
        assert_eq!(best(&pod("1"), &nodes, &[]), None);
    }
}
