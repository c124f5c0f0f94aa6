//! The watcher against the simulated Kubernetes API (real HTTP, real `kube` watches) and
//! in-process fake planner replicas on 127.0.0.1:0: sync before the first snapshot, relists
//! after dropped watches and 410 Gone, failover to another replica with a fresh snapshot,
//! Events on pods and NodePool status.

use service_shell::metrics::Render;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use planner_client::{ClientConfig, PlannerClient};
use proto::v1 as pb;
use proto::v1::cluster_update::Update;
use serde_json::json;
use test_support::try_eventually;
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use watcher::app::{self, Running, Settings};
use watcher::informers::karpenter_resource;
use watcher::metrics::Metrics;

// === a fake planner replica ===

/// One replica: logs every update, keeps the session's pods, and answers each CloseBatch by
/// nominating every pending pod to one new claim (pods labelled `fail=yes` are unschedulable).
#[derive(Clone)]
struct FakePlanner {
    name: &'static str,
    log: Arc<Mutex<Vec<(&'static str, pb::ClusterUpdate)>>>,
    pods: Arc<Mutex<BTreeMap<String, pb::Pod>>>,
    arrived: Arc<Notify>,
    dead: Arc<AtomicBool>,
    died: Arc<Notify>,
}

fn plan_for(pods: &BTreeMap<String, pb::Pod>, seq: u64) -> pb::PlanResponse {
    let mut plan = pb::PlanResponse::default();
    let mut claim = pb::PlannedNodeClaim {
        name: format!("claim-{seq}"),
        node_pool: "default".into(),
        ..Default::default()
    };
    for p in pods.values().filter(|p| p.node_name.is_none()) {
        let name = format!("{}/{}", p.namespace, p.name);
        if p.labels.get("fail").map(String::as_str) == Some("yes") {
            plan.unschedulable.push(pb::Unschedulable {
                pod: name,
                reason: "no instance type in NodePool default fits cpu=200".into(),
            });
        } else {
            claim.pods.push(name);
        }
    }
    if !claim.pods.is_empty() {
        plan.node_claims.push(claim);
    }
    plan
}

#[tonic::async_trait]
impl pb::planner_server::Planner for FakePlanner {
    async fn plan(
        &self,
        _: Request<pb::PlanRequest>,
    ) -> Result<Response<pb::PlanResponse>, Status> {
        Err(Status::unimplemented("sessions only"))
    }

