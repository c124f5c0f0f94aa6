//! The NodeClaim lifecycle and garbage collection against the simulator (its kube API on
//! loopback, its cloud, its kubelet), under paused tokio time: the NodeClaim exists before the
//! instance, and moves Launched → Registered → Initialized with its Node labelled and tainted
//! as it says; liveness fails a claim whose Node never registers; a NodeClaim deleted by a user
//! terminates its instance and releases its finalizer; garbage collection terminates a leaked
//! instance and fails a vanished one; a crash between "NodeClaim created" and "launched"
//! resumes without a second NodeClaim or instance.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actuator::launch::{Taint as SpecTaint, TaintEffect};
use actuator::ledger::{ClaimState, Submission};
use actuator::lifecycle::gc;
use actuator::metrics::Metrics;
use actuator::worker::{self, Step, Worker};
use async_trait::async_trait;
use cloud::{CloudProvider, Instance, InstanceState, LaunchRequest, ListFilter, ProviderId};
use crds::{ConditionStatus, NodeClaim, NodePool};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use simulator::cloud::SimCloud;
use support::plan;

use support::CLUSTER;

/// The simulator's cloud, noting at each create call whether the claim's NodeClaim existed.
struct Witness {
    sim: SimCloud,
    store: Arc<simulator::api::Store>,
    nodeclaim_at_create: Mutex<Vec<(String, bool)>>,
}

#[async_trait]
impl CloudProvider for Witness {
    async fn create(&self, r: &LaunchRequest) -> cloud::Result<Instance> {
        let name = r.tags[cloud::TAG_NODECLAIM].clone();
        let kind = self.store.kinds().find("karpenter.sh", "v1", "nodeclaims");
        let exists = kind.is_some_and(|k| self.store.get(&k, "", &name).is_ok());
        self.nodeclaim_at_create
            .lock()
            .expect("lock")
            .push((name, exists));
        self.sim.create(r).await
    }
    async fn get(&self, p: &ProviderId) -> cloud::Result<Instance> {
        self.sim.get(p).await
    }
    async fn list(&self, f: &ListFilter) -> cloud::Result<Vec<Instance>> {
        self.sim.list(f).await
    }
    async fn delete(&self, p: &ProviderId) -> cloud::Result<()> {
        CloudProvider::delete(&self.sim, p).await
    }
    async fn tag(&self, p: &ProviderId, tags: &cloud::Tags) -> cloud::Result<()> {
        self.sim.tag(p, tags).await
    }
    async fn instance_types(&self) -> cloud::Result<cloud::Catalog> {
        self.sim.instance_types().await
    }
}

/// The NodePool's `spec.template`, as a user applies it.
fn pool_template() -> serde_json::Value {
    json!({
        "metadata": {"labels": {"env": "test"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            "expireAfter": "720h"
        }
    })
}

/// The shared fixture ([`support::fx`]) over the witness cloud, its ledger frozen for paused
/// time.
struct Fx {
    base: support::fx::Fx,
    cloud: Arc<Witness>,
}

impl std::ops::Deref for Fx {
    type Target = support::fx::Fx;

    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl Fx {
    async fn new() -> Self {
        let (base, cloud) = support::fx::Builder::new()
            .pool(json!({"template": pool_template()}))
            .frozen()
            .build_with(|sim| {
                Arc::new(Witness {
                    sim: sim.cloud().clone(),
                    store: sim.store().clone(),
                    nodeclaim_at_create: Mutex::default(),
                })
            })
            .await;
        Self { base, cloud }
    }

    fn worker(&self, owner: &str, pause_at: Option<Step>) -> Worker {
        Worker::new(
            self.ledger.clone(),
            self.cloud.clone(),
            self.clock.clone(),
            Metrics::new(),
            worker::Options {
                owner: owner.into(),
                cluster_name: CLUSTER.into(),
                lease: Duration::from_secs(30),
                poll: Duration::from_secs(1),
                pause_at,
                ..worker::Options::default()
            },
        )
        .with_lifecycle(Arc::new(self.ctl.launch_hook()))
    }

    async fn submit(&self, names: &[&str]) {
        let mut p: Submission = plan("p1", &[], names);
        for l in &mut p.launches {
            l.spec.labels.insert("team".into(), "web".into());
            l.spec.taints = vec![SpecTaint {
                key: "dedicated".into(),
                value: "web".into(),
                effect: TaintEffect::NoSchedule,
            }];
            l.spec.startup_taints = vec![SpecTaint {
                key: "example.com/agent".into(),
                value: String::new(),
                effect: TaintEffect::NoExecute,
            }];
        }
        self.ledger.submit(&p, 1).await.expect("submit");
    }

    /// Runs controller passes a second apart until `name` is in `state` (at most `max` passes).
    async fn until(&self, name: &str, state: ClaimState, max: u32) {
        for _ in 0..max {
            let p = self.ctl.pass().await.expect("pass");
            assert!(p.errors.is_empty(), "{:?}", p.errors);
            if self.state(name).await == state {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        panic!("{name} did not reach {state}: {}", self.state(name).await);
    }

    fn instances(&self) -> Vec<Instance> {
        self.sim.cloud().instances()
    }

    async fn finish(self) {
        self.base.finish().await;
    }
}

fn condition(nc: &NodeClaim, t: &str) -> Option<(ConditionStatus, String)> {
    nc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| (c.status, c.reason.clone().unwrap_or_default()))
}

fn taint_keys(n: &Node) -> Vec<String> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect()
}

fn label<'a>(
    labels: &'a Option<std::collections::BTreeMap<String, String>>,
    k: &str,
) -> Option<&'a str> {
    labels.as_ref()?.get(k).map(String::as_str)
}

