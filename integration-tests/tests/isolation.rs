//! One bad object never stops the cluster: the watcher (in-process, against the simulated
//! Kubernetes API) streams to a real `dovetail-planner` process a cluster holding NodePools that
//! cannot be used: a `consolidationPolicy: Sometimes` one, valid only in a CRD newer than
//! dovetail's (the simulator's API server refuses it, so it is stored skipping validation, as
//! a newer API server would have stored it; the watcher's reader refuses it), and one with a
//! budget schedule at minute 61 (which the CRD's pattern, like Karpenter's, accepts: passed on,
//! the planner leaves it out).
//! The session stays open, a canary pod is still nominated to a new claim, the pod that needed
//! the bad pool gets a `FailedScheduling` Event naming it, both bad pools show
//! `ValidationSucceeded=False` / `Ready=False`, and the watcher counts what the plan left out.

use service_shell::metrics::Render;
use std::sync::Arc;
use std::time::Duration;

use integration_tests::binary;
use integration_tests::planner_process::PlannerProcess;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use planner_client::{ClientConfig, PlannerClient};
use serde_json::{Value, json};
use simulator::api::validation::Admission;
use test_support::try_eventually;
use watcher::app::{self, Settings};
use watcher::metrics::Metrics;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

fn ar(group: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind))
}

async fn pending_pod(client: &kube::Client, name: &str, pool: Option<&str>) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let selector = pool.map_or(json!({}), |p| json!({"karpenter.sh/nodepool": p}));
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeSelector": selector, "containers": [{"name": "app", "image": "app",
                 "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}
    }))?;
    pods.create(&PostParams::default(), &p).await?;
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]}})),
    )
    .await?;
    Ok(())
}

fn pool(name: &str, disruption: Value) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"disruption": disruption, "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
        }}}
    }))?)
}

async fn cluster(client: &kube::Client, sim: &simulator::Simulation) -> anyhow::Result<()> {
    let classes =
        Api::<DynamicObject>::all_with(client.clone(), &ar("karpenter.k8s.aws", "EC2NodeClass"));
    classes
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}
        }))?)
        .await?;
    let pools = Api::<DynamicObject>::all_with(client.clone(), &ar("karpenter.sh", "NodePool"));
    pools
        .create(&PostParams::default(), &pool("default", json!({}))?)
        .await?;
    let sometimes = serde_json::to_value(pool(
        "balanced",
        json!({"consolidationPolicy": "Sometimes"}),
    )?)?;
    let e = pools
        .create(
            &PostParams::default(),
            &serde_json::from_value(sometimes.clone())?,
        )
        .await
        .expect_err("the API server refuses a policy its CRD does not know");
    assert!(
        e.to_string()
            .contains("spec.disruption.consolidationPolicy"),
        "{e}"
    );
    let kind = sim
        .store()
        .kinds()
        .find("karpenter.sh", "v1", "nodepools")
        .expect("NodePools are served");
    sim.store()
        .create_with(&kind, "", sometimes, Admission::Skip)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    pools
        .create(
            &PostParams::default(),
            &pool(
                "cron",
                json!({"budgets": [{"nodes": "1", "schedule": "61 * * * *", "duration": "1h"}]}),
            )?,
        )
        .await?;
    Ok(())
}

/// The note of the first Event `reason` on `pod` that contains `needle`.
async fn event(
    client: &kube::Client,
    pod: &str,
    reason: &str,
    needle: &str,
) -> anyhow::Result<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    Ok(try_eventually(
        &format!("{reason} on {pod} with {needle:?}"),
        WAIT,
        POLL,
        || {
            let events = events.clone();
            async move {
                let l = events.list(&Default::default()).await.ok()?;
                l.items
                    .into_iter()
                    .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
                    .filter(|e| e.reason.as_deref() == Some(reason))
                    .filter_map(|e| e.note)
                    .find(|n| n.contains(needle))
            }
        },
    )
    .await?)
}

/// `type` → (status, reason, message) of a NodePool's conditions.
async fn conditions(
    client: &kube::Client,
    name: &str,
) -> Option<Vec<(String, String, String, String)>> {
    let pools = Api::<DynamicObject>::all_with(client.clone(), &ar("karpenter.sh", "NodePool"));
    let p = pools.get(name).await.ok()?;
    let list = p.data.pointer("/status/conditions")?.as_array()?.clone();
    Some(
        list.iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (s("type"), s("status"), s("reason"), s("message"))
            })
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pools_the_planner_cannot_use_are_left_out_and_the_rest_is_planned()
-> anyhow::Result<()> {
    let bin = binary("planner-service", "dovetail-planner")?;
    let planner = PlannerProcess::start(&bin, &["--insecure-no-auth"]).await?;
    let sim = simulator::Simulation::start(simulator::Config {
        scheduler: false,
        controllers: false,
        ..Default::default()
    })
    .await?;
    let client = sim.kube_client()?;
    cluster(&client, &sim).await?;
    pending_pod(&client, "canary", None).await?;
    pending_pod(&client, "wants-cron", Some("cron")).await?;

    let planners = PlannerClient::connect(ClientConfig::new(vec![planner.endpoint()])).await?;
    let mut settings = Settings::new("isolation");
    settings.timings.batch_idle = Duration::from_millis(200);
    settings.timings.batch_max = Duration::from_secs(2);
    settings.timings.retry_after = Duration::from_millis(100);
    settings.status_every = Duration::from_millis(500);
    let metrics = Metrics::new();
    let running = app::start(
        client.clone(),
        Arc::new(planners),
        settings,
        metrics.clone(),
    );

    let note = event(&client, "canary", "Nominated", "nodeclaim/").await?;
    assert!(
        note.starts_with("Pod should schedule on: nodeclaim/default-"),
        "{note}"
    );
    let note = event(&client, "wants-cron", "FailedScheduling", "NodePool cron").await?;
    assert!(
        note.contains("NodePool cron was left out of the plan") && note.contains("61 * * * *"),
        "{note}"
    );

    for (name, says) in [("balanced", "Sometimes"), ("cron", "Invalid")] {
        let conds = try_eventually(&format!("NodePool {name} not valid"), WAIT, POLL, || {
            let client = client.clone();
            async move {
                conditions(&client, name).await.filter(|c| {
                    c.iter()
                        .any(|(t, s, _, _)| t == "ValidationSucceeded" && s == "False")
                })
            }
        })
        .await?;
        let by = |t: &str| conds.iter().find(|c| c.0 == t).cloned().unwrap_or_default();
        let v = by("ValidationSucceeded");
        assert_eq!(v.2, "NodePoolValidationFailed", "{conds:?}");
        assert!(v.3.contains(says), "{conds:?}");
        assert_eq!(by("Ready").1, "False", "{conds:?}");
    }
    let good = conditions(&client, "default").await.unwrap_or_default();
    assert!(
        good.iter().any(|(t, s, _, _)| t == "Ready" && s == "True"),
        "{good:?}"
    );

    let text = metrics.render();
    let line = r#"dovetail_watcher_excluded_objects{kind="NodePool",reason="Invalid"} 1"#;
    assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    // One session, never refused: nothing to reconnect for.
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("dovetail_watcher_reconnects_total") && !l.ends_with(" 0")),
        "{text}"
    );
    assert!(
        !text.contains("dovetail_watcher_session_failures_total{"),
        "{text}"
    );
    running.shutdown().await;
    Ok(())
}
