//! Static NodePools (Karpenter v1.14 `spec.replicas`) in the running system: the watcher, two
//! planners and the actuator as processes, EC2 on moto_server, the simulated cluster
//! (`integration_tests::system`), the watcher with `--feature-gates StaticCapacity=true` (off by
//! default, as in Karpenter). A static pool gets exactly its replicas with no pod pending,
//! follows `kubectl scale nodepool` (the CRD's scale subresource) down, and pending pods never
//! make it launch more. Derived from kubernetes-sigs/karpenter
//! `pkg/controllers/static/provisioning/suite_test.go` ("should create nodeclaims when current
//! node count is less than desired replicas") and `static/deprovisioning/suite_test.go` ("should
//! terminate excess nodeclaims when current count exceeds desired replicas").
//!
//! What moto cannot show: capacity errors (it launches the first override and never runs out).
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it.

use integration_tests::system::{Options, POLL, System, WAIT};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;
use test_support::try_eventually;

fn node_pools(sys: &System) -> Api<DynamicObject> {
    Api::all_with(
        sys.kube.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool")),
    )
}

fn node_claims(sys: &System) -> Api<DynamicObject> {
    Api::all_with(
        sys.kube.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim")),
    )
}

/// (NodeClaims, Nodes) of the pool `fixed` that are not being deleted.
async fn fixed_counts(sys: &System) -> anyhow::Result<(usize, usize)> {
    let by_pool = ListParams::default().labels("karpenter.sh/nodepool=fixed");
    let claims = node_claims(sys).list(&by_pool).await?;
    let nodes = Api::<Node>::all(sys.kube.clone()).list(&by_pool).await?;
    let live_claims = claims
        .items
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .count();
    let live_nodes = nodes
        .items
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .count();
    Ok((live_claims, live_nodes))
}

async fn wait_fixed(sys: &System, want: usize) -> anyhow::Result<()> {
    Ok(try_eventually(
        &format!("{want} NodeClaims and Nodes in the static pool"),
        WAIT,
        POLL,
        move || async move {
            match fixed_counts(sys).await {
                Ok((c, n)) if c == want && n == want => Ok(()),
                Ok((c, n)) => Err(format!("{c} NodeClaims, {n} Nodes")),
                Err(e) => Err(format!("{e:#}")),
            }
        },
    )
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_static_node_pool_keeps_its_replicas_and_follows_scale() -> anyhow::Result<()> {
    let mut opts = Options::new("static-pool");
    opts.watcher_args = vec!["--feature-gates".into(), "StaticCapacity=true".into()];
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    node_pools(&sys)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                "metadata": {"name": "fixed"},
                "spec": {
                    "replicas": 2,
                    "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m"]},
                        ],
                    }},
                },
            }))?,
        )
        .await?;
    // No pod is pending: the pool launches its two replicas anyway.
    wait_fixed(&sys, 2).await?;
    let a = sys.wait_agreement().await?;
    assert_eq!(a.instances, 2, "only the static pool launched: {a:?}");

    // Scaled down through the scale subresource, as `kubectl scale nodepool fixed --replicas=1`.
    node_pools(&sys)
        .patch_scale(
            "fixed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await?;
    wait_fixed(&sys, 1).await?;
    let a = sys.wait_agreement().await?;
    assert_eq!(a.instances, 1, "{a:?}");

    // Pending pods get capacity from the dynamic pool; the static one stays at its replicas.
    sys.deploy("web", 12, "500m", "512Mi").await?;
    sys.wait_running("web", 12).await?;
    sys.wait_agreement().await?;
    assert_eq!(fixed_counts(&sys).await?, (1, 1));
    sys.finish().await
}
