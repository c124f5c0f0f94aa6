//! Interruptions end to end against real parts: moto_server's SQS (the EventBridge bodies of
//! `actuator/aws/tests/fixtures/interruption/` sent with the real SDK), the simulator (its kube
//! API, cloud and kubelet) and a SQLite ledger, in real time (the SDK's network calls do not run
//! under paused time).
//!
//! - a spot warning for a launched claim cordons and taints its Node
//!   `karpenter.sh/disrupted:NoSchedule`, records the interruption in the ledger and deletes the
//!   NodeClaim, whose termination then terminates the instance; a rebalance recommendation is an
//!   Event on the Node only; garbled and unknown messages are deleted and counted; every handled
//!   message is deleted (nothing comes back after the visibility timeout); redelivery of the
//!   warning, before and after the termination, does nothing new;
//! - an AWS Health scheduled change and `stopping` / `terminated` state changes from SQS
//!   interrupt their claims the same way (each noted once, each terminated); a `running` state
//!   change is an unknown kind, deleted and counted;
//! - the simulator's own queue (its `InterruptionQueue`, scheduled maintenance) drives the same
//!   handler;
//! - the loop backs off on receive errors and goes on (paused time, a queue that fails).
//!
//! What moto cannot show: nothing feeds its queue (EventBridge rules are not evaluated), so the
//! test sends what EventBridge would; the instance IDs are the simulator's, since the claims
//! are launched in the simulator's cloud (moto's EC2 is not involved here).

mod support;

use service_shell::metrics::Render;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actuator::interruption::{self, Interruptions, Outcome};
use actuator::ledger::ClaimState;
use actuator::metrics::Metrics;
use actuator::worker::{self, Worker};
use async_trait::async_trait;
use cloud::{CapacityType, InterruptionEvent, InterruptionQueue, Message, ProviderId, Unreadable};
use cloud_aws::interruption::fixtures;
use cloud_aws::testing::{self as aws_testing, MotoServer};
use crds::NodeClaim;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::Api;
use service_shell::clock::Clock;
use support::{TestDb, plan};

use support::CLUSTER;

/// The shared fixture ([`support::fx`]: SQLite ledger, lifecycle passes half a second apart)
/// with the interruption handler.
struct Fx {
    base: support::fx::Fx,
    handler: Interruptions,
}

impl std::ops::Deref for Fx {
    type Target = support::fx::Fx;

    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl Fx {
    /// The simulator with a NodePool, and `names` launched as spot claims and registered.
    async fn new(names: &[&str]) -> Self {
        let base = support::fx::Builder::new()
            .interval(Duration::from_millis(500))
            .build()
            .await;
        let handler = Interruptions::new(
            base.client.clone(),
            base.ledger.clone(),
            base.clock.clone(),
            base.metrics.clone(),
            interruption::Options {
                owner: "interruption-1".into(),
                ..interruption::Options::default()
            },
        );
        let fx = Self { base, handler };
        let mut p = plan("p1", &[], names);
        for l in &mut p.launches {
            l.spec.capacity_types = vec![CapacityType::Spot];
        }
        fx.ledger.submit(&p, 1).await.expect("submit");
        let w = Worker::new(
            fx.ledger.clone(),
            fx.cloud.clone(),
            fx.clock.clone(),
            Metrics::new(),
            worker::Options {
                owner: "w1".into(),
                cluster_name: CLUSTER.into(),
                ..worker::Options::default()
            },
        )
        .with_lifecycle(Arc::new(fx.ctl.launch_hook()));
        assert_eq!(w.round().await.expect("round"), names.len());
        for name in names {
            fx.until(name, ClaimState::Registered, 60).await;
        }
        fx
    }

    /// Lifecycle passes half a second apart until `name` is in `state` or past it.
    async fn until(&self, name: &str, state: ClaimState, max: u32) {
        for _ in 0..max {
            self.ctl.pass().await.expect("pass");
            if self.state(name).await >= state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("{name} did not reach {state}: {}", self.state(name).await);
    }

    async fn instance_id(&self, name: &str) -> String {
        self.ledger
            .claim(name)
            .await
            .expect("read")
            .expect("claim")
            .instance
            .expect("launched")
            .instance_id
    }

    async fn provider_id(&self, name: &str) -> ProviderId {
        self.ledger
            .claim(name)
            .await
            .expect("read")
            .expect("claim")
            .instance
            .expect("launched")
            .provider_id
            .parse()
            .expect("provider ID")
    }

    async fn nodeclaim(&self, name: &str) -> Option<NodeClaim> {
        Api::<NodeClaim>::all(self.client.clone())
            .get_opt(name)
            .await
            .expect("read NodeClaim")
    }

    async fn events_about(&self, node: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), interruption::EVENT_NAMESPACE)
            .list(&Default::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(node))
            .collect()
    }

