//! `Planner.Session` over real gRPC: snapshot, deltas, a plan per closed batch, sequence checks,
//! the memory bound, and forwarding to a recording stand-in of the actuator.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use planner::model::ClusterSnapshot;
use planner_service::api::actuator::Forwarder;
use planner_service::metrics::Metrics;
use planner_wire::fixtures;
use proto::v1 as pb;
use service_shell::auth::AddBearer;
use support::*;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};

/// Plans that report what they saw: pending pods and the names of the pods.
fn echo_plan_fn() -> planner_service::api::PlanFn {
    Arc::new(|s: &ClusterSnapshot, _, o| {
        let mut p = fixtures::plan();
        p.summary.pending_pods = s.pods.len() as u32;
        p.notes = vec![format!("now={}", o.now)];
        p.notes
            .extend(s.pods.iter().map(|p| format!("{}/{}", p.namespace, p.name)));
        p
    })
}

fn snapshot_update(sequence: u64, pods: usize) -> pb::ClusterUpdate {
    let s = fixtures::snapshot(pods);
    pb::ClusterUpdate {
        sequence,
        update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
            snapshot: Some(planner_wire::to_wire::snapshot(&s)),
            catalog_source: None,
            options: None,
        })),
    }
}

fn close(sequence: u64, now: i64) -> pb::ClusterUpdate {
    pb::ClusterUpdate {
        sequence,
        update: Some(pb::cluster_update::Update::CloseBatch(pb::CloseBatch {
            now,
        })),
    }
}

fn delta(
    sequence: u64,
    upserts: Vec<pb::upsert::Object>,
    deletes: Vec<(&str, &str)>,
) -> pb::ClusterUpdate {
    pb::ClusterUpdate {
        sequence,
        update: Some(pb::cluster_update::Update::Delta(pb::Delta {
            upserts: upserts
                .into_iter()
                .map(|o| pb::Upsert { object: Some(o) })
                .collect(),
            deletes: deletes
                .into_iter()
                .map(|(k, u)| pb::Delete {
                    kind: k.into(),
                    uid: u.into(),
                })
                .collect(),
        })),
    }
}

fn new_pod(name: &str) -> pb::upsert::Object {
    pb::upsert::Object::Pod(pb::Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        requests: [("cpu".to_string(), "100m".to_string())].into(),
        ..pb::Pod::default()
    })
}

type Tx = mpsc::Sender<pb::ClusterUpdate>;

async fn open(server: &Server) -> (Tx, tonic::Streaming<pb::PlanResponse>) {
    let (tx, rx) = mpsc::channel(16);
    let mut client = pb::planner_client::PlannerClient::new(channel(server).await);
    let stream = client
        .session(ReceiverStream::new(rx))
        .await
        .expect("session opens")
        .into_inner();
    (tx, stream)
}

async fn next_plan(
    stream: &mut tonic::Streaming<pb::PlanResponse>,
) -> Result<pb::PlanResponse, Status> {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an answer in time")
        .expect("the stream is open")
}

