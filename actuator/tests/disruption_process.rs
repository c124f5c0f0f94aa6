//! SIGKILL of the real `dovetail-actuator` mid-drain: the process (ledger on Postgres, its `sim`
//! stand-in cloud in a file, the simulator as the cluster) launches a claim, the test plays the
//! kubelet (a Ready Node with the instance's provider ID, two pods on it), a user deletes the
//! NodeClaim, and a PodDisruptionBudget lets exactly one pod be evicted. With one pod evicted
//! and one held, the process is SIGKILLed. A new process on the same ledger resumes the drain
//! (no second start, no pod evicted twice), finishes it once the PDB goes, terminates the
//! instance and releases the NodeClaim.
//!
//! What this cannot show: the stand-in cloud has no kubelet, so the Node is the test's; pods
//! disappear at once when evicted (no graceful termination in the simulator).

mod support;

use std::time::Duration;

use actuator::ledger::{ClaimState, Ledger};
use actuator::lifecycle::drain;
use crds::NodeClaim;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::TestDb;
use support::process::{Process, cloud_file, get_metrics, request, statuses};
use test_support::eventually;

/// How long a condition on the binary's effects may take, and how often it is checked.
const WAIT: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_millis(50);

async fn drain_details(l: &dyn Ledger, claim: &str) -> Vec<String> {
    l.events(claim)
        .await
        .expect("events")
        .into_iter()
        .filter(|e| e.detail.starts_with("drain:"))
        .map(|e| e.detail)
        .collect()
}

#[tokio::test]
async fn sigkill_mid_drain_then_restart_resumes_the_drain_and_drains_no_node_twice() {
    let (sim, client) = support::cluster(
        false,
        json!({"template": {"spec": support::template_spec()}}),
    )
    .await;
    let db = TestDb::postgres().await;
    let ledger = db.ledger().await;
    let cloud = cloud_file(&db, "drain-kill");
    let kubeconfig = cloud.with_file_name("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).expect("kubeconfig");
    let kc = kubeconfig.to_string_lossy().to_string();
    let flags = [
        "--insecure-no-auth",
        "--kubeconfig",
        kc.as_str(),
        "--lifecycle-interval",
        "100ms",
    ];

    let p1 = Process::start_with(db.url(), &cloud, None, &flags).await;
    let r = p1
        .client()
        .await
        .submit(request("plan-1", &[], &["default-k1"]))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted"]);
    let pid = eventually("launched", WAIT, EVERY, || async {
        let c = ledger.claim("default-k1").await.ok()??;
        (c.state == ClaimState::Launched).then_some(())?;
        Some(c.instance?.provider_id)
    })
    .await;

    // The kubelet's part: a Ready Node for the instance, two pods on it.
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "ip-10-0-0-1.ec2.internal", "labels": {"kubernetes.io/os": "linux"}},
        "spec": {"providerID": pid}
    }))
    .expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    nodes
        .patch_status(
            "ip-10-0-0-1.ec2.internal",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}
            }})),
        )
        .await
        .expect("node status");
    eventually("initialized", WAIT, EVERY, || async {
        let c = ledger.claim("default-k1").await.ok()??;
        (c.state == ClaimState::Initialized).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["p1", "p2"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"nodeName": "ip-10-0-0-1.ec2.internal",
                     "containers": [{"name": "c", "image": "nginx"}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod");
    }
    let on_node = || async {
        pods.list(&ListParams::default().fields("spec.nodeName=ip-10-0-0-1.ec2.internal"))
            .await
            .expect("pods")
            .items
    };
    eventually("pods running", WAIT, EVERY, || async {
        let ps = on_node().await;
        (ps.len() == 2
            && ps
                .iter()
                .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")))
        .then_some(())
    })
    .await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("pdb");

    // A user deletes the NodeClaim: one pod may go, the other is held by the PDB.
    let ncs: Api<NodeClaim> = Api::all(client.clone());
    ncs.delete("default-k1", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("one pod evicted and one held", WAIT, EVERY, || async {
        let d = drain_details(ledger.as_ref(), "default-k1").await;
        let evicted = d.iter().filter(|x| x.starts_with(drain::EVICTED)).count();
        (evicted == 1 && on_node().await.len() == 1).then_some(())
    })
    .await;
    let m = eventually("a PDB refusal counted", WAIT, EVERY, || async {
        let m = get_metrics(&p1.metrics).await;
        m.contains(r#"dovetail_actuator_evictions_total{outcome="pdb_blocked"}"#)
            .then_some(m)
    })
    .await;
    assert!(
        m.contains(r#"dovetail_actuator_evictions_total{outcome="evicted"} 1"#),
        "{m}"
    );
    p1.sigkill().await;

    let before = drain_details(ledger.as_ref(), "default-k1").await;
    assert_eq!(
        ledger
            .claim("default-k1")
            .await
            .expect("read")
            .expect("claim")
            .state,
        ClaimState::Terminating
    );
    assert!(
        nodes
            .get_opt("ip-10-0-0-1.ec2.internal")
            .await
            .expect("get")
            .is_some()
    );
    let (_, live) = support::process::instances(&cloud);
    assert_eq!(live, 1);

    // A new process resumes: still held while the PDB stands, no new start, no re-eviction.
    let p2 = Process::start_with(db.url(), &cloud, None, &flags).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = drain_details(ledger.as_ref(), "default-k1").await;
    assert_eq!(during, before, "the restarted drain repeats nothing");
    assert_eq!(on_node().await.len(), 1);
    pdbs.delete("web", &DeleteParams::default())
        .await
        .expect("delete pdb");
    eventually("terminated", WAIT, EVERY, || async {
        let c = ledger.claim("default-k1").await.ok()??;
        (c.state == ClaimState::Terminated).then_some(())
    })
    .await;
    let d = drain_details(ledger.as_ref(), "default-k1").await;
    assert_eq!(
        d.iter().filter(|x| x.starts_with(drain::STARTED)).count(),
        1,
        "one drain: {d:#?}"
    );
    let mut evicted: Vec<&String> = d.iter().filter(|x| x.starts_with(drain::EVICTED)).collect();
    evicted.sort();
    assert_eq!(
        evicted,
        ["drain: evicted default/p1", "drain: evicted default/p2"],
        "each pod evicted once: {d:#?}"
    );
    assert_eq!(d.iter().filter(|x| x.starts_with(drain::DONE)).count(), 1);
    assert!(
        nodes
            .get_opt("ip-10-0-0-1.ec2.internal")
            .await
            .expect("get")
            .is_none()
    );
    assert!(ncs.get_opt("default-k1").await.expect("get").is_none());
    let all = actuator::standin::instances_in(&cloud).expect("cloud state");
    assert!(
        all.iter().all(|i| i.state != cloud::InstanceState::Running),
        "{all:?}"
    );
    let status = p2.sigterm().await;
    assert!(status.success(), "{status}");
    ledger.close().await;
    sim.shutdown().await;
    db.drop().await;
}