#[tokio::test(start_paused = true)]
async fn a_launch_creates_its_nodeclaim_first_and_it_moves_launched_registered_initialized() {
    let fx = Fx::new().await;
    fx.submit(&["default-a1"]).await;
    assert_eq!(fx.worker("w1", None).round().await.expect("round"), 1);
    assert_eq!(fx.state("default-a1").await, ClaimState::Launched);
    assert_eq!(
        *fx.cloud.nodeclaim_at_create.lock().expect("lock"),
        [("default-a1".to_string(), true)],
        "the NodeClaim exists before the instance is created"
    );

    let nc = fx.nodeclaims().get("default-a1").await.expect("nodeclaim");
    let pool = Api::<NodePool>::all(fx.client.clone())
        .get("default")
        .await
        .expect("pool");
    assert_eq!(
        label(&nc.metadata.labels, "karpenter.sh/nodepool"),
        Some("default")
    );
    assert_eq!(
        label(&nc.metadata.labels, "env"),
        Some("test"),
        "template labels"
    );
    assert_eq!(
        label(&nc.metadata.labels, "team"),
        Some("web"),
        "planner labels"
    );
    assert_eq!(
        nc.metadata.finalizers.clone().unwrap_or_default(),
        ["karpenter.sh/termination"]
    );
    let owner = &nc.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("NodePool", pool.metadata.uid.as_ref())
    );
    assert_eq!(nc.spec.expire_after.as_deref(), Some("720h"));
    assert_eq!(nc.spec.node_class_ref.name, "default");
    // The drift hash of the NodePool as applied, the planner's function (common::hash).
    let annotations = nc.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("karpenter.sh/nodepool-hash"),
        Some(&common::hash::nodepool_template_hash(&pool_template()))
    );
    assert_eq!(
        annotations
            .get("karpenter.sh/nodepool-hash-version")
            .map(String::as_str),
        Some(common::hash::HASH_VERSION)
    );
    assert_eq!(
        condition(&nc, "Launched"),
        Some((ConditionStatus::Unknown, "AwaitingReconciliation".into()))
    );

    // Launched: the status says what was launched; no Node yet.
    fx.ctl.pass().await.expect("pass");
    let nc = fx.nodeclaims().get("default-a1").await.expect("nodeclaim");
    let claim = fx
        .ledger
        .claim("default-a1")
        .await
        .expect("read")
        .expect("claim");
    let inst = claim.instance.clone().expect("instance");
    let status = nc.status.clone().expect("status");
    assert_eq!(
        status.provider_id.as_deref(),
        Some(inst.provider_id.as_str())
    );
    assert!(status.allocatable.is_some_and(|a| a.contains_key("cpu")));
    assert_eq!(
        condition(&nc, "Launched"),
        Some((ConditionStatus::True, "Launched".into()))
    );
    assert_eq!(
        condition(&nc, "Registered"),
        Some((ConditionStatus::Unknown, "NodeNotFound".into()))
    );
    assert_eq!(
        label(&nc.metadata.labels, "node.kubernetes.io/instance-type"),
        Some("m5.large")
    );

    // Registered once the kubelet registers (pending 5 s + 3 s): synced, unregistered taint gone.
    fx.until("default-a1", ClaimState::Registered, 30).await;
    let node = fx.node_of("default-a1").await.expect("node");
    let taints = taint_keys(&node);
    assert!(
        !taints.contains(&"karpenter.sh/unregistered".to_string()),
        "{taints:?}"
    );
    assert!(taints.contains(&"dedicated".to_string()), "{taints:?}");
    assert!(
        taints.contains(&"example.com/agent".to_string()),
        "{taints:?}"
    );
    for (k, v) in [
        ("karpenter.sh/registered", "true"),
        ("team", "web"),
        ("env", "test"),
    ] {
        assert_eq!(label(&node.metadata.labels, k), Some(v), "node label {k}");
    }
    let owners = node.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.kind == "NodeClaim" && o.name == "default-a1")
    );

    // The startup taint holds initialization back, whatever the passes.
    for _ in 0..5 {
        fx.ctl.pass().await.expect("pass");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(fx.state("default-a1").await, ClaimState::Registered);
    let nc = fx.nodeclaims().get("default-a1").await.expect("nodeclaim");
    assert_eq!(
        condition(&nc, "Initialized"),
        Some((ConditionStatus::Unknown, "StartupTaintsExist".into()))
    );
    assert_eq!(
        condition(&nc, "Ready").map(|c| c.0),
        Some(ConditionStatus::Unknown)
    );

    // A daemon removes it: Initialized.
    let node = fx.node_of("default-a1").await.expect("node");
    let kept: Vec<_> = node
        .spec
        .clone()
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != "example.com/agent")
        .collect();
    fx.nodes()
        .patch(
            node.metadata.name.as_deref().expect("name"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": kept}})),
        )
        .await
        .expect("remove the startup taint");
    fx.until("default-a1", ClaimState::Initialized, 5).await;
    let node = fx.node_of("default-a1").await.expect("node");
    assert_eq!(
        label(&node.metadata.labels, "karpenter.sh/initialized"),
        Some("true")
    );
    let nc = fx.nodeclaims().get("default-a1").await.expect("nodeclaim");
    for t in ["Launched", "Registered", "Initialized", "Ready"] {
        assert_eq!(
            condition(&nc, t).map(|c| c.0),
            Some(ConditionStatus::True),
            "{t}"
        );
    }
    assert_eq!(nc.status.and_then(|s| s.node_name), node.metadata.name);
    let steps: Vec<ClaimState> = fx
        .ledger
        .events("default-a1")
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.to)
        .collect();
    assert_eq!(
        steps,
        [
            ClaimState::Requested,
            ClaimState::Launching,
            ClaimState::Launched,
            ClaimState::Registered,
            ClaimState::Initialized
        ]
    );
    // Resting: more passes write nothing.
    let writes = fx.ledger.writes();
    for _ in 0..3 {
        fx.ctl.pass().await.expect("pass");
    }
    assert_eq!(
        fx.ledger.writes(),
        writes,
        "a resting claim costs no ledger write"
    );
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn liveness_fails_a_claim_whose_node_never_registers_after_fifteen_minutes() {
    let fx = Fx::new().await;
    fx.sim.cloud().block_node_registration(true);
    fx.submit(&["default-l1"]).await;
    fx.worker("w1", None).round().await.expect("round");
    let launched = tokio::time::Instant::now();
    let pid: ProviderId = fx
        .ledger
        .claim("default-l1")
        .await
        .expect("read")
        .and_then(|c| c.instance)
        .expect("instance")
        .provider_id
        .parse()
        .expect("provider id");
    loop {
        fx.ctl.pass().await.expect("pass");
        let s = fx.state("default-l1").await;
        if s != ClaimState::Launched {
            assert!(
                launched.elapsed() >= Duration::from_secs(15 * 60),
                "{s} after only {:?}",
                launched.elapsed()
            );
            break;
        }
        assert!(
            launched.elapsed() < Duration::from_secs(16 * 60),
            "still launched"
        );
        tokio::time::sleep(Duration::from_secs(20)).await;
    }
    fx.until("default-l1", ClaimState::Failed, 30).await;
    let claim = fx
        .ledger
        .claim("default-l1")
        .await
        .expect("read")
        .expect("claim");
    assert!(
        claim
            .failure_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("registration_timeout")),
        "{:?}",
        claim.failure_reason
    );
    let inst = fx.sim.cloud().get(&pid).await.expect("instance");
    assert_eq!(inst.state, InstanceState::Terminated);
    assert!(
        fx.nodeclaims()
            .get_opt("default-l1")
            .await
            .expect("get")
            .is_none()
    );
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_nodeclaim_deleted_by_a_user_terminates_its_instance_and_releases_the_finalizer() {
    let fx = Fx::new().await;
    fx.submit(&["default-d1"]).await;
    fx.worker("w1", None).round().await.expect("round");
    fx.until("default-d1", ClaimState::Registered, 30).await;
    let node = fx.node_of("default-d1").await.expect("node");
    fx.nodeclaims()
        .delete("default-d1", &DeleteParams::default())
        .await
        .expect("delete");
    let nc = fx
        .nodeclaims()
        .get("default-d1")
        .await
        .expect("held by the finalizer");
    assert!(nc.metadata.deletion_timestamp.is_some());
    fx.until("default-d1", ClaimState::Terminated, 30).await;
    assert!(
        fx.nodeclaims()
            .get_opt("default-d1")
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        fx.nodes()
            .get_opt(node.metadata.name.as_deref().expect("name"))
            .await
            .expect("get")
            .is_none()
    );
    let live: Vec<_> = fx
        .instances()
        .into_iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .collect();
    assert!(live.is_empty(), "{live:?}");
    let steps: Vec<ClaimState> = fx
        .ledger
        .events("default-d1")
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.to)
        .collect();
    assert_eq!(
        &steps[steps.len() - 2..],
        [ClaimState::Terminating, ClaimState::Terminated]
    );
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn gc_terminates_a_leaked_instance_after_the_grace_and_fails_a_vanished_one() {
    let fx = Fx::new().await;
    fx.submit(&["default-g1"]).await;
    fx.worker("w1", None).round().await.expect("round");
    fx.until("default-g1", ClaimState::Registered, 30).await;
    let offering = cloud::OfferingKey {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: cloud::CapacityType::OnDemand,
    };
    let tags = |claim: &str| {
        cloud::Tags::from([
            (
                format!("kubernetes.io/cluster/{CLUSTER}"),
                "owned".to_string(),
            ),
            (cloud::TAG_NODECLAIM.to_string(), claim.to_string()),
        ])
    };
    let leaked = fx.sim.cloud().leak(&offering, tags("ghost")).expect("leak");
    let other_cluster = fx
        .sim
        .cloud()
        .leak(
            &offering,
            cloud::Tags::from([
                (
                    "kubernetes.io/cluster/other".to_string(),
                    "owned".to_string(),
                ),
                (cloud::TAG_NODECLAIM.to_string(), "ghost".to_string()),
            ]),
        )
        .expect("leak");

    let r = gc::collect(&fx.ctl).await.expect("gc");
    assert_eq!(r, gc::Report::default(), "nothing within the grace period");
    tokio::time::sleep(Duration::from_secs(5 * 60)).await;
    let r = gc::collect(&fx.ctl).await.expect("gc");
    assert_eq!(r.terminated, [leaked.id.as_str()]);
    assert!(r.vanished.is_empty());
    let state = |id: &str| {
        fx.instances()
            .into_iter()
            .find(|i| i.id == id)
            .map(|i| i.state)
    };
    assert_eq!(state(&leaked.id), Some(InstanceState::ShuttingDown));
    assert_eq!(
        state(&other_cluster.id),
        Some(InstanceState::Running),
        "not this cluster's"
    );
    let claim = fx
        .ledger
        .claim("default-g1")
        .await
        .expect("read")
        .expect("claim");
    let mine = claim.instance.expect("instance").instance_id;
    assert_eq!(
        state(&mine),
        Some(InstanceState::Running),
        "an owned instance stays"
    );

    // The claim's instance vanishes under it: failed, NodeClaim removed.
    fx.sim
        .cloud()
        .terminate(
            &fx.sim
                .cloud()
                .instances()
                .into_iter()
                .find(|i| i.id == mine)
                .expect("mine")
                .provider_id,
        )
        .expect("terminate");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let r = gc::collect(&fx.ctl).await.expect("gc");
    assert_eq!(r.vanished, ["default-g1".to_string()]);
    fx.until("default-g1", ClaimState::Failed, 10).await;
    let claim = fx
        .ledger
        .claim("default-g1")
        .await
        .expect("read")
        .expect("claim");
    assert!(
        claim
            .failure_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("instance_vanished")),
        "{:?}",
        claim.failure_reason
    );
    assert!(
        fx.nodeclaims()
            .get_opt("default-g1")
            .await
            .expect("get")
            .is_none()
    );
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_crash_between_nodeclaim_created_and_launched_resumes_without_a_second_of_either() {
    let fx = Fx::new().await;
    fx.submit(&["default-c1"]).await;
    // Worker 1 creates the NodeClaim and the instance, then dies before writing `launched`.
    let w1 = fx.worker("w1", Some(Step::Created));
    let crashed = tokio::spawn(async move {
        let _ = w1.round().await;
    });
    let uid = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !fx.instances().is_empty()
            && let Some(nc) = fx.nodeclaims().get_opt("default-c1").await.expect("get")
        {
            break nc.metadata.uid.clone().expect("uid");
        }
    };
    crashed.abort();
    let _ = crashed.await;
    assert_eq!(fx.state("default-c1").await, ClaimState::Launching);

    // Worker 2 takes the claim over once the lease expires.
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(fx.worker("w2", None).round().await.expect("round"), 1);
    assert_eq!(fx.state("default-c1").await, ClaimState::Launched);
    let nc = fx.nodeclaims().get("default-c1").await.expect("nodeclaim");
    assert_eq!(
        nc.metadata.uid.as_deref(),
        Some(uid.as_str()),
        "the same NodeClaim, adopted"
    );
    let all = fx
        .nodeclaims()
        .list(&Default::default())
        .await
        .expect("list");
    assert_eq!(all.items.len(), 1);
    assert_eq!(fx.instances().len(), 1, "one instance");
    assert_eq!(
        fx.sim.cloud().create_calls(),
        1,
        "the instance was found by its tag"
    );
    fx.until("default-c1", ClaimState::Registered, 30).await;
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_nodeclaim_removed_by_hand_is_recreated_and_its_instance_kept() {
    let fx = Fx::new().await;
    fx.submit(&["default-r1"]).await;
    fx.worker("w1", None).round().await.expect("round");
    fx.ctl.pass().await.expect("pass");
    let old = fx.nodeclaims().get("default-r1").await.expect("nodeclaim");
    fx.nodeclaims()
        .patch(
            "default-r1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("drop the finalizer");
    fx.nodeclaims()
        .delete("default-r1", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        fx.nodeclaims()
            .get_opt("default-r1")
            .await
            .expect("get")
            .is_none()
    );
    let p = fx.ctl.pass().await.expect("pass");
    assert!(p.errors.is_empty() && p.steps.is_empty(), "{p:?}");
    let new = fx.nodeclaims().get("default-r1").await.expect("recreated");
    assert_ne!(new.metadata.uid, old.metadata.uid);
    assert_eq!(fx.state("default-r1").await, ClaimState::Launched);
    assert!(
        fx.instances()
            .iter()
            .all(|i| i.state != InstanceState::Terminated && i.state != InstanceState::ShuttingDown)
    );
    fx.until("default-r1", ClaimState::Registered, 30).await;
    fx.finish().await;
}

/// An instance a crashed launch left with only the cluster, NodePool and EC2NodeClass tags (no
/// `karpenter.sh/nodeclaim`) is still this cluster's: garbage collection terminates it after
/// the grace period, as Karpenter's does for any instance of the cluster without a NodeClaim
/// (aws/karpenter-provider-aws `pkg/controllers/nodeclaim/garbagecollection/controller.go`,
/// instances listed by `pkg/providers/instance/instance.go` `List`).
#[tokio::test(start_paused = true)]
async fn gc_terminates_a_leaked_instance_without_a_nodeclaim_tag() {
    let fx = Fx::new().await;
    fx.submit(&["default-u1"]).await;
    fx.worker("w1", None).round().await.expect("round");
    fx.until("default-u1", ClaimState::Registered, 30).await;
    let offering = cloud::OfferingKey {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: cloud::CapacityType::OnDemand,
    };
    let leaked = fx
        .sim
        .cloud()
        .leak(
            &offering,
            cloud::Tags::from([
                (
                    format!("kubernetes.io/cluster/{CLUSTER}"),
                    "owned".to_string(),
                ),
                (cloud::TAG_NODEPOOL.to_string(), "default".to_string()),
                (cloud::TAG_NODECLASS.to_string(), "default".to_string()),
            ]),
        )
        .expect("leak");
    let r = gc::collect(&fx.ctl).await.expect("gc");
    assert!(r.terminated.is_empty(), "within the grace period: {r:?}");
    tokio::time::sleep(Duration::from_secs(5 * 60)).await;
    let r = gc::collect(&fx.ctl).await.expect("gc");
    assert_eq!(r.terminated, [leaked.id.as_str()]);
    let mine = fx
        .ledger
        .claim("default-u1")
        .await
        .expect("read")
        .expect("claim")
        .instance
        .expect("instance")
        .instance_id;
    let state = |id: &str| {
        fx.instances()
            .into_iter()
            .find(|i| i.id == id)
            .map(|i| i.state)
    };
    assert_eq!(state(&leaked.id), Some(InstanceState::ShuttingDown));
    assert_eq!(state(&mine), Some(InstanceState::Running), "owned");
    fx.finish().await;
}

fn pods(fx: &Fx) -> Api<k8s_openapi::api::core::v1::Pod> {
    Api::namespaced(fx.client.clone(), "default")
}

async fn pod_on(fx: &Fx, name: &str, node: &str, annotations: serde_json::Value, grace: i64) {
    let pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                 // The Fx's Nodes keep their NoExecute startup taint (no agent removes it here).
                 "tolerations": [{"key": "example.com/agent", "operator": "Exists", "effect": "NoExecute"}],
                 "containers": [{"name": "c", "image": "nginx",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    }))
    .expect("pod");
    pods(fx)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
}

