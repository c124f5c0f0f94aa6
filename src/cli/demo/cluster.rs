//! The demo's hands and eyes on the simulated cluster, through the Kubernetes API only (the
//! `kube` client, as `kubectl` would): server-side apply of the scenario, scaling Deployments,
//! editing a NodePool, and the [`observe`] loop that turns pods, nodes and NodeClaims into the
//! views' [`Frame`]s and actions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

// The runtime's monotonic clock (clippy.toml keeps std's for clock modules).
use tokio::time::Instant;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Discovery, Scope};
use planner::catalog::Catalog;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::scenario::{Object, Scenario};
use super::view::{self, Frame, NodeBox, SharedBoard};

/// The field manager of everything the demo writes.
const MANAGER: &str = "dovetail-demo";

/// The NodeClaim resource.
pub(crate) fn node_claims(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"));
    Api::all_with(client.clone(), &ar)
}

/// Applies every object of the scenario (server-side apply, field manager `dovetail-demo`).
///
/// # Errors
/// The first object the API server refuses, named by its source (file and document).
pub(crate) async fn apply(client: &kube::Client, objects: &[&Object]) -> anyhow::Result<()> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("discovering the API server's resources")?;
    for o in objects {
        let api_version = o.value["apiVersion"].as_str().unwrap_or("v1");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, o.kind());
        let (ar, caps) = discovery.resolve_gvk(&gvk).with_context(|| {
            format!(
                "{}: {api_version} {} is not served by the cluster",
                o.source,
                o.kind()
            )
        })?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(client.clone(), o.namespace(), &ar),
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            o.name(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&o.value),
        )
        .await
        .with_context(|| format!("{}: applying {} {}", o.source, o.kind(), o.name()))?;
    }
    Ok(())
}

/// Sets a Deployment's replicas.
///
/// # Errors
/// When the API server refuses the patch.
pub(crate) async fn scale(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    replicas: i64,
) -> anyhow::Result<()> {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), namespace);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .with_context(|| format!("scaling Deployment {namespace}/{name} to {replicas}"))?;
    Ok(())
}

/// Adds a label to a NodePool's node template (a change of the pool's drift hash).
///
/// # Errors
/// When the API server refuses the patch.
pub(crate) async fn label_pool_template(
    client: &kube::Client,
    pool: &str,
    key: &str,
    value: &str,
) -> anyhow::Result<()> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"));
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    api.patch(
        pool,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"metadata": {"labels": {key: value}}}}})),
    )
    .await
    .with_context(|| format!("editing NodePool {pool}"))?;
    Ok(())
}

/// Everything listed at one instant.
#[derive(Clone, Debug, Default)]
pub(crate) struct Listing {
    pub(crate) pods: Vec<Value>,
    pub(crate) nodes: Vec<Value>,
    pub(crate) claims: Vec<Value>,
}

/// Lists pods (without finished ones), nodes and NodeClaims.
///
/// # Errors
/// When a list fails.
pub(crate) async fn list(client: &kube::Client) -> anyhow::Result<Listing> {
    let pods: Api<Pod> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let claims = node_claims(client);
    let lp = ListParams::default();
    let (pods, nodes, claims) = tokio::try_join!(pods.list(&lp), nodes.list(&lp), claims.list(&lp))
        .context("listing pods, nodes and NodeClaims")?;
    Ok(Listing {
        pods: pods
            .items
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .collect(),
        nodes: nodes
            .items
            .iter()
            .filter_map(|n| serde_json::to_value(n).ok())
            .collect(),
        claims: claims
            .items
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect(),
    })
}

fn label<'a>(o: &'a Value, key: &str) -> &'a str {
    o["metadata"]["labels"][key].as_str().unwrap_or("")
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or("")
}

/// Whether a pod is bound to a node.
pub(crate) fn bound(pod: &Value) -> bool {
    pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty())
}

/// The hourly price of an offering in the catalog (0 when unknown).
pub(crate) fn price(catalog: &Catalog, instance_type: &str, zone: &str, capacity: &str) -> f64 {
    catalog
        .get(instance_type)
        .and_then(|t| {
            t.offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == capacity)
        })
        .map_or(0.0, |o| o.price)
}

/// The frame of a listing.
pub(crate) fn frame(listing: &Listing, catalog: &Catalog, t: f64) -> Frame {
    let mut boxes: BTreeMap<String, NodeBox> = BTreeMap::new();
    for n in &listing.nodes {
        let instance_type = label(n, "node.kubernetes.io/instance-type").to_string();
        let zone = label(n, "topology.kubernetes.io/zone").to_string();
        let capacity_type = label(n, "karpenter.sh/capacity-type").to_string();
        let ready = n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let leaving = n["spec"]["unschedulable"] == json!(true)
            || !n["metadata"]["deletionTimestamp"].is_null();
        boxes.insert(
            name(n).to_string(),
            NodeBox {
                name: name(n).to_string(),
                price: price(catalog, &instance_type, &zone, &capacity_type),
                pool: label(n, "karpenter.sh/nodepool").to_string(),
                cpu_millis: view::cpu_millis(&n["status"]["allocatable"]["cpu"]),
                instance_type,
                zone,
                capacity_type,
                ready,
                leaving,
                cpu_used_millis: 0,
                pods: Vec::new(),
            },
        );
    }
    let mut pending = 0;
    let mut bound_count = 0;
    for p in &listing.pods {
        if bound(p) {
            bound_count += 1;
            if let Some(b) = boxes.get_mut(p["spec"]["nodeName"].as_str().unwrap_or("")) {
                b.cpu_used_millis += view::pod_cpu_millis(p);
                b.pods.push(format!(
                    "{}/{}",
                    p["metadata"]["namespace"].as_str().unwrap_or(""),
                    name(p)
                ));
            }
        } else {
            pending += 1;
        }
    }
    let nodes: Vec<NodeBox> = boxes.into_values().collect();
    Frame {
        t,
        pods_total: listing.pods.len(),
        pods_pending: pending,
        pods_bound: bound_count,
        node_claims: listing.claims.len(),
        claim_names: listing.claims.iter().map(|c| name(c).to_string()).collect(),
        // `+ 0.0`: an empty f64 sum is -0.0, printed as "$-0.000".
        cost_per_hour: nodes.iter().map(|n| n.price).sum::<f64>() + 0.0,
        nodes,
        lower_bound_per_hour: None,
    }
}