#[tokio::test]
async fn deltas_change_the_next_plan() {
    let metrics = Metrics::new();
    let server = start(
        config(service_shell::auth::Auth::Disabled),
        service(&metrics, Some(echo_plan_fn())),
        metrics,
    )
    .await;
    let (tx, mut plans) = open(&server).await;

    tx.send(snapshot_update(100, 3)).await.expect("send");
    tx.send(close(101, 1_700_000_000)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("plan");
    assert_eq!(p.summary.as_ref().expect("summary").pending_pods, 3);
    assert_eq!(p.notes[0], "now=1700000000");

    // uid-0 is deleted, two pods arrive (one twice: an upsert replaces), then the batch closes.
    tx.send(delta(
        102,
        vec![new_pod("extra-a"), new_pod("extra-b")],
        vec![("Pod", "uid-0")],
    ))
    .await
    .expect("send");
    tx.send(delta(103, vec![new_pod("extra-b")], vec![]))
        .await
        .expect("send");
    tx.send(close(104, 1_700_000_060)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("plan");
    assert_eq!(p.summary.as_ref().expect("summary").pending_pods, 4);
    assert_eq!(p.notes[0], "now=1700000060");
    assert!(p.notes.iter().any(|n| n == "default/extra-a"));
    assert!(
        !p.notes.iter().any(|n| n == "default/app-0-0"),
        "{:?}",
        p.notes
    );

    // A new snapshot resets the session.
    tx.send(snapshot_update(500, 1)).await.expect("send");
    tx.send(close(501, 5)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("plan");
    assert_eq!(p.summary.as_ref().expect("summary").pending_pods, 1);
}

#[tokio::test]
async fn out_of_order_updates_end_the_session_with_failed_precondition() {
    let metrics = Metrics::new();
    let server = start(
        config(service_shell::auth::Auth::Disabled),
        service(&metrics, Some(echo_plan_fn())),
        metrics,
    )
    .await;

    let (tx, mut plans) = open(&server).await;
    tx.send(close(1, 0)).await.expect("send");
    let e = next_plan(&mut plans).await.expect_err("no snapshot yet");
    assert_eq!(e.code(), Code::FailedPrecondition);

    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(10, 2)).await.expect("send");
    tx.send(close(12, 0)).await.expect("send");
    let e = next_plan(&mut plans).await.expect_err("gap");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().contains("expected 11, got 12"),
        "{}",
        e.message()
    );

    // A delete of a kind this planner does not know (a newer client) holds nothing: ignored.
    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(1, 2)).await.expect("send");
    tx.send(delta(2, vec![], vec![("Gadget", "x")]))
        .await
        .expect("send");
    tx.send(pb::ClusterUpdate {
        sequence: 3,
        update: Some(pb::cluster_update::Update::Delta(pb::Delta {
            upserts: vec![pb::Upsert { object: None }],
            deletes: vec![],
        })),
    })
    .await
    .expect("send");
    tx.send(close(4, 0)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("planned");
    assert_eq!(p.summary.expect("summary").pending_pods, 2);
}

#[tokio::test]
async fn session_memory_is_bounded_and_released_when_the_stream_ends() {
    let metrics = Metrics::new();
    // A tight limit: the fixture snapshot of 5 pods holds 5 + 4 objects.
    let small = planner_service::api::PlannerService::new(
        Arc::new(|_: &str| Ok(fixtures::catalog())),
        metrics.clone(),
        planner_service::api::ServiceOptions {
            session_max_objects: 10,
            ..planner_service::api::ServiceOptions::default()
        },
    )
    .with_plan_fn(echo_plan_fn());
    let server = start(config(service_shell::auth::Auth::Disabled), small, metrics).await;

    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(1, 5)).await.expect("send");
    tx.send(close(2, 0)).await.expect("send");
    next_plan(&mut plans).await.expect("plan");
    let text = scrape(&server).await;
    assert!(
        text.contains("dovetail_planner_session_objects 9"),
        "{text}"
    );
    assert!(text.contains("dovetail_planner_sessions 1"), "{text}");
    drop(tx);
    assert!(plans.next().await.is_none(), "the server ends the stream");
    // Released once the stream is gone.
    let mut released = false;
    for _ in 0..50 {
        let text = scrape(&server).await;
        if text.contains("dovetail_planner_session_objects 0")
            && text.contains("dovetail_planner_sessions 0")
        {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(released, "session memory not released");

    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(1, 5)).await.expect("send");
    tx.send(delta(
        2,
        (0..5).map(|i| new_pod(&format!("more-{i}"))).collect(),
        vec![],
    ))
    .await
    .expect("send");
    let e = next_plan(&mut plans).await.expect_err("too large");
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(e.message().contains("limit of 10"), "{}", e.message());
}

#[tokio::test]
async fn open_sessions_together_hold_at_most_max_held_objects_and_the_room_comes_back() {
    let metrics = Metrics::new();
    // Room for two fixture snapshots of 5 pods (9 objects each), not three.
    let small = planner_service::api::PlannerService::new(
        Arc::new(|_: &str| Ok(fixtures::catalog())),
        metrics.clone(),
        planner_service::api::ServiceOptions {
            max_held_objects: 20,
            ..planner_service::api::ServiceOptions::default()
        },
    )
    .with_plan_fn(echo_plan_fn());
    let server = start(config(service_shell::auth::Auth::Disabled), small, metrics).await;
    let session = async || {
        let (tx, mut plans) = open(&server).await;
        tx.send(snapshot_update(1, 5)).await.expect("send");
        tx.send(close(2, 0)).await.expect("send");
        let answer = next_plan(&mut plans).await;
        (tx, plans, answer)
    };
    let (a_tx, mut a_plans, a) = session().await;
    a.expect("the first session plans");
    let (b_tx, mut b_plans, b) = session().await;
    b.expect("the second session plans");
    // The third snapshot does not fit: refused before it is held, the others go on.
    let (_c_tx, _c_plans, c) = session().await;
    let e = c.expect_err("no room for a third session");
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(
        e.message().contains("--max-held-objects") && e.message().contains("limit of 20"),
        "{}",
        e.message()
    );
    let text = scrape(&server).await;
    assert!(
        text.contains("dovetail_planner_session_objects 18"),
        "{text}"
    );
    b_tx.send(close(3, 0)).await.expect("send");
    next_plan(&mut b_plans)
        .await
        .expect("the second session still plans");

    // A delta past the room ends its own session only.
    b_tx.send(delta(
        4,
        (0..5).map(|i| new_pod(&format!("more-{i}"))).collect(),
        vec![],
    ))
    .await
    .expect("send");
    let e = next_plan(&mut b_plans)
        .await
        .expect_err("the delta passes the limit");
    assert_eq!(e.code(), Code::ResourceExhausted);
    a_tx.send(close(3, 0)).await.expect("send");
    next_plan(&mut a_plans)
        .await
        .expect("the first session still plans");

    // The room of the ended session is given back: a new session fits.
    let mut fits = false;
    for _ in 0..50 {
        if scrape(&server)
            .await
            .contains("dovetail_planner_session_objects 9")
        {
            fits = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(fits, "the refused session's objects are released");
    let (_d_tx, _d_plans, d) = session().await;
    d.expect("a new session fits once one ended");
    drop(a_tx);
}

/// One submission: the authorization header and the request.
type Seen = (Option<String>, pb::SubmitRequest);

/// A stand-in actuator that records what it is sent.
#[derive(Clone, Default)]
struct RecordingActuator {
    seen: Arc<Mutex<Vec<Seen>>>,
}

#[tonic::async_trait]
impl pb::actuator_server::Actuator for RecordingActuator {
    async fn submit(
        &self,
        request: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let auth = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let req = request.into_inner();
        let results = req
            .commands
            .iter()
            .map(|c| pb::CommandResult {
                idempotency_key: match &c.command {
                    Some(pb::command::Command::Launch(l)) => l.idempotency_key.clone(),
                    Some(pb::command::Command::Disrupt(d)) => d.idempotency_key.clone(),
                    None => String::new(),
                },
                status: "Accepted".into(),
                message: String::new(),
                claim: String::new(),
            })
            .collect();
        self.seen.lock().expect("lock").push((auth, req));
        Ok(Response::new(pb::SubmitResponse { results }))
    }

    async fn catalog(
        &self,
        _request: Request<pb::CatalogRequest>,
    ) -> Result<Response<pb::CatalogResponse>, Status> {
        Err(Status::failed_precondition("no live catalog here"))
    }
}

#[tokio::test]
async fn session_plans_are_submitted_to_the_actuator_and_unary_plans_are_not() {
    let actuator = RecordingActuator::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let actuator_addr = listener.local_addr().expect("addr");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(pb::actuator_server::ActuatorServer::new(actuator.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let metrics = Metrics::new();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{actuator_addr}"))
        .expect("uri")
        .connect_lazy();
    let forwarder = Forwarder::new(
        channel,
        AddBearer::new(Some("actuator-token")).expect("token"),
        metrics.clone(),
    );
    let svc = service(&metrics, Some(fixture_plan_fn())).with_actuator(forwarder);
    let server = start(config(service_shell::auth::Auth::Disabled), svc, metrics).await;

    // Unary Plan never executes anything.
    let mut raw = pb::planner_client::PlannerClient::new(support::channel(&server).await);
    raw.plan(planner_wire::to_wire::plan_request(
        &fixtures::snapshot(3),
        &planner_service::api::convert::CatalogChoice::Default,
        &Default::default(),
    ))
    .await
    .expect("plan");
    assert!(actuator.seen.lock().expect("lock").is_empty());

    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(7, 4)).await.expect("send");
    tx.send(close(8, 1_700_000_000)).await.expect("send");
    next_plan(&mut plans).await.expect("plan");
    tx.send(close(9, 1_700_000_030)).await.expect("send");
    next_plan(&mut plans).await.expect("plan");

    let seen = actuator.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2, "one submission per batch");
    let (auth, first) = &seen[0];
    assert_eq!(auth.as_deref(), Some("Bearer actuator-token"));
    let basis = first.basis.as_ref().expect("basis");
    assert_eq!(basis.in_flight_claims, vec!["default-inflight".to_string()]);
    assert_eq!(basis.now, 1_700_000_000);
    assert_eq!(basis.sequence, 8);
    assert!(
        first.session_id.starts_with("planner-"),
        "{}",
        first.session_id
    );
    // The fixture plan: two launches and two disruptions.
    let kinds: Vec<&str> = first
        .commands
        .iter()
        .map(|c| match &c.command {
            Some(pb::command::Command::Launch(_)) => "launch",
            Some(pb::command::Command::Disrupt(_)) => "disrupt",
            None => "none",
        })
        .collect();
    assert_eq!(kinds, ["launch", "launch", "disrupt", "disrupt"]);
    // The same decisions planned again carry the same idempotency keys; the basis moved on.
    let keys = |r: &pb::SubmitRequest| -> Vec<String> {
        r.commands
            .iter()
            .filter_map(|c| match &c.command {
                Some(pb::command::Command::Launch(l)) => Some(l.idempotency_key.clone()),
                Some(pb::command::Command::Disrupt(d)) => Some(d.idempotency_key.clone()),
                None => None,
            })
            .collect()
    };
    assert_eq!(keys(first), keys(&seen[1].1));
    let unique: std::collections::BTreeSet<String> = keys(first).into_iter().collect();
    assert_eq!(unique.len(), 4, "distinct commands have distinct keys");
    assert_ne!(first.plan_id, seen[1].1.plan_id);
}

#[tokio::test]
async fn an_unreachable_actuator_does_not_break_the_session() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let metrics = Metrics::new();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{dead}"))
        .expect("uri")
        .connect_lazy();
    let forwarder = Forwarder::new(channel, AddBearer::default(), metrics.clone());
    let svc = service(&metrics, Some(fixture_plan_fn())).with_actuator(forwarder);
    let server = start(config(service_shell::auth::Auth::Disabled), svc, metrics).await;
    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(1, 2)).await.expect("send");
    tx.send(close(2, 0)).await.expect("send");
    next_plan(&mut plans).await.expect("the plan still comes");
    let text = scrape(&server).await;
    assert!(
        text.contains("dovetail_planner_actuator_submit_failures_total 1"),
        "{text}"
    );
}

#[tokio::test]
async fn shutdown_ends_open_sessions_with_unavailable() {
    let metrics = Metrics::new();
    let server = start(
        config(service_shell::auth::Auth::Disabled),
        service(&metrics, Some(echo_plan_fn())),
        metrics,
    )
    .await;
    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(1, 2)).await.expect("send");
    tx.send(close(2, 0)).await.expect("send");
    next_plan(&mut plans).await.expect("plan");
    let stop = tokio::spawn(server.running.shutdown(Duration::ZERO));
    let e = next_plan(&mut plans).await.expect_err("ended");
    assert_eq!(e.code(), Code::Unavailable);
    assert!(e.message().contains("reconnect"), "{}", e.message());
    drop(tx);
    stop.await.expect("joined").expect("clean stop");
}

