//! What the consolidation tests and benches measure after a scale-in: the live cost
//! ([`cost`]), the planner's proven lower bound for the pods left ([`bound`]), and one
//! consolidation round of the running system ([`round`]).
//!
//! A round is what the running system does between two quiet moments: the disruptions it
//! executes at once (each plan commits every decision its budgets allow), until none is
//! executing and EC2, the ledger and the cluster agree again, as Karpenter's disruption
//! controller runs one command per pass (kubernetes-sigs/karpenter
//! `pkg/controllers/disruption/controller.go`).

use std::collections::BTreeSet;

use actuator::ledger::DisruptionState;
use serde_json::{Value, json};

use crate::system::{self, System, WAIT, default_node_class};

/// A Deployment: (name, replicas, cpu, memory).
pub type Workload<'a> = (&'a str, i32, &'a str, &'a str);

/// The hourly cost of the live instances, from `catalog`'s prices.
///
/// # Errors
/// When moto cannot be asked, or an instance's type and zone have no price.
pub async fn cost(sys: &System, catalog: &planner::catalog::Catalog) -> anyhow::Result<f64> {
    let mut sum = 0.0;
    for i in sys.instances().await? {
        if !matches!(i.state.as_str(), "pending" | "running") {
            continue;
        }
        let capacity = if i.spot { "spot" } else { "on-demand" };
        let price = catalog
            .get(&i.instance_type)
            .and_then(|t| {
                t.offerings
                    .iter()
                    .find(|o| o.zone == i.zone && o.capacity_type == capacity)
            })
            .map(|o| o.price)
            .ok_or_else(|| anyhow::anyhow!("no price for {} in {}", i.instance_type, i.zone))?;
        sum += price;
    }
    Ok(sum)
}

/// The planner's proven lower bound for `replicas` pods of each Deployment under the system's
/// NodePool and EC2NodeClass, planned as pending pods (`dovetail plan`'s summary).
///
/// # Errors
/// When the manifests do not load.
pub fn bound(
    sys: &System,
    catalog: &planner::catalog::Catalog,
    replicas: &[Workload<'_>],
) -> anyhow::Result<f64> {
    let mut reader = planner_manifests::Reader::new();
    reader.add_value(&default_node_class(), "system")?;
    reader.add_value(&sys.node_pool(), "system")?;
    for (name, n, cpu, memory) in replicas {
        for i in 0..*n {
            let pod: Value = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{name}-{i}"), "namespace": "default",
                             "labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
            });
            reader.add_value(&pod, "pods")?;
        }
    }
    let loaded = reader.finish()?;
    let options = planner::model::PlanOptions {
        no_disruption: true,
        ..Default::default()
    };
    let plan = planner::plan(&loaded.snapshot, catalog, &options);
    Ok(plan.summary.lower_bound_cost_per_hour)
}

/// What one round did.
#[derive(Clone, Debug, Default)]
pub struct Round {
    /// The disruptions done in it, as `key#attempt`.
    pub done: Vec<String>,
    /// Each as `reason N → M replacement(s)`.
    pub reasons: Vec<String>,
}

/// Waits (up to [`WAIT`]) for the next round: at least one disruption not in `seen` is done,
/// none is executing, and EC2, the ledger and the cluster agree. Adds the round's disruptions
/// to `seen`.
///
/// # Errors
/// When no round completes within [`WAIT`] (the system stopped consolidating, or is stuck).
pub async fn round(sys: &System, seen: &mut BTreeSet<String>) -> anyhow::Result<Round> {
    let s = sys;
    let before = &*seen;
    let r = test_support::try_eventually(
        "a consolidation round",
        WAIT,
        system::POLL,
        move || async move {
            let ds = s
                .ledger
                .disruptions(false)
                .await
                .map_err(|e| e.to_string())?;
            let executing = ds.iter().any(|d| {
                matches!(
                    d.state,
                    DisruptionState::Confirmed
                        | DisruptionState::Replacing
                        | DisruptionState::Deleting
                        | DisruptionState::Aborting
                )
            });
            let done: BTreeSet<String> = ds
                .iter()
                .filter(|d| d.state == DisruptionState::Done)
                .map(|d| format!("{}#{}", d.key, d.attempt))
                .collect();
            let new: Vec<String> = done.difference(before).cloned().collect();
            if new.is_empty() || executing {
                return Err(format!(
                    "{} done so far, executing: {executing}",
                    done.len()
                ));
            }
            s.agreement().await?;
            let reasons: Vec<String> = ds
                .iter()
                .filter(|d| new.contains(&format!("{}#{}", d.key, d.attempt)))
                .map(|d| {
                    format!(
                        "{} {} → {} replacement(s)",
                        d.reason,
                        d.nodes.len(),
                        d.replacements.len()
                    )
                })
                .collect();
            Ok(Round { done: new, reasons })
        },
    )
    .await?;
    seen.extend(r.done.iter().cloned());
    Ok(r)
}