async fn pod_exists(fx: &Fx, name: &str) -> bool {
    pods(fx).get_opt(name).await.expect("get pod").is_some()
}

/// Deleting a NodeClaim honours `karpenter.sh/do-not-disrupt` and the NodePool's
/// `terminationGracePeriod`, as Karpenter's termination controller does
/// (`pkg/controllers/node/termination/controller.go`, `terminator/eviction.go`,
/// `pkg/utils/pod/scheduling.go` `IsEvictable` of kubernetes-sigs/karpenter; its
/// `suite_test.go` "should not evict pods that have the do-not-disrupt annotation" and "should
/// delete pods with do-not-disrupt once the terminationGracePeriod is near"): the plain pod is
/// evicted at once, the do-not-disrupt pods (`true`, and a duration longer than the test) stay
/// Running until the deadline is within their own `terminationGracePeriodSeconds`, then they
/// are deleted and the instance terminated.
#[tokio::test(start_paused = true)]
async fn deleting_a_nodeclaim_waits_for_do_not_disrupt_pods_until_the_termination_grace_period() {
    let fx = Fx::new().await;
    Api::<NodePool>::all(fx.client.clone())
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"template": {"spec": {"terminationGracePeriod": "3m"}}}}),
            ),
        )
        .await
        .expect("set terminationGracePeriod");
    fx.submit(&["default-t1"]).await;
    fx.worker("w1", None).round().await.expect("round");
    fx.until("default-t1", ClaimState::Registered, 30).await;
    let node = fx.node_of("default-t1").await.expect("node");
    let node_name = node.metadata.name.clone().expect("name");
    pod_on(&fx, "plain", &node_name, json!({}), 30).await;
    pod_on(
        &fx,
        "kept",
        &node_name,
        json!({"karpenter.sh/do-not-disrupt": "true"}),
        60,
    )
    .await;
    pod_on(
        &fx,
        "kept-1h",
        &node_name,
        json!({"karpenter.sh/do-not-disrupt": "1h"}),
        30,
    )
    .await;

    fx.nodeclaims()
        .delete("default-t1", &DeleteParams::default())
        .await
        .expect("delete");
    // Two minutes: past the plain pod's eviction, before either deadline.
    for _ in 0..115 {
        let p = fx.ctl.pass().await.expect("pass");
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(!pod_exists(&fx, "plain").await, "evicted");
    assert!(pod_exists(&fx, "kept").await, "do-not-disrupt: true");
    assert!(pod_exists(&fx, "kept-1h").await, "do-not-disrupt: 1h");
    assert_eq!(fx.state("default-t1").await, ClaimState::Terminating);
    let live = fx
        .instances()
        .into_iter()
        .filter(|i| i.state == InstanceState::Running)
        .count();
    assert_eq!(live, 1, "the instance runs while the pods are kept");
    // The deadline is announced as Karpenter does (`pkg/controllers/nodeclaim/lifecycle/
    // controller.go`, `pkg/controllers/node/termination/controller.go`): the NodeClaim's
    // `karpenter.sh/nodeclaim-termination-timestamp`, and a Warning
    // `TerminationGracePeriodExpiring` "All pods will be deleted by <time>" on the NodeClaim and
    // on its Node, as `kubectl get events` lists them.
    let nc = fx.nodeclaims().get("default-t1").await.expect("nodeclaim");
    let at = nc
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .get("karpenter.sh/nodeclaim-termination-timestamp")
        .cloned()
        .expect("termination timestamp annotation");
    let events = |fx: &Fx| {
        let api =
            Api::<k8s_openapi::api::core::v1::Event>::namespaced(fx.client.clone(), "default");
        async move { api.list(&Default::default()).await.expect("events").items }
    };
    let expiring: Vec<(String, String)> = events(&fx)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("TerminationGracePeriodExpiring"))
        .map(|e| {
            (
                e.involved_object.kind.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
            )
        })
        .collect();
    let note = format!("All pods will be deleted by {at}");
    for kind in ["NodeClaim", "Node"] {
        assert!(
            expiring.contains(&(kind.to_string(), note.clone())),
            "{kind}: {expiring:?}"
        );
    }
    // The 60 s pod goes first, at the deadline minus 60 s; then the other; then the instance.
    fx.until("default-t1", ClaimState::Terminated, 90).await;
    assert!(!pod_exists(&fx, "kept").await);
    assert!(!pod_exists(&fx, "kept-1h").await);
    // Each pod deleted for the deadline gets Karpenter's `Disrupted` Event (`DisruptPodDelete`).
    let disrupted: Vec<String> = events(&fx)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Disrupted"))
        .filter_map(|e| e.involved_object.name.clone())
        .collect();
    assert!(
        disrupted.contains(&"kept".to_string()) && disrupted.contains(&"kept-1h".to_string()),
        "{disrupted:?}"
    );
    let events: Vec<String> = fx
        .ledger
        .events("default-t1")
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.detail)
        .collect();
    assert!(
        events.iter().any(|d| d == "drain: evicted default/plain"),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|d| d == "drain: deleted after terminationGracePeriod default/kept"),
        "{events:?}"
    );
    let live: Vec<_> = fx
        .instances()
        .into_iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .collect();
    assert!(live.is_empty(), "{live:?}");
    fx.finish().await;
}