#[tokio::test]
async fn the_client_opens_sessions_on_a_live_replica() {
    let metrics = Metrics::new();
    let server = start(
        config(service_shell::auth::Auth::Disabled),
        service(&metrics, Some(echo_plan_fn())),
        metrics,
    )
    .await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let client = planner_client::PlannerClient::connect(planner_client::ClientConfig::new(vec![
        dead.to_string(),
        server.running.grpc_addr.to_string(),
    ]))
    .await
    .expect("client");
    for _ in 0..2 {
        let mut attempts = 0;
        let mut plans = client
            .session(|| {
                attempts += 1;
                tokio_stream::iter([snapshot_update(1, 3), close(2, 10)])
            })
            .await
            .expect("a session opens");
        let p = next_plan(&mut plans).await.expect("plan");
        assert_eq!(p.summary.expect("summary").pending_pods, 3);
        assert!(attempts <= 2);
    }
}

async fn echo_server() -> Server {
    let metrics = Metrics::new();
    start(
        config(service_shell::auth::Auth::Disabled),
        service(&metrics, Some(echo_plan_fn())),
        metrics,
    )
    .await
}

fn pod_named(uid: &str, name: &str) -> pb::upsert::Object {
    pb::upsert::Object::Pod(pb::Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: uid.into(),
        requests: [("cpu".to_string(), "100m".to_string())].into(),
        ..pb::Pod::default()
    })
}

