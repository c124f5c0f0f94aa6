//! Clients nobody here wrote: the official Python `kubernetes` client and `kubectl`.
//!
//! The Python test uses the interpreter in `DOVETAIL_PYTHON` (set by `scripts/test.sh`, which
//! installs the client with `scripts/python-env.sh`), else the venv that script creates. The
//! kubectl test uses `DOVETAIL_KUBECTL` (also set by `scripts/test.sh`; the same script installs
//! a kubectl binary into that venv), else the venv's, else `kubectl` on `PATH`. When a client is
//! missing the test fails, unless `DOVETAIL_ALLOW_MISSING` names it (then it skips with a notice).

mod support;

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::process::Command;

use support::{client, eventually, kubectl, missing, run_kubectl, start};

fn python() -> Option<PathBuf> {
    client("DOVETAIL_PYTHON", "python", false)
}

#[tokio::test]
async fn official_python_client_lists_watches_creates_patches_and_evicts() {
    let Some(py) = python() else {
        missing("Python client", "run scripts/python-env.sh");
        return;
    };
    let sim = start().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/client_smoke.py");
    let out = Command::new(&py)
        .arg(script)
        .arg(sim.api_url())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap_or_else(|e| panic!("running {}: {e}", py.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

#[tokio::test]
async fn kubectl_gets_and_applies() {
    let Some(kubectl) = kubectl() else {
        missing("kubectl", "set DOVETAIL_KUBECTL or put kubectl on PATH");
        return;
    };
    let sim = start().await;
    let server = sim.api_url().to_string();
    // A node from the simulated cloud, so there is something to get.
    let inst = cloud::CloudProvider::create(
        sim.cloud(),
        &cloud::LaunchRequest {
            client_token: "kubectl".into(),
            offerings: vec![cloud::OfferingKey {
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: cloud::CapacityType::OnDemand,
            }],
            tags: Default::default(),
            node_class: None,
            image_id: None,
            node: None,
        },
    )
    .await
    .unwrap();
    let client = sim.kube_client().unwrap();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    eventually(&sim, "the node", || async {
        nodes
            .get_opt(&inst.private_dns_name)
            .await
            .ok()?
            .map(|_| ())
    })
    .await;

    let (ok, out, err) =
        run_kubectl(&kubectl, &server, &["get", "nodes", "-o", "json"], None).await;
    assert!(ok, "kubectl get nodes failed: {err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        list["items"][0]["metadata"]["name"],
        json!(inst.private_dns_name)
    );

    let manifest = r#"
apiVersion: v1
kind: Pod
metadata:
  name: from-kubectl
  namespace: default
  labels: {app: cli}
spec:
  containers:
  - name: app
    image: nginx
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: cli-pool
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
"#;
    let (ok, out, err) =
        run_kubectl(&kubectl, &server, &["apply", "-f", "-"], Some(manifest)).await;
    assert!(ok, "kubectl apply failed:\n{out}\n{err}");
    // Apply again with a change: a patch of the live objects.
    let changed = manifest.replace("labels: {app: cli}", "labels: {app: cli, rev: two}");
    let (ok, out, err) =
        run_kubectl(&kubectl, &server, &["apply", "-f", "-"], Some(&changed)).await;
    assert!(ok, "second kubectl apply failed:\n{out}\n{err}");
    let (ok, out, err) = run_kubectl(
        &kubectl,
        &server,
        &[
            "get", "pods", "-n", "default", "-l", "app=cli", "-o", "json",
        ],
        None,
    )
    .await;
    assert!(ok, "kubectl get pods failed: {err}");
    let pods: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pods["items"][0]["metadata"]["labels"]["rev"], "two");
    let (ok, out, err) =
        run_kubectl(&kubectl, &server, &["get", "nodepools", "-o", "json"], None).await;
    assert!(ok, "kubectl get nodepools failed: {err}");
    let pools: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pools["items"][0]["metadata"]["name"], "cli-pool");
    // Server-side apply.
    let (ok, out, err) = run_kubectl(
        &kubectl,
        &server,
        &["apply", "--server-side", "-f", "-"],
        Some(&changed.replace("rev: two", "rev: three")),
    )
    .await;
    assert!(ok, "kubectl apply --server-side failed:\n{out}\n{err}");
    let (_, out, _) = run_kubectl(
        &kubectl,
        &server,
        &["get", "pod", "from-kubectl", "-n", "default", "-o", "json"],
        None,
    )
    .await;
    let pod: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pod["metadata"]["labels"]["rev"], "three");
    let (ok, _, err) = run_kubectl(
        &kubectl,
        &server,
        &[
            "delete",
            "pod",
            "from-kubectl",
            "-n",
            "default",
            "--wait=false",
        ],
        None,
    )
    .await;
    assert!(ok, "kubectl delete failed: {err}");
}
