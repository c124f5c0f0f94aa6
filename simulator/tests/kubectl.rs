//! The simulated cluster answers `kubectl` as a real one does: `kubectl apply` validates
//! (through `/openapi/v3` and server-side field validation) without `--validate=false`, and
//! `kubectl get` prints the API server's Table columns.
//!
//! kubectl is found as in `foreign_clients.rs` (`DOVETAIL_KUBECTL`, set by `scripts/test.sh`,
//! which installs it); without it the tests fail (unless `DOVETAIL_ALLOW_MISSING` names kubectl: then they skip).

mod support;

use std::path::PathBuf;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use support::{eventually, kubectl, run_kubectl, start};

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        ports: [{containerPort: 80}]
        env: [{name: MODE, value: demo}]
        resources: {requests: {cpu: 100m, memory: 64Mi}}
      - name: sidecar
        image: busybox
        resources: {requests: {cpu: 10m, memory: 16Mi}}
"#;

const NODEPOOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
      expireAfter: 720h
  limits: {cpu: "100"}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
  weight: 10
"#;

/// kubectl and the simulator's URL, or `None` (with a notice) when kubectl is missing.
async fn setup() -> Option<(PathBuf, simulator::Simulation, String)> {
    let Some(k) = kubectl() else {
        support::missing("kubectl", "set DOVETAIL_KUBECTL or put kubectl on PATH");
        return None;
    };
    let sim = start().await;
    let url = sim.api_url().to_string();
    Some((k, sim, url))
}

/// The whitespace-separated words of the line of `out` starting with `first`.
fn line<'a>(out: &'a str, first: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.starts_with(first))
        .unwrap_or_else(|| panic!("no line starting with {first:?} in:\n{out}"))
        .split_whitespace()
        .collect()
}

/// The column headers of kubectl's table output (its first line), split on runs of 2+ spaces
/// so that `NOMINATED NODE` stays one header.
fn headers(out: &str) -> Vec<String> {
    out.lines()
        .next()
        .unwrap_or_default()
        .split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::test]
