//! Dynamic Resource Allocation under Karpenter's `ignoreDRARequests` setting in the running
//! system: the watcher, two planners and the actuator as processes, EC2 on moto_server, the
//! simulated cluster serving `resource.k8s.io/v1` (`integration_tests::system`).
//!
//! A pod that references a ResourceClaim (`spec.resourceClaims`, its container's
//! `resources.claims`) is, by default (`ignoreDRARequests: true`, as Karpenter's
//! `IGNORE_DRA_REQUESTS` defaults), not planned for: no node is launched for it and its
//! `FailedScheduling` Event reads Karpenter's "Failed to schedule pod, pod has Dynamic Resource
//! Allocation requirements that are not yet supported by Karpenter", while a plain pod created
//! alongside gets its node. With `--ignore-dra-requests false` the watcher mirrors
//! ResourceClaims, DeviceClasses and ResourceSlices and the planner allocates the claim's devices
//! as Karpenter v1.14 does: with no device published the pod is unschedulable with Karpenter's
//! "allocating dynamic resources, no instance type can satisfy the allocation", and once a
//! cluster-wide ResourceSlice (`allNodes`) offers a matching device the pod gets a node.
//! kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/scheduler.go` (`add`,
//! `Results.Record`), `suite_test.go` "Dynamic Resource Allocation (DRA)" and
//! `pkg/controllers/provisioning/dra_test.go` (U2, V2).
//!
//! What moto and the simulator cannot show: no DRA driver runs, so the test publishes the slice
//! itself and no claim is ever allocated; the simulator's scheduler binds a pod with claims as if
//! it had none (a real one would wait for the driver's allocation).
//!
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it.

use integration_tests::system::{Options, POLL, System, WAIT};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;
use test_support::try_eventually;

/// Karpenter's Event message for a refused DRA pod.
const REFUSED: &str = "Failed to schedule pod, pod has Dynamic Resource Allocation requirements \
                       that are not yet supported by Karpenter";

fn dra_api(sys: &System, kind: &str, namespaced: bool) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("resource.k8s.io", "v1", kind));
    if namespaced {
        Api::namespaced_with(sys.kube.clone(), "default", &ar)
    } else {
        Api::all_with(sys.kube.clone(), &ar)
    }
}

/// A DeviceClass, a ResourceClaim naming it and a Deployment `train` of one pod that uses the
/// claim and asks for 3 cpu (more than the node of the plain pod has left, so that pod's node
/// never takes it).
async fn create_dra_workload(sys: &System) -> anyhow::Result<()> {
    dra_api(sys, "DeviceClass", false)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]},
            }))?,
        )
        .await?;
    dra_api(sys, "ResourceClaim", true)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "single-gpu", "namespace": "default"},
                "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
                ]}},
            }))?,
        )
        .await?;
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "train"}},
            "template": {
                "metadata": {"labels": {"app": "train"}},
                "spec": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "single-gpu"}],
                    "containers": [{"name": "cuda", "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": "3", "memory": "1Gi"},
                                      "claims": [{"name": "gpu"}]}}]
                }
            }
        }
    }))?;
    Api::<Deployment>::namespaced(sys.kube.clone(), "default")
        .create(&PostParams::default(), &d)
        .await?;
    Ok(())
}

/// The name of the one pod of `app`.
async fn pod_of(sys: &System, app: &str) -> anyhow::Result<String> {
    let label = format!("app={app}");
    Ok(
        try_eventually(&format!("the pod of {app}"), WAIT, POLL, || {
            let label = label.clone();
            async move {
                let pods = Api::<Pod>::namespaced(sys.kube.clone(), "default")
                    .list(&ListParams::default().labels(&label))
                    .await
                    .map_err(|e| e.to_string())?;
                pods.items
                    .into_iter()
                    .find_map(|p| p.metadata.name)
                    .ok_or_else(|| "none yet".to_string())
            }
        })
        .await?,
    )
}