    async fn notes(&self, name: &str) -> Vec<String> {
        self.ledger
            .events(name)
            .await
            .expect("events")
            .into_iter()
            .map(|e| e.detail)
            .filter(|d| d.contains("interrupted"))
            .collect()
    }

    /// Polls `queue` until `n` messages were processed (a one-second long poll each time).
    async fn process_n(&self, queue: &dyn InterruptionQueue, n: usize) -> Vec<(Message, Outcome)> {
        let mut out = Vec::new();
        for _ in 0..15 {
            out.extend(self.handler.poll_once(queue).await.expect("receive"));
            if out.len() >= n {
                break;
            }
        }
        assert_eq!(out.len(), n, "{out:?}");
        out
    }

    async fn finish(self) {
        self.base.finish().await;
    }
}

fn cordoned_and_tainted(n: &Node) -> (bool, bool) {
    let spec = n.spec.clone().unwrap_or_default();
    (
        spec.unschedulable.unwrap_or(false),
        spec.taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "karpenter.sh/disrupted" && t.effect == "NoSchedule"),
    )
}

fn outcome_of(results: &[(Message, Outcome)], id: &str) -> Outcome {
    results
        .iter()
        .find(|(m, _)| m.id == id)
        .map(|(_, o)| *o)
        .unwrap_or_else(|| panic!("message {id} not processed: {results:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_warning_from_sqs_taints_the_node_and_deletes_the_nodeclaim() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let queue = aws_testing::create_queue(&moto.config(), "interruptions", 2).await;
    let fx = Fx::new(&["default-a1", "default-a2"]).await;
    let a1 = fx.instance_id("default-a1").await;
    let a2 = fx.instance_id("default-a2").await;
    let node1 = fx.node_of("default-a1").await.expect("node of a1");
    let node1_name = node1.metadata.name.clone().expect("name");
    let node2_name = fx
        .node_of("default-a2")
        .await
        .expect("node of a2")
        .metadata
        .name
        .expect("name");
    assert_eq!(cordoned_and_tainted(&node1), (false, false));

    let spot_body = fixtures::body_for("spot_interruption.json", &a1);
    let spot = aws_testing::send(&queue, &spot_body).await;
    let rebalance = aws_testing::send(
        &queue,
        &fixtures::body_for("rebalance_recommendation.json", &a2),
    )
    .await;
    let garbled = aws_testing::send(&queue, "{\"detail-type\": \"EC2 Spot Inst").await;
    let unknown = aws_testing::send(&queue, &fixtures::body("health_issue_rds.json")).await;
    let stranger = aws_testing::send(
        &queue,
        &fixtures::body_for("spot_interruption.json", "i-0000000000000000f"),
    )
    .await;
    let results = fx.process_n(&queue, 5).await;
    assert_eq!(outcome_of(&results, &spot), Outcome::Interrupted);
    assert_eq!(outcome_of(&results, &rebalance), Outcome::Recorded);
    assert_eq!(outcome_of(&results, &garbled), Outcome::Dropped);
    assert!(matches!(
        results
            .iter()
            .find(|(m, _)| m.id == garbled)
            .map(|(m, _)| &m.content),
        Some(Err(Unreadable::Garbled { .. }))
    ));
    assert_eq!(outcome_of(&results, &unknown), Outcome::Dropped);
    assert_eq!(outcome_of(&results, &stranger), Outcome::NotManaged);

    // a1: cordoned, tainted, recorded, its NodeClaim being deleted (held by the finalizer).
    let node1 = fx.node_of("default-a1").await.expect("node of a1");
    assert_eq!(cordoned_and_tainted(&node1), (true, true));
    let nc1 = fx
        .nodeclaim("default-a1")
        .await
        .expect("held by its finalizer");
    assert!(nc1.metadata.deletion_timestamp.is_some());
    let notes = fx.notes("default-a1").await;
    assert_eq!(
        notes,
        [format!(
            "interrupted: spot interruption warning: message {spot}"
        )]
    );
    let events = fx.events_about(&node1_name).await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("SpotInterrupted")),
        "{events:?}"
    );

    // a2: an Event only.
    let node2 = fx.node_of("default-a2").await.expect("node of a2");
    assert_eq!(cordoned_and_tainted(&node2), (false, false));
    let nc2 = fx.nodeclaim("default-a2").await.expect("nodeclaim a2");
    assert!(nc2.metadata.deletion_timestamp.is_none());
    assert!(fx.notes("default-a2").await.is_empty());
    let events = fx.events_about(&node2_name).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.reason.as_deref() == Some("RebalanceRecommendation"))
            .count(),
        1,
        "{events:?}"
    );

    let text = fx.metrics.render();
    for line in [
        r#"dovetail_actuator_interruption_messages_total{kind="spot_interruption",outcome="interrupted"} 1"#,
        r#"dovetail_actuator_interruption_messages_total{kind="rebalance_recommendation",outcome="recorded"} 1"#,
        r#"dovetail_actuator_interruption_messages_total{kind="garbled",outcome="dropped"} 1"#,
        r#"dovetail_actuator_interruption_messages_total{kind="unknown",outcome="dropped"} 1"#,
        r#"dovetail_actuator_interruption_messages_total{kind="spot_interruption",outcome="not_managed"} 1"#,
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }

    // Every message was deleted: nothing comes back after the visibility timeout.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        fx.handler
            .poll_once(&queue)
            .await
            .expect("receive")
            .is_empty()
    );

    // Redelivery while terminating: nothing new (no note, no second Event).
    let again = aws_testing::send(&queue, &spot_body).await;
    let results = fx.process_n(&queue, 1).await;
    assert_eq!(outcome_of(&results, &again), Outcome::AlreadyTerminating);
    assert_eq!(fx.notes("default-a1").await.len(), 1);

    // The NodeClaim's termination: the instance is terminated, the NodeClaim released.
    fx.until("default-a1", ClaimState::Terminated, 60).await;
    assert!(fx.nodeclaim("default-a1").await.is_none());
    let pid = fx.provider_id("default-a1").await;
    assert!(
        fx.sim
            .cloud()
            .instances()
            .iter()
            .any(|i| i.provider_id == pid && i.state == cloud::InstanceState::Terminated)
            || !fx
                .sim
                .cloud()
                .instances()
                .iter()
                .any(|i| i.provider_id == pid),
        "the instance is terminated"
    );
    let a2_state = fx.state("default-a2").await;
    assert!(
        (ClaimState::Registered..ClaimState::Terminating).contains(&a2_state),
        "a2 is untouched: {a2_state}"
    );

    // Redelivery after the end, and the instance's own terminated state change: nothing new.
    let late = aws_testing::send(&queue, &spot_body).await;
    let terminated = aws_testing::send(
        &queue,
        &fixtures::body_for("state_change_terminated.json", &a1),
    )
    .await;
    let results = fx.process_n(&queue, 2).await;
    assert_eq!(outcome_of(&results, &late), Outcome::AlreadyTerminating);
    assert_eq!(
        outcome_of(&results, &terminated),
        Outcome::AlreadyTerminating
    );
    assert_eq!(fx.notes("default-a1").await.len(), 1);
    fx.finish().await;
}