    type SessionStream = ReceiverStream<Result<pb::PlanResponse, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<pb::ClusterUpdate>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(Status::unavailable("replica down"));
        }
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(8);
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                // Registered before the flag is read, so a kill between the two is not missed.
                let died = me.died.notified();
                if me.dead.load(Ordering::SeqCst) {
                    let _ = tx.send(Err(Status::unavailable("replica down"))).await;
                    return;
                }
                let msg = tokio::select! {
                    m = inbound.message() => m,
                    _ = died => {
                        let _ = tx.send(Err(Status::unavailable("replica down"))).await;
                        return;
                    }
                };
                let Ok(Some(u)) = msg else { return };
                {
                    let mut pods = me.pods.lock().expect("pods");
                    match &u.update {
                        Some(Update::Snapshot(s)) => {
                            pods.clear();
                            for p in s.snapshot.iter().flat_map(|s| &s.pods) {
                                pods.insert(p.uid.clone(), p.clone());
                            }
                        }
                        Some(Update::Delta(d)) => {
                            for up in &d.upserts {
                                if let Some(pb::upsert::Object::Pod(p)) = &up.object {
                                    pods.insert(p.uid.clone(), p.clone());
                                }
                            }
                            for del in d.deletes.iter().filter(|d| d.kind == "Pod") {
                                pods.remove(&del.uid);
                            }
                        }
                        _ => {}
                    }
                }
                let close = matches!(u.update, Some(Update::CloseBatch(_)));
                let seq = u.sequence;
                me.log.lock().expect("log").push((me.name, u));
                me.arrived.notify_waiters();
                if close {
                    let plan = plan_for(&me.pods.lock().expect("pods"), seq);
                    if tx.send(Ok(plan)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

impl FakePlanner {
    async fn start(
        name: &'static str,
        log: Arc<Mutex<Vec<(&'static str, pb::ClusterUpdate)>>>,
        arrived: Arc<Notify>,
    ) -> anyhow::Result<(Self, SocketAddr)> {
        let me = Self {
            name,
            log,
            pods: Arc::default(),
            arrived,
            dead: Arc::default(),
            died: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let svc = pb::planner_server::PlannerServer::new(me.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        Ok((me, addr))
    }

    /// Ends its sessions with UNAVAILABLE and refuses new ones, as a dead replica would.
    fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
        self.died.notify_waiters();
    }

    fn pending(&self) -> Vec<String> {
        self.pods
            .lock()
            .expect("pods")
            .values()
            .filter(|p| p.node_name.is_none())
            .map(|p| p.name.clone())
            .collect()
    }
}

// === harness ===

type Log = Arc<Mutex<Vec<(&'static str, pb::ClusterUpdate)>>>;

struct Cluster {
    sim: simulator::Simulation,
    client: kube::Client,
    log: Log,
    arrived: Arc<Notify>,
    planners: Vec<FakePlanner>,
    endpoints: Vec<String>,
    watcher: Option<Running>,
}

const WAIT: Duration = Duration::from_secs(30);
/// How often a test polls API state, which has no arrival signal to wait on.
const POLL: Duration = Duration::from_millis(50);

impl Cluster {
    async fn start(replicas: usize) -> anyhow::Result<Self> {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let sim = simulator::Simulation::start(simulator::Config {
            scheduler: false,
            controllers: false,
            ..Default::default()
        })
        .await?;
        let client = sim.kube_client()?;
        let log: Log = Arc::default();
        let arrived = Arc::new(Notify::new());
        let mut planners = Vec::new();
        let mut endpoints = Vec::new();
        for name in ["replica-a", "replica-b", "replica-c"]
            .into_iter()
            .take(replicas)
        {
            let (p, addr) = FakePlanner::start(name, log.clone(), arrived.clone()).await?;
            planners.push(p);
            endpoints.push(addr.to_string());
        }
        Ok(Self {
            sim,
            client,
            log,
            arrived,
            planners,
            endpoints,
            watcher: None,
        })
    }

    async fn start_watcher(&mut self) -> anyhow::Result<()> {
        self.watcher = Some(self.watcher_replica("test", false).await?);
        Ok(())
    }

    /// A watcher replica, electing a leader through a Lease when `elect`.
    async fn watcher_replica(&self, identity: &str, elect: bool) -> anyhow::Result<Running> {
        self.watcher_with(identity, elect, |_| {}).await
    }

    /// [`Self::watcher_replica`] with `configure` applied to its settings.
    async fn watcher_with(
        &self,
        identity: &str,
        elect: bool,
        configure: impl FnOnce(&mut Settings),
    ) -> anyhow::Result<Running> {
        let planners = PlannerClient::connect(ClientConfig::new(self.endpoints.clone())).await?;
        let mut settings = Settings::new(identity);
        configure(&mut settings);
        if elect {
            let mut l = watcher::leader::Settings::new("kube-system", identity);
            l.lease_duration = Duration::from_secs(3);
            l.retry_every = Duration::from_millis(100);
            settings.leader = Some(l);
        }
        settings.timings.batch_idle = Duration::from_millis(100);
        settings.timings.batch_max = Duration::from_secs(1);
        settings.timings.consolidate_every = Duration::from_secs(3600);
        settings.timings.flush_after = Duration::from_millis(10);
        settings.timings.retry_after = Duration::from_millis(50);
        settings.status_every = Duration::from_millis(200);
        Ok(app::start(
            self.client.clone(),
            Arc::new(planners),
            settings,
            Metrics::new(),
        ))
    }

    fn log(&self) -> Vec<(&'static str, pb::ClusterUpdate)> {
        self.log.lock().expect("log").clone()
    }

    /// Waits (on the planners' arrival signal, not a sleep) until `pred` holds over the log.
    async fn until(
        &self,
        what: &str,
        pred: impl Fn(&[(&'static str, pb::ClusterUpdate)]) -> bool,
    ) -> anyhow::Result<Vec<(&'static str, pb::ClusterUpdate)>> {
        let log = test_support::when_notified(&self.arrived, || {
            let log = self.log();
            pred(&log).then_some(log)
        });
        tokio::time::timeout(WAIT, log)
            .await
            .with_context(|| format!("waiting for {what}"))
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// A pod kube-scheduler has marked Unschedulable.
    async fn pending_pod(
        &self,
        name: &str,
        labels: serde_json::Value,
        cpu: &str,
    ) -> anyhow::Result<()> {
        let p = json!({
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}
        });
        if simulator::resources::parse_milli(cpu).is_some() {
            self.pods()
                .create(&PostParams::default(), &serde_json::from_value::<Pod>(p)?)
                .await?;
        } else {
            // The API server refuses a quantity it cannot parse; stored skipping validation,
            // as a pod the watcher's reader must refuse on its own.
            let kind = self
                .sim
                .store()
                .kinds()
                .find("", "v1", "pods")
                .context("pods are served")?;
            self.sim
                .store()
                .create_with(
                    &kind,
                    "default",
                    p,
                    simulator::api::validation::Admission::Skip,
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        self.pods()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes are available"}
                ]}})),
            )
            .await?;
        Ok(())
    }

    async fn bound_pod(&self, name: &str, node: &str) -> anyhow::Result<()> {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": "100m"}}}]}
        }))?;
        self.pods().create(&PostParams::default(), &p).await?;
        Ok(())
    }

    async fn node(&self, name: &str, pool: &str) -> anyhow::Result<()> {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool, "kubernetes.io/hostname": name}},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))?;
        Api::<Node>::all(self.client.clone())
            .create(&PostParams::default(), &n)
            .await?;
        Ok(())
    }

    async fn karpenter(&self) -> anyhow::Result<()> {
        let pools = Api::<DynamicObject>::all_with(
            self.client.clone(),
            &karpenter_resource("karpenter.sh", "NodePool"),
        );
        let classes = Api::<DynamicObject>::all_with(
            self.client.clone(),
            &karpenter_resource("karpenter.k8s.aws", "EC2NodeClass"),
        );
        let class: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}
        }))?;
        classes.create(&PostParams::default(), &class).await?;
        let pool: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
            }}}
        }))?;
        pools.create(&PostParams::default(), &pool).await?;
        Ok(())
    }
}

