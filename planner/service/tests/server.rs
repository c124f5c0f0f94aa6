//! The planner server over real gRPC on 127.0.0.1: health, reflection, Plan, errors, auth,
//! load shedding, timeouts, metrics, TLS.

mod support;

use std::sync::Arc;
use std::time::Duration;

use planner::model::PlanOptions;
use planner_client::{ClientConfig, PlannerClient};
use planner_service::api::RemotePlan;
use planner_service::metrics::Metrics;
use planner_wire::fixtures;
use planner_wire::{CatalogChoice, to_wire::plan_request as to_plan_request};
use proto::v1 as pb;
use service_shell::auth::Auth;
use service_shell::tls::ClientTls;
use service_shell::tls::ServerTls;
use support::*;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

async fn health_of(server: &Server, service: &str) -> ServingStatus {
    let mut h = HealthClient::new(channel(server).await);
    let r = h
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health answers");
    r.into_inner().status()
}

#[tokio::test]
async fn health_is_not_serving_until_ready_and_after_shutdown_begins() {
    let metrics = Metrics::new();
    let running = planner_service::server::start(
        &config(Auth::Disabled),
        service(&metrics, None),
        metrics.clone(),
    )
    .await
    .expect("starts");
    let server = Server { running, metrics };
    assert_eq!(health_of(&server, "").await, ServingStatus::NotServing);
    assert_eq!(
        health_of(&server, "dovetail.v1.Planner").await,
        ServingStatus::NotServing
    );
    server.running.set_serving().await;
    assert_eq!(health_of(&server, "").await, ServingStatus::Serving);
    assert_eq!(
        health_of(&server, "dovetail.v1.Planner").await,
        ServingStatus::Serving
    );

    // Shutdown: NOT_SERVING during the drain delay, then the port closes.
    let addr = server.running.grpc_addr;
    let mut watcher = HealthClient::new(channel(&server).await);
    let mut updates = watcher
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("watch")
        .into_inner();
    assert_eq!(
        updates.next().await.expect("first").expect("ok").status(),
        ServingStatus::Serving
    );
    let stop = tokio::spawn(server.running.shutdown(Duration::from_millis(300)));
    assert_eq!(
        updates.next().await.expect("update").expect("ok").status(),
        ServingStatus::NotServing
    );
    drop(updates);
    stop.await.expect("joined").expect("clean stop");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn reflection_lists_services_in_v1_and_v1alpha() {
    let metrics = Metrics::new();
    let server = start(config(Auth::Disabled), service(&metrics, None), metrics).await;

    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient as V1;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest as V1Req;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse as V1Resp;
    let req = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(V1Req::ListServices(String::new())),
    };
    let mut resp = V1::new(channel(&server).await)
        .server_reflection_info(tokio_stream::iter([req]))
        .await
        .expect("v1 answers")
        .into_inner();
    let Some(Ok(msg)) = resp.next().await else {
        panic!("no v1 reflection response")
    };
    let Some(V1Resp::ListServicesResponse(list)) = msg.message_response else {
        panic!("not a list")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in [
        "dovetail.v1.Planner",
        "dovetail.v1.Actuator",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }

    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient as V1a;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest as V1aReq;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse as V1aResp;
    let req = tonic_reflection::pb::v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(V1aReq::FileContainingSymbol("dovetail.v1.Planner".into())),
    };
    let mut resp = V1a::new(channel(&server).await)
        .server_reflection_info(tokio_stream::iter([req]))
        .await
        .expect("v1alpha answers")
        .into_inner();
    let Some(Ok(msg)) = resp.next().await else {
        panic!("no v1alpha reflection response")
    };
    let Some(V1aResp::FileDescriptorResponse(files)) = msg.message_response else {
        panic!("not a file descriptor response: {:?}", msg.message_response)
    };
    assert!(!files.file_descriptor_proto.is_empty());
}