/// The other kinds that mean the instance is going, each from SQS for its own claim: an AWS
/// Health scheduled change, a `stopping` and a `terminated` state change (an instance stopped
/// or terminated from outside). Each cordons and taints the Node, notes the claim and deletes
/// its NodeClaim; a `running` state change is an unknown kind, deleted and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_changes_and_stop_or_terminate_state_changes_interrupt() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let queue = aws_testing::create_queue(&moto.config(), "interruptions", 2).await;
    let names = ["default-c1", "default-c2", "default-c3"];
    let fx = Fx::new(&names).await;
    let mut sent = Vec::new();
    for (name, fixture) in names.iter().zip([
        "scheduled_change.json",
        "state_change_stopping.json",
        "state_change_terminated.json",
    ]) {
        let id = fx.instance_id(name).await;
        sent.push(aws_testing::send(&queue, &fixtures::body_for(fixture, &id)).await);
    }
    let running_id = fx.instance_id("default-c1").await;
    let running = aws_testing::send(
        &queue,
        &fixtures::body_for("state_change_running.json", &running_id),
    )
    .await;
    let results = fx.process_n(&queue, 4).await;
    for id in &sent {
        assert_eq!(
            outcome_of(&results, id),
            Outcome::Interrupted,
            "{results:?}"
        );
    }
    assert_eq!(outcome_of(&results, &running), Outcome::Dropped);
    for (name, what) in names.iter().zip([
        "scheduled change (AWS Health)",
        "instance stopping",
        "instance terminated",
    ]) {
        let node = fx.node_of(name).await.expect("node");
        assert_eq!(cordoned_and_tainted(&node), (true, true), "{name}");
        assert!(
            fx.nodeclaim(name)
                .await
                .is_some_and(|nc| nc.metadata.deletion_timestamp.is_some()),
            "{name}: NodeClaim being deleted"
        );
        let notes = fx.notes(name).await;
        assert_eq!(notes.len(), 1, "{name}: {notes:?}");
        assert!(notes[0].contains(what), "{name}: {notes:?}");
    }
    let text = fx.metrics.render();
    for line in [
        r#"dovetail_actuator_interruption_messages_total{kind="scheduled_change",outcome="interrupted"} 1"#,
        r#"dovetail_actuator_interruption_messages_total{kind="state_change",outcome="interrupted"} 2"#,
        r#"dovetail_actuator_interruption_messages_total{kind="unknown",outcome="dropped"} 1"#,
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    // The terminations finish: every instance terminated.
    for name in names {
        fx.until(name, ClaimState::Terminated, 60).await;
    }
    fx.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulators_queue_drives_the_same_handler() {
    let fx = Fx::new(&["default-b1"]).await;
    let pid = fx.provider_id("default-b1").await;
    fx.sim
        .cloud()
        .schedule_maintenance(&pid)
        .expect("maintenance event");
    let results = fx.process_n(fx.sim.cloud(), 1).await;
    assert_eq!(results[0].1, Outcome::Interrupted);
    let node = fx.node_of("default-b1").await.expect("node");
    assert_eq!(cordoned_and_tainted(&node), (true, true));
    assert!(
        fx.nodeclaim("default-b1")
            .await
            .is_some_and(|nc| nc.metadata.deletion_timestamp.is_some())
    );
    assert_eq!(
        fx.notes("default-b1").await.len(),
        1,
        "the scheduled change is recorded"
    );
    // Deleted from the simulator's queue: nothing is received again.
    assert!(
        fx.handler
            .poll_once(fx.sim.cloud())
            .await
            .expect("receive")
            .is_empty()
    );
    fx.finish().await;
}

/// A queue that fails its first receives, then has two unreadable messages, then none.
#[derive(Default)]
struct Flaky {
    failures: Mutex<u32>,
    pending: Mutex<VecDeque<Message>>,
    deleted: Mutex<Vec<String>>,
}

#[async_trait]
impl InterruptionQueue for Flaky {
    async fn receive(&self, _max: usize) -> cloud::Result<Vec<InterruptionEvent>> {
        Ok(vec![])
    }
    async fn delete(&self, receipt_handle: &str) -> cloud::Result<()> {
        self.deleted
            .lock()
            .expect("lock")
            .push(receipt_handle.to_string());
        Ok(())
    }
    async fn receive_messages(&self, max: usize) -> cloud::Result<Vec<Message>> {
        {
            let mut f = self.failures.lock().expect("lock");
            if *f > 0 {
                *f -= 1;
                return Err(cloud::Error::Unavailable {
                    message: "ReceiveMessage: connection refused".into(),
                });
            }
        }
        let mut p = self.pending.lock().expect("lock");
        let n = max.min(p.len());
        Ok(p.drain(..n).collect())
    }
}

#[tokio::test]
async fn the_loop_backs_off_on_receive_errors_and_goes_on() {
    // Nothing here reaches Kubernetes or the ledger (unreadable messages only): an unreachable
    // API and a fresh ledger are enough.
    let client = kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:9".parse().expect("url"),
    ))
    .expect("client");
    let db = TestDb::sqlite();
    let ledger = db.ledger().await;
    // The ledger is migrated in real time (SQLite works on its own thread); the loop's timers
    // run paused from here.
    tokio::time::pause();
    let metrics = Metrics::new();
    let handler = Interruptions::new(
        client,
        ledger.clone(),
        Clock::new(),
        metrics.clone(),
        interruption::Options::default(),
    );
    let queue = Arc::new(Flaky {
        failures: Mutex::new(3),
        ..Flaky::default()
    });
    for (i, content) in [
        Err(Unreadable::Garbled {
            reason: "the body is not JSON".into(),
        }),
        Err(Unreadable::Unknown {
            kind: "aws.ec2/EC2 Instance Launch Successful".into(),
        }),
    ]
    .into_iter()
    .enumerate()
    {
        queue.pending.lock().expect("lock").push_back(Message {
            id: format!("m{i}"),
            receipt_handle: format!("rh{i}"),
            content,
        });
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn({
        let h = handler.clone();
        let q: Arc<dyn InterruptionQueue> = queue.clone();
        async move { h.run(q, stopped).await }
    });
    // Three failures back off 1 s, 2 s and 4 s, each stretched by up to a quarter (jitter):
    // the fourth receive comes between 7 s and 8.75 s.
    tokio::time::sleep(Duration::from_millis(6_900)).await;
    assert!(
        queue.deleted.lock().expect("lock").is_empty(),
        "still backing off"
    );
    let text = metrics.render();
    assert!(
        text.contains(
            r#"dovetail_actuator_loop_failures_total{loop="interruption",reason="unavailable"} 3"#
        ),
        "{text}"
    );
    let waiting = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"dovetail_actuator_loop_backoff_seconds{loop="interruption"} "#)
        })
        .and_then(|v| v.parse::<f64>().ok())
        .expect("the backoff gauge");
    assert!((4.0..5.0).contains(&waiting), "{waiting}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(*queue.deleted.lock().expect("lock"), ["rh0", "rh1"]);
    let text = metrics.render();
    assert!(
        text.contains("dovetail_actuator_interruption_receive_errors_total 3"),
        "{text}"
    );
    assert!(
        text.contains(r#"dovetail_actuator_loop_backoff_seconds{loop="interruption"} 0"#),
        "the backoff ends with a receive that works: {text}"
    );
    assert!(text.contains(
        r#"dovetail_actuator_interruption_messages_total{kind="garbled",outcome="dropped"} 1"#
    ));
    assert!(text.contains(
        r#"dovetail_actuator_interruption_messages_total{kind="unknown",outcome="dropped"} 1"#
    ));
    assert!(!task.is_finished(), "the loop goes on");
    stop.send(true).expect("stop");
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("stops on shutdown")
        .expect("no panic");
    tokio::time::resume();
    ledger.close().await;
    db.drop().await;
}
