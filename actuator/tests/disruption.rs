//! Disruptions executed only when confirmed, and drains through the eviction API, against the
//! simulator (its kube API, scheduler, kubelet, workload controllers and cloud) with the ledger
//! on Postgres (`DOVETAIL_TEST_POSTGRES`), under paused tokio time:
//! - an Underutilized replacement goes proposed → confirmed (a plan ≥ 15 s later) → candidate
//!   tainted → replacement launched and initialized → candidate's NodeClaim deleted → drained
//!   (its pods rescheduled onto the replacement) → instance terminated, each step in the ledger;
//! - a PodDisruptionBudget that allows no eviction holds the drain until it allows one, or until
//!   the NodeClaim's `terminationGracePeriod` runs out (then the pod is deleted);
//! - a replacement that fails (insufficient capacity) aborts the disruption and untaints;
//! - a budget of zero nodes rejects a confirmed disruption at execution time;
//! - proposals: seen once is not executed, seen again too soon is not, stale plans are refused,
//!   a rejected decision proposed again starts a new attempt (both ledger backends).
//!
//! What the simulator cannot show: pods with a long graceful termination (its pods go at once
//! when evicted), so "wait until the pods are gone" is exercised only for pods already gone.

mod support;

use service_shell::metrics::Render;
use std::sync::Arc;
use std::time::Duration;

use actuator::api::ActuatorService;
use actuator::disruption::{self, Executor};
use actuator::ledger::{
    self, ClaimState, DisruptionState, NewDisruption, ProposalOutcome, Proposals,
};
use actuator::lifecycle::drain;
use actuator::worker::{self, Worker};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use proto::v1 as pb;
use proto::v1::actuator_server::Actuator;
use serde_json::json;
use support::{TestDb, plan};

use support::CLUSTER;
/// The plans' clock at the first proposal (seconds since the epoch).
const T0: i64 = 1_767_225_600;

/// The shared fixture ([`support::fx`]: kube-scheduler on, Postgres ledger frozen for paused
/// time, evictions without retries) with a worker, the disruption executor and the `Submit` API.
struct Fx {
    base: support::fx::Fx,
    executor: Executor,
    worker: Worker,
    api: ActuatorService,
}

impl std::ops::Deref for Fx {
    type Target = support::fx::Fx;

    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl Fx {
    async fn new(budgets: serde_json::Value) -> Self {
        Self::with_pool(budgets, json!(null)).await
    }

    /// With the NodePool's `terminationGracePeriod` (JSON null: none).
    async fn with_pool(budgets: serde_json::Value, grace: serde_json::Value) -> Self {
        let mut template = support::template_spec();
        if !grace.is_null() {
            template["terminationGracePeriod"] = grace;
        }
        let base = support::fx::Builder::new()
            .scheduler()
            .pool(json!({
                "template": {"spec": template},
                "disruption": {"budgets": budgets}
            }))
            .postgres()
            .frozen()
            .eviction_client()
            .build()
            .await;
        let worker = Worker::new(
            base.ledger.clone(),
            base.cloud.clone(),
            base.clock.clone(),
            base.metrics.clone(),
            worker::Options {
                owner: "w1".into(),
                cluster_name: CLUSTER.into(),
                lease: Duration::from_secs(30),
                ..worker::Options::default()
            },
        )
        .with_lifecycle(Arc::new(base.ctl.launch_hook()));
        let executor = Executor::new(
            base.ctl.clone(),
            disruption::Options {
                owner: "executor-1".into(),
                ..disruption::Options::default()
            },
        )
        .with_worker_waker(worker.waker());
        let api = ActuatorService::new(
            base.ledger.clone(),
            base.clock.clone(),
            base.metrics.clone(),
            worker.waker(),
        );
        Self {
            base,
            executor,
            worker,
            api,
        }
    }

    async fn disruption_state(&self, key: &str) -> DisruptionState {
        self.ledger
            .disruption(key)
            .await
            .expect("read")
            .expect("disruption")
            .state
    }

    /// One round of every loop, then a second of (paused) time.
    async fn tick(&self) {
        self.worker.round().await.expect("worker round");
        let p = self.ctl.pass().await.expect("lifecycle pass");
        assert!(p.errors.is_empty(), "lifecycle: {:?}", p.errors);
        let p = self.executor.pass().await.expect("executor pass");
        assert!(p.errors.is_empty(), "executor: {:?}", p.errors);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    /// Ticks until `f` holds (at most `max` ticks).
    async fn until<F, Fut>(&self, what: &str, max: u32, mut f: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        for _ in 0..max {
            if f().await {
                return;
            }
            self.tick().await;
        }
        panic!("{what}: not reached in {max} ticks");
    }

    /// A claim launched through a plan and driven to `initialized`.
    async fn initialized_claim(&self, name: &str) -> Node {
        let mut p = plan("p-launch", &[], &[name]);
        p.plan_id = format!("p-{name}");
        self.ledger.submit(&p, 1).await.expect("submit");
        self.until(&format!("{name} initialized"), 40, || async {
            self.state(name).await == ClaimState::Initialized
        })
        .await;
        self.node_of(name).await.expect("node")
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    async fn node_tainted(&self, name: &str) -> bool {
        let n = self.nodes().get(name).await.expect("node");
        drain::is_tainted(&n)
    }

    /// A bare pod bound to `node`, labelled `app=web`.
    async fn pod_on(&self, name: &str, node: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
        }))
        .expect("pod");
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
    }