#[tokio::test]
async fn plan_answers_what_the_planner_computes() {
    let metrics = Metrics::new();
    // The real planner behind the server; the expected plan is computed here, in process, from
    // the same snapshot and the catalog the service resolves for its region.
    let server = start(config(Auth::Disabled), service(&metrics, None), metrics).await;
    let client = PlannerClient::connect(ClientConfig::new(vec![
        server.running.grpc_addr.to_string(),
    ]))
    .await
    .expect("client");
    let snapshot = fixtures::snapshot(50);
    let remote = client
        .plan(&snapshot, &CatalogChoice::Default, &PlanOptions::default())
        .await
        .expect("plans");
    let expected = planner::plan(&snapshot, &fixtures::catalog(), &PlanOptions::default());
    assert!(
        !expected.node_claims.is_empty(),
        "the fixture snapshot should need new nodes: {expected:?}"
    );
    assert_eq!(remote, expected);

    // Built-in catalogs by reference; an unknown region names the field.
    let e = client
        .plan(
            &snapshot,
            &CatalogChoice::Builtin {
                region: "mars-north-1".into(),
            },
            &PlanOptions::default(),
        )
        .await
        .expect_err("unknown region");
    let planner_client::Error::Rpc { status, .. } = e else {
        panic!("not an rpc error: {e}")
    };
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().starts_with("catalog_ref.region"),
        "{}",
        status.message()
    );

    let text = scrape(&server).await;
    assert!(text.starts_with("# HELP"), "{text}");
    assert!(
        text.contains(r#"dovetail_planner_requests_total{method="Plan",code="Ok"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"dovetail_planner_requests_total{method="Plan",code="InvalidArgument"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("dovetail_planner_pods_planned_total 50"),
        "{text}"
    );
    assert!(text.contains("dovetail_planner_plan_cost_per_hour_dollars_count 1"));
}

#[tokio::test]
async fn an_invalid_object_is_left_out_naming_the_field_and_the_rest_planned() {
    let metrics = Metrics::new();
    let server = start(config(Auth::Disabled), service(&metrics, None), metrics).await;
    let mut req = to_plan_request(
        &fixtures::snapshot(20),
        &CatalogChoice::Inline(fixtures::catalog()),
        &PlanOptions::default(),
    );
    let bad = &mut req.snapshot.as_mut().expect("snapshot").pods[17];
    bad.requests.insert("cpu".into(), "a lot".into());
    let bad = format!("{}/{}", bad.namespace, bad.name);
    let mut raw = pb::planner_client::PlannerClient::new(channel(&server).await);
    let plan = raw
        .plan(req)
        .await
        .expect("the rest is planned")
        .into_inner();
    let e = &plan.excluded[..];
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        (
            e[0].kind.as_str(),
            format!("{}/{}", e[0].namespace, e[0].name)
        ),
        ("Pod", bad)
    );
    assert_eq!(e[0].reason, "Invalid");
    assert_eq!(e[0].field, "requests.cpu");
    assert!(e[0].message.contains("\"a lot\""), "{}", e[0].message);
    assert_eq!(plan.summary.expect("summary").pending_pods, 19);

    // A broken catalog is still refused whole, naming the field.
    let mut req = to_plan_request(
        &fixtures::snapshot(2),
        &CatalogChoice::Inline(fixtures::catalog()),
        &PlanOptions::default(),
    );
    if let Some(pb::plan_request::CatalogSource::Catalog(c)) = &mut req.catalog_source {
        c.instance_types.clear();
    }
    let status = raw.plan(req).await.expect_err("rejected");
    assert_eq!(status.code(), Code::InvalidArgument);
    let details = status.get_error_details();
    let violations = &details
        .bad_request()
        .expect("field violations")
        .field_violations;
    assert_eq!(violations[0].field, "catalog.instance_types");
}

#[tokio::test]
async fn a_panicking_planner_is_internal_and_the_server_keeps_serving() {
    let metrics = Metrics::new();
    let boom: planner_service::api::PlanFn = Arc::new(|s, _, _| {
        if s.pods.len() == 13 {
            panic!("planner bug")
        }
        planner::plan::Plan::default()
    });
    let server = start(
        config(Auth::Disabled),
        service(&metrics, Some(boom)),
        metrics,
    )
    .await;
    let mut raw = pb::planner_client::PlannerClient::new(channel(&server).await);
    let bad = to_plan_request(
        &fixtures::snapshot(13),
        &CatalogChoice::Default,
        &PlanOptions::default(),
    );
    assert_eq!(raw.plan(bad).await.expect_err("bug").code(), Code::Internal);
    let ok = to_plan_request(
        &fixtures::snapshot(3),
        &CatalogChoice::Default,
        &PlanOptions::default(),
    );
    raw.plan(ok).await.expect("still serving");
}

