//! The watcher (in-process, against the simulated Kubernetes API) streaming to two real
//! `dovetail-planner` processes: pending pods come back `Nominated` to the planner's claims; the
//! replica holding the session is SIGKILLed, the watcher reopens the session on the other with a
//! fresh snapshot, and a pod created afterwards is planned too.

use service_shell::metrics::Render;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use integration_tests::binary;
use integration_tests::planner_process::PlannerProcess;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use planner_client::{ClientConfig, PlannerClient};
use serde_json::json;
use test_support::try_eventually;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use watcher::app::{self, Settings};
use watcher::metrics::Metrics;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

async fn pending_pod(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}
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

async fn karpenter(client: &kube::Client) -> anyhow::Result<()> {
    let ar = |g: &str, k: &str| ApiResource::from_gvk(&GroupVersionKind::gvk(g, "v1", k));
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
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
            }}}
        }))?)
        .await?;
    Ok(())
}

/// The `Nominated` Event note on a pod, once there is one.
async fn nominated(client: &kube::Client, pod: &str) -> anyhow::Result<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    Ok(
        try_eventually(&format!("Nominated on {pod}"), WAIT, POLL, || {
            let events = events.clone();
            async move {
                let l = events.list(&Default::default()).await.ok()?;
                l.items
                    .into_iter()
                    .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
                    .find(|e| e.reason.as_deref() == Some("Nominated"))
                    .and_then(|e| e.note)
            }
        })
        .await?,
    )
}

/// Open sessions of a planner, from its Prometheus endpoint.
async fn sessions(p: &PlannerProcess) -> anyhow::Result<f64> {
    let mut s = tokio::net::TcpStream::connect(p.metrics).await?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await?;
    let mut body = String::new();
    s.read_to_string(&mut body).await?;
    Ok(body
        .lines()
        .find_map(|l| {
            l.strip_prefix("dovetail_planner_sessions ")
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_keeps_planning_through_a_killed_planner_replica() -> anyhow::Result<()> {
    let bin = binary("planner-service", "dovetail-planner")?;
    let mut replicas = vec![
        PlannerProcess::start(&bin, &["--insecure-no-auth"]).await?,
        PlannerProcess::start(&bin, &["--insecure-no-auth"]).await?,
    ];
    let sim = simulator::Simulation::start(simulator::Config {
        scheduler: false,
        controllers: false,
        ..Default::default()
    })
    .await?;
    let client = sim.kube_client()?;
    karpenter(&client).await?;
    pending_pod(&client, "web-1").await?;

    let planners = PlannerClient::connect(ClientConfig::new(
        replicas.iter().map(PlannerProcess::endpoint).collect(),
    ))
    .await?;
    let mut settings = Settings::new("e2e");
    settings.timings.batch_idle = Duration::from_millis(200);
    settings.timings.batch_max = Duration::from_secs(2);
    settings.timings.retry_after = Duration::from_millis(100);
    let metrics = Metrics::new();
    let running = app::start(
        client.clone(),
        Arc::new(planners),
        settings,
        metrics.clone(),
    );

    let note = nominated(&client, "web-1").await?;
    assert!(
        note.starts_with("Pod should schedule on: nodeclaim/"),
        "{note}"
    );

    // SIGKILL the replica that holds the session.
    let mut holder = None;
    for (i, r) in replicas.iter().enumerate() {
        if sessions(r).await? >= 1.0 {
            holder = Some(i);
        }
    }
    let holder = holder.context("no replica holds the session")?;
    let mut dead = replicas.remove(holder);
    dead.child.start_kill()?;
    let _ = dead.child.wait().await;

    pending_pod(&client, "web-2").await?;
    let note = nominated(&client, "web-2").await?;
    assert!(
        note.starts_with("Pod should schedule on: nodeclaim/"),
        "{note}"
    );
    assert_eq!(
        sessions(&replicas[0]).await?,
        1.0,
        "the survivor holds the session"
    );
    let text = metrics.render();
    assert!(
        text.lines()
            .any(|l| l == "dovetail_watcher_reconnects_total 1"),
        "{text}"
    );
    running.shutdown().await;
    Ok(())
}
