//! A Node can be made unhealthy as the EKS Node Monitoring Agent makes it, with
//! `kubectl patch node NAME --subresource=status` (strategic merge: conditions merge by their
//! `type`, so the kubelet's `Ready` stays). Node repair's process tests
//! (`integration-tests/tests/node_repair.rs`) rely on it.
//!
//! kubectl is found as in `kubectl.rs` (`DOVETAIL_KUBECTL`); without it the test fails (unless
//! `DOVETAIL_ALLOW_MISSING` names kubectl: then it skips).

mod support;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use serde_json::json;

use support::{kubectl, run_kubectl, start_without_scheduler};

#[tokio::test]
async fn kubectl_patches_a_node_condition_through_the_status_subresource() {
    let Some(k) = kubectl() else {
        support::missing("kubectl", "set DOVETAIL_KUBECTL or put kubectl on PATH");
        return;
    };
    let sim = start_without_scheduler().await;
    let url = sim.api_url().to_string();
    let nodes: Api<Node> = Api::all(sim.kube_client().expect("client"));
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"conditions": [{"type": "Ready", "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    }))
    .expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("created");
    let patch = json!({"status": {"conditions": [{"type": "KernelReady", "status": "False",
        "reason": "KernelDeadlock", "lastTransitionTime": "2026-01-01T00:10:00Z"}]}})
    .to_string();
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &["patch", "node", "n1", "--subresource=status", "-p", &patch],
        None,
    )
    .await;
    assert!(ok, "kubectl patch failed:\n{out}\n{err}");
    let got = nodes.get_status("n1").await.expect("node");
    let conditions = got.status.and_then(|s| s.conditions).unwrap_or_default();
    let by_type: Vec<(&str, &str)> = conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert!(by_type.contains(&("Ready", "True")), "{by_type:?}");
    assert!(by_type.contains(&("KernelReady", "False")), "{by_type:?}");
}