/// The planner's proven lower bound on the hourly cost of nodes for `pods` under the
/// scenario's NodePools and EC2NodeClasses: the pods are planned as if none were bound
/// (the planner library, in this process, as `dovetail plan` does).
pub(crate) fn lower_bound(
    scenario: &Scenario,
    pods: &[Value],
    catalog: &Catalog,
    now: i64,
) -> Option<f64> {
    let mut builder = planner_manifests::Reader::new();
    for o in scenario
        .objects
        .iter()
        .filter(|o| matches!(o.kind(), "NodePool" | "EC2NodeClass" | "PriorityClass"))
    {
        builder.add_value(&o.value, &o.source).ok()?;
    }
    for p in pods {
        let mut p = p.clone();
        if let Some(spec) = p["spec"].as_object_mut() {
            spec.remove("nodeName");
        }
        if let Some(obj) = p.as_object_mut() {
            obj.remove("status");
            if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
                meta.remove("ownerReferences");
            }
        }
        builder.add_value(&p, "cluster").ok()?;
    }
    let loaded = builder.finish().ok()?;
    let options = planner::model::PlanOptions {
        now,
        no_disruption: true,
        ..Default::default()
    };
    let plan = planner::plan(&loaded.snapshot, catalog, &options);
    Some(plan.summary.lower_bound_cost_per_hour)
}

/// What the observer remembers between looks, to report changes as actions.
#[derive(Debug, Default)]
struct Seen {
    nodes: BTreeMap<String, String>,
    claims: BTreeSet<String>,
    leaving: BTreeSet<String>,
}

/// Looks at the cluster every `every` until `stop`, updating the board: the frame, the chart,
/// and an action for each node and NodeClaim that comes or goes. The lower bound is recomputed
/// on the blocking pool at most every `bound_every`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn observe(
    client: kube::Client,
    board: SharedBoard,
    scenario: Arc<Scenario>,
    catalog: Arc<Catalog>,
    started: Instant,
    start_unix: i64,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut seen = Seen::default();
    let mut bound: Option<f64> = None;
    let mut computing: Option<tokio::task::JoinHandle<Option<f64>>> = None;
    let mut last_bound_at: Option<Instant> = None;
    let bound_every = Duration::from_secs(2);
    loop {
        if let Ok(listing) = list(&client).await {
            let t = started.elapsed().as_secs_f64();
            let mut f = frame(&listing, &catalog, t);
            if let Some(h) = computing.take_if(|h| h.is_finished()) {
                bound = h.await.ok().flatten().or(bound);
            }
            if computing.is_none() && last_bound_at.is_none_or(|at| at.elapsed() >= bound_every) {
                last_bound_at = Some(Instant::now());
                let (s, c, pods) = (scenario.clone(), catalog.clone(), listing.pods.clone());
                let now = start_unix + t as i64;
                computing = Some(tokio::task::spawn_blocking(move || {
                    lower_bound(&s, &pods, &c, now)
                }));
            }
            f.lower_bound_per_hour = bound;
            let mut b = view::lock(&board);
            diff(&mut seen, &listing, &f, &mut b, t);
            b.set_frame(f);
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
    }
}

fn diff(seen: &mut Seen, listing: &Listing, f: &Frame, b: &mut view::Board, t: f64) {
    let now_nodes: BTreeMap<String, String> = f
        .nodes
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                format!(
                    "{} {} {} (pool {}, ${:.3}/h)",
                    n.instance_type, n.zone, n.capacity_type, n.pool, n.price
                ),
            )
        })
        .collect();
    let claims: BTreeSet<String> = listing.claims.iter().map(|c| name(c).to_string()).collect();
    for c in claims.difference(&seen.claims) {
        let claim = listing.claims.iter().find(|x| name(x) == c);
        let pool = claim.map_or("", |x| label(x, "karpenter.sh/nodepool"));
        b.act(t, format!("+ NodeClaim {c} (pool {pool})"));
    }
    for c in seen.claims.difference(&claims) {
        b.act(t, format!("- NodeClaim {c} deleted"));
    }
    for (n, what) in &now_nodes {
        if !seen.nodes.contains_key(n) {
            b.act(t, format!("+ node {n} registered: {what}"));
        }
    }
    for (n, what) in &seen.nodes {
        if !now_nodes.contains_key(n) {
            b.act(t, format!("- node {n} removed: {what}"));
        }
    }
    let leaving: BTreeSet<String> = f
        .nodes
        .iter()
        .filter(|n| n.leaving)
        .map(|n| n.name.clone())
        .collect();
    for n in leaving.difference(&seen.leaving) {
        b.act(t, format!("~ node {n} cordoned / draining"));
    }
    seen.nodes = now_nodes;
    seen.claims = claims;
    seen.leaving = leaving;
}
