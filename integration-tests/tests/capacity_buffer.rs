//! CapacityBuffers (Karpenter v1.14, `autoscaling.x-k8s.io/v1beta1`) in the running system: the
//! watcher, two planners and the actuator as processes, EC2 on moto_server, the simulated
//! cluster serving the CapacityBuffer CRD (`integration_tests::system`), the watcher with
//! `--feature-gates CapacityBuffer=true` (off by default, as in Karpenter), consolidation on
//! with `consolidateAfter: 0s`.
//!
//! A buffer of one chunk keeps a spare node with no pod pending or running, its status says so
//! as Karpenter writes it (`ReadyForProvisioning`, `Provisioning=True FitsExistingCapacity`,
//! `status.replicas`), consolidation leaves the node alone round after round, and once the
//! buffer is deleted the empty node is removed. Derived from kubernetes-sigs/karpenter
//! `test/suites/regression/capacitybuffer_test.go`, `pkg/controllers/provisioning/buffers.go`
//! and `pkg/controllers/disruption/emptiness_test.go` ("should not disrupt a node that hosts
//! virtual buffer pods", "should disrupt a node once buffer pods are cleared").
//!
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it.

use integration_tests::system::{Options, POLL, System, WAIT};
use k8s_openapi::api::core::v1::{Node, PodTemplate};
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use serde_json::{Value, json};
use test_support::try_eventually;

fn buffers(sys: &System) -> Api<DynamicObject> {
    Api::namespaced_with(
        sys.kube.clone(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "autoscaling.x-k8s.io",
            "v1beta1",
            "CapacityBuffer",
        )),
    )
}

/// Names of the Nodes not being deleted.
async fn live_nodes(sys: &System) -> anyhow::Result<Vec<String>> {
    let nodes = Api::<Node>::all(sys.kube.clone())
        .list(&ListParams::default())
        .await?;
    let mut names: Vec<String> = nodes
        .items
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.sort();
    Ok(names)
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

async fn plans(sys: &System) -> anyhow::Result<f64> {
    Ok(sys
        .watcher_metric("dovetail_watcher_plans_total")
        .await?
        .unwrap_or(0.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_buffer_keeps_a_spare_node_that_consolidation_leaves_alone() -> anyhow::Result<()> {
    let mut opts = Options::new("capacity-buffer");
    opts.watcher_args = vec!["--feature-gates".into(), "CapacityBuffer=true".into()];
    opts.disruption = Some(json!({
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
    }));
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    let template: PodTemplate = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": "spare-chunk", "namespace": "default"},
        "template": {
            "metadata": {"labels": {"app": "spare"}},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}
        }
    }))?;
    Api::<PodTemplate>::namespaced(sys.kube.clone(), "default")
        .create(&PostParams::default(), &template)
        .await?;
    buffers(&sys)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                "metadata": {"name": "spare", "namespace": "default"},
                "spec": {"podTemplateRef": {"name": "spare-chunk"}, "replicas": 1},
            }))?,
        )
        .await?;

    // No pod at all: the buffer alone launches one node, and its status says the chunk fits
    // on existing capacity once the node is there.
    let node = try_eventually("one spare node for the buffer", WAIT, POLL, || async {
        match live_nodes(&sys).await {
            Ok(n) if n.len() == 1 => Ok(n[0].clone()),
            Ok(n) => Err(format!("Nodes {n:?}")),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .await?;
    let status = try_eventually("the buffer's status", WAIT, POLL, || async {
        let b = buffers(&sys)
            .get("spare")
            .await
            .map_err(|e| e.to_string())?;
        let status = b.data["status"].clone();
        let fits = condition(&status, "Provisioning")
            .is_some_and(|c| c["status"] == "True" && c["reason"] == "FitsExistingCapacity");
        if fits {
            Ok(status)
        } else {
            Err(format!("status {status}"))
        }
    })
    .await?;
    let ready = condition(&status, "ReadyForProvisioning").expect("ReadyForProvisioning");
    assert_eq!(ready["status"], "True", "{status}");
    assert_eq!(ready["reason"], "Resolved", "{status}");
    assert_eq!(status["replicas"], 1, "{status}");
    assert_eq!(status["podTemplateRef"]["name"], "spare-chunk", "{status}");
    let a = sys.wait_agreement().await?;
    assert_eq!(a.instances, 1, "{a:?}");

    // Consolidation runs (a plan every 3 s) and leaves the spare node alone: after several more
    // plans the same single node is still there.
    let seen = plans(&sys).await?;
    try_eventually("five more plans", WAIT, POLL, || async {
        match plans(&sys).await {
            Ok(p) if p >= seen + 5.0 => Ok(()),
            Ok(p) => Err(format!("{p} plans")),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .await?;
    assert_eq!(live_nodes(&sys).await?, vec![node.clone()]);
    let a = sys.wait_agreement().await?;
    assert_eq!(a.instances, 1, "{a:?}");

    // The buffer gone, the node is empty and consolidation removes it.
    buffers(&sys)
        .delete("spare", &DeleteParams::default())
        .await?;
    try_eventually("the spare node removed", WAIT, POLL, || async {
        match live_nodes(&sys).await {
            Ok(n) if n.is_empty() => Ok(()),
            Ok(n) => Err(format!("Nodes {n:?}")),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .await?;
    sys.finish().await
}