async fn kubectl_apply_validates_against_the_served_schemas() {
    let Some((k, sim, url)) = setup().await else {
        return;
    };
    let manifest = format!("{DEPLOYMENT}---{NODEPOOL}");
    let (ok, out, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(&manifest)).await;
    assert!(ok, "kubectl apply failed:\n{out}\n{err}");
    assert!(out.contains("deployment.apps/web created"), "{out}");
    assert!(
        out.contains("nodepool.karpenter.sh/general created"),
        "{out}"
    );
    assert!(!err.contains("warning"), "{err}");

    // A second apply patches by strategic merge with the served patch keys: the changed
    // container is merged by name, the other kept, no fallback warning.
    let changed = DEPLOYMENT.replace("image: nginx:1.27", "image: nginx:1.28");
    let (ok, out, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(&changed)).await;
    assert!(ok, "second kubectl apply failed:\n{out}\n{err}");
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    assert!(!err.contains("warning"), "{err}");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(sim.kube_client().unwrap(), "default");
    let live = deployments.get("web").await.unwrap();
    let containers = live.spec.unwrap().template.spec.unwrap().containers;
    let images: Vec<_> = containers
        .iter()
        .map(|c| c.image.clone().unwrap_or_default())
        .collect();
    assert_eq!(images, ["nginx:1.28", "busybox"]);

    // Unknown fields fail the request, named by their path.
    let bad = DEPLOYMENT.replace("replicas: 2", "replicas: 2\n  replica: 3");
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &["apply", "--validate=strict", "-f", "-"],
        Some(&bad),
    )
    .await;
    assert!(!ok, "an unknown field was accepted:\n{out}");
    assert!(err.contains(r#"unknown field "spec.replica""#), "{err}");
    let bad_container = DEPLOYMENT.replace("web", "other").replace(
        "image: busybox",
        "image: busybox\n        imagePullPolicyy: Always",
    );
    let (ok, _, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(&bad_container)).await;
    assert!(!ok, "an unknown container field was accepted");
    assert!(
        err.contains(r#"unknown field "spec.template.spec.containers[1].imagePullPolicyy""#),
        "{err}"
    );
    assert!(
        deployments.get_opt("other").await.unwrap().is_none(),
        "a rejected create stores nothing"
    );
    // The CRD schemas from crate `crds` check custom resources the same way.
    let bad_pool = NODEPOOL.replace("weight: 10", "weight: 10\n  wieght: 1");
    let (ok, _, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(&bad_pool)).await;
    assert!(!ok, "an unknown NodePool field was accepted");
    assert!(err.contains(r#"unknown field "spec.wieght""#), "{err}");
    // With --validate=warn the object is stored and kubectl prints the server's warning.
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &["apply", "--validate=warn", "-f", "-"],
        Some(&bad_pool),
    )
    .await;
    assert!(ok, "--validate=warn failed:\n{out}\n{err}");
    assert!(
        err.contains(r#"unknown field \"spec.wieght\""#)
            || err.contains(r#"unknown field "spec.wieght""#),
        "{err}"
    );

    // kubectl explain reads the same documents.
    let (ok, out, err) = run_kubectl(&k, &url, &["explain", "nodepool.spec.weight"], None).await;
    assert!(ok, "kubectl explain failed: {err}");
    assert!(out.contains("FIELD: weight <integer>"), "{out}");
}

#[tokio::test]
async fn kubectl_get_prints_the_api_servers_columns() {
    let Some((k, sim, url)) = setup().await else {
        return;
    };
    let inst = cloud::CloudProvider::create(
        sim.cloud(),
        &cloud::LaunchRequest {
            client_token: "kubectl-get".into(),
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
    let node = inst.private_dns_name.clone();
    let (ok, out, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(DEPLOYMENT)).await;
    assert!(ok, "kubectl apply failed:\n{out}\n{err}");
    let claim = format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: general-abc12
  labels:
    karpenter.sh/nodepool: general
    node.kubernetes.io/instance-type: m5.large
    karpenter.sh/capacity-type: on-demand
    topology.kubernetes.io/zone: us-east-1a
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements:
  - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
---{NODEPOOL}"#
    );
    let (ok, out, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(&claim)).await;
    assert!(ok, "kubectl apply failed:\n{out}\n{err}");
    let claims: Api<DynamicObject> = Api::all_with(
        sim.kube_client().unwrap(),
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
            "nodeclaims",
        ),
    );
    let status = json!({"status": {"nodeName": node, "providerID": inst.provider_id.to_string(),
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    claims
        .patch_status(
            "general-abc12",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();

    // Wait until both pods run on the node.
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(sim.kube_client().unwrap(), "default");
    eventually(&sim, "both pods running", || async {
        let list = pods.list(&Default::default()).await.ok()?;
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 2).then_some(())
    })
    .await;

    let get = |args: &'static [&'static str]| {
        let (k, url) = (k.clone(), url.clone());
        async move {
            let (ok, out, err) = run_kubectl(&k, &url, args, None).await;
            assert!(ok, "kubectl {args:?} failed: {err}");
            assert!(!err.contains("warning"), "{err}");
            out
        }
    };

    let out = get(&["get", "pods"]).await;
    assert_eq!(
        headers(&out),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    let row = line(&out, "web-");
    assert_eq!(row[1..4], ["2/2", "Running", "0"], "{out}");

    let out = get(&["get", "pods", "-o", "wide"]).await;
    assert_eq!(
        headers(&out),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ]
    );
    let row = line(&out, "web-");
    assert_eq!(
        row[5..],
        [inst.private_ip.as_str(), node.as_str(), "<none>", "<none>"],
        "{out}"
    );

    let out = get(&["get", "pods", "-A"]).await;
    assert_eq!(headers(&out)[..2], ["NAMESPACE", "NAME"]);
    assert_eq!(line(&out, "default")[2], "2/2", "{out}");

    let out = get(&["get", "nodes"]).await;
    assert_eq!(headers(&out), ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    let row = line(&out, &node);
    assert_eq!(row[1..3], ["Ready", "<none>"], "{out}");
    assert_eq!(row[4], "v1.33.0-dovetail-simulator", "{out}");

    let out = get(&["get", "nodes", "-o", "wide"]).await;
    assert_eq!(
        headers(&out),
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ]
    );
    let row = out.lines().nth(1).unwrap_or_default().to_string();
    for want in [
        inst.private_ip.as_str(),
        "<none>",
        "Amazon Linux 2023 (simulated)",
        "6.1.0",
        "containerd://1.7.0",
    ] {
        assert!(row.contains(want), "{want:?} missing from {row:?}");
    }

    let out = get(&["get", "deployments"]).await;
    assert_eq!(
        headers(&out),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    );
    assert_eq!(line(&out, "web")[1..4], ["2/2", "2", "2"], "{out}");

    let out = get(&["get", "nodepools"]).await;
    assert_eq!(
        headers(&out),
        ["NAME", "NODECLASS", "NODES", "READY", "AGE"]
    );
    assert_eq!(line(&out, "general")[1], "default", "{out}");
    let out = get(&["get", "nodepools", "-o", "wide"]).await;
    assert!(headers(&out).contains(&"WEIGHT".to_string()), "{out}");
    assert!(line(&out, "general").contains(&"10"), "{out}");

    let out = get(&["get", "nodeclaims"]).await;
    assert_eq!(
        headers(&out),
        ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    );
    assert_eq!(
        line(&out, "general-abc12")[1..6],
        ["m5.large", "on-demand", "us-east-1a", node.as_str(), "True"],
        "{out}"
    );

    // Kinds without a printer of their own: NAME and AGE.
    let out = get(&["get", "namespaces"]).await;
    assert_eq!(headers(&out), ["NAME", "AGE"]);
    assert!(out.contains("kube-system"), "{out}");

    // One object by name, and -o json still returns the object itself.
    let out = get(&["get", "nodeclaim", "general-abc12"]).await;
    assert_eq!(out.lines().count(), 2, "{out}");
    let out = get(&["get", "deployment", "web", "-o", "json"]).await;
    let obj: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(obj["kind"], "Deployment");
}

#[tokio::test]
async fn kubectl_get_watch_prints_rows_from_table_watch_events() {
    use tokio::io::AsyncBufReadExt;

    let Some((k, sim, url)) = setup().await else {
        return;
    };
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(sim.kube_client().unwrap(), "default");
    let create = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let pod = serde_json::from_value(support::pod_json(name, json!({}), "10m")).unwrap();
            pods.create(&Default::default(), &pod).await.unwrap();
        }
    };
    create("listed").await;
    let mut child = tokio::process::Command::new(&k)
        .arg(format!("--server={url}"))
        .args(["--kubeconfig=/dev/null", "get", "pods", "--watch"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl starts");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = async || {
        lines
            .next_line()
            .await
            .unwrap()
            .expect("kubectl keeps printing")
    };
    // The list: the header and the pod that exists.
    assert_eq!(
        headers(&next().await),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    assert!(next().await.starts_with("listed"));
    // kubectl watches from the list's resourceVersion, so a pod created now arrives as a watch
    // event, which carries a one-row Table with the same columns.
    create("watched").await;
    loop {
        let l = next().await;
        if l.starts_with("watched") {
            let cells: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cells[1..4], ["0/1", "Pending", "0"], "{l:?}");
            break;
        }
    }
    child.kill().await.unwrap();
}

/// `kubectl scale nodepool` works on a static NodePool (Karpenter v1.14's CRD declares the
/// scale subresource on `.spec.replicas` / `.status.nodes`) and is refused on a dynamic one,
/// whose CRD rule forbids turning it static.
#[tokio::test]
async fn kubectl_scale_nodepool_sets_a_static_pools_replicas() {
    let Some((k, sim, url)) = setup().await else {
        return;
    };
    let fixed = NODEPOOL
        .replace("name: general", "name: fixed")
        .replace("  limits: {cpu: \"100\"}\n", "  replicas: 2\n")
        .replace("  weight: 10\n", "");
    let manifest = format!("{NODEPOOL}---{fixed}");
    let (ok, out, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(&manifest)).await;
    assert!(ok, "kubectl apply failed:\n{out}\n{err}");

    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &["scale", "nodepool", "fixed", "--replicas=5"],
        None,
    )
    .await;
    assert!(ok, "kubectl scale failed:\n{out}\n{err}");
    assert!(out.contains("nodepool.karpenter.sh/fixed scaled"), "{out}");
    let pools: Api<DynamicObject> = Api::all_with(
        sim.kube_client().expect("client"),
        &ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "karpenter.sh",
            "v1",
            "NodePool",
        )),
    );
    let got = pools.get("fixed").await.expect("the NodePool");
    assert_eq!(got.data["spec"]["replicas"], json!(5));

    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &["scale", "nodepool", "general", "--replicas=3"],
        None,
    )
    .await;
    assert!(!ok, "a dynamic NodePool was scaled:\n{out}");
    assert!(
        err.contains("Cannot transition NodePool between static (replicas set) and dynamic"),
        "{err}"
    );
}

/// dovetail writes `events.k8s.io/v1` Events (kube-rs's `Recorder`, as the watcher does); a real
/// API server keeps one Event store under both groups, so `kubectl describe pod` and `kubectl
/// get events` (which read `v1` Events) show them (Kubernetes'
/// `pkg/apis/events/v1/conversion.go`).
#[tokio::test]
async fn kubectl_describe_pod_and_get_events_show_events_k8s_io_events() {
    use k8s_openapi::api::core::v1::{ObjectReference, Pod};
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let Some((k, sim, url)) = setup().await else {
        return;
    };
    let client = sim.kube_client().expect("client");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "pending-1", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}],
                 "nodeSelector": {"no": "such-node"}}
    }))
    .expect("pod");
    let pod = Api::<Pod>::namespaced(client.clone(), "default")
        .create(&Default::default(), &pod)
        .await
        .expect("create pod");
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: "dovetail-watcher".into(),
            instance: Some("watcher-0".into()),
        },
    );
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some("default".into()),
        name: Some("pending-1".into()),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    };
    recorder
        .publish(
            &Event {
                type_: EventType::Normal,
                reason: "Nominated".into(),
                note: Some("Pod should schedule on: nodeclaim/default-x2b4k".into()),
                action: "Scheduling".into(),
                secondary: None,
            },
            &reference,
        )
        .await
        .expect("publish");
    let (ok, out, err) = run_kubectl(&k, &url, &["describe", "pod", "pending-1"], None).await;
    assert!(ok, "kubectl describe failed:\n{out}\n{err}");
    let events = out.split("Events:").nth(1).unwrap_or_default();
    assert!(
        events.contains("Nominated")
            && events.contains("dovetail-watcher")
            && events.contains("Pod should schedule on: nodeclaim/default-x2b4k"),
        "{out}"
    );
    let (ok, out, err) = run_kubectl(&k, &url, &["get", "events", "-o", "wide"], None).await;
    assert!(ok, "kubectl get events failed:\n{out}\n{err}");
    assert!(
        out.contains("pod/pending-1") && out.contains("Nominated"),
        "{out}"
    );
    sim.shutdown().await;
}