    async fn pods_on(&self, node: &str) -> Vec<Pod> {
        self.pods()
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .expect("pods")
            .items
    }

    async fn submit(&self, now: i64, commands: Vec<pb::Command>) -> Vec<pb::CommandResult> {
        let in_flight: Vec<String> = self
            .ledger
            .claims()
            .await
            .expect("claims")
            .into_iter()
            .filter(|c| c.state.is_in_flight())
            .map(|c| c.name)
            .collect();
        self.api
            .submit(tonic::Request::new(pb::SubmitRequest {
                plan_id: format!("plan-{now}"),
                session_id: "s1".into(),
                basis: Some(pb::PlanBasis {
                    in_flight_claims: in_flight,
                    now,
                    sequence: 1,
                }),
                commands,
            }))
            .await
            .expect("submit")
            .into_inner()
            .results
    }

    async fn finish(self) {
        self.base.finish().await;
    }
}

fn disrupt(key: &str, reason: &str, nodes: &[&str], replacements: &[&str]) -> pb::Command {
    pb::Command {
        command: Some(pb::command::Command::Disrupt(pb::DisruptCommand {
            idempotency_key: key.into(),
            decision: Some(pb::DisruptionDecision {
                reason: reason.into(),
                nodes: nodes.iter().map(|s| s.to_string()).collect(),
                replacements: replacements
                    .iter()
                    .map(|n| pb::PlannedNodeClaim {
                        name: n.to_string(),
                        node_pool: "default".into(),
                        instance_types: vec!["m5.large".into()],
                        zones: vec!["us-east-1a".into()],
                        capacity_types: vec!["on-demand".into()],
                        price: 0.096,
                        ..Default::default()
                    })
                    .collect(),
                savings_per_hour: 0.05,
                ..Default::default()
            }),
        })),
    }
}

fn details(events: &[ledger::Event]) -> Vec<String> {
    events.iter().map(|e| e.detail.clone()).collect()
}

/// The ledger name of a disruption's replacement: generated from its key, as Karpenter's
/// `generateName: <nodepool>-` gives each NodeClaim a fresh name.
fn replacement(key: &str, attempt: u32) -> String {
    actuator::launch::generated_name("default", &format!("{key}/a{attempt}/r0"))
}