/// The messages of the Events of `reason` on pod `pod`, as `kubectl get events` reads them.
async fn event_messages(sys: &System, pod: &str, reason: &str) -> anyhow::Result<Vec<String>> {
    Ok(Api::<Event>::namespaced(sys.kube.clone(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pod_with_a_resource_claim_gets_no_node_by_default() -> anyhow::Result<()> {
    let Some(sys) = System::start(Options::new("dra-ignored")).await? else {
        return Ok(());
    };
    create_dra_workload(&sys).await?;
    // A plain pod alongside: the watcher plans, and it gets its node.
    sys.deploy("web", 1, "500m", "256Mi").await?;
    sys.wait_running("web", 1).await?;
    let train = pod_of(&sys, "train").await?;
    let messages = try_eventually(
        "the DRA pod's FailedScheduling Event",
        WAIT,
        POLL,
        || async {
            match event_messages(&sys, &train, "FailedScheduling").await {
                Ok(m) if m.iter().any(|m| m == REFUSED) => Ok(m),
                Ok(m) => Err(format!("{m:?}")),
                Err(e) => Err(format!("{e:#}")),
            }
        },
    )
    .await?;
    assert!(messages.iter().any(|m| m == REFUSED), "{messages:?}");
    // Nothing was launched for it: the one instance is web's, and the pod is still pending.
    let a = sys.wait_agreement().await?;
    assert_eq!(a.instances, 1, "{a:?}");
    let (total, running) = sys.pods("train").await?;
    assert_eq!((total, running), (1, 0));
    assert!(
        event_messages(&sys, &train, "Nominated").await?.is_empty(),
        "the DRA pod is nominated nowhere"
    );
    sys.finish().await
}

/// Karpenter's Event message for a pod whose claim no device can satisfy.
const UNSATISFIABLE: &str = "Failed to schedule pod, allocating dynamic resources, no instance \
                             type can satisfy the allocation";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_ignore_dra_requests_false_the_pod_gets_a_node_once_a_device_is_published()
-> anyhow::Result<()> {
    let mut opts = Options::new("dra-planned");
    opts.watcher_args = vec!["--ignore-dra-requests".into(), "false".into()];
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    create_dra_workload(&sys).await?;
    let train = pod_of(&sys, "train").await?;
    // No device anywhere: unschedulable, nothing launched.
    try_eventually(
        "the unsatisfiable claim's FailedScheduling Event",
        WAIT,
        POLL,
        || async {
            match event_messages(&sys, &train, "FailedScheduling").await {
                Ok(m) if m.iter().any(|m| m == UNSATISFIABLE) => Ok(()),
                Ok(m) => Err(format!("{m:?}")),
                Err(e) => Err(format!("{e:#}")),
            }
        },
    )
    .await?;
    assert!(
        event_messages(&sys, &train, "Nominated").await?.is_empty(),
        "nominated nowhere while no device is published"
    );
    // A cluster-wide device of the class's driver: the watcher mirrors it, the claim is
    // allocated from it on a new NodeClaim.
    dra_api(&sys, "ResourceSlice", false)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": "shared-gpus"},
                "spec": {"driver": "gpu.example.com", "allNodes": true,
                         "pool": {"name": "shared-gpus", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-0"}]},
            }))?,
        )
        .await?;
    // Nominated to a NodeClaim, which is launched.
    let nominated = try_eventually("the DRA pod nominated", WAIT, POLL, || async {
        match event_messages(&sys, &train, "Nominated").await {
            Ok(m) if !m.is_empty() => Ok(m),
            Ok(m) => Err(format!("{m:?}")),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .await?;
    assert!(
        nominated
            .iter()
            .all(|m| m.starts_with("Pod should schedule on: nodeclaim/")),
        "{nominated:?}"
    );
    let a = sys.wait_agreement().await?;
    assert_eq!(a.instances, 1, "{a:?}");
    let refused = event_messages(&sys, &train, "FailedScheduling").await?;
    assert!(!refused.iter().any(|m| m == REFUSED), "{refused:?}");
    sys.finish().await
}
