//! Memory of the watcher's mirror on a synthetic cluster of 5,000 nodes and 100,000 pods (and
//! their DaemonSets, namespaces and one NodePool), fed object by object through the same
//! conversion the informers use, then one full snapshot encoded as the session would send it.
//!
//! Prints resident memory before and after filling the mirror, the peak (`VmHWM`) including
//! the snapshot, the snapshot's encoded size and the conversion and encode times. Asserts
//! nothing. `cargo bench -p watcher --bench memory [-- NODES PODS]`.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use prost::Message;
use proto::v1 as pb;
use serde_json::json;
use watcher::convert::{self, PodDisposition, PriorityClasses};
use watcher::mirror::Mirror;

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn node(i: usize) -> Node {
    let zone = ZONES[i % 3];
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("ip-10-{}-{}-{}.ec2.internal", i / 65536, (i / 256) % 256, i % 256),
            "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": format!("ip-10-0-{i}"),
                "node.kubernetes.io/instance-type": "m5.2xlarge",
                "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": zone,
                "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
                "karpenter.k8s.aws/instance-family": "m5", "karpenter.k8s.aws/instance-cpu": "8",
                "karpenter.k8s.aws/instance-memory": "32768", "karpenter.sh/initialized": "true",
                "karpenter.sh/registered": "true"
            },
            "annotations": {"karpenter.sh/nodepool-hash": "1234567890", "karpenter.sh/nodepool-hash-version": "v3"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {}}}}]
        },
        "spec": {"providerID": format!("aws:///{zone}/i-{i:017x}")},
        "status": {
            "capacity": {"cpu": "8", "memory": "32329264Ki", "pods": "58", "ephemeral-storage": "20959212Ki"},
            "allocatable": {"cpu": "7910m", "memory": "31312432Ki", "pods": "58", "ephemeral-storage": "18242267924"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
            "images": [{"names": ["public.ecr.aws/eks-distro/kubernetes/pause:3.9"], "sizeBytes": 300000}]
        }
    }))
    .expect("node")
}

fn pod(i: usize, nodes: usize) -> Pod {
    let app = format!("app-{}", i % 400);
    let bound = !i.is_multiple_of(20); // 5% pending
    let mut p = json!({
        "metadata": {
            "name": format!("{app}-7d9c8b6f5-{i:06}"),
            "namespace": format!("team-{}", i % 50),
            "uid": format!("10000000-0000-4000-8000-{i:012}"),
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {"app": app, "pod-template-hash": "7d9c8b6f5", "team": format!("team-{}", i % 50)},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T09:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-7d9c8b6f5"), "uid": "r", "controller": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]
        },
        "spec": {
            "containers": [
                {"name": "app", "image": "registry.example.com/app:1.2.3",
                 "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                 "ports": [{"containerPort": 8080}]},
                {"name": "sidecar", "image": "registry.example.com/proxy:1.0",
                 "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}
            ],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": app}}}],
            "priority": 0
        },
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    });
    if bound {
        p["spec"]["nodeName"] = json!(format!("ip-10-0-{}", i % nodes));
        p["status"] = json!({"phase": "Running", "startTime": "2026-11-30T10:01:00Z",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "image": "app", "imageID": "sha256:abc"}]});
    }
    serde_json::from_value(p).expect("pod")
}

#[allow(clippy::disallowed_methods)] // A bench measures wall time.
fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let nodes = args.first().copied().unwrap_or(5_000);
    let pods = args.get(1).copied().unwrap_or(100_000);
    let base = status_kb("VmRSS:");
    let mirror = Mirror::new();
    let classes = PriorityClasses::default();
    let t = Instant::now();
    for i in 0..nodes {
        let n = convert::node(&node(i)).expect("node converts");
        mirror.update(|s| s.upsert(pb::upsert::Object::Node(n)));
    }
    for i in 0..pods {
        if let PodDisposition::Keep(p) = convert::pod(&pod(i, nodes), &classes) {
            mirror.update(|s| s.upsert(pb::upsert::Object::Pod(*p)));
        }
    }
    let fill = t.elapsed();
    let filled = status_kb("VmRSS:");
    let (objects, pending) = {
        let s = mirror.lock();
        (s.len(), s.pending_pods())
    };
    let _ = mirror.lock().take_delta();
    let t = Instant::now();
    let snapshot = mirror.lock().snapshot();
    let update = pb::ClusterUpdate {
        sequence: 1,
        update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
            snapshot: Some(snapshot),
            ..Default::default()
        })),
    };
    let built = t.elapsed();
    let t = Instant::now();
    let bytes = update.encode_to_vec();
    let encode = t.elapsed();
    println!(
        "dovetail watcher memory bench: {nodes} nodes, {pods} pods ({pending} pending), {objects} objects mirrored"
    );
    println!(
        "  convert + mirror:      {:>8.2} s ({:.1} µs/object)",
        fill.as_secs_f64(),
        fill.as_secs_f64() * 1e6 / objects.max(1) as f64
    );
    println!(
        "  RSS before / after:    {:>8.1} MB / {:.1} MB (mirror ≈ {:.1} MB, {:.0} B/object)",
        mb(base),
        mb(filled),
        mb(filled.saturating_sub(base)),
        (filled.saturating_sub(base) * 1024) as f64 / objects.max(1) as f64
    );
    println!(
        "  snapshot build:        {:>8.1} ms",
        built.as_secs_f64() * 1e3
    );
    println!(
        "  snapshot encode:       {:>8.1} ms ({:.1} MB encoded)",
        encode.as_secs_f64() * 1e3,
        bytes.len() as f64 / 1_048_576.0
    );
    println!(
        "  peak RSS (VmHWM):      {:>8.1} MB",
        mb(status_kb("VmHWM:"))
    );
}
