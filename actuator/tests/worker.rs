//! The launch worker against the local cloud stand-in: exactly one instance per claim, resume
//! from `launching` by tag look-up, failures and retries recorded, lease takeover, and two
//! workers racing on one Postgres ledger.

mod support;

use service_shell::metrics::Render;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actuator::ledger::{ClaimState, Ledger};
use actuator::metrics::Metrics;
use actuator::standin::{self, StandIn};
use actuator::worker::{Options, Step, Worker};
use cloud::{CloudProvider, Instance};
use service_shell::clock::Clock;
use support::{TestDb, plan};

fn options(owner: &str) -> Options {
    Options {
        owner: owner.to_string(),
        cluster_name: "test".into(),
        lease: Duration::from_secs(30),
        poll: Duration::from_millis(20),
        ..Options::default()
    }
}

fn moto_like() -> Arc<StandIn> {
    Arc::new(
        StandIn::new(
            standin::Options {
                state_file: None,
                ignore_client_token: true,
            },
            Clock::new(),
        )
        .expect("stand-in"),
    )
}

fn per_claim(instances: &[Instance]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for i in instances {
        let claim = i
            .tags
            .get(cloud::TAG_NODECLAIM)
            .cloned()
            .unwrap_or_default();
        *m.entry(claim).or_insert(0) += 1;
    }
    m
}

async fn states(l: &dyn Ledger) -> Vec<(String, ClaimState)> {
    l.claims()
        .await
        .expect("claims")
        .into_iter()
        .map(|c| (c.name, c.state))
        .collect()
}

#[tokio::test]
async fn launches_each_claim_once_and_records_every_step() {
    let db = TestDb::sqlite();
    let l = db.ledger().await;
    let cloud = moto_like();
    l.submit(&plan("p1", &[], &["a", "b", "c"]), 1)
        .await
        .expect("submit");
    let metrics = Metrics::new();
    let w = Worker::new(
        l.clone(),
        cloud.clone(),
        Clock::new(),
        metrics.clone(),
        options("w1"),
    );
    assert_eq!(w.round().await.expect("round"), 3);
    assert_eq!(w.round().await.expect("round"), 0, "launched claims rest");

    assert!(
        states(&*l)
            .await
            .iter()
            .all(|(_, s)| *s == ClaimState::Launched)
    );
    let instances = cloud.instances();
    assert_eq!(
        per_claim(&instances),
        BTreeMap::from([("a".into(), 1), ("b".into(), 1), ("c".into(), 1)])
    );
    assert_eq!(cloud.create_calls(), 3);
    let a = l.claim("a").await.expect("read").expect("a");
    let i = instances
        .iter()
        .find(|i| i.tags[cloud::TAG_NODECLAIM] == "a")
        .expect("a's instance");
    assert_eq!(
        a.instance.as_ref().map(|r| r.instance_id.as_str()),
        Some(i.id.as_str())
    );
    assert_eq!(a.lease_owner, None, "lease released once launched");
    assert_eq!(i.tags["kubernetes.io/cluster/test"], "owned");
    assert_eq!(i.instance_type, "m5.large");
    let steps: Vec<_> = l
        .events("a")
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
            ClaimState::Launched
        ]
    );
    assert!(
        metrics
            .render()
            .contains("dovetail_actuator_launches_total 3")
    );
    db.drop().await;
}