#[tokio::test(start_paused = true)]
async fn an_underutilized_replacement_is_confirmed_then_taints_launches_drains_and_terminates() {
    let fx = Fx::new(json!([{"nodes": "10%"}])).await;
    let node = fx.initialized_claim("default-a1").await;
    let node_name = node.metadata.name.clone().expect("name");
    // Two pods of a Deployment, scheduled onto the only node.
    let deploy: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx",
                                  "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}
    }))
    .expect("deployment");
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(fx.client.clone(), "default")
        .create(&PostParams::default(), &deploy)
        .await
        .expect("deployment");
    fx.until("two pods running on the candidate", 20, || async {
        fx.pods_on(&node_name)
            .await
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count()
            == 2
    })
    .await;

    // Seen once: recorded, not executed.
    let cmd = || {
        vec![disrupt(
            "disrupt-u1",
            "Underutilized",
            &[&node_name],
            &["default-r1"],
        )]
    };
    let r = fx.submit(T0, cmd()).await;
    assert_eq!(r[0].status, "Accepted", "{:?}", r[0]);
    assert!(r[0].message.contains("recorded"), "{}", r[0].message);
    for _ in 0..3 {
        fx.tick().await;
    }
    assert_eq!(
        fx.disruption_state("disrupt-u1").await,
        DisruptionState::Proposed
    );
    assert!(
        !fx.node_tainted(&node_name).await,
        "nothing done before confirmation"
    );
    assert!(
        fx.ledger
            .claim(&replacement("disrupt-u1", 1))
            .await
            .expect("read")
            .is_none()
    );

    // Seen again 10 s later (plan clock): still waiting.
    let r = fx.submit(T0 + 10, cmd()).await;
    assert_eq!(r[0].status, "Duplicate", "{:?}", r[0]);
    fx.tick().await;
    assert_eq!(
        fx.disruption_state("disrupt-u1").await,
        DisruptionState::Proposed
    );

    // Seen again 15 s later: confirmed, then executed.
    let r = fx.submit(T0 + 15, cmd()).await;
    assert_eq!(r[0].status, "Accepted", "{:?}", r[0]);
    assert!(r[0].message.contains("confirmed"), "{}", r[0].message);
    // The executor's first pass taints the candidate and records the replacement.
    let p = fx.executor.pass().await.expect("executor pass");
    assert_eq!(
        p.steps,
        [("disrupt-u1".to_string(), DisruptionState::Replacing)]
    );
    assert!(
        fx.node_tainted(&node_name).await,
        "tainted before the replacement launches"
    );
    assert_eq!(
        fx.state(&replacement("disrupt-u1", 1)).await,
        ClaimState::Requested
    );
    let r = fx.submit(T0 + 20, cmd()).await;
    assert_eq!(r[0].status, "Duplicate", "executing: {:?}", r[0]);

    fx.until("the disruption done", 90, || async {
        fx.disruption_state("disrupt-u1").await == DisruptionState::Done
    })
    .await;

    // The ledger: the disruption's steps in order.
    let d_events = fx
        .ledger
        .disruption_events("disrupt-u1")
        .await
        .expect("events");
    let steps: Vec<DisruptionState> = d_events.iter().map(|e| e.to).collect();
    let mut distinct = steps.clone();
    distinct.dedup();
    assert_eq!(
        distinct,
        [
            DisruptionState::Proposed,
            DisruptionState::Confirmed,
            DisruptionState::Replacing,
            DisruptionState::Deleting,
            DisruptionState::Done
        ],
        "{d_events:#?}"
    );
    // The candidate: terminating (disrupted) → drain started → each pod evicted → drain done
    // → terminated; the replacement was initialized before the drain started.
    let a = fx.ledger.events("default-a1").await.expect("events");
    let d = details(&a);
    let at = |prefix: &str| {
        a.iter()
            .position(|e| e.detail.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {d:#?}"))
    };
    let (term, started, done) = (
        at("disrupted: Underutilized"),
        at(drain::STARTED),
        at(drain::DONE),
    );
    let evicted: Vec<&String> = d.iter().filter(|x| x.starts_with(drain::EVICTED)).collect();
    assert_eq!(evicted.len(), 2, "{d:#?}");
    assert!(term < started && started < done, "{d:#?}");
    assert_eq!(a.last().map(|e| e.to), Some(ClaimState::Terminated));
    assert_eq!(
        d.iter().filter(|x| x.starts_with(drain::STARTED)).count(),
        1
    );
    let r_events = fx
        .ledger
        .events(&replacement("disrupt-u1", 1))
        .await
        .expect("events");
    let r_init = r_events
        .iter()
        .find(|e| e.to == ClaimState::Initialized)
        .expect("replacement initialized");
    assert!(
        r_init.at <= a[started].at,
        "replacement initialized before the drain"
    );
    // The cluster: the candidate's NodeClaim, Node and instance are gone; the Deployment's pods
    // run on the replacement.
    assert!(
        fx.nodeclaims()
            .get_opt("default-a1")
            .await
            .expect("get")
            .is_none()
    );
    assert!(fx.nodes().get_opt(&node_name).await.expect("get").is_none());
    let a_instance = fx
        .ledger
        .claim("default-a1")
        .await
        .expect("read")
        .and_then(|c| c.instance)
        .expect("instance");
    assert!(
        fx.sim
            .cloud()
            .instances()
            .iter()
            .any(|i| i.id == a_instance.instance_id
                && matches!(
                    i.state,
                    cloud::InstanceState::Terminated | cloud::InstanceState::ShuttingDown
                ))
    );
    let r_node = fx
        .node_of(&replacement("disrupt-u1", 1))
        .await
        .expect("replacement node");
    let r_name = r_node.metadata.name.clone().expect("name");
    fx.until("the pods running on the replacement", 20, || async {
        fx.pods_on(&r_name)
            .await
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count()
            == 2
    })
    .await;
    let m = fx.metrics.render();
    for line in [
        r#"dovetail_actuator_disruptions_total{reason="Underutilized",outcome="done"} 1"#,
        r#"dovetail_actuator_disruptions_total{reason="Underutilized",outcome="confirmed"} 1"#,
        r#"dovetail_actuator_evictions_total{outcome="evicted"} 2"#,
    ] {
        assert!(m.contains(line), "{line} not in\n{m}");
    }
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_pdb_that_allows_no_eviction_holds_the_drain_until_it_allows_one() {
    let fx = Fx::new(json!([])).await;
    let node = fx.initialized_claim("default-p1").await;
    let node_name = node.metadata.name.clone().expect("name");
    fx.pod_on("web-1", &node_name).await;
    fx.pod_on("web-2", &node_name).await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(fx.client.clone(), "default");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("pdb");
    fx.until("pods running", 10, || async {
        fx.pods_on(&node_name)
            .await
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;

    // A user deletes the NodeClaim: termination drains first.
    fx.nodeclaims()
        .delete("default-p1", &DeleteParams::default())
        .await
        .expect("delete");
    for _ in 0..20 {
        fx.tick().await;
    }
    assert_eq!(fx.state("default-p1").await, ClaimState::Terminating);
    assert_eq!(
        fx.pods_on(&node_name).await.len(),
        2,
        "the PDB holds both pods"
    );
    assert!(fx.node_tainted(&node_name).await);
    let m = fx.metrics.render();
    assert!(
        m.contains(r#"dovetail_actuator_evictions_total{outcome="pdb_blocked"}"#),
        "{m}"
    );
    assert!(!m.contains(r#"outcome="evicted""#), "{m}");
    let events = details(&fx.ledger.events("default-p1").await.expect("events"));
    assert_eq!(
        events
            .iter()
            .filter(|d| d.starts_with(drain::STARTED))
            .count(),
        1
    );
    assert!(
        !events.iter().any(|d| d.starts_with(drain::EVICTED)),
        "{events:#?}"
    );
    assert!(
        fx.sim
            .cloud()
            .instances()
            .iter()
            .all(|i| i.state == cloud::InstanceState::Running),
        "the instance waits for the drain"
    );

    // The PDB allows one: exactly one pod goes, the other stays.
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
    )
    .await
    .expect("relax");
    for _ in 0..15 {
        fx.tick().await;
    }
    assert_eq!(
        fx.pods_on(&node_name).await.len(),
        1,
        "one eviction allowed"
    );
    assert_eq!(fx.state("default-p1").await, ClaimState::Terminating);

    // The PDB goes: the drain finishes and the claim terminates.
    pdbs.delete("web", &DeleteParams::default())
        .await
        .expect("delete pdb");
    fx.until("terminated", 30, || async {
        fx.state("default-p1").await == ClaimState::Terminated
    })
    .await;
    let events = details(&fx.ledger.events("default-p1").await.expect("events"));
    let evicted: Vec<&String> = events
        .iter()
        .filter(|d| d.starts_with(drain::EVICTED))
        .collect();
    assert_eq!(evicted.len(), 2, "{events:#?}");
    assert_eq!(
        events.iter().filter(|d| d.starts_with(drain::DONE)).count(),
        1
    );
    assert!(fx.nodes().get_opt(&node_name).await.expect("get").is_none());
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn past_the_termination_grace_period_the_pods_a_pdb_holds_are_deleted() {
    let fx = Fx::with_pool(json!([]), json!("1m")).await;
    let node = fx.initialized_claim("default-g1").await;
    let node_name = node.metadata.name.clone().expect("name");
    let nc = fx.nodeclaims().get("default-g1").await.expect("nodeclaim");
    assert_eq!(nc.spec.termination_grace_period.as_deref(), Some("1m"));
    fx.pod_on("web-1", &node_name).await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    Api::<PodDisruptionBudget>::namespaced(fx.client.clone(), "default")
        .create(&PostParams::default(), &pdb)
        .await
        .expect("pdb");
    fx.until("pod running", 10, || async {
        fx.pods_on(&node_name)
            .await
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    fx.nodeclaims()
        .delete("default-g1", &DeleteParams::default())
        .await
        .expect("delete");
    let started = tokio::time::Instant::now();
    fx.until("terminated", 120, || async {
        fx.state("default-g1").await == ClaimState::Terminated
    })
    .await;
    // Held by the PDB until the deadline is within the pod's own grace period (30 s, the
    // default), then deleted so that it is gone by the deadline (Karpenter's
    // `needsForceDelete`, `pkg/controllers/node/termination/terminator/eviction.go`).
    assert!(
        started.elapsed() >= Duration::from_secs(30),
        "the PDB held the pod until the deadline minus its grace period, not {:?}",
        started.elapsed()
    );
    let events = details(&fx.ledger.events("default-g1").await.expect("events"));
    assert!(
        events
            .iter()
            .any(|d| d == &format!("{}default/web-1", drain::DELETED)),
        "{events:#?}"
    );
    assert!(
        !events.iter().any(|d| d.starts_with(drain::EVICTED)),
        "{events:#?}"
    );
    let m = fx.metrics.render();
    assert!(
        m.contains(r#"dovetail_actuator_evictions_total{outcome="deleted"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"dovetail_actuator_evictions_total{outcome="pdb_blocked"}"#),
        "{m}"
    );
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_replacement_aborts_the_disruption_and_untaints() {
    let fx = Fx::new(json!([{"nodes": "100%"}])).await;
    let node = fx.initialized_claim("default-f1").await;
    let node_name = node.metadata.name.clone().expect("name");
    fx.sim.cloud().insufficient_capacity(cloud::OfferingKey {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: cloud::CapacityType::OnDemand,
    });
    let cmd = || {
        vec![disrupt(
            "disrupt-f1",
            "Drifted",
            &[&node_name],
            &["default-fr1"],
        )]
    };
    fx.submit(T0, cmd()).await;
    let r = fx.submit(T0 + 20, cmd()).await;
    assert_eq!(r[0].status, "Accepted");
    fx.executor.pass().await.expect("pass");
    assert!(fx.node_tainted(&node_name).await);
    fx.until("aborted", 20, || async {
        fx.disruption_state("disrupt-f1").await == DisruptionState::Aborted
    })
    .await;
    assert_eq!(
        fx.state(&replacement("disrupt-f1", 1)).await,
        ClaimState::Failed
    );
    assert!(!fx.node_tainted(&node_name).await, "the taint is removed");
    assert_eq!(
        fx.state("default-f1").await,
        ClaimState::Initialized,
        "the candidate stays"
    );
    let nc = fx.nodeclaims().get("default-f1").await.expect("nodeclaim");
    assert!(nc.metadata.deletion_timestamp.is_none());
    let d = fx
        .ledger
        .disruption("disrupt-f1")
        .await
        .expect("read")
        .expect("d");
    let why = d.failure_reason.unwrap_or_default();
    assert!(
        why.contains(&format!(
            "replacement {} failed",
            replacement("disrupt-f1", 1)
        )),
        "{why}"
    );
    let steps: Vec<DisruptionState> = fx
        .ledger
        .disruption_events("disrupt-f1")
        .await
        .expect("events")
        .iter()
        .map(|e| e.to)
        .collect();
    assert!(
        steps.ends_with(&[DisruptionState::Aborting, DisruptionState::Aborted]),
        "{steps:?}"
    );
    assert!(
        fx.metrics.render().contains(
            r#"dovetail_actuator_disruptions_total{reason="Drifted",outcome="aborted"} 1"#
        )
    );

    // Proposed again: a new attempt with a new replacement name, confirmed afresh.
    let r = fx.submit(T0 + 30, cmd()).await;
    assert!(r[0].message.contains("attempt 2"), "{}", r[0].message);
    fx.sim.cloud().restore_capacity(&cloud::OfferingKey {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: cloud::CapacityType::OnDemand,
    });
    fx.submit(T0 + 45, cmd()).await;
    fx.until("the second attempt done", 90, || async {
        fx.disruption_state("disrupt-f1").await == DisruptionState::Done
    })
    .await;
    assert_eq!(
        fx.state(&replacement("disrupt-f1", 2)).await,
        ClaimState::Initialized
    );
    assert_eq!(fx.state("default-f1").await, ClaimState::Terminated);
    fx.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_budget_of_zero_nodes_rejects_a_confirmed_disruption_at_execution_time() {
    let fx = Fx::new(json!([{"nodes": "0", "reasons": ["Empty"]}])).await;
    let node = fx.initialized_claim("default-b1").await;
    let node_name = node.metadata.name.clone().expect("name");
    let cmd = || vec![disrupt("disrupt-b1", "Empty", &[&node_name], &[])];
    fx.submit(T0, cmd()).await;
    fx.submit(T0 + 15, cmd()).await;
    let p = fx.executor.pass().await.expect("pass");
    assert_eq!(
        p.steps,
        [("disrupt-b1".to_string(), DisruptionState::Rejected)]
    );
    let d = fx
        .ledger
        .disruption("disrupt-b1")
        .await
        .expect("read")
        .expect("d");
    let why = d.failure_reason.unwrap_or_default();
    assert!(
        why.starts_with("budget: NodePool default allows 0 more Empty"),
        "{why}"
    );
    assert!(!fx.node_tainted(&node_name).await);
    assert_eq!(fx.state("default-b1").await, ClaimState::Initialized);
    fx.finish().await;
}

fn proposal(plan_id: &str, now: i64, in_flight: &[&str], key: &str) -> Proposals {
    Proposals {
        plan_id: plan_id.into(),
        session_id: "s".into(),
        basis: ledger::Basis {
            in_flight: in_flight.iter().map(|s| s.to_string()).collect(),
            now,
            sequence: 1,
        },
        launch_keys: Vec::new(),
        disruptions: vec![NewDisruption {
            idempotency_key: key.into(),
            payload: vec![1],
            reason: "Empty".into(),
            nodes: vec!["n1".into()],
            replacements: Vec::new(),
            savings: 0.1,
        }],
    }
}

async fn proposals_on(db: TestDb) {
    let l = db.ledger().await;
    let ms = 15_000;
    let o = l
        .propose(&proposal("p1", T0, &[], "k1"), ms, 1)
        .await
        .expect("propose");
    assert_eq!(o[0].1, ProposalOutcome::Recorded { attempt: 1 });
    let o = l
        .propose(&proposal("p2", T0 + 14, &[], "k1"), ms, 2)
        .await
        .expect("propose");
    assert_eq!(o[0].1, ProposalOutcome::Waiting { after: 14 });
    // A configurable delay: 30 s is not reached at 15 s.
    let o = l
        .propose(&proposal("p3", T0 + 15, &[], "k1"), 30_000, 3)
        .await
        .expect("propose");
    assert_eq!(o[0].1, ProposalOutcome::Waiting { after: 15 });
    // A stale plan neither records nor confirms.
    l.submit(&plan("launch", &[], &["c1"]), 4)
        .await
        .expect("submit");
    let o = l
        .propose(&proposal("p4", T0 + 20, &[], "k1"), ms, 5)
        .await
        .expect("propose");
    assert!(
        matches!(&o[0].1, ProposalOutcome::Rejected { reason } if reason.starts_with("stale plan")),
        "{o:?}"
    );
    assert_eq!(
        l.disruption("k1").await.expect("read").expect("d").state,
        DisruptionState::Proposed
    );
    let o = l
        .propose(&proposal("p5", T0 + 20, &["c1"], "k1"), ms, 6)
        .await
        .expect("propose");
    assert_eq!(o[0].1, ProposalOutcome::Confirmed { after: 20 });
    let o = l
        .propose(&proposal("p6", T0 + 40, &["c1"], "k1"), ms, 7)
        .await
        .expect("propose");
    assert_eq!(
        o[0].1,
        ProposalOutcome::Duplicate {
            state: DisruptionState::Confirmed
        }
    );
    let active = l.disruptions(true).await.expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(
        (active[0].first_seen, active[0].confirmed_seen),
        (T0, Some(T0 + 20))
    );
    // Rejected at execution, then proposed again: attempt 2, waiting for its own confirmation.
    let d = l
        .acquire_disruption("x", "k1", 8, 10_000)
        .await
        .expect("lease")
        .expect("d");
    let mut s =
        ledger::DisruptionStep::new("k1", "x", d.state, DisruptionState::Rejected, "budget");
    s.failure_reason = Some("budget".into());
    s.release = true;
    l.advance_disruption(&s, 9).await.expect("reject");
    assert!(
        l.advance_disruption(&s, 10).await.is_err(),
        "the state moved on"
    );
    let o = l
        .propose(&proposal("p7", T0 + 60, &["c1"], "k1"), ms, 11)
        .await
        .expect("propose");
    assert_eq!(o[0].1, ProposalOutcome::Recorded { attempt: 2 });
    let d = l.disruption("k1").await.expect("read").expect("d");
    assert_eq!(
        (d.state, d.attempt, d.first_seen, d.failure_reason),
        (DisruptionState::Proposed, 2, T0 + 60, None)
    );
    let steps: Vec<DisruptionState> = l
        .disruption_events("k1")
        .await
        .expect("events")
        .iter()
        .map(|e| e.to)
        .collect();
    assert_eq!(
        steps,
        [
            DisruptionState::Proposed,
            DisruptionState::Confirmed,
            DisruptionState::Rejected,
            DisruptionState::Proposed
        ]
    );
    l.close().await;
    db.drop().await;
}

#[tokio::test]
async fn proposals_are_confirmed_only_by_a_plan_at_least_the_delay_later_on_postgres() {
    proposals_on(TestDb::postgres().await).await;
}

#[tokio::test]
async fn proposals_are_confirmed_only_by_a_plan_at_least_the_delay_later_on_sqlite() {
    proposals_on(TestDb::sqlite()).await;
}