#[tokio::test]
async fn the_same_uid_twice_in_one_snapshot_leaves_the_second_out_naming_both_places() {
    let server = echo_server().await;
    let (tx, mut plans) = open(&server).await;
    let mut update = snapshot_update(1, 3);
    let Some(pb::cluster_update::Update::Snapshot(s)) = &mut update.update else {
        unreachable!("a snapshot update")
    };
    let snap = s.snapshot.as_mut().expect("objects");
    let mut twin = snap.pods[0].clone();
    twin.name = "another-name".into();
    snap.pods.push(twin);
    tx.send(update).await.expect("send");
    tx.send(close(2, 0)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("the rest is planned");
    assert_eq!(
        excluded(&p),
        [(
            "Pod",
            "default/another-name".to_string(),
            "Duplicate",
            "uid"
        )]
    );
    assert!(
        p.excluded[0]
            .message
            .contains("snapshot.snapshot.pods[3] repeats snapshot.snapshot.pods[0]"),
        "{}",
        p.excluded[0].message
    );
    assert_eq!(
        p.summary.expect("summary").pending_pods,
        3,
        "the first is kept"
    );

    // Without uids, objects are keyed by name: the second NodePool of one name is left out.
    let (tx, mut plans) = open(&server).await;
    let mut update = snapshot_update(7, 1);
    let Some(pb::cluster_update::Update::Snapshot(s)) = &mut update.update else {
        unreachable!("a snapshot update")
    };
    let snap = s.snapshot.as_mut().expect("objects");
    snap.node_pools.push(snap.node_pools[0].clone());
    tx.send(update).await.expect("send");
    tx.send(close(8, 0)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("the rest is planned");
    assert_eq!(
        excluded(&p),
        [("NodePool", "default".to_string(), "Duplicate", "name")]
    );
}

#[tokio::test]
async fn the_second_of_two_objects_of_one_name_in_a_batch_is_left_out() {
    let server = echo_server().await;
    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(1, 2)).await.expect("send");
    // `default/app-0-0` exists with uid-0; a different uid with that name arrives in update 2,
    // as a watch that missed the old pod's deletion would send it.
    tx.send(delta(
        2,
        vec![new_pod("fine"), pod_named("uid-other", "app-0-0")],
        vec![],
    ))
    .await
    .expect("send");
    tx.send(close(3, 0)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("the rest is planned");
    // Keyed by uid, the batch lists uid-0 before uid-other: the second is the delta's.
    assert_eq!(
        excluded(&p),
        [("Pod", "default/app-0-0".to_string(), "Duplicate", "name")]
    );
    assert_eq!(p.summary.expect("summary").pending_pods, 3);
}

#[tokio::test]
async fn a_later_upsert_of_a_held_uid_is_an_update_not_a_duplicate() {
    let server = echo_server().await;
    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(1, 2)).await.expect("send");
    // Same uid, new name and requests: Kubernetes' MODIFIED (a name cannot change there, but
    // the session keys by uid, so the object is replaced whole).
    tx.send(delta(2, vec![pod_named("uid-0", "app-0-0")], vec![]))
        .await
        .expect("send");
    tx.send(delta(3, vec![pod_named("uid-0", "app-0-0")], vec![]))
        .await
        .expect("send");
    tx.send(close(4, 0)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("plan");
    assert_eq!(p.summary.as_ref().expect("summary").pending_pods, 2);
    assert_eq!(
        p.notes.iter().filter(|n| *n == "default/app-0-0").count(),
        1,
        "{:?}",
        p.notes
    );
}

/// The plan's exclusions as (kind, namespace/name, reason, field).
fn excluded(p: &pb::PlanResponse) -> Vec<(&str, String, &str, &str)> {
    p.excluded
        .iter()
        .map(|e| {
            let name = if e.namespace.is_empty() {
                e.name.clone()
            } else {
                format!("{}/{}", e.namespace, e.name)
            };
            (e.kind.as_str(), name, e.reason.as_str(), e.field.as_str())
        })
        .collect()
}

#[tokio::test]
async fn an_object_the_planner_cannot_use_is_left_out_and_the_rest_is_planned() {
    let server = echo_server().await;
    let (tx, mut plans) = open(&server).await;
    tx.send(snapshot_update(1, 2)).await.expect("send");
    let base = planner_wire::to_wire::node_pool(&fixtures::snapshot(1).node_pools[0]);
    // An invalid budget cron (found by the rules of the closed batch), an explicit weight 0
    // (found when decoding), a policy newer than the planner, a budget over 100%, minValues
    // over 50, a restricted requirement key, and a bound pod with negative cpu.
    let mut cron = base.clone();
    cron.name = "cron".into();
    cron.disruption = Some(pb::Disruption {
        budgets: vec![pb::Budget {
            nodes: "1".into(),
            schedule: Some("61 * * * *".into()),
            duration: Some(3600),
            ..pb::Budget::default()
        }],
        ..pb::Disruption::default()
    });
    let mut weight = base.clone();
    weight.name = "weight".into();
    weight.weight = Some(0);
    let mut balanced = base.clone();
    balanced.name = "balanced".into();
    balanced.disruption = Some(pb::Disruption {
        consolidation_policy: "Sometimes".into(),
        ..pb::Disruption::default()
    });
    let mut percent = base.clone();
    percent.name = "percent".into();
    percent.disruption = Some(pb::Disruption {
        budgets: vec![pb::Budget {
            nodes: "150%".into(),
            ..pb::Budget::default()
        }],
        ..pb::Disruption::default()
    });
    let mut min_values = base.clone();
    min_values.name = "min-values".into();
    min_values.requirements = vec![pb::Requirement {
        key: "karpenter.k8s.aws/instance-family".into(),
        operator: "Exists".into(),
        values: vec![],
        min_values: Some(100),
    }];
    let mut restricted = base.clone();
    restricted.name = "restricted".into();
    restricted.requirements = vec![pb::Requirement {
        key: "karpenter.sh/nodepool".into(),
        operator: "In".into(),
        values: vec!["x".into()],
        min_values: None,
    }];
    let pools = [cron, weight, balanced, percent, min_values, restricted];
    let mut upserts: Vec<pb::upsert::Object> = pools
        .iter()
        .cloned()
        .map(pb::upsert::Object::NodePool)
        .collect();
    upserts.push(new_pod("a"));
    upserts.push(pb::upsert::Object::Pod(pb::Pod {
        namespace: "default".into(),
        name: "negative".into(),
        uid: "uid-negative".into(),
        node_name: Some("node-0".into()),
        phase: "Running".into(),
        requests: [("cpu".to_string(), "-2".to_string())].into(),
        ..pb::Pod::default()
    }));
    tx.send(delta(2, upserts, vec![])).await.expect("send");
    tx.send(close(3, 0)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("the rest is planned");
    assert_eq!(
        excluded(&p),
        [
            (
                "NodePool",
                "balanced".into(),
                "Unsupported",
                "disruption.consolidation_policy"
            ),
            (
                "NodePool",
                "cron".into(),
                "Invalid",
                "disruption.budgets[0].schedule"
            ),
            (
                "NodePool",
                "min-values".into(),
                "Invalid",
                "requirements[0].min_values"
            ),
            (
                "NodePool",
                "percent".into(),
                "Invalid",
                "disruption.budgets[0].nodes"
            ),
            (
                "NodePool",
                "restricted".into(),
                "Invalid",
                "requirements[0].key"
            ),
            ("NodePool", "weight".into(), "Invalid", "weight"),
            ("Pod", "default/negative".into(), "Invalid", "requests.cpu"),
        ]
    );
    assert!(
        p.excluded[0].message.contains("Sometimes"),
        "{}",
        p.excluded[0].message
    );
    // The two pods of the snapshot and `a` are planned; the bound pod stays as a placeholder
    // that keeps its node from looking empty.
    assert_eq!(p.summary.as_ref().expect("summary").pending_pods, 4);
    assert!(
        p.notes.iter().any(|n| n == "default/negative"),
        "{:?}",
        p.notes
    );

    // Fixed by a later upsert (and the pod deleted), nothing is left out any more.
    let mut fixed: Vec<pb::upsert::Object> = pools
        .into_iter()
        .map(|mut pool| {
            pool.disruption = None;
            pool.weight = None;
            pool.requirements = vec![];
            pb::upsert::Object::NodePool(pool)
        })
        .collect();
    fixed.push(new_pod("b"));
    tx.send(delta(4, fixed, vec![("Pod", "uid-negative")]))
        .await
        .expect("send");
    tx.send(close(5, 0)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("plan");
    assert!(p.excluded.is_empty(), "{:?}", p.excluded);
}

#[tokio::test]
async fn pods_that_needed_an_excluded_node_pool_are_told_which() {
    // The real planner: a pool the pod selects, left out for its budget.
    let metrics = Metrics::new();
    let server = start(
        config(service_shell::auth::Auth::Disabled),
        service(&metrics, None),
        metrics,
    )
    .await;
    let (tx, mut plans) = open(&server).await;
    let mut s = fixtures::snapshot(0);
    s.node_claims.clear();
    s.nodes.clear();
    let mut snapshot = planner_wire::to_wire::snapshot(&s);
    let mut gpu = snapshot.node_pools[0].clone();
    gpu.name = "gpu".into();
    gpu.disruption = Some(pb::Disruption {
        budgets: vec![pb::Budget {
            nodes: "150%".into(),
            ..pb::Budget::default()
        }],
        ..pb::Disruption::default()
    });
    snapshot.node_pools.push(gpu);
    let pod = |name: &str, pool: Option<&str>| pb::Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        requests: [("cpu".to_string(), "100m".to_string())].into(),
        node_selector: pool
            .map(|p| [("karpenter.sh/nodepool".to_string(), p.to_string())].into())
            .unwrap_or_default(),
        ..pb::Pod::default()
    };
    snapshot.pods = vec![pod("canary", None), pod("trainer", Some("gpu"))];
    tx.send(pb::ClusterUpdate {
        sequence: 1,
        update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
            snapshot: Some(snapshot),
            catalog_source: None,
            options: None,
        })),
    })
    .await
    .expect("send");
    tx.send(close(2, 1_700_000_000)).await.expect("send");
    let p = next_plan(&mut plans).await.expect("plan");
    let placed: Vec<&str> = p
        .node_claims
        .iter()
        .flat_map(|c| c.pods.iter().map(String::as_str))
        .collect();
    assert_eq!(placed, ["default/canary"], "{p:?}");
    let trainer = p
        .unschedulable
        .iter()
        .find(|u| u.pod == "default/trainer")
        .expect("trainer unschedulable");
    assert!(
        trainer
            .reason
            .contains("NodePool gpu was left out of the plan")
            && trainer.reason.contains("150%"),
        "{}",
        trainer.reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_plans_wait_for_the_same_limit_as_unary_plans() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let plan_fn: planner_service::api::PlanFn = {
        let (running, peak) = (running.clone(), peak.clone());
        Arc::new(move |_, _, _| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
            running.fetch_sub(1, Ordering::SeqCst);
            fixtures::plan()
        })
    };
    let metrics = Metrics::new();
    let config = planner_service::config::Config {
        max_concurrent_requests: 2,
        ..config(service_shell::auth::Auth::Disabled)
    };
    let server = start(config, service(&metrics, Some(plan_fn)), metrics).await;
    // Sessions open one by one (opening takes a permit for a moment), then all close a batch
    // at once: 16 plans wanted, never more than 2 running.
    let mut sessions = Vec::new();
    for _ in 0..16 {
        let (tx, plans) = open(&server).await;
        tx.send(snapshot_update(1, 3)).await.expect("send");
        sessions.push((tx, plans));
    }
    for (tx, _) in &sessions {
        tx.send(close(2, 0)).await.expect("send");
    }
    for (_, plans) in &mut sessions {
        next_plan(plans).await.expect("every session gets its plan");
    }
    assert_eq!(peak.load(Ordering::SeqCst), 2, "at most the limit at once");
}