/// `kubectl delete node` is durable: registration puts Karpenter's `karpenter.sh/termination`
/// finalizer on the Node (`pkg/controllers/nodeclaim/lifecycle/registration.go`), so the
/// deletion only marks it; the claim terminates (drain, instance terminated, NodeClaim
/// deleted) and the finalizer comes off once the instance is gone
/// (`pkg/controllers/node/termination/controller.go`, its `suite_test.go` "should delete
/// nodes" and "should not race if deleting nodes in parallel").
#[tokio::test(start_paused = true)]
async fn a_deleted_node_drains_terminates_its_instance_and_deletes_its_nodeclaim() {
    let fx = Fx::new().await;
    fx.submit(&["default-n1"]).await;
    fx.worker("w1", None).round().await.expect("round");
    fx.until("default-n1", ClaimState::Registered, 60).await;
    fx.ctl
        .pass()
        .await
        .expect("a pass after registration (finalizer, tags)");
    let node = fx.node_of("default-n1").await.expect("node");
    let name = node.metadata.name.clone().expect("name");
    assert_eq!(
        node.metadata.finalizers.clone().unwrap_or_default(),
        ["karpenter.sh/termination"]
    );
    // The instance carries its Node's name (aws/karpenter-provider-aws
    // `pkg/controllers/nodeclaim/tagging/controller.go`), and the NodeClaim says so.
    let pid = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .expect("providerID");
    let inst = fx
        .instances()
        .into_iter()
        .find(|i| i.provider_id.to_string() == pid)
        .expect("instance");
    assert_eq!(inst.tags.get("Name"), Some(&name), "{:?}", inst.tags);
    assert_eq!(
        inst.tags.get("eks:eks-cluster-name").map(String::as_str),
        Some(CLUSTER)
    );
    let nc = fx.nodeclaims().get("default-n1").await.expect("nodeclaim");
    assert_eq!(
        label(&nc.metadata.annotations, "karpenter.k8s.aws/tagged"),
        Some("true")
    );
    pod_on(&fx, "web", &name, json!({}), 30).await;
    fx.nodes()
        .delete(&name, &DeleteParams::default())
        .await
        .expect("kubectl delete node");
    let held = fx.nodes().get(&name).await.expect("held by the finalizer");
    assert!(held.metadata.deletion_timestamp.is_some());
    fx.until("default-n1", ClaimState::Terminated, 60).await;
    assert!(!pod_exists(&fx, "web").await, "drained");
    assert!(fx.nodes().get_opt(&name).await.expect("get").is_none());
    assert!(
        fx.nodeclaims()
            .get_opt("default-n1")
            .await
            .expect("get")
            .is_none()
    );
    let live: Vec<_> = fx
        .instances()
        .into_iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .collect();
    assert!(live.is_empty(), "{live:?}");
    // Nothing registers it again.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        fx.nodes()
            .list(&Default::default())
            .await
            .expect("nodes")
            .items
            .is_empty()
    );
    fx.finish().await;
}

