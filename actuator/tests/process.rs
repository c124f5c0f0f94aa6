//! The real `dovetail-actuator` process: gRPC Submit (accepted, duplicate, stale), health and
//! metrics, graceful shutdown releasing every lease, and crash tests: the worker is paused at
//! each step of a launch (`DOVETAIL_TEST_PAUSE_AT`), the process SIGKILLed there and restarted,
//! and the cloud must then hold exactly one instance per claim and nothing else.
//!
//! The cloud is the actuator's `sim` stand-in persisted in a file (it outlives the killed
//! process) and ignoring client tokens as moto does, so only the ledger and the look-up by
//! NodeClaim tag stand between a crash and a second instance.

mod support;

use actuator::ledger::ClaimState;
use proto::v1 as pb;
use support::TestDb;
use support::process::{Process, cloud_file, instances, request, statuses, wait_all};

const CLAIMS: [&str; 3] = ["default-aaaaa", "default-bbbbb", "default-ccccc"];

/// Kills the actuator at `step` of the launch of three claims, restarts it, and checks that
/// each claim ends launched with exactly one instance and nothing leaked.
async fn crash_at(db: TestDb, step: &str) {
    let ledger = db.ledger().await;
    let cloud = cloud_file(&db, step);
    let mut p = Process::start(db.url(), &cloud, Some(step)).await;
    let r = p
        .client()
        .await
        .submit(request("plan-1", &[], &CLAIMS))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted"; 3]);
    let paused = p.wait_line("DOVETAIL_PAUSED").await;
    assert!(paused.contains(&format!("step={step}")), "{paused}");
    p.sigkill().await;

    let claims = ledger.claims().await.expect("claims");
    let expected_state = match step {
        "requested" => ClaimState::Requested,
        "launching" | "created" => ClaimState::Launching,
        _ => ClaimState::Launched,
    };
    assert!(
        claims.iter().any(|c| c.state == expected_state),
        "killed at {step}: {claims:?}"
    );

    let p = Process::start(db.url(), &cloud, None).await;
    wait_all(&*ledger, 3, ClaimState::Launched).await;
    let (per_claim, total) = instances(&cloud);
    assert_eq!(total, 3, "no leaked instance: {per_claim:?}");
    for c in CLAIMS {
        assert_eq!(per_claim.get(c), Some(&1), "{c}: {per_claim:?}");
        let rec = ledger.claim(c).await.expect("read").expect("claim");
        assert!(rec.instance.is_some(), "{rec:?}");
    }
    // The plan re-sent after the restart launches nothing.
    let again = p
        .client()
        .await
        .submit(request("plan-1", &[], &CLAIMS))
        .await
        .expect("resubmit")
        .into_inner();
    assert_eq!(statuses(&again), ["Duplicate"; 3]);
    assert_eq!(p.sigterm().await.code(), Some(0));
    assert_eq!(instances(&cloud).1, 3);
    let _ = std::fs::remove_dir_all(cloud.parent().expect("dir"));
    ledger.close().await;
    db.drop().await;
}

#[tokio::test]
async fn crash_after_the_claims_were_requested() {
    crash_at(TestDb::sqlite(), "requested").await;
}

#[tokio::test]
async fn crash_after_launching_was_written() {
    crash_at(TestDb::sqlite(), "launching").await;
}

#[tokio::test]
async fn crash_after_the_create_call_returned() {
    crash_at(TestDb::sqlite(), "created").await;
}

#[tokio::test]
async fn crash_after_launched_was_written() {
    crash_at(TestDb::sqlite(), "launched").await;
}

#[tokio::test]
async fn crash_after_the_create_call_returned_postgres() {
    crash_at(TestDb::postgres().await, "created").await;
}

