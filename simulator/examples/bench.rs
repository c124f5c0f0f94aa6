//! Prints rough speed figures of the simulator: object creation through the API, a full list,
//! and how long the simulated kube-scheduler takes to bind a burst of pending pods.
//!
//! `cargo run -p simulator --example bench [-- PODS NODES]` (build with `--release` for figures
//! worth comparing).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let pods_n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1000);
    let nodes_n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(50);
    let sim = simulator::Simulation::start(simulator::Config {
        scheduler_interval: Duration::from_millis(50),
        ..simulator::Config::default()
    })
    .await?;
    let client = sim.kube_client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..nodes_n {
        let name = format!("node-{i}");
        let n = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
        nodes
            .create(&PostParams::default(), &serde_json::from_value(n)?)
            .await?;
        let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
                                       "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}});
        nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
    }
    let t = tokio::time::Instant::now();
    for i in 0..pods_n {
        let p = json!({"metadata": {"name": format!("p-{i}")},
                       "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}});
        pods.create(&PostParams::default(), &serde_json::from_value(p)?)
            .await?;
    }
    let created = t.elapsed();
    let t = tokio::time::Instant::now();
    let listed = pods.list(&ListParams::default()).await?.items.len();
    let list_time = t.elapsed();
    let t_raw = tokio::time::Instant::now();
    let raw = client
        .request_text(http::Request::get("/api/v1/namespaces/default/pods").body(vec![])?)
        .await?;
    let raw_time = t_raw.elapsed();
    loop {
        let bound = pods
            .list(&ListParams::default().fields("spec.nodeName!="))
            .await?
            .items
            .len();
        if bound == pods_n || nodes_n == 0 || t.elapsed() > Duration::from_secs(120) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let bind_time = t.elapsed();
    println!(
        "create {pods_n} pods through the API: {:.0} pods/s",
        pods_n as f64 / created.as_secs_f64()
    );
    println!(
        "list {listed} pods: {:.1} ms typed (kube + k8s-openapi decoding), {:.1} ms raw ({} KiB)",
        list_time.as_secs_f64() * 1000.0,
        raw_time.as_secs_f64() * 1000.0,
        raw.len() / 1024
    );
    println!(
        "scheduler: {pods_n} pods bound onto {nodes_n} nodes in {:.2} s (after creation)",
        bind_time.as_secs_f64()
    );
    sim.shutdown().await;
    Ok(())
}
