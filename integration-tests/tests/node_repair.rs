//! Node repair (Karpenter's `NodeRepair` feature gate) in the running system: the watcher, two
//! planners and the actuator as processes, EC2 on moto_server, the simulated cluster
//! (`integration_tests::system`). A Node is made unhealthy as the EKS Node Monitoring Agent
//! does it, by writing a condition through the Node's `status` subresource (what
//! `kubectl patch node NAME --subresource=status` sends): `KernelReady=False`, with a
//! `lastTransitionTime` 31 minutes back, past the AWS provider's 30-minute toleration.
//!
//! Derived from kubernetes-sigs/karpenter v1.14.1 `pkg/controllers/node/health/suite_test.go`
//! ("should delete nodes that are unhealthy by the cloud provider", "should ignore unhealthy
//! nodes if more then 20% of the nodes are unhealthy in a nodepool") and
//! aws/karpenter-provider-aws v1.14.1 `pkg/cloudprovider/cloudprovider.go` (`RepairPolicies`).
//!
//! What moto cannot show: nothing here depends on EC2 beyond launching and terminating. The
//! simulated kubelet keeps `Ready` itself, so the tests use a Node Monitoring Agent condition,
//! which no simulated component rewrites.
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it.

use std::collections::BTreeSet;
use std::time::Duration;

use integration_tests::system::{Options, POLL, System, WAIT};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use service_shell::clock::Clock;
use test_support::try_eventually;

fn node_claims(sys: &System) -> Api<DynamicObject> {
    Api::all_with(
        sys.kube.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim")),
    )
}

/// The Nodes of the default pool that are not being deleted.
async fn live_nodes(sys: &System) -> anyhow::Result<Vec<Node>> {
    let nodes = Api::<Node>::all(sys.kube.clone())
        .list(&ListParams::default().labels("karpenter.sh/nodepool=default"))
        .await?;
    Ok(nodes
        .items
        .into_iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .collect())
}

/// Names of the NodeClaims that are not being deleted.
async fn live_claims(sys: &System) -> anyhow::Result<BTreeSet<String>> {
    Ok(node_claims(sys)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| c.metadata.name)
        .collect())
}

/// Sets `KernelReady` on `node` through the status subresource: `False` since 31 minutes ago,
/// or `True` now.
async fn set_kernel_ready(sys: &System, node: &str, healthy: bool) -> anyhow::Result<()> {
    let now_s = Clock::new().now_ms() / 1000;
    let since = if healthy { now_s } else { now_s - 31 * 60 };
    let stamp = k8s_openapi::jiff::Timestamp::from_second(since)?.to_string();
    let api = Api::<Node>::all(sys.kube.clone());
    let current = api.get_status(node).await?;
    let mut conditions: Vec<Value> = current
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    conditions.retain(|c| c["type"] != "KernelReady");
    conditions.push(json!({
        "type": "KernelReady",
        "status": if healthy { "True" } else { "False" },
        "reason": if healthy { "KernelIsReady" } else { "KernelDeadlock" },
        "message": "set by the node repair test",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }));
    api.patch_status(
        node,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": conditions}})),
    )
    .await?;
    Ok(())
}

fn options(name: &str) -> Options {
    let mut opts = Options::new(name);
    // No consolidation: the Nodes change only by repair.
    opts.disruption = Some(json!({"consolidateAfter": "Never"}));
    opts
}

/// Two Nodes: one pod that fills a 2-vCPU type, then another that no longer fits beside it.
async fn two_nodes(sys: &System) -> anyhow::Result<Vec<Node>> {
    sys.deploy("first", 1, "1500m", "256Mi").await?;
    sys.wait_running("first", 1).await?;
    sys.deploy("second", 1, "1500m", "256Mi").await?;
    sys.wait_running("second", 1).await?;
    sys.wait_agreement().await?;
    let nodes = live_nodes(sys).await?;
    anyhow::ensure!(
        nodes.len() >= 2,
        "the scenario needs two Nodes for the circuit breaker, got {}",
        nodes.len()
    );
    Ok(nodes)
}

