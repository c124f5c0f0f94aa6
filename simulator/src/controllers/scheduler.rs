//! A simulated kube-scheduler: binds pending pods to nodes where they fit and marks the rest
//! `PodScheduled=False, reason=Unschedulable` with a `FailedScheduling` event, as the real
//! scheduler does.
//!
//! It is a deliberately simple filter-and-score written for the simulator from kube-scheduler's
//! documented behaviour, over the stored Kubernetes objects, sharing no code with the planner:
//! the simulated cluster is an independent witness of what fits, so a wrong fit, taint,
//! affinity or overhead rule in the planner shows up in end-to-end tests.
//! - [`filters`]: NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
//!   NodeResourcesFit, InterPodAffinity (required anti-affinity), node Ready.
//! - [`score`]: least allocated, ties by node name.
//! - pods are taken in kube-scheduler's queue order: priority (high first), then creation time,
//!   then namespace/name; each binding is accounted before the next pod is placed.
//!
//! Not simulated: preemption, volume binding, topology spread constraints, required pod
//! affinity, preferred (soft) rules in scoring.

mod filters;
mod score;
mod selectors;
mod topology;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::{Ctx, kind, name_of, namespace_of};
use crate::api::Subresource;
use crate::api::eviction::pod_is_terminal;
use crate::api::server::set_condition;
use filters::{Namespaces, NodeInfo};

/// The scheduler name pods ask for when they want this scheduler.
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// What one scheduling pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Pods bound, as `namespace/name` → node.
    pub bound: Vec<(String, String)>,
    /// Pods marked Unschedulable, as `namespace/name` → reason.
    pub unschedulable: Vec<(String, String)>,
}

