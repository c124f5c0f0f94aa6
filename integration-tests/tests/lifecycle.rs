//! NodeClaims and Nodes live and die as Karpenter's end-to-end suites expect
//! (kubernetes-sigs/karpenter `test/suites/nodeclaim`, `test/suites/termination`), through the
//! real processes: the watcher, two planners and `dovetail-actuator --cloud aws` on moto, the
//! simulated cluster (`integration_tests::system`). What a user sees is asserted: NodeClaims and
//! Nodes through the API, Events as `kubectl get events` reads them (core `v1`), instances and
//! their tags through EC2's DescribeInstances.
//!
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it.

use std::collections::BTreeSet;
use std::time::Duration;

use integration_tests::system::{Options, System, WAIT};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use test_support::try_eventually;

fn nodeclaims(sys: &System) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"));
    Api::all_with(sys.kube.clone(), &ar)
}

async fn nodeclaim_names(sys: &System) -> anyhow::Result<BTreeSet<String>> {
    Ok(nodeclaims(sys)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

/// A claim that is gone never blocks a new one for the same pods: the NodeClaim planned for a
/// pending pod is deleted before the pod binds; the planner proposes the same claim again and
/// the actuator launches it under a new name (Karpenter's `generateName: <nodepool>-`,
/// `pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go`), so the pod runs, and its
/// `Nominated` Events name the NodeClaim it runs on. The NodePool consolidates as Karpenter's
/// default does (`WhenEmptyOrUnderutilized`, `consolidateAfter: 0s`). The instance is tagged with its
/// Node's name (aws/karpenter-provider-aws `pkg/controllers/nodeclaim/tagging/controller.go`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nodeclaim_deleted_before_its_pod_binds_is_replaced_under_a_new_name()
-> anyhow::Result<()> {
    let mut opts = Options::new("deleted-before-bind");
    // A window between the launch and the Node in which to delete the NodeClaim.
    opts.register_after = Duration::from_secs(4);
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    sys.deploy("web", 1, "500m", "512Mi").await?;
    let s = &sys;
    let first = try_eventually(
        "a NodeClaim",
        WAIT,
        Duration::from_millis(20),
        || async move {
            match nodeclaim_names(s).await {
                Ok(n) => n.into_iter().next().ok_or_else(|| "none yet".to_string()),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await?;
    nodeclaims(&sys)
        .delete(&first, &DeleteParams::default())
        .await?;
    sys.wait_running("web", 1).await?;
    let a = sys.wait_agreement().await?;
    assert_eq!(a.node_claims, 1, "{a:?}");
    let names = nodeclaim_names(&sys).await?;
    let second = names.iter().next().cloned().unwrap_or_default();
    assert_ne!(second, first, "a new name: {names:?}");

    // The pod runs on the new NodeClaim's Node, and its Events say so (kubectl get events).
    let pods = Api::<Pod>::namespaced(sys.kube.clone(), "default")
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items;
    let pod = pods[0].metadata.name.clone().unwrap_or_default();
    let events = Api::<Event>::namespaced(sys.kube.clone(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await?
        .items;
    let nominated: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Nominated"))
        .filter_map(|e| e.message.clone())
        .collect();
    assert!(
        nominated
            .iter()
            .any(|m| m.ends_with(&format!("nodeclaim/{second}"))),
        "{nominated:?}"
    );
    let node_name = pods[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    // EC2: the live instance carries its Node's name.
    let node = Api::<Node>::all(sys.kube.clone()).get(&node_name).await?;
    let pid = node.spec.and_then(|s| s.provider_id).unwrap_or_default();
    let s = &sys;
    let pid = &pid;
    let node_name = &node_name;
    try_eventually(
        "the Name tag",
        WAIT,
        Duration::from_millis(200),
        || async move {
            let live: Vec<_> = s
                .instances()
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|i| i.provider_id() == *pid)
                .collect();
            match live.first().and_then(|i| i.tags.get("Name")) {
                Some(n) if n == node_name => Ok(()),
                other => Err(format!("Name tag {other:?}")),
            }
        },
    )
    .await?;
    sys.finish().await
}

/// `kubectl delete node` is durable (Karpenter's `test/suites/termination`): the Node carries
/// the `karpenter.sh/termination` finalizer, so the deletion drains it, terminates its instance
/// in EC2 and deletes its NodeClaim; the pod runs again on a new node and nothing re-registers
/// the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_node_terminates_its_instance_and_nodeclaim() -> anyhow::Result<()> {
    let Some(sys) = System::start(Options::new("delete-node")).await? else {
        return Ok(());
    };
    sys.deploy("web", 1, "500m", "512Mi").await?;
    sys.wait_running("web", 1).await?;
    sys.wait_agreement().await?;
    let nodes = Api::<Node>::all(sys.kube.clone());
    let node = nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|p| p.starts_with("aws:///"))
        })
        .expect("a node of an instance");
    assert_eq!(
        node.metadata.finalizers.clone().unwrap_or_default(),
        ["karpenter.sh/termination"]
    );
    let name = node.metadata.name.clone().unwrap_or_default();
    let pid = node.spec.and_then(|s| s.provider_id).unwrap_or_default();
    let claim_before = nodeclaim_names(&sys).await?;
    nodes.delete(&name, &DeleteParams::default()).await?;
    let s = &sys;
    let pid = &pid;
    try_eventually(
        "the instance terminated",
        WAIT,
        Duration::from_millis(200),
        || async move {
            let i = s
                .instances()
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .find(|i| i.provider_id() == *pid);
            match i.map(|i| i.state) {
                Some(st) if st == "shutting-down" || st == "terminated" => Ok(()),
                None => Ok(()),
                other => Err(format!("instance {other:?}")),
            }
        },
    )
    .await?;
    sys.wait_running("web", 1).await?;
    sys.wait_agreement().await?;
    assert!(
        nodes.get_opt(&name).await?.is_none(),
        "not registered again"
    );
    let after = nodeclaim_names(&sys).await?;
    assert!(
        claim_before.is_disjoint(&after),
        "{claim_before:?} → {after:?}"
    );
    sys.finish().await
}