fn name(n: &Node) -> String {
    n.metadata.name.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unhealthy_node_is_replaced_unless_too_many_of_its_pool_are() -> anyhow::Result<()> {
    let mut opts = options("node-repair");
    opts.actuator_args = vec!["--feature-gates".into(), "NodeRepair=true".into()];
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    let nodes = two_nodes(&sys).await?;
    let claims = live_claims(&sys).await?;

    // Every Node unhealthy: more than 20% of the pool (2 of 2 > ceil(0.4) = 1). The repair is
    // blocked, and said so with a NodeRepairBlocked Event.
    for n in &nodes {
        set_kernel_ready(&sys, &name(n), false).await?;
    }
    let names: BTreeSet<String> = nodes.iter().map(name).collect();
    let events = Api::<Event>::namespaced(sys.kube.clone(), "default");
    try_eventually("a NodeRepairBlocked Event", WAIT, POLL, || {
        let (events, names) = (&events, &names);
        async move {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            list.items
                .iter()
                .find(|e| {
                    e.reason.as_deref() == Some("NodeRepairBlocked")
                        && e.involved_object
                            .name
                            .as_ref()
                            .is_some_and(|n| names.contains(n))
                })
                .map(|e| {
                    assert_eq!(e.type_.as_deref(), Some("Warning"));
                    assert_eq!(
                        e.message.as_deref(),
                        Some("more than 20% nodes are unhealthy in the nodepool")
                    );
                })
                .ok_or_else(|| "none yet".to_string())
        }
    })
    .await?;
    // The Event is written by the pass that decided not to repair; two more passes (2 s each)
    // change nothing either.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(live_claims(&sys).await?, claims, "nothing repaired");
    assert_eq!(live_nodes(&sys).await?.len(), nodes.len());

    // One Node healthy again: 1 of 2 is within the breaker, so the other is repaired: its
    // NodeClaim deleted, its pods deleted at once (forceful termination), a replacement
    // launched for them.
    let (sick, well) = (&nodes[0], &nodes[1]);
    set_kernel_ready(&sys, &name(well), true).await?;
    let sick_name = name(sick);
    try_eventually("the unhealthy Node gone", WAIT, POLL, || {
        let (sys, sick_name) = (&sys, &sick_name);
        async move {
            let nodes = Api::<Node>::all(sys.kube.clone());
            match nodes.get_opt(sick_name).await {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err("still there".to_string()),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await?;
    sys.wait_running("first", 1).await?;
    sys.wait_running("second", 1).await?;
    let a = sys.wait_agreement().await?;
    let after = live_claims(&sys).await?;
    assert_eq!(after.len(), claims.len(), "one NodeClaim replaced: {a:?}");
    assert_eq!(
        claims.difference(&after).count(),
        1,
        "exactly the unhealthy Node's NodeClaim went: {claims:?} → {after:?}"
    );
    let nodes_after: BTreeSet<String> = live_nodes(&sys).await?.iter().map(name).collect();
    assert!(nodes_after.contains(&name(well)), "{nodes_after:?}");
    assert!(!nodes_after.contains(&sick_name), "{nodes_after:?}");
    // Karpenter's repair metrics (`pkg/controllers/node/health/controller.go`), on the
    // actuator's scrape.
    let text = integration_tests::process::scrape(sys.actuator_metrics.expect("metrics")).await?;
    let counted = |family: &str, want: &[&str]| {
        text.lines().any(|l| {
            l.starts_with(family)
                && want.iter().all(|w| l.contains(w))
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(1.0)
        })
    };
    assert!(
        counted(
            "karpenter_nodeclaims_unhealthy_disrupted_total{",
            &[
                r#"condition="kernel_ready""#,
                r#"nodepool="default""#,
                "image_id=\""
            ]
        ),
        "{text}"
    );
    assert!(
        counted(
            "karpenter_nodeclaims_disrupted_total{",
            &[r#"reason="unhealthy""#, r#"nodepool="default""#]
        ),
        "{text}"
    );
    sys.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_gate_off_an_unhealthy_node_stays() -> anyhow::Result<()> {
    // Karpenter's default: NodeRepair=false.
    let Some(sys) = System::start(options("node-repair-off")).await? else {
        return Ok(());
    };
    sys.deploy("first", 1, "1500m", "256Mi").await?;
    sys.wait_running("first", 1).await?;
    sys.wait_agreement().await?;
    let claims = live_claims(&sys).await?;
    let nodes = live_nodes(&sys).await?;
    for n in &nodes {
        set_kernel_ready(&sys, &name(n), false).await?;
    }
    // Several lifecycle passes (2 s each) later, nothing changed. With the gate on, one Node
    // alone (1 ≤ ceil(0.2)) would be repaired at the first pass.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(live_claims(&sys).await?, claims);
    assert_eq!(live_nodes(&sys).await?.len(), nodes.len());
    let log = std::fs::read_to_string(sys.dir.join("actuator.log")).unwrap_or_default();
    assert!(!log.contains("Deleting unhealthy node"), "{log}");
    sys.finish().await
}