#[tokio::test]
async fn bearer_token_guards_the_planner_but_not_health() {
    let metrics = Metrics::new();
    let server = start(
        config(Auth::Bearer("s3cret".into())),
        service(&metrics, None),
        metrics,
    )
    .await;
    let addr = server.running.grpc_addr.to_string();
    let anonymous = PlannerClient::connect(ClientConfig::new(vec![addr.clone()]))
        .await
        .expect("client");
    let e = anonymous
        .plan(
            &fixtures::snapshot(1),
            &CatalogChoice::Default,
            &PlanOptions::default(),
        )
        .await
        .expect_err("no token");
    let planner_client::Error::Rpc { status, .. } = e else {
        panic!("{e}")
    };
    assert_eq!(status.code(), Code::Unauthenticated);

    let mut cfg = ClientConfig::new(vec![addr]);
    cfg.token = Some("s3cret".into());
    let authed = PlannerClient::connect(cfg).await.expect("client");
    authed
        .plan(
            &fixtures::snapshot(1),
            &CatalogChoice::Default,
            &PlanOptions::default(),
        )
        .await
        .expect("token accepted");
    assert_eq!(health_of(&server, "").await, ServingStatus::Serving);
}

/// A plan function that announces each call on `started` and then blocks until `release` lets
/// it go (dropping the `Gate` releases every call): requests are ordered by events, not sleeps.
struct Gate {
    started: Arc<tokio::sync::Notify>,
    release: std::sync::mpsc::Sender<()>,
}

fn gated_plan_fn() -> (planner_service::api::PlanFn, Gate) {
    let started = Arc::new(tokio::sync::Notify::new());
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let wait = std::sync::Mutex::new(wait);
    let announce = started.clone();
    let f: planner_service::api::PlanFn = Arc::new(move |_, _, _| {
        announce.notify_one();
        // Err: the Gate was dropped, which releases too.
        let _ = wait.lock().expect("gate lock").recv();
        planner::plan::Plan::default()
    });
    (f, Gate { started, release })
}

