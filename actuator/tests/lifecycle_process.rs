//! The `dovetail-actuator` process with a cluster (`--kubeconfig` of the simulator): a plan
//! submitted over gRPC shows up as a NodeClaim before its instance is recorded, the NodeClaim
//! becomes `Launched=True` with the instance's provider ID, and deleting it terminates the
//! claim and releases its finalizer. The process's cloud is its own `sim` stand-in (no kubelet
//! joins from it), so registration is covered by `tests/lifecycle.rs`.

mod support;

use std::process::Stdio;
use std::time::Duration;

use actuator::ledger::ClaimState;
use crds::{ConditionStatus, NodeClaim};
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use support::TestDb;
use support::process::{cloud_file, request, statuses};
use test_support::eventually;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// How long a condition on the binary's effects may take, and how often it is checked.
const WAIT: Duration = Duration::from_secs(30);
const EVERY: Duration = Duration::from_millis(50);

#[tokio::test]
async fn the_binary_creates_launches_and_releases_nodeclaims_in_the_cluster() {
    let (sim, client) = support::cluster(
        false,
        json!({"template": {"spec": support::template_spec()}}),
    )
    .await;
    let db = TestDb::sqlite();
    let ledger = db.ledger().await;
    let cloud = cloud_file(&db, "lifecycle");
    let kubeconfig = cloud.with_file_name("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).expect("kubeconfig");

    let mut child = Command::new(env!("CARGO_BIN_EXE_dovetail-actuator"))
        .args([
            "--ledger",
            db.url(),
            "--cloud",
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
            "--insecure-no-auth",
            "--poll-interval",
            "50ms",
            "--lifecycle-interval",
            "100ms",
            "--drain-delay",
            "0",
        ])
        .arg("--cloud-state")
        .arg(&cloud)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("DOVETAIL_TEST_PAUSE_AT")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn dovetail-actuator");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("started in time")
        .expect("read")
        .expect("a listening line");
    let grpc = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("grpc="))
        .map(|a| format!("http://{a}"))
        .expect("grpc address");
    let mut c = proto::v1::actuator_client::ActuatorClient::connect(grpc)
        .await
        .expect("connect");
    let r = c
        .submit(request("plan-1", &[], &["default-p1"]))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted"]);

    let ncs: Api<NodeClaim> = Api::all(client.clone());
    let nc = eventually("a Launched NodeClaim", WAIT, EVERY, || async {
        let nc = ncs.get_opt("default-p1").await.ok()??;
        let launched = nc
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Launched" && c.status == ConditionStatus::True);
        launched.then_some(nc)
    })
    .await;
    let claim = ledger
        .claim("default-p1")
        .await
        .expect("read")
        .expect("claim");
    assert_eq!(claim.state, ClaimState::Launched);
    assert_eq!(
        nc.status.and_then(|s| s.provider_id),
        claim.instance.map(|i| i.provider_id)
    );
    assert_eq!(
        nc.metadata.finalizers.unwrap_or_default(),
        ["karpenter.sh/termination"]
    );

    ncs.delete("default-p1", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the NodeClaim released", WAIT, EVERY, || async {
        ncs.get_opt("default-p1")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    // The final state is written after the finalizer is removed (termination's last step), so
    // the NodeClaim can be gone a moment before the ledger says Terminated.
    let state = eventually(
        "the claim Terminated in the ledger",
        WAIT,
        EVERY,
        || async {
            let claim = ledger.claim("default-p1").await.ok()??;
            (claim.state == ClaimState::Terminated).then_some(claim.state)
        },
    )
    .await;
    assert_eq!(state, ClaimState::Terminated);

    let pid = child.id().expect("pid").to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("kill")
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("stopped in time")
        .expect("status");
    assert!(status.success(), "{status}");
    ledger.close().await;
    sim.shutdown().await;
    db.drop().await;
}