/// Dynamic Resource Allocation objects (`resource.k8s.io/v1`, Kubernetes 1.34) as a DRA driver's
/// user applies them: a DeviceClass, a ResourceClaim, a ResourceClaimTemplate, a driver's
/// ResourceSlice and a pod that references a claim; `kubectl get` lists them and the pod keeps
/// its `resourceClaims` (what dovetail's planner reads for Karpenter's `ignoreDRARequests`).
#[tokio::test]
async fn kubectl_applies_and_gets_dynamic_resource_allocation_objects() {
    let Some((k, sim, url)) = setup().await else {
        return;
    };
    let manifest = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: single-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 1}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-template, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu.example.com}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      model: {string: a10g}
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: default}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimName: single-gpu}
  containers:
  - name: cuda
    image: nvidia/cuda
    resources:
      requests: {cpu: "1"}
      claims:
      - name: gpu
"#;
    let (ok, out, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(manifest)).await;
    assert!(ok, "kubectl apply failed:\n{out}\n{err}");
    for created in [
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "resourceclaim.resource.k8s.io/single-gpu created",
        "resourceclaimtemplate.resource.k8s.io/gpu-template created",
        "resourceslice.resource.k8s.io/node-1-gpu.example.com created",
        "pod/train created",
    ] {
        assert!(out.contains(created), "{created}:\n{out}");
    }
    assert!(!err.contains("warning"), "{err}");
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &[
            "get",
            "resourceclaims,deviceclasses,resourceslices",
            "-o",
            "name",
        ],
        None,
    )
    .await;
    assert!(ok, "kubectl get failed:\n{out}\n{err}");
    for name in [
        "resourceclaim.resource.k8s.io/single-gpu",
        "deviceclass.resource.k8s.io/gpu.example.com",
        "resourceslice.resource.k8s.io/node-1-gpu.example.com",
    ] {
        assert!(out.contains(name), "{name}:\n{out}");
    }
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &[
            "get",
            "pod",
            "train",
            "-o",
            "jsonpath={.spec.resourceClaims[0].resourceClaimName}/{.spec.containers[0].resources.claims[0].name}",
        ],
        None,
    )
    .await;
    assert!(ok, "kubectl get pod failed:\n{out}\n{err}");
    assert_eq!(out, "single-gpu/gpu");
    // A misspelt field of a DRA object is refused, named by its path.
    let bad = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: typo, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClasName: gpu.example.com}
"#;
    let (ok, _, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(bad)).await;
    assert!(!ok, "an unknown ResourceClaim field was accepted");
    assert!(
        err.contains(r#"unknown field "spec.devices.requests[0].exactly.deviceClasName""#),
        "{err}"
    );
    sim.shutdown().await;
}
