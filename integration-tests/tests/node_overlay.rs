//! NodeOverlays in the running system: the watcher, two planners and the actuator as
//! processes, EC2 on moto_server, the simulated cluster (`integration_tests::system`). A
//! NodeOverlay gives `m5.xlarge` a price below every other type's:
//!
//! - with `--feature-gates NodeOverlay=true` the watcher mirrors it, the plan orders
//!   `m5.xlarge` first and the launched instance is an `m5.xlarge` (moto launches the first
//!   override, which is the planner's cheapest); the overlay's status says
//!   `ValidationSucceeded=True` and `Ready=True`, as Karpenter's NodeOverlay controller writes;
//! - with the gate off (Karpenter's default) the overlay changes nothing: the instance is the
//!   catalog's cheapest type, and nothing writes the overlay's status.
//!
//! Derived from kubernetes-sigs/karpenter `pkg/controllers/nodeoverlay/suite_test.go` ("should
//! pass with a single overlay") and `pkg/cloudprovider/overlay/cloudprovider.go` (overlays apply
//! only under the gate). What moto cannot show: capacity errors.
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it.

use integration_tests::system::{Options, POLL, System, WAIT};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use test_support::try_eventually;

const OVERLAID: &str = "m5.xlarge";

fn overlays(sys: &System) -> Api<DynamicObject> {
    Api::all_with(
        sys.kube.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "karpenter.sh",
            "v1alpha1",
            "NodeOverlay",
        )),
    )
}

async fn create_overlay(sys: &System) -> anyhow::Result<()> {
    overlays(sys)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                "metadata": {"name": "cheap-m5-xlarge"},
                "spec": {
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [OVERLAID]},
                    ],
                    "price": "0.001",
                },
            }))?,
        )
        .await?;
    Ok(())
}

/// Starts a system with the gate on or off, applies the overlay, runs one pod and returns the
/// instance types launched, with the system.
async fn run(name: &str, gate: bool) -> anyhow::Result<Option<(System, Vec<String>)>> {
    let mut opts = Options::new(name);
    opts.watcher_args = vec!["--feature-gates".into(), format!("NodeOverlay={gate}")];
    let Some(sys) = System::start(opts).await? else {
        return Ok(None);
    };
    create_overlay(&sys).await?;
    // Mirrored before the pod arrives (under the gate the watcher's NodeOverlay informer has
    // synced before it opens a session; the overlay is an upsert of it).
    if gate {
        wait_status(&sys).await?;
    }
    sys.deploy("web", 1, "500m", "512Mi").await?;
    sys.wait_running("web", 1).await?;
    sys.wait_agreement().await?;
    let types: Vec<String> = sys
        .instances()
        .await?
        .into_iter()
        .filter(|i| i.state != "terminated")
        .map(|i| i.instance_type)
        .collect();
    Ok(Some((sys, types)))
}

/// Waits for the overlay's `ValidationSucceeded=True` and `Ready=True`.
async fn wait_status(sys: &System) -> anyhow::Result<()> {
    let api = overlays(sys);
    Ok(try_eventually(
        "the NodeOverlay's ValidationSucceeded and Ready",
        WAIT,
        POLL,
        move || {
            let api = api.clone();
            async move {
                let o = api
                    .get("cheap-m5-xlarge")
                    .await
                    .map_err(|e| e.to_string())?;
                let conditions = o
                    .data
                    .pointer("/status/conditions")
                    .and_then(|c| c.as_array())
                    .cloned()
                    .unwrap_or_default();
                let is_true = |t: &str| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == t && c["status"] == "True")
                };
                if is_true("ValidationSucceeded") && is_true("Ready") {
                    Ok(())
                } else {
                    Err(format!("conditions: {conditions:?}"))
                }
            }
        },
    )
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_overlay_price_changes_the_launched_type_only_under_the_gate() -> anyhow::Result<()> {
    // Gate off: the overlay is ignored.
    let Some((sys, off)) = run("node-overlay-off", false).await? else {
        return Ok(());
    };
    assert_eq!(off.len(), 1, "{off:?}");
    assert_ne!(off[0], OVERLAID, "the overlay applied with the gate off");
    let o = overlays(&sys).get("cheap-m5-xlarge").await?;
    assert!(
        o.data.pointer("/status/conditions").is_none(),
        "nothing writes an overlay's status with the gate off: {:?}",
        o.data
    );
    sys.finish().await?;

    // Gate on: the overlay's price makes m5.xlarge the cheapest, and it is launched.
    let Some((sys, on)) = run("node-overlay-on", true).await? else {
        return Ok(());
    };
    assert_eq!(on, [OVERLAID], "gate off launched {off:?}");
    sys.finish().await
}