#[tokio::test]
async fn submit_over_grpc_dedupes_refuses_stale_plans_and_shuts_down_cleanly() {
    let db = TestDb::postgres().await;
    let ledger = db.ledger().await;
    let cloud = cloud_file(&db, "api");
    let p = Process::start(db.url(), &cloud, None).await;

    let channel = tonic::transport::Endpoint::from_shared(p.grpc.clone())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let h = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "dovetail.v1.Actuator".into(),
        })
        .await
        .expect("health")
        .into_inner();
    assert_eq!(
        h.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    let mut c = p.client().await;
    let r = c
        .submit(request("plan-1", &[], &["a-1", "a-2"]))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted", "Accepted"]);
    // A plan that did not see a-1 and a-2 in flight must not launch.
    let stale = c
        .submit(request("plan-2", &[], &["b-1"]))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&stale), ["Rejected"]);
    assert!(stale.results[0].message.contains("stale plan"), "{stale:?}");
    // A plan that saw them may launch; a re-planned identical decision is a duplicate.
    let fresh = c
        .submit(request("plan-3", &["a-1", "a-2"], &["a-2", "b-1"]))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&fresh), ["Duplicate", "Accepted"]);
    // Bad input names the field and records nothing.
    let mut bad = request("plan-4", &["a-1", "a-2", "b-1"], &["c-1"]);
    if let Some(pb::command::Command::Launch(l)) = &mut bad.commands[0].command {
        l.node_claim.as_mut().expect("claim").zones.clear();
    }
    let e = c.submit(bad).await.expect_err("invalid");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message()
            .starts_with("commands[0].launch.node_claim.zones"),
        "{e:?}"
    );

    wait_all(&*ledger, 3, ClaimState::Launched).await;
    assert_eq!(instances(&cloud).1, 3);
    let text = support::process::get_metrics(&p.metrics).await;
    assert!(
        text.contains("dovetail_actuator_launches_total 3"),
        "{text}"
    );
    assert!(
        text.contains(r#"dovetail_actuator_commands_total{status="Rejected"} 1"#),
        "{text}"
    );
    // Three submissions were recorded; the invalid one was refused before the ledger.
    assert!(
        text.contains("dovetail_actuator_submit_duration_seconds_count 3"),
        "{text}"
    );

    assert_eq!(p.sigterm().await.code(), Some(0));
    let leased: Vec<_> = ledger
        .claims()
        .await
        .expect("claims")
        .into_iter()
        .filter(|c| c.lease_owner.is_some())
        .collect();
    assert!(
        leased.is_empty(),
        "graceful shutdown releases leases: {leased:?}"
    );
    let _ = std::fs::remove_dir_all(cloud.parent().expect("dir"));
    ledger.close().await;
    db.drop().await;
}

#[tokio::test]
async fn bad_configuration_exits_64_naming_the_setting() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dovetail-actuator"))
        .args(["--cloud", "sim", "--insecure-no-auth"])
        .env_remove("DOVETAIL_LEDGER")
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--ledger (or DOVETAIL_LEDGER) is required"),
        "{err}"
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dovetail-actuator"))
        .args(["--ledger", "sqlite:///nonexistent/x.db", "--cloud", "sim"])
        .env("DOVETAIL_LEASE", "forever")
        .env("DOVETAIL_INSECURE_NO_AUTH", "true")
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("DOVETAIL_LEASE: \"forever\" is invalid"),
        "{err}"
    );
    // No --kubeconfig and no cluster to infer one from: said at start, not found out later.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dovetail-actuator"))
        .args(["--ledger", "sqlite:///nonexistent/x.db", "--cloud", "sim"])
        .args(["--insecure-no-auth"])
        .env_remove("DOVETAIL_KUBECONFIG")
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", "/nonexistent")
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--kubeconfig (or DOVETAIL_KUBECONFIG) is unset and there is no cluster"),
        "{err}"
    );
}

#[tokio::test]
async fn submit_requires_the_bearer_token_when_one_is_set() {
    let db = TestDb::sqlite();
    let cloud = cloud_file(&db, "auth");
    let p = Process::start_with(db.url(), &cloud, None, &["--auth-token", "s3cret"]).await;
    let mut c = p.client().await;
    let e = c
        .submit(request("plan-1", &[], &["x-1"]))
        .await
        .expect_err("no token");
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    let mut req = tonic::Request::new(request("plan-1", &[], &["x-1"]));
    req.metadata_mut()
        .insert("authorization", "Bearer s3cret".parse().expect("header"));
    let r = c.submit(req).await.expect("with token").into_inner();
    assert_eq!(statuses(&r), ["Accepted"]);
    assert_eq!(p.sigterm().await.code(), Some(0));
    let _ = std::fs::remove_dir_all(cloud.parent().expect("dir"));
    db.drop().await;
}