#[tokio::test]
async fn a_claim_left_in_launching_adopts_its_instance_instead_of_creating_another() {
    let db = TestDb::sqlite();
    let l = db.ledger().await;
    let cloud = moto_like();
    l.submit(&plan("p1", &[], &["a"]), 1).await.expect("submit");
    // The create succeeds but its answer is lost (a timeout, or a crash right after).
    cloud.lose_next_responses(1);
    let w = Worker::new(
        l.clone(),
        cloud.clone(),
        Clock::new(),
        Metrics::new(),
        options("w1"),
    );
    w.round().await.expect("round");
    let a = l.claim("a").await.expect("read").expect("a");
    assert_eq!(a.state, ClaimState::Launching);
    assert_eq!(a.attempts, 1);
    assert!(a.retry_at > a.created_at, "retry is scheduled later");
    assert_eq!(cloud.instances().len(), 1);

    // The retry (here by another worker whose clock is past the retry time) finds the
    // instance by its NodeClaim tag: the moto-like cloud ignores client tokens, so a second
    // create would have made a second instance.
    let later = Clock::at(Duration::from_millis(
        u64::try_from(a.retry_at + 1).expect("positive"),
    ));
    let w2 = Worker::new(
        l.clone(),
        cloud.clone(),
        later,
        Metrics::new(),
        options("w2"),
    );
    assert_eq!(w2.round().await.expect("round"), 1);
    let a = l.claim("a").await.expect("read").expect("a");
    assert_eq!(a.state, ClaimState::Launched);
    assert_eq!(cloud.create_calls(), 1);
    assert_eq!(cloud.instances().len(), 1);
    let last = l.events("a").await.expect("events").pop().expect("event");
    assert!(last.detail.starts_with("found the instance"), "{last:?}");
    db.drop().await;
}

