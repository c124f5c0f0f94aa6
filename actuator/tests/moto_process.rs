//! The real `dovetail-actuator --cloud aws` process against moto_server, crashed between the
//! create call and the ledger write: exactly one EC2 instance per NodeClaim across SIGKILL.
//!
//! moto ignores `ClientToken` (a repeated CreateFleet launches again), so the exactly-once
//! shown here comes from the actuator's adopt-by-tag step (the restarted worker finds the
//! instance by its `karpenter.sh/nodeclaim` tag before creating). moto launches only the first
//! override of a fleet and never runs out of capacity, so one instance type and zone are
//! planned and capacity errors are not exercised. Skipped unless moto is found
//! (`DOVETAIL_MOTO_SERVER`, or `moto_server` on `PATH`); a missing moto fails unless `DOVETAIL_ALLOW_MISSING` names `moto_server`.

mod support;

use std::path::Path;
use std::time::Duration;

use actuator::ledger::ClaimState;
use cloud_aws::testing::{self, MotoServer, TEST_CLUSTER, TEST_K8S_VERSION, TEST_SSM_PREFIX};
use crds::{EC2NodeClass, NodePool};
use kube::Api;
use kube::api::PostParams;
use proto::v1 as pb;
use serde_json::json;
use support::TestDb;
use support::process::{Process, statuses, wait_all};
use tokio::process::Command;

const CLAIM: &str = "default-moto1";
const INSTANCE_TYPE: &str = "m5.large";

/// `dovetail-actuator --cloud aws` against moto, its cluster at `kubeconfig`.
async fn start(moto: &str, ledger: &str, kubeconfig: &Path, pause_at: Option<&str>) -> Process {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dovetail-actuator"));
    cmd.args([
        "--ledger",
        ledger,
        "--cloud",
        "aws",
        "--aws-endpoint",
        moto,
        "--aws-region",
        "us-east-1",
        "--aws-ssm-prefix",
        TEST_SSM_PREFIX,
        "--kubernetes-version",
        TEST_K8S_VERSION,
        "--cluster-name",
        TEST_CLUSTER,
        "--cluster-endpoint",
        "https://example.invalid",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "off",
        "--insecure-no-auth",
        "--lease",
        "1s",
        "--poll-interval",
        "50ms",
        "--drain-delay",
        "0",
    ])
    .arg("--kubeconfig")
    .arg(kubeconfig)
    .env("AWS_ACCESS_KEY_ID", "testing")
    .env("AWS_SECRET_ACCESS_KEY", "testing")
    .env_remove("AWS_SESSION_TOKEN")
    .env_remove("AWS_PROFILE");
    Process::spawn(cmd, pause_at).await
}

/// One launch of `m5.large` in `us-east-1a` (moto launches the first override only).
fn request() -> pb::SubmitRequest {
    let mut r = support::process::request("plan-moto", &[], &[CLAIM]);
    for c in &mut r.commands {
        if let Some(pb::command::Command::Launch(l)) = &mut c.command
            && let Some(claim) = &mut l.node_claim
        {
            claim.instance_types = vec![INSTANCE_TYPE.into()];
            claim.zones = vec!["us-east-1a".into()];
        }
    }
    r
}

#[tokio::test]
async fn moto_process_killed_after_create_leaves_exactly_one_ec2_instance() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let config = moto.config();
    let _world = testing::seed(&config).await;

    let sim = simulator::Simulation::start(simulator::Config {
        scheduler: false,
        ..simulator::Config::default()
    })
    .await
    .expect("simulation");
    let client = sim.kube_client().expect("client");
    let class: EC2NodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}],
            "role": "KarpenterNodeRole-test-cluster"
        }
    }))
    .expect("class");
    Api::<EC2NodeClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("create EC2NodeClass");
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }}}
    }))
    .expect("pool");
    Api::<NodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .expect("create NodePool");

    let db = TestDb::sqlite();
    let ledger = db.ledger().await;
    let dir = std::env::temp_dir().join(format!("dovetail-moto-process-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).expect("kubeconfig");

    let mut p = start(moto.url(), db.url(), &kubeconfig, Some("created")).await;
    let r = pb::actuator_client::ActuatorClient::connect(p.grpc.clone())
        .await
        .expect("connect")
        .submit(request())
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted"]);
    let paused = p.wait_line("DOVETAIL_PAUSED").await;
    assert!(paused.contains("step=created"), "{paused}");
    p.sigkill().await;
    let claim = ledger.claim(CLAIM).await.expect("read").expect("claim");
    assert_eq!(claim.state, ClaimState::Launching, "{claim:?}");
    assert!(claim.instance.is_none(), "{claim:?}");

    let provider = cloud_aws::Ec2Provider::new(config).await;
    let ec2 = provider.ec2();
    let before = testing::instances_tagged(ec2, cloud::TAG_NODECLAIM, CLAIM).await;
    assert_eq!(
        before.len(),
        1,
        "the killed process created one: {before:?}"
    );

    let p = start(moto.url(), db.url(), &kubeconfig, None).await;
    wait_all(&*ledger, 1, ClaimState::Launched).await;
    let ids = testing::instances_tagged(ec2, cloud::TAG_NODECLAIM, CLAIM).await;
    assert_eq!(ids, before, "exactly one instance, the adopted one");
    let described = ec2
        .describe_instances()
        .instance_ids(&ids[0])
        .send()
        .await
        .expect("DescribeInstances");
    let instance = &described.reservations()[0].instances()[0];
    assert_eq!(
        instance.instance_type().map(|t| t.as_str()),
        Some(INSTANCE_TYPE)
    );
    let tag = |k: &str| {
        instance
            .tags()
            .iter()
            .find(|t| t.key() == Some(k))
            .and_then(|t| t.value())
            .map(str::to_string)
    };
    assert_eq!(
        tag(&format!("{}{TEST_CLUSTER}", cloud::TAG_CLUSTER_PREFIX)).as_deref(),
        Some("owned")
    );
    let rec = ledger
        .claim(CLAIM)
        .await
        .expect("read")
        .expect("claim")
        .instance
        .expect("instance recorded");
    assert_eq!(rec.instance_id, ids[0]);
    assert_eq!(rec.instance_type, INSTANCE_TYPE);

    // The NodeClaim says where the instance sits on the network, as EC2 reports it (the
    // planner's SubnetDrift and SecurityGroupDrift read these).
    // moto leaves a fleet instance's top-level groups empty (it ignores the template's): then
    // nothing may be invented for them.
    let mut groups: Vec<String> = instance
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id().map(str::to_string))
        .collect();
    groups.sort();
    let subnet = instance.subnet_id().expect("subnet").to_string();
    let claims = Api::<crds::NodeClaim>::all(client.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let annotations = claims
            .get(CLAIM)
            .await
            .expect("NodeClaim")
            .metadata
            .annotations
            .unwrap_or_default();
        let want_groups = (!groups.is_empty()).then(|| groups.join(","));
        if annotations.get("dovetail.io/subnet-id") == Some(&subnet)
            && annotations.get("dovetail.io/security-group-ids") == want_groups.as_ref()
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "NodeClaim annotations {annotations:?}, want subnet {subnet} and groups {groups:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    drop(p);
    ledger.close().await;
    sim.shutdown().await;
    db.drop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