/// Runs the scheduler until `stop` turns true: after any change, at most once per `interval`.
pub(crate) async fn run(ctx: Ctx, interval: Duration, mut stop: watch::Receiver<bool>) {
    let mut changed = ctx.store.changed();
    loop {
        changed.borrow_and_update();
        // A pass is CPU work over the whole store: keep it off the runtime's async workers.
        let c = ctx.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || reconcile(&c)).await {
            tracing::error!(error = %e, "Scheduling pass panicked");
        }
        tokio::select! {
            _ = changed.changed() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Records a `FailedScheduling` Warning event on the pod, as the real scheduler does.
fn failed_scheduling_event(ctx: &Ctx, pod: &Value, message: &str, stamp: &str) {
    let Some(events) = kind(&ctx.store, "", "events") else {
        return;
    };
    let ns = namespace_of(pod);
    let event = json!({
        "metadata": {"generateName": format!("{}.", name_of(pod)), "namespace": ns},
        "involvedObject": {
            "kind": "Pod", "apiVersion": "v1", "namespace": ns, "name": name_of(pod),
            "uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"],
        },
        "reason": "FailedScheduling",
        "message": message,
        "type": "Warning",
        "source": {"component": SCHEDULER_NAME},
        "reportingComponent": SCHEDULER_NAME,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    });
    if let Err(e) = ctx.store.create(&events, ns, event) {
        tracing::debug!(error = %e, "Recording a FailedScheduling event failed");
    }
}

fn is_pending(p: &Value) -> bool {
    p["spec"]["nodeName"].as_str().is_none_or(str::is_empty)
        && p["metadata"]["deletionTimestamp"].is_null()
        && !pod_is_terminal(p)
        && p["spec"]["schedulerName"]
            .as_str()
            .is_none_or(|s| s == SCHEDULER_NAME)
}

/// kube-scheduler's queue order: higher `spec.priority` first, then older, then by name.
fn queue_order(a: &&Value, b: &&Value) -> std::cmp::Ordering {
    let priority = |p: &Value| p["spec"]["priority"].as_i64().unwrap_or(0);
    let created = |p: &Value| {
        p["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    priority(b)
        .cmp(&priority(a))
        .then_with(|| created(a).cmp(&created(b)))
        .then_with(|| namespace_of(a).cmp(namespace_of(b)))
        .then_with(|| name_of(a).cmp(name_of(b)))
}

/// The `FailedScheduling` message: `0/N nodes are available: ` and the count of nodes per
/// reason, reasons sorted, as kube-scheduler's FitError prints it.
fn fit_error(total: usize, reasons: &HashMap<String, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    if parts.is_empty() {
        return format!("0/{total} nodes are available.");
    }
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}

/// One scheduling pass: each pending pod, in queue order, goes to the best-scoring node that
/// passes every filter; pods that no node takes are marked Unschedulable with the reasons.
pub(crate) fn reconcile(ctx: &Ctx) -> Outcome {
    let store = &ctx.store;
    let mut outcome = Outcome::default();
    let (Some(pods_kind), Some(nodes_kind)) = (kind(store, "", "pods"), kind(store, "", "nodes"))
    else {
        return outcome;
    };
    let pods = store.all(&pods_kind.key());
    let mut pending: Vec<&Value> = pods.iter().filter(|p| is_pending(p)).collect();
    if pending.is_empty() {
        return outcome;
    }
    pending.sort_by(queue_order);
    // Nodes being deleted are as good as gone; NotReady ones are filtered with a reason.
    let mut nodes: Vec<NodeInfo> = store
        .all(&nodes_kind.key())
        .into_iter()
        .filter(|n| n["metadata"]["deletionTimestamp"].is_null())
        .map(NodeInfo::new)
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let index: HashMap<String, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for p in &pods {
        // Terminating pods still hold their resources until they are gone.
        if pod_is_terminal(p) {
            continue;
        }
        if let Some(&i) = p["spec"]["nodeName"].as_str().and_then(|n| index.get(n)) {
            nodes[i].add_pod(p.clone());
        }
    }
    let namespaces: Namespaces = kind(store, "", "namespaces")
        .map(|k| {
            store
                .all(&k.key())
                .iter()
                .map(|n| (name_of(n).to_string(), selectors::labels_of(n)))
                .collect()
        })
        .unwrap_or_default();
    let stamp = store.clock().rfc3339();
    let total = nodes.len();
    for p in pending {
        let key = format!("{}/{}", namespace_of(p), name_of(p));
        let mut reasons: HashMap<String, usize> = HashMap::new();
        let mut feasible = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let failed = filter(p, n, &nodes, &namespaces);
            if failed.is_empty() {
                feasible.push(i);
            }
            for r in failed {
                *reasons.entry(r).or_default() += 1;
            }
        }
        if let Some(i) = score::best(p, &nodes, &feasible) {
            let node = nodes[i].name.clone();
            if bind(ctx, &pods_kind, p, &node, &stamp) {
                let mut bound = p.clone();
                bound["spec"]["nodeName"] = json!(node);
                nodes[i].add_pod(bound);
                outcome.bound.push((key, node));
            }
            continue;
        }
        let message = fit_error(total, &reasons);
        mark_unschedulable(ctx, &pods_kind, p, &message, &stamp);
        outcome.unschedulable.push((key, message));
    }
    outcome
}

/// Binds `pod` to `node` unless something else bound it meanwhile; true when bound here.
fn bind(ctx: &Ctx, pods_kind: &crate::api::KindInfo, pod: &Value, node: &str, stamp: &str) -> bool {
    let r = ctx.store.mutate(
        pods_kind,
        namespace_of(pod),
        name_of(pod),
        Subresource::Both,
        |p| {
            if p["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty())
            {
                return Ok(false);
            }
            p["spec"]["nodeName"] = json!(node);
            set_condition(p, "PodScheduled", "True", None, None, stamp);
            Ok(true)
        },
    );
    r.is_ok_and(|p| p["spec"]["nodeName"] == node)
}

/// Sets `PodScheduled=False, reason=Unschedulable` and, when that changed the pod, records a
/// `FailedScheduling` event.
fn mark_unschedulable(
    ctx: &Ctx,
    pods_kind: &crate::api::KindInfo,
    pod: &Value,
    message: &str,
    stamp: &str,
) {
    let before = pod["status"]["conditions"].clone();
    let updated = ctx.store.mutate(
        pods_kind,
        namespace_of(pod),
        name_of(pod),
        Subresource::Status,
        |p| {
            let before = p["status"]["conditions"].clone();
            set_condition(
                p,
                "PodScheduled",
                "False",
                Some("Unschedulable"),
                Some(message),
                stamp,
            );
            Ok(p["status"]["conditions"] != before)
        },
    );
    if updated.is_ok_and(|p| p["status"]["conditions"] != before) {
        failed_scheduling_event(ctx, pod, message, stamp);
    }
}

/// Runs every filter; an empty list means the pod may go on the node.
fn filter(pod: &Value, node: &NodeInfo, all: &[NodeInfo], ns: &Namespaces) -> Vec<String> {
    if !crate::controllers::kubelet::node_ready(&node.node) {
        return vec!["node(s) were not ready".into()];
    }
    for f in [
        filters::node_unschedulable,
        filters::taint_toleration,
        filters::node_affinity,
        filters::node_ports,
    ] {
        if let Some(reason) = f(pod, node) {
            return vec![reason];
        }
    }
    let fit = filters::node_resources_fit(pod, node);
    if !fit.is_empty() {
        return fit;
    }
    if let Some(r) = topology::pod_topology_spread(pod, node, all) {
        return vec![r];
    }
    filters::inter_pod_anti_affinity(pod, node, all, ns)
        .or_else(|| topology::inter_pod_affinity(pod, node, all, ns))
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_error_counts_nodes_per_reason_sorted() {
        let reasons = HashMap::from([
            ("node(s) were not ready".to_string(), 2),
            ("Insufficient cpu".to_string(), 1),
        ]);
        assert_eq!(
            fit_error(3, &reasons),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were not ready."
        );
        assert_eq!(fit_error(0, &HashMap::new()), "0/0 nodes are available.");
    }

    #[test]
    fn queue_order_is_priority_then_age_then_name() {
        let p = |name: &str, priority: i64, created: &str| {
            json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": created},
                   "spec": {"priority": priority}})
        };
        let pods = [
            p("late", 0, "2026-01-01T00:00:02Z"),
            p("b", 0, "2026-01-01T00:00:01Z"),
            p("a", 0, "2026-01-01T00:00:01Z"),
            p("urgent", 100, "2026-01-01T00:00:09Z"),
        ];
        let mut order: Vec<&Value> = pods.iter().collect();
        order.sort_by(queue_order);
        let names: Vec<&str> = order.iter().map(|p| name_of(p)).collect();
        assert_eq!(names, ["urgent", "a", "b", "late"]);
    }
}