#[tokio::test]
async fn capacity_errors_fail_the_claim_with_the_reason() {
    struct NoCapacity;
    #[async_trait::async_trait]
    impl CloudProvider for NoCapacity {
        async fn create(&self, r: &cloud::LaunchRequest) -> cloud::Result<Instance> {
            Err(cloud::Error::InsufficientCapacity {
                offerings: r.offerings.clone(),
            })
        }
        async fn get(&self, p: &cloud::ProviderId) -> cloud::Result<Instance> {
            Err(cloud::Error::NotFound {
                provider_id: p.to_string(),
            })
        }
        async fn list(&self, _: &cloud::ListFilter) -> cloud::Result<Vec<Instance>> {
            Ok(Vec::new())
        }
        async fn delete(&self, p: &cloud::ProviderId) -> cloud::Result<()> {
            Err(cloud::Error::NotFound {
                provider_id: p.to_string(),
            })
        }
        async fn instance_types(&self) -> cloud::Result<cloud::Catalog> {
            Ok(cloud::Catalog::default())
        }
    }
    let db = TestDb::sqlite();
    let l = db.ledger().await;
    l.submit(&plan("p1", &[], &["a"]), 1).await.expect("submit");
    let metrics = Metrics::new();
    let w = Worker::new(
        l.clone(),
        Arc::new(NoCapacity),
        Clock::new(),
        metrics.clone(),
        options("w"),
    );
    w.round().await.expect("round");
    let a = l.claim("a").await.expect("read").expect("a");
    assert_eq!(a.state, ClaimState::Failed);
    assert!(
        a.failure_reason
            .as_deref()
            .unwrap_or("")
            .contains("insufficient capacity"),
        "{a:?}"
    );
    assert!(
        metrics
            .render()
            .contains(r#"launch_failures_total{reason="insufficient_capacity"} 1"#)
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_claim_is_taken_over_after_its_lease_and_launched_once() {
    let db = TestDb::postgres().await;
    let l = db.ledger().await;
    let cloud = moto_like();
    l.submit(&plan("p1", &[], &["a"]), 1).await.expect("submit");
    // Worker 1 stops for good right after its create call returned (as if killed there).
    let mut o1 = options("w1");
    o1.pause_at = Some(Step::Created);
    let w1 = Worker::new(l.clone(), cloud.clone(), Clock::new(), Metrics::new(), o1);
    let stuck = tokio::spawn(async move { w1.round().await });
    // Wait for the instance first, then read the claim: a claim read before the create call
    // may still say Requested (the worker records Launching, then calls create).
    while cloud.instances().len() != 1 {
        tokio::task::yield_now().await;
    }
    let a = l.claim("a").await.expect("read").expect("a");
    assert_eq!(a.state, ClaimState::Launching);
    assert_eq!(a.lease_owner.as_deref(), Some("w1"));

    // Worker 2 before the lease expires gets nothing; after (its clock is past the expiry)
    // it takes the claim over and adopts the instance.
    let w2 = Worker::new(
        l.clone(),
        cloud.clone(),
        Clock::new(),
        Metrics::new(),
        options("w2"),
    );
    assert_eq!(w2.round().await.expect("round"), 0);
    let expiry = a.lease_expires_at.expect("leased");
    let after = Clock::at(Duration::from_millis(
        u64::try_from(expiry + 1).expect("positive"),
    ));
    let w2 = Worker::new(
        l.clone(),
        cloud.clone(),
        after,
        Metrics::new(),
        options("w2"),
    );
    assert_eq!(w2.round().await.expect("round"), 1);
    let a = l.claim("a").await.expect("read").expect("a");
    assert_eq!(a.state, ClaimState::Launched);
    assert_eq!(cloud.instances().len(), 1);
    assert_eq!(cloud.create_calls(), 1);
    stuck.abort();
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_one_postgres_ledger_never_launch_a_claim_twice() {
    let db = TestDb::postgres().await;
    let names: Vec<String> = (0..60).map(|i| format!("claim-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    db.ledger()
        .await
        .submit(&plan("p1", &[], &refs), 1)
        .await
        .expect("submit");
    // One cloud that ignores client tokens: a claim executed twice shows as two instances.
    let cloud = moto_like();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    let mut ledgers = Vec::new();
    for owner in ["replica-1", "replica-2"] {
        // Each replica has its own pool, as two processes would.
        let l = db.ledger().await;
        ledgers.push(l.clone());
        let mut o = options(owner);
        o.batch = 4;
        o.concurrency = 4;
        let w = Worker::new(l, cloud.clone(), Clock::new(), Metrics::new(), o);
        let rx = stopped.clone();
        tasks.push(tokio::spawn(async move { w.run(rx).await }));
    }
    let l = ledgers[0].clone();
    loop {
        let s = states(&*l).await;
        if s.iter().all(|(_, s)| *s == ClaimState::Launched) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(true);
    for t in tasks {
        t.await.expect("worker");
    }
    let counts = per_claim(&cloud.instances());
    assert_eq!(counts.len(), 60);
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    assert_eq!(cloud.create_calls(), 60);
    // Both replicas did part of the work.
    let mut by_owner = BTreeMap::new();
    for n in &names {
        let e = l.events(n).await.expect("events");
        let actor = e.last().expect("event").actor.clone();
        *by_owner.entry(actor).or_insert(0) += 1;
    }
    assert_eq!(by_owner.len(), 2, "{by_owner:?}");
    for l in ledgers {
        l.close().await;
    }
    db.drop().await;
}

/// A cloud whose every create is refused because the claim's EC2NodeClass matches no subnet,
/// unless the class names `fixed` in its role; counts the creates.
#[derive(Default)]
struct NoSubnets {
    creates: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl CloudProvider for NoSubnets {
    async fn create(&self, r: &cloud::LaunchRequest) -> cloud::Result<Instance> {
        self.creates
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let class = r
            .node
            .as_ref()
            .map(|n| n.class.name.clone())
            .unwrap_or_default();
        Err(cloud::Error::InvalidRequest {
            reason: format!("EC2NodeClass {class}: spec.subnetSelectorTerms matched no subnet"),
        })
    }
    async fn get(&self, p: &cloud::ProviderId) -> cloud::Result<Instance> {
        Err(cloud::Error::NotFound {
            provider_id: p.to_string(),
        })
    }
    async fn list(&self, _: &cloud::ListFilter) -> cloud::Result<Vec<Instance>> {
        Ok(Vec::new())
    }
    async fn delete(&self, p: &cloud::ProviderId) -> cloud::Result<()> {
        Err(cloud::Error::NotFound {
            provider_id: p.to_string(),
        })
    }
    async fn instance_types(&self) -> cloud::Result<cloud::Catalog> {
        Ok(cloud::Catalog::default())
    }
    async fn resolve_node_class(
        &self,
        class: &cloud::NodeClassSpec,
    ) -> cloud::Result<cloud::NodeClassResolution> {
        Ok(cloud::NodeClassResolution {
            subnets: Err(format!(
                "EC2NodeClass {}: spec.subnetSelectorTerms matched no subnet",
                class.name
            )),
            security_groups: Ok(Vec::new()),
            amis: Ok(Vec::new()),
            instance_profile: Ok(None),
        })
    }
}

/// Gives every claim the node of one EC2NodeClass, whose spec a test may change.
struct OneClass(std::sync::Mutex<cloud::NodeClassSpec>);

#[async_trait::async_trait]
impl actuator::worker::Lifecycle for OneClass {
    fn states(&self) -> Vec<ClaimState> {
        Vec::new()
    }
    async fn advance(
        &self,
        _claim: &actuator::ledger::ClaimRecord,
    ) -> Result<Option<(ClaimState, String)>, actuator::worker::LifecycleError> {
        Ok(None)
    }
    async fn node_spec(
        &self,
        _claim: &actuator::ledger::ClaimRecord,
    ) -> Result<Option<cloud::NodeSpec>, actuator::worker::LifecycleError> {
        Ok(Some(cloud::NodeSpec {
            class: self.0.lock().expect("class").clone(),
            ..cloud::NodeSpec::default()
        }))
    }
}

#[tokio::test]
async fn a_class_that_matches_no_subnet_is_not_launched_from_until_it_changes() {
    let db = TestDb::sqlite();
    let l = db.ledger().await;
    let cloud = Arc::new(NoSubnets::default());
    let class = cloud::NodeClassSpec {
        name: "broken".into(),
        ..cloud::NodeClassSpec::default()
    };
    let lifecycle = Arc::new(OneClass(std::sync::Mutex::new(class.clone())));
    let metrics = Metrics::new();
    let w = Worker::new(
        l.clone(),
        cloud.clone(),
        Clock::new(),
        metrics.clone(),
        options("w"),
    )
    .with_lifecycle(lifecycle.clone());
    // The planner asks again and again for the pods a failed claim left pending: twenty
    // claims one after another, as a storm would bring them.
    let mut names: Vec<String> = Vec::new();
    for i in 0..20 {
        let name = format!("c{i}");
        let seen: Vec<&str> = names.iter().map(String::as_str).collect();
        let out = l
            .submit(&plan(&format!("p{i}"), &seen, &[name.as_str()]), i + 1)
            .await
            .expect("submit");
        assert_eq!(out.len(), 1, "{out:?}");
        names.push(name);
        w.round().await.expect("round");
    }
    let creates = cloud.creates.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(creates, 1, "one create, then the class backs off");
    let first = l.claim("c0").await.expect("read").expect("c0");
    assert_eq!(first.state, ClaimState::Failed);
    let held = l.claim("c7").await.expect("read").expect("c7");
    assert_eq!(
        held.state,
        ClaimState::Launching,
        "waits, counted as in flight"
    );
    assert!(
        held.failure_reason
            .as_deref()
            .unwrap_or("")
            .contains("EC2NodeClass broken cannot launch: EC2NodeClass broken: spec.subnetSelectorTerms matched no subnet"),
        "{held:?}"
    );
    let text = metrics.render();
    assert!(
        text.contains(r#"launch_failures_total{reason="node_class_not_ready"} 1"#),
        "{text}"
    );
    // A changed class is tried at once.
    lifecycle.0.lock().expect("class").role = Some("fixed".into());
    let seen: Vec<&str> = names.iter().map(String::as_str).collect();
    l.submit(&plan("p-fixed", &seen, &["after-fix"]), 100)
        .await
        .expect("submit");
    w.round().await.expect("round");
    assert_eq!(cloud.creates.load(std::sync::atomic::Ordering::SeqCst), 2);
    db.drop().await;
}
