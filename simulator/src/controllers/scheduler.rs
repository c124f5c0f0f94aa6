//! A minimal kube-scheduler: binds pending pods to Ready nodes where they fit and marks the rest
//! `PodScheduled=False, reason=Unschedulable`, as the real scheduler does.
//!
//! It does not pack pods itself: it converts the stored objects into the planner's model and
//! asks `planner::plan` (with no NodePools, so only existing nodes are used) where pending pods
//! go, so that the simulator and the planner agree on what fits.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use planner::catalog::Catalog;
use planner::manifests::SnapshotBuilder;
use planner::model::PlanOptions;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::kubelet::node_ready;
use super::{Ctx, kind, name_of, namespace_of};
use crate::api::Subresource;
use crate::api::eviction::pod_is_terminal;
use crate::api::server::set_condition;

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
pub(crate) async fn run(
    ctx: Ctx,
    catalog: Catalog,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut changed = ctx.store.changed();
    let catalog = std::sync::Arc::new(catalog);
    loop {
        changed.borrow_and_update();
        // Planning is CPU work: keep it off the runtime's async workers.
        let (c, cat) = (ctx.clone(), catalog.clone());
        if let Err(e) = tokio::task::spawn_blocking(move || reconcile(&c, &cat)).await {
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

/// One scheduling pass: pending pods go to Ready nodes where the planner places them; the
/// rest are marked Unschedulable with the planner's reason.
pub(crate) fn reconcile(ctx: &Ctx, catalog: &Catalog) -> Outcome {
    let store = &ctx.store;
    let mut outcome = Outcome::default();
    let (Some(pods_kind), Some(nodes_kind)) = (kind(store, "", "pods"), kind(store, "", "nodes"))
    else {
        return outcome;
    };
    let pods = store.all(&pods_kind.key());
    if !pods.iter().any(is_pending) {
        return outcome;
    }
    // Only Ready nodes that are not going away: the planner sees them as existing capacity,
    // and with no NodePools in the snapshot it can only place pods there.
    let nodes: Vec<Value> = store
        .all(&nodes_kind.key())
        .into_iter()
        .filter(|n| node_ready(n) && n["metadata"]["deletionTimestamp"].is_null())
        .collect();
    let node_names: HashSet<&str> = nodes.iter().map(name_of).collect();
    let mut builder = SnapshotBuilder::new();
    let mut add = |o: &Value, what: &str| {
        if let Err(e) = builder.add_value(o, what) {
            tracing::debug!(object = what, error = %e, "Scheduler skips an object the planner cannot read");
        }
    };
    for n in &nodes {
        add(n, "node");
    }
    for p in &pods {
        let bound_here = p["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| node_names.contains(n));
        if (bound_here && !pod_is_terminal(p)) || is_pending(p) {
            add(p, "pod");
        }
    }
    // Volume topology, namespaces (for namespaceSelector) and priorities. Workload controllers
    // are left out: their pods exist already, and DaemonSet pods are not simulated.
    for (group, resource) in [
        ("", "namespaces"),
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("storage.k8s.io", "storageclasses"),
        ("scheduling.k8s.io", "priorityclasses"),
    ] {
        if let Some(k) = kind(store, group, resource) {
            for o in store.all(&k.key()) {
                add(&o, resource);
            }
        }
    }
    let loaded = builder.finish();
    let options = PlanOptions {
        now: store.clock().now(),
        no_disruption: true,
        ..PlanOptions::default()
    };
    let plan = planner::plan(&loaded.snapshot, catalog, &options);
    let by_key: HashMap<String, &Value> = pods
        .iter()
        .filter(|p| is_pending(p))
        .map(|p| (format!("{}/{}", namespace_of(p), name_of(p)), p))
        .collect();
    let stamp = store.clock().rfc3339();
    for placement in &plan.existing_nodes {
        if !node_names.contains(placement.name.as_str()) {
            continue;
        }
        for key in &placement.pods {
            let Some(p) = by_key.get(key) else { continue };
            let node = placement.name.clone();
            let r = store.mutate(
                &pods_kind,
                namespace_of(p),
                name_of(p),
                Subresource::Both,
                |pod| {
                    if pod["spec"]["nodeName"]
                        .as_str()
                        .is_some_and(|n| !n.is_empty())
                    {
                        return Ok(false);
                    }
                    pod["spec"]["nodeName"] = json!(node);
                    set_condition(pod, "PodScheduled", "True", None, None, &stamp);
                    Ok(true)
                },
            );
            if r.is_ok() {
                outcome.bound.push((key.clone(), placement.name.clone()));
            }
        }
    }
    let total = nodes.len();
    for u in &plan.unschedulable {
        let Some(p) = by_key.get(&u.pod) else {
            continue;
        };
        let message = format!("0/{total} nodes are available: {}", u.reason);
        let before = p["status"]["conditions"].clone();
        let updated = store.mutate(
            &pods_kind,
            namespace_of(p),
            name_of(p),
            Subresource::Status,
            |pod| {
                let before = pod["status"]["conditions"].clone();
                set_condition(
                    pod,
                    "PodScheduled",
                    "False",
                    Some("Unschedulable"),
                    Some(&message),
                    &stamp,
                );
                Ok(pod["status"]["conditions"] != before)
            },
        );
        if updated.is_ok_and(|pod| pod["status"]["conditions"] != before) {
            failed_scheduling_event(ctx, p, &message, &stamp);
        }
        outcome
            .unschedulable
            .push((u.pod.clone(), u.reason.clone()));
    }
    outcome
}