#[tokio::test]
async fn over_the_concurrency_limit_requests_are_shed_not_queued() {
    let metrics = Metrics::new();
    let mut cfg = config(Auth::Disabled);
    cfg.max_concurrent_requests = 1;
    let (plan_fn, gate) = gated_plan_fn();
    let server = start(cfg, service(&metrics, Some(plan_fn)), metrics).await;
    let ch = channel(&server).await;
    let req = to_plan_request(
        &fixtures::snapshot(1),
        &CatalogChoice::Default,
        &PlanOptions::default(),
    );
    let mut a = pb::planner_client::PlannerClient::new(ch.clone());
    let first = tokio::spawn({
        let req = req.clone();
        async move { a.plan(req).await }
    });
    // The first request is inside the planner (and holds the only slot) until released.
    gate.started.notified().await;
    let mut b = pb::planner_client::PlannerClient::new(ch);
    let shed = b.plan(req).await.expect_err("shed");
    assert_eq!(shed.code(), Code::ResourceExhausted, "{shed:?}");
    gate.release.send(()).expect("the first request waits");
    first
        .await
        .expect("joined")
        .expect("the first one completes");
    // Health is never shed.
    assert_eq!(health_of(&server, "").await, ServingStatus::Serving);
    let text = scrape(&server).await;
    assert!(
        text.contains("dovetail_planner_requests_shed_total 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_request_past_the_timeout_is_deadline_exceeded() {
    let metrics = Metrics::new();
    let mut cfg = config(Auth::Disabled);
    cfg.request_timeout = Duration::from_millis(100);
    // The planner never answers before the deadline: it waits for a release that comes after.
    let (plan_fn, gate) = gated_plan_fn();
    let server = start(cfg, service(&metrics, Some(plan_fn)), metrics).await;
    let mut raw = pb::planner_client::PlannerClient::new(channel(&server).await);
    let req = to_plan_request(
        &fixtures::snapshot(1),
        &CatalogChoice::Default,
        &PlanOptions::default(),
    );
    assert_eq!(
        raw.plan(req).await.expect_err("timeout").code(),
        Code::DeadlineExceeded
    );
    drop(gate);
}

#[tokio::test]
async fn large_snapshots_fit_in_the_message_limit() {
    let metrics = Metrics::new();
    // This test is about message size, not speed: planning 50k pods in a debug build on a
    // loaded CI machine may take longer than the default request timeout.
    let mut cfg = config(Auth::Disabled);
    cfg.request_timeout = Duration::from_secs(600);
    let server = start(cfg, service(&metrics, None), metrics).await;
    let mut client_config = ClientConfig::new(vec![server.running.grpc_addr.to_string()]);
    client_config.timeout = Duration::from_secs(600);
    let client = PlannerClient::connect(client_config).await.expect("client");
    // Well past tonic's 4 MiB default.
    let snapshot = fixtures::snapshot(50_000);
    let size = prost::Message::encoded_len(&to_plan_request(
        &snapshot,
        &CatalogChoice::Default,
        &PlanOptions::default(),
    ));
    assert!(size > 4 << 20, "{size}");
    client
        .plan(&snapshot, &CatalogChoice::Default, &PlanOptions::default())
        .await
        .expect("a 50k-pod snapshot is accepted");
}

fn certs() -> (Vec<u8>, ServerTls, (Vec<u8>, Vec<u8>)) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let server_key = KeyPair::generate().expect("key");
    let server = CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .signed_by(&server_key, &issuer)
        .expect("server cert");
    let client_key = KeyPair::generate().expect("key");
    let client = CertificateParams::new(vec!["watcher".to_string()])
        .expect("params")
        .signed_by(&client_key, &issuer)
        .expect("client cert");
    let ca_pem = ca.pem().into_bytes();
    (
        ca_pem.clone(),
        ServerTls {
            cert: server.pem().into_bytes(),
            key: server_key.serialize_pem().into_bytes(),
            client_ca: Some(ca_pem),
        },
        (
            client.pem().into_bytes(),
            client_key.serialize_pem().into_bytes(),
        ),
    )
}

#[tokio::test]
async fn mutual_tls_admits_only_clients_with_a_certificate() {
    let (ca, tls, identity) = certs();
    let metrics = Metrics::new();
    let mut cfg = config(Auth::MutualTls);
    cfg.tls = Some(tls);
    let server = start(cfg, service(&metrics, None), metrics).await;
    let endpoint = format!("localhost:{}", server.running.grpc_addr.port());

    let mut with_cert = ClientConfig::new(vec![endpoint.clone()]);
    with_cert.tls = Some(ClientTls {
        ca: Some(ca.clone()),
        identity: Some(identity),
        domain: Some("localhost".into()),
    });
    let client = PlannerClient::connect(with_cert).await.expect("client");
    client
        .plan(
            &fixtures::snapshot(2),
            &CatalogChoice::Default,
            &PlanOptions::default(),
        )
        .await
        .expect("mTLS call succeeds");

    let mut without_cert = ClientConfig::new(vec![endpoint]);
    without_cert.tls = Some(ClientTls {
        ca: Some(ca),
        identity: None,
        domain: Some("localhost".into()),
    });
    let client = PlannerClient::connect(without_cert).await.expect("client");
    let e = client
        .plan(
            &fixtures::snapshot(2),
            &CatalogChoice::Default,
            &PlanOptions::default(),
        )
        .await
        .expect_err("no client certificate, no plan");
    // The TLS handshake itself refuses: the server's alert, not a DNS, connect or RPC error.
    let planner_client::Error::Rpc { status, .. } = &e else {
        panic!("not a handshake failure: {e}")
    };
    let mut chain = Vec::new();
    let mut source = std::error::Error::source(status);
    while let Some(s) = source {
        chain.push(format!("{s:?}"));
        source = s.source();
    }
    assert!(
        chain.iter().any(|s| s.contains("CertificateRequired")),
        "the handshake should fail for want of a client certificate: {e:?}"
    );
}

#[tokio::test]
async fn the_client_fails_over_to_a_live_replica() {
    let metrics = Metrics::new();
    let live = start(
        config(Auth::Disabled),
        service(&metrics, None),
        metrics.clone(),
    )
    .await;
    // A port with nothing behind it.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let client = PlannerClient::connect(ClientConfig::new(vec![
        dead.to_string(),
        live.running.grpc_addr.to_string(),
    ]))
    .await
    .expect("client");
    for _ in 0..6 {
        client
            .plan(
                &fixtures::snapshot(2),
                &CatalogChoice::Default,
                &PlanOptions::default(),
            )
            .await
            .expect("every call succeeds");
    }
    let text = scrape(&live).await;
    assert!(
        text.contains(r#"dovetail_planner_requests_total{method="Plan",code="Ok"} 6"#),
        "{text}"
    );
}