/// A NodeClaim created by a user is launched like any other, as Karpenter's lifecycle
/// controller launches every NodeClaim (`pkg/controllers/nodeclaim/lifecycle/launch.go`; its
/// `suite_test.go` "should launch an instance when a new NodeClaim is created"): recorded in the
/// ledger under its own name, given the termination finalizer, launched into an offering its
/// requirements allow, and taken through Launched and Registered.
#[tokio::test(start_paused = true)]
async fn a_nodeclaim_created_by_a_user_is_launched_like_any_other() {
    let fx = Fx::new().await;
    let nc: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "handmade", "labels": {"karpenter.sh/nodepool": "default", "team": "ops"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ]
        }
    }))
    .expect("nodeclaim");
    fx.nodeclaims()
        .create(&PostParams::default(), &nc)
        .await
        .expect("kubectl apply");
    let p = fx.ctl.pass().await.expect("pass");
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.steps, [("handmade".to_string(), ClaimState::Requested)]);
    let claim = fx
        .ledger
        .claim("handmade")
        .await
        .expect("read")
        .expect("recorded");
    assert_eq!(claim.spec.node_pool, "default");
    assert_eq!(claim.spec.instance_types[0], "m5.large", "cheapest first");
    let nc = fx.nodeclaims().get("handmade").await.expect("nodeclaim");
    assert_eq!(
        nc.metadata.finalizers.clone().unwrap_or_default(),
        ["karpenter.sh/termination"]
    );
    assert_eq!(
        condition(&nc, "Launched"),
        Some((ConditionStatus::Unknown, "AwaitingReconciliation".into()))
    );
    // A second pass records nothing twice.
    let p = fx.ctl.pass().await.expect("pass");
    assert!(p.steps.is_empty(), "{:?}", p.steps);

    assert_eq!(fx.worker("w1", None).round().await.expect("round"), 1);
    fx.until("handmade", ClaimState::Registered, 30).await;
    let nc = fx.nodeclaims().get("handmade").await.expect("nodeclaim");
    assert_eq!(
        condition(&nc, "Launched").map(|c| c.0),
        Some(ConditionStatus::True)
    );
    assert_eq!(label(&nc.metadata.labels, "team"), Some("ops"));
    let inst = fx
        .instances()
        .into_iter()
        .find(|i| i.tags.get("karpenter.sh/nodeclaim").map(String::as_str) == Some("handmade"))
        .expect("an instance for the user's NodeClaim");
    assert_eq!(inst.instance_type, "m5.large");
    let node = fx.node_of("handmade").await.expect("its Node");
    assert_eq!(label(&node.metadata.labels, "team"), Some("ops"));
    fx.finish().await;
}