fn snapshot(u: &pb::ClusterUpdate) -> Option<&pb::ClusterSnapshot> {
    match &u.update {
        Some(Update::Snapshot(s)) => s.snapshot.as_ref(),
        _ => None,
    }
}

/// Sequence numbers grow by one within each session (a new session starts with a snapshot).
fn assert_in_order(log: &[(&'static str, pb::ClusterUpdate)]) {
    for w in log.windows(2) {
        let (a, b) = (&w[0].1, &w[1].1);
        if snapshot(b).is_none() {
            assert_eq!(
                w[0].0, w[1].0,
                "a delta on a new replica without a snapshot first"
            );
            assert_eq!(
                b.sequence,
                a.sequence + 1,
                "gap or reorder: {} then {}",
                a.sequence,
                b.sequence
            );
        }
    }
}

/// The value of one sample in a Prometheus text exposition (0 when absent).
fn metric(text: &str, sample: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

// === tests ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_store_syncs_before_the_first_snapshot() -> anyhow::Result<()> {
    let mut c = Cluster::start(1).await?;
    c.karpenter().await?;
    c.node("n1", "default").await?;
    c.bound_pod("running", "n1").await?;
    c.pending_pod("web-1", json!({}), "500m").await?;
    c.pending_pod("web-2", json!({}), "500m").await?;
    // A pod nobody marked Unschedulable yet is not the planner's business.
    c.pods()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "fresh", "namespace": "default"},
                "spec": {"containers": [{"name": "app", "image": "app"}]}
            }))?,
        )
        .await?;
    // Slow lists of nodes: the snapshot still waits for them.
    c.sim
        .faults()
        .slow_requests(2, Duration::from_millis(700), Some("/api/v1/nodes"));
    c.start_watcher().await?;
    let log = c.until("the first snapshot", |l| !l.is_empty()).await?;
    let s = snapshot(&log[0].1).context("the first message is a snapshot")?;
    assert_eq!(s.nodes.len(), 1);
    let mut pods: Vec<&str> = s.pods.iter().map(|p| p.name.as_str()).collect();
    pods.sort();
    assert_eq!(pods, ["running", "web-1", "web-2"]);
    assert_eq!(s.node_pools.len(), 1);
    assert_eq!(s.node_classes.len(), 1);
    assert!(s.namespaces.iter().any(|n| n.name == "kube-system"));
    let web = s.pods.iter().find(|p| p.name == "web-1").context("web-1")?;
    assert_eq!(
        web.requests_milli.get("cpu"),
        Some(&500),
        "parsed once, sent in milli-units"
    );
    assert!(!web.uid.is_empty());
    // The pending pods close a batch right after the snapshot.
    let log = c
        .until("a CloseBatch", |l| {
            l.iter()
                .any(|(_, u)| matches!(u.update, Some(Update::CloseBatch(_))))
        })
        .await?;
    assert_in_order(&log);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_follow_in_order_and_a_dropped_watch_or_410_loses_no_pod() -> anyhow::Result<()> {
    let mut c = Cluster::start(1).await?;
    c.karpenter().await?;
    c.pending_pod("p1", json!({}), "100m").await?;
    c.pending_pod("p2", json!({}), "100m").await?;
    c.start_watcher().await?;
    c.until("the first snapshot", |l| !l.is_empty()).await?;
    let planner = c.planners[0].clone();

    // Cut every watch, and answer the re-watches with 410 Gone: the informers relist.
    c.sim.faults().expire_next_watches(24);
    c.sim.faults().drop_watches();
    // While they are down: one pod goes, one comes, one is bound.
    c.pods().delete("p1", &DeleteParams::default()).await?;
    c.pending_pod("p3", json!({}), "100m").await?;
    c.pods()
        .patch(
            "p2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "n9"}})),
        )
        .await?;
    c.pending_pod("p4", json!({}), "100m").await?;
    let planner2 = planner.clone();
    try_eventually(
        "the planner's pods to match the cluster",
        WAIT,
        POLL,
        move || {
            let p = planner2.clone();
            async move {
                let mut pending = p.pending();
                pending.sort();
                (pending == ["p3", "p4"]).then_some(())
            }
        },
    )
    .await?;
    let pods = planner.pods.lock().expect("pods").clone();
    assert!(
        pods.values()
            .any(|p| p.name == "p2" && p.node_name.as_deref() == Some("n9"))
    );
    assert!(c.sim.faults().injected() > 0, "faults were injected");
    let log = c.log();
    assert_eq!(
        log.iter().filter(|(_, u)| snapshot(u).is_some()).count(),
        1,
        "one session throughout"
    );
    assert_in_order(&log);
    // The relist is counted once it has listed again, which can come after the planner already
    // has the pods from the watch: poll the counter rather than read it once.
    let watcher = c.watcher.as_ref().context("watcher")?;
    let key = "dovetail_watcher_relists_total{kind=\"pods\"}";
    let mut metrics = watcher.metrics.render();
    for _ in 0..(WAIT.as_millis() / POLL.as_millis().max(1)) {
        if metric(&metrics, key) >= 2.0 {
            break;
        }
        tokio::time::sleep(POLL).await;
        metrics = watcher.metrics.render();
    }
    assert!(
        metric(&metrics, key) >= 2.0,
        "the 410 made the pods informer relist: {metrics}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_planner_replica_leads_to_a_fresh_snapshot_on_another() -> anyhow::Result<()> {
    let mut c = Cluster::start(2).await?;
    c.karpenter().await?;
    c.pending_pod("a", json!({}), "100m").await?;
    c.start_watcher().await?;
    let log = c
        .until("the first plan request", |l| {
            l.iter()
                .any(|(_, u)| matches!(u.update, Some(Update::CloseBatch(_))))
        })
        .await?;
    let first = log[0].0;
    let (dead, alive) = if first == c.planners[0].name {
        (c.planners[0].clone(), c.planners[1].clone())
    } else {
        (c.planners[1].clone(), c.planners[0].clone())
    };
    dead.kill();
    // A pod created around the failure reaches the surviving replica.
    c.pending_pod("b", json!({}), "100m").await?;
    let alive_name = alive.name;
    let log = c
        .until("a snapshot on the other replica", |l| {
            l.iter()
                .any(|(r, u)| *r == alive_name && snapshot(u).is_some())
        })
        .await?;
    assert_in_order(&log);
    let alive2 = alive.clone();
    try_eventually(
        "both pods on the surviving replica",
        WAIT,
        POLL,
        move || {
            let a = alive2.clone();
            async move {
                let mut p = a.pending();
                p.sort();
                (p == ["a", "b"]).then_some(())
            }
        },
    )
    .await?;
    let log = c
        .until("a plan requested of the survivor", |l| {
            l.iter()
                .any(|(r, u)| *r == alive_name && matches!(u.update, Some(Update::CloseBatch(_))))
        })
        .await?;
    assert_in_order(&log);
    let m = c.watcher.as_ref().context("watcher")?.metrics.render();
    assert_eq!(metric(&m, "dovetail_watcher_reconnects_total"), 1.0, "{m}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_on_pods_and_nodepool_status_appear() -> anyhow::Result<()> {
    let mut c = Cluster::start(1).await?;
    c.karpenter().await?;
    c.node("n1", "default").await?;
    c.pending_pod("web", json!({}), "500m").await?;
    c.pending_pod("huge", json!({"fail": "yes"}), "200").await?;
    c.pending_pod("broken", json!({}), "lots").await?;
    c.start_watcher().await?;
    let events: Api<Event> = Api::namespaced(c.client.clone(), "default");
    let on = |pod: &'static str, reason: &'static str| {
        let events = events.clone();
        move || {
            let events = events.clone();
            async move {
                let l = events.list(&Default::default()).await.ok()?;
                l.items
                    .into_iter()
                    .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
                    .find(|e| e.reason.as_deref() == Some(reason))
                    .and_then(|e| e.note)
            }
        }
    };
    let note = try_eventually("Nominated on web", WAIT, POLL, on("web", "Nominated")).await?;
    assert!(
        note.starts_with("Pod should schedule on: nodeclaim/claim-"),
        "{note}"
    );
    let note = try_eventually(
        "FailedScheduling on huge",
        WAIT,
        POLL,
        on("huge", "FailedScheduling"),
    )
    .await?;
    assert!(
        note.contains("no instance type in NodePool default fits cpu=200"),
        "{note}"
    );
    let note = try_eventually(
        "the invalid pod's Event",
        WAIT,
        POLL,
        on("broken", "FailedScheduling"),
    )
    .await?;
    assert!(
        note.contains("resources.requests.cpu: invalid quantity \"lots\""),
        "{note}"
    );
    // The invalid pod never reaches the planner.
    assert!(
        c.log()
            .iter()
            .all(|(_, u)| snapshot(u).is_none_or(|s| s.pods.iter().all(|p| p.name != "broken")))
    );
    let broken_events = events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken"))
        .count();
    assert_eq!(
        broken_events, 1,
        "one Event for a pod that cannot be planned"
    );

    let pools = Api::<DynamicObject>::all_with(
        c.client.clone(),
        &karpenter_resource("karpenter.sh", "NodePool"),
    );
    let status = try_eventually("NodePool status", WAIT, POLL, || {
        let pools = pools.clone();
        async move {
            let p = pools.get("default").await.ok()?;
            let s = p.data.get("status")?.clone();
            s.get("conditions").is_some().then_some(s)
        }
    })
    .await?;
    assert_eq!(status["resources"]["nodes"], "1");
    assert_eq!(status["resources"]["cpu"], "4");
    assert_eq!(status["nodes"], 1);
    for t in ["Ready", "ValidationSucceeded", "NodeClassReady"] {
        let cond = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == t);
        assert_eq!(
            cond.map(|c| c["status"].clone()),
            Some(json!("True")),
            "{t}: {status}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_replicas_leads_and_the_other_takes_over() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.karpenter().await?;
    c.pending_pod("a", json!({}), "100m").await?;
    let first = c.watcher_replica("watcher-1", true).await?;
    let mut leading = first.leading.clone();
    tokio::time::timeout(WAIT, leading.wait_for(|l| *l)).await??;
    let second = c.watcher_replica("watcher-2", true).await?;
    tokio::time::timeout(WAIT, second.readiness.wait_until_ready()).await?;
    c.until("the leader's snapshot", |l| !l.is_empty()).await?;
    // The follower is synced and ready, yet sends nothing while the leader holds the Lease.
    let follower_leads = second.leading.clone();
    assert!(!*follower_leads.borrow());
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(c.client.clone(), "kube-system");
    let holder =
        |l: k8s_openapi::api::coordination::v1::Lease| l.spec.and_then(|s| s.holder_identity);
    assert_eq!(
        holder(leases.get("dovetail-watcher").await?).as_deref(),
        Some("watcher-1")
    );

    // The leader stops (releasing the Lease): the other replica takes over with a snapshot.
    first.shutdown().await;
    let mut follower_leads = follower_leads;
    tokio::time::timeout(WAIT, follower_leads.wait_for(|l| *l)).await??;
    c.pending_pod("b", json!({}), "100m").await?;
    let log = c
        .until("a second snapshot, then pod b", |l| {
            l.iter().filter(|(_, u)| snapshot(u).is_some()).count() == 2
                && c.planners[0].pending().contains(&"b".to_string())
        })
        .await?;
    assert_in_order(&log);
    let mut pending = c.planners[0].pending();
    pending.sort();
    assert_eq!(pending, ["a", "b"]);
    assert_eq!(
        holder(leases.get("dovetail-watcher").await?).as_deref(),
        Some("watcher-2")
    );
    second.shutdown().await;
    Ok(())
}

/// A pod nominated to a claim that is then deleted and replaced under a new name gets a second
/// `Nominated` Event naming the new claim, as `kubectl get events` shows it (core `v1`): kube's
/// recorder alone would fold the second into the first's series and keep the old note.
#[tokio::test]
async fn a_new_nomination_of_a_pod_is_a_new_event_naming_the_new_claim() -> anyhow::Result<()> {
    let sim = simulator::Simulation::start(simulator::Config {
        scheduler: false,
        controllers: false,
        ..Default::default()
    })
    .await?;
    let client = sim.kube_client()?;
    let mut events = watcher::feedback::Events::new(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "dovetail-watcher".into(),
            instance: Some("test".into()),
        },
    );
    let nominated = |claim: &str| watcher::feedback::PodEvent {
        pod: "default/web-1".into(),
        uid: "uid-web-1".into(),
        reason: "Nominated",
        note: format!("Pod should schedule on: nodeclaim/{claim}"),
    };
    events.publish_all(vec![nominated("default-aaaaa")]).await;
    // The same plan again writes nothing new.
    events.publish_all(vec![nominated("default-aaaaa")]).await;
    events.publish_all(vec![nominated("default-bbbbb")]).await;
    let notes: Vec<String> =
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(client, "default")
            .list(&kube::api::ListParams::default().fields("involvedObject.name=web-1"))
            .await?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("Nominated"))
            .filter_map(|e| e.message)
            .collect();
    assert_eq!(notes.len(), 2, "one Event per nomination: {notes:?}");
    assert!(
        notes.iter().any(|n| n.ends_with("nodeclaim/default-bbbbb")),
        "{notes:?}"
    );
    Ok(())
}

/// The `resource.k8s.io/v1` API of `kind`.
fn dra_api(c: &Cluster, kind: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("resource.k8s.io", "v1", kind);
    let ar = kube::api::ApiResource::from_gvk(&gvk);
    if kind == "ResourceClaim" {
        Api::namespaced_with(c.client.clone(), "default", &ar)
    } else {
        Api::all_with(c.client.clone(), &ar)
    }
}

async fn create(api: &Api<DynamicObject>, v: serde_json::Value) -> anyhow::Result<()> {
    api.create(&PostParams::default(), &serde_json::from_value(v)?)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_objects_are_mirrored_while_ignore_dra_requests_is_off() -> anyhow::Result<()> {
    let mut c = Cluster::start(1).await?;
    c.karpenter().await?;
    c.node("n1", "default").await?;
    create(
        &dra_api(&c, "DeviceClass"),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
               "metadata": {"name": "gpu.example.com"},
               "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    )
    .await?;
    create(
        &dra_api(&c, "ResourceClaim"),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "gpu", "namespace": "default"},
               "spec": {"devices": {"requests": [
                   {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}}),
    )
    .await?;
    let slices = dra_api(&c, "ResourceSlice");
    create(
        &slices,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": "n1-gpu"},
               "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}]}}),
    )
    .await?;
    c.watcher = Some(
        c.watcher_with("test", false, |s| {
            s.base.options.ignore_dra_requests = Some(false);
        })
        .await?,
    );
    let log = c.until("the first snapshot", |l| !l.is_empty()).await?;
    let s = snapshot(&log[0].1).context("the first message is a snapshot")?;
    assert_eq!(s.device_classes.len(), 1, "{:?}", s.device_classes);
    assert_eq!(
        s.device_classes[0].selectors,
        ["device.driver == \"gpu.example.com\""]
    );
    let claim = s.resource_claims.first().context("the claim")?;
    assert_eq!(
        (claim.namespace.as_str(), claim.name.as_str()),
        ("default", "gpu")
    );
    assert_eq!(claim.requests[0].count, 2);
    let slice = s.resource_slices.first().context("the slice")?;
    assert_eq!(
        (slice.driver.as_str(), slice.node_name.as_str()),
        ("gpu.example.com", "n1")
    );
    assert_eq!(
        slice.devices[0]
            .attributes
            .get("gpu.example.com/model")
            .map(String::as_str),
        Some("\"a100\"")
    );
    // A slice published later arrives as an upsert, its deletion as a delete of its kind.
    create(
        &slices,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": "shared"},
               "spec": {"driver": "gpu.example.com", "allNodes": true,
                        "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "gpu-9"}]}}),
    )
    .await?;
    c.until("the new slice upserted", |l| {
        l.iter().any(|(_, u)| match &u.update {
            Some(Update::Delta(d)) => d.upserts.iter().any(|x| {
                matches!(&x.object, Some(pb::upsert::Object::ResourceSlice(r)) if r.name == "shared" && r.all_nodes)
            }),
            _ => false,
        })
    })
    .await?;
    slices.delete("shared", &DeleteParams::default()).await?;
    c.until("the slice deleted", |l| {
        l.iter().any(|(_, u)| match &u.update {
            Some(Update::Delta(d)) => d.deletes.iter().any(|x| x.kind == "ResourceSlice"),
            _ => false,
        })
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_objects_are_not_mirrored_by_default() -> anyhow::Result<()> {
    let mut c = Cluster::start(1).await?;
    c.karpenter().await?;
    create(
        &dra_api(&c, "DeviceClass"),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
               "metadata": {"name": "gpu.example.com"}, "spec": {}}),
    )
    .await?;
    c.start_watcher().await?;
    let log = c.until("the first snapshot", |l| !l.is_empty()).await?;
    let s = snapshot(&log[0].1).context("the first message is a snapshot")?;
    assert!(s.device_classes.is_empty(), "{:?}", s.device_classes);
    assert_eq!(s.node_pools.len(), 1);
    Ok(())
}

/// Karpenter v1.14's `ConsolidationApproved` (`pkg/controllers/disruption/balanced.go`,
/// `events/events.go`): an approved single-node Balanced move on the Node and its NodeClaim, an
/// approved multi-node move on the NodePool, with `consolidationScoreMessage`'s words, written
/// once however many plans repeat them, and nothing for a rejected move.
#[tokio::test]
async fn approved_balanced_moves_are_consolidation_approved_events() -> anyhow::Result<()> {
    use proto::v1::upsert::Object;
    let sim = simulator::Simulation::start(simulator::Config {
        scheduler: false,
        controllers: false,
        ..Default::default()
    })
    .await?;
    let client = sim.kube_client()?;
    let mirror = watcher::mirror::Mirror::new();
    mirror.update(|s| {
        for n in ["n1", "n2", "n3", "n4"] {
            s.upsert(Object::Node(pb::Node {
                name: n.into(),
                uid: format!("uid-{n}"),
                ..Default::default()
            }));
            s.upsert(Object::NodeClaim(pb::NodeClaim {
                name: format!("c-{n}"),
                uid: format!("uid-c-{n}"),
                ..Default::default()
            }));
        }
        s.upsert(Object::NodePool(pb::NodePool {
            name: "bal".into(),
            uid: "uid-bal".into(),
            ..Default::default()
        }));
    });
    let pool = |score: f64, savings: f64, disruption: f64| pb::ConsolidationPoolScore {
        node_pool: "bal".into(),
        policy: "Balanced".into(),
        scored: true,
        score,
        threshold: 0.5,
        k: 2,
        savings_percent: savings,
        disruption_percent: disruption,
    };
    let mv = |decision: &str, nodes: &[&str], score| pb::ConsolidationMove {
        decision: decision.into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        node_claims: nodes.iter().map(|n| format!("c-{n}")).collect(),
        node_pools: vec![score],
    };
    let plan = pb::PlanResponse {
        consolidation_moves: vec![
            mv("approved", &["n1"], pool(0.75, 75.0, 100.0)),
            mv("approved", &["n2", "n3"], pool(1.25, 50.0, 40.0)),
            mv("rejected", &["n4"], pool(0.39, 16.7, 42.9)),
        ],
        ..Default::default()
    };
    let mut events = watcher::feedback::Events::new(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "dovetail-watcher".into(),
            instance: Some("test".into()),
        },
    );
    // Two plans with the same moves: one Event per object.
    for _ in 0..2 {
        let todo = watcher::feedback::disruption_events(&plan, &mirror);
        events.publish_disruption(todo).await;
    }
    let mut got: Vec<(String, String, String)> =
        Api::<k8s_openapi::api::core::v1::Event>::all(client)
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("ConsolidationApproved"))
            .map(|e| {
                (
                    e.involved_object.kind.unwrap_or_default(),
                    e.involved_object.name.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect();
    got.sort();
    let single = "score 0.75 >= threshold 0.50 (k: 2, savings 75.0%, disruption 100.0%)";
    let multi = "score 1.25 >= threshold 0.50 (k: 2, savings 50.0%, disruption 40.0%)";
    assert_eq!(
        got,
        vec![
            ("Node".into(), "n1".into(), single.into()),
            ("NodeClaim".into(), "c-n1".into(), single.into()),
            ("NodePool".into(), "bal".into(), multi.into()),
        ]
    );
    Ok(())
}