/// The README's grpcurl example body, as grpcurl would send it (proto3 JSON).
#[tokio::test]
async fn the_readme_plan_request_plans() {
    let metrics = Metrics::new();
    let svc = planner_service::api::PlannerService::new(
        Arc::new(|r: &str| planner::catalog::aws::builtin(r).map_err(|e| e.to_string())),
        metrics.clone(),
        planner_service::api::ServiceOptions::default(),
    );
    let server = start(config(Auth::Disabled), svc, metrics).await;
    let body = include_str!("fixtures/plan-request.json");
    let req: pb::PlanRequest = serde_json::from_str(body).expect("proto3 JSON");
    let mut raw = pb::planner_client::PlannerClient::new(channel(&server).await);
    let plan = raw.plan(req).await.expect("plans").into_inner();
    let summary = plan.summary.expect("summary");
    assert_eq!(summary.pending_pods, 3);
    assert_eq!(summary.scheduled_pods, 3, "{plan:?}");
    assert!(!plan.node_claims.is_empty());
}

/// Sends bytes as they are and reads the answer's bytes: a client that speaks garbage.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        buf: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut as _;
        buf.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        buf: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use prost::bytes::Buf as _;
        Ok(Some(buf.copy_to_bytes(buf.remaining()).to_vec()))
    }
}

#[tokio::test]
async fn an_undecodable_request_is_invalid_argument() {
    let metrics = Metrics::new();
    let server = start(config(Auth::Disabled), service(&metrics, None), metrics).await;
    let mut grpc = tonic::client::Grpc::new(channel(&server).await);
    grpc.ready().await.expect("ready");
    // Field 1 (snapshot, a message) sent with the varint wire type, then a truncated varint.
    let garbage = vec![0x08, 0xff, 0xff];
    let status = grpc
        .unary(
            tonic::Request::new(garbage),
            http::uri::PathAndQuery::from_static("/dovetail.v1.Planner/Plan"),
            RawCodec,
        )
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("undecodable"), "{status:?}");
}

#[tokio::test]
async fn an_undecodable_session_frame_ends_the_stream_with_invalid_argument() {
    let metrics = Metrics::new();
    let server = start(config(Auth::Disabled), service(&metrics, None), metrics).await;
    let mut grpc = tonic::client::Grpc::new(channel(&server).await);
    grpc.ready().await.expect("ready");
    let garbage = vec![0x08, 0xff, 0xff];
    let status = match grpc
        .streaming(
            tonic::Request::new(tokio_stream::iter(vec![garbage])),
            http::uri::PathAndQuery::from_static("/dovetail.v1.Planner/Session"),
            RawCodec,
        )
        .await
    {
        Err(status) => status,
        Ok(response) => {
            let mut stream = response.into_inner();
            match tokio::time::timeout(Duration::from_secs(10), stream.message()).await {
                Ok(Err(status)) => status,
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
    };
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("undecodable"), "{status:?}");
}

/// A Balanced NodePool with one m5.2xlarge (0.384/h) whose one pod fits a cheaper node: the
/// move saves most of the pool's cost for all of its disruption.
fn oversized_balanced_node() -> planner::model::ClusterSnapshot {
    use planner::model::{ConsolidationPolicy, Node, OwnerRef, Pod, PodPhase, Resources};
    let mut s = fixtures::snapshot(0);
    s.nodes.clear();
    s.node_claims.clear();
    s.node_pools[0].disruption.consolidation_policy = ConsolidationPolicy::Balanced;
    let it = fixtures::catalog()
        .instance_types
        .into_iter()
        .find(|t| t.name == "m5.2xlarge")
        .expect("m5.2xlarge");
    let mut node = Node {
        name: "big".into(),
        allocatable: it.allocatable(),
        capacity: it.capacity.clone(),
        labels: it.labels.clone(),
        ready: true,
        provider_id: Some("aws:///us-east-1a/i-0big".into()),
        creation_time: Some(1_700_000_000),
        ..Node::default()
    };
    for (k, v) in [
        (planner::labels::NODEPOOL, "default"),
        (planner::labels::ZONE, "us-east-1a"),
        (planner::labels::CAPACITY_TYPE, "on-demand"),
        (planner::labels::INITIALIZED, "true"),
        (planner::labels::HOSTNAME, "big"),
    ] {
        node.labels.insert(k.into(), v.into());
    }
    s.nodes.push(node);
    s.pods.push(Pod {
        namespace: "default".into(),
        name: "web-0".into(),
        uid: "web-0".into(),
        owner: Some(OwnerRef {
            kind: "ReplicaSet".into(),
            name: "web".into(),
            controller: true,
        }),
        requests: Resources::cpu_memory(500, 1 << 30),
        node_name: Some("big".into()),
        phase: PodPhase::Running,
        creation_time: Some(1_700_000_000),
        start_time: Some(1_700_000_000),
        ..Pod::default()
    });
    s
}

// kubernetes-sigs/karpenter v1.14 pkg/controllers/disruption/balanced.go ApproveCommand: the
// real planner behind the server counts the plan's approved single-node Balanced move in
// karpenter_consolidation_moves_total and observes its score in karpenter_consolidation_score.
#[tokio::test]
async fn plans_count_consolidation_moves_and_scores_by_karpenters_names() {
    let metrics = Metrics::new();
    let server = start(config(Auth::Disabled), service(&metrics, None), metrics).await;
    let client = PlannerClient::connect(ClientConfig::new(vec![
        server.running.grpc_addr.to_string(),
    ]))
    .await
    .expect("client");
    let snapshot = oversized_balanced_node();
    let options = PlanOptions {
        now: 1_700_100_000,
        ..PlanOptions::default()
    };
    let remote = client
        .plan(&snapshot, &CatalogChoice::Default, &options)
        .await
        .expect("plans");
    let expected = planner::plan(&snapshot, &fixtures::catalog(), &options);
    assert_eq!(remote, expected);
    assert_eq!(remote.consolidation_moves.len(), 1, "{remote:?}");
    let mv = &remote.consolidation_moves[0];
    assert_eq!(
        (mv.decision.as_str(), mv.nodes.as_slice()),
        ("approved", &["big".to_string()][..])
    );
    // The pool is the one node: the move's savings share over all of its disruption.
    let score = mv.node_pools[0].score;
    let want = remote.disruptions[0].savings_per_hour / 0.384;
    assert!((score - want).abs() < 1e-9 && score >= 0.5, "{mv:?}");

    let text = scrape(&server).await;
    for line in [
        r#"karpenter_consolidation_moves_total{decision="approved",nodepool="default",policy="Balanced"} 1"#,
        r#"karpenter_consolidation_score_count{decision="approved",nodepool="default",policy="Balanced"} 1"#,
        r#"karpenter_consolidation_score_bucket{le="0.5",decision="approved",nodepool="default",policy="Balanced"} 0"#,
        r#"karpenter_consolidation_score_bucket{le="1.0",decision="approved",nodepool="default",policy="Balanced"} 1"#,
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
}
