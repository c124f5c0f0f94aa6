//! Times reading manifests into a snapshot (what every `dovetail plan` pays before planning):
//! a 10k-Pod YAML file shaped like `kubectl get pods -o yaml` output, the same as JSON, and a
//! file of Deployments that expand into 10k pods. Prints figures; asserts nothing.
//!
//! Run: `cargo bench -p planner-manifests --bench manifests_load`
//! With `DOVETAIL_BENCH_WRITE=DIR` it also writes the generated files there, to time
//! `dovetail plan -f DIR/pods-10k.yaml` end to end.

// A bench measures wall time; the clock ban is for the planner code, not for this.
#![allow(clippy::disallowed_methods)]

use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};

use planner_manifests::Reader;

const PODS: usize = 10_000;

/// One pending pod as a Deployment's pod looks in a `kubectl get -o yaml` dump (without
/// managedFields): labels, owner, affinity, spread, tolerations, two containers, status.
fn pod_doc(out: &mut String, i: usize) {
    let app = i % 50;
    let cpu = 100 + (i * 37) % 1400;
    let mem = 100 + (i * 53) % 3900;
    let _ = write!(
        out,
        r#"---
apiVersion: v1
kind: Pod
metadata:
  name: app-{app}-7d9f8c6b5-{i:05}
  namespace: team-{ns}
  uid: 6f1c2a8e-{i:04x}-4b1e-9a53-0c2d4e6f8a10
  creationTimestamp: "2026-11-30T07:00:00Z"
  labels:
    app: app-{app}
    pod-template-hash: 7d9f8c6b5
    app.kubernetes.io/part-of: shop
  annotations:
    prometheus.io/scrape: "true"
  ownerReferences:
  - apiVersion: apps/v1
    kind: ReplicaSet
    name: app-{app}-7d9f8c6b5
    uid: 11111111-2222-3333-4444-{app:012}
    controller: true
    blockOwnerDeletion: true
spec:
  priorityClassName: default-priority
  nodeSelector:
    kubernetes.io/os: linux
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        preference:
          matchExpressions:
          - key: karpenter.sh/capacity-type
            operator: In
            values: [spot]
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          labelSelector:
            matchLabels:
              app: app-{app}
          topologyKey: kubernetes.io/hostname
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        app: app-{app}
  tolerations:
  - key: node.kubernetes.io/not-ready
    operator: Exists
    effect: NoExecute
    tolerationSeconds: 300
  - key: node.kubernetes.io/unreachable
    operator: Exists
    effect: NoExecute
    tolerationSeconds: 300
  containers:
  - name: app
    image: registry.example.com/app-{app}:1.4.2
    ports:
    - containerPort: 8080
      protocol: TCP
    resources:
      requests:
        cpu: {cpu}m
        memory: {mem}Mi
      limits:
        memory: {mem}Mi
  - name: proxy
    image: envoyproxy/envoy:v1.31.0
    resources:
      requests:
        cpu: 50m
        memory: 64Mi
  volumes:
  - name: kube-api-access
    projected:
      sources:
      - serviceAccountToken:
          path: token
status:
  phase: Pending
  qosClass: Burstable
"#,
        ns = i % 10,
    );
}

fn deployment_doc(out: &mut String, i: usize, replicas: usize) {
    let cpu = 100 + (i * 37) % 1400;
    let mem = 100 + (i * 53) % 3900;
    let _ = write!(
        out,
        r#"---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{i}
  namespace: team-{ns}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: app-{i}}}
  template:
    metadata:
      labels: {{app: app-{i}}}
    spec:
      topologySpreadConstraints:
      - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {{matchLabels: {{app: app-{i}}}}}}}
      containers:
      - name: app
        image: registry.example.com/app-{i}:1.0
        resources:
          requests: {{cpu: {cpu}m, memory: {mem}Mi}}
"#,
        ns = i % 10,
    );
}

/// CPU time of this process (user + system) from /proc, in seconds; 0 where unavailable.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which is in parentheses): utime is the 12th, stime 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn time<T>(runs: u32, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let mut best = Duration::MAX;
    let mut total = Duration::ZERO;
    for _ in 0..runs {
        let start = Instant::now();
        black_box(f());
        let d = start.elapsed();
        best = best.min(d);
        total += d;
    }
    (best, total / runs)
}

fn load(text: &str, source: &str) -> usize {
    let mut b = Reader::new();
    b.add_document_text(text, source)
        .expect("generated input loads");
    b.finish().expect("valid").snapshot.pods.len()
}

fn report(what: &str, text: &str, source: &str) {
    let pods = load(text, source);
    let cpu0 = cpu_seconds();
    let (best, mean) = time(5, || load(text, source));
    let cpu = (cpu_seconds() - cpu0) / 5.0;
    println!(
        "{what}: {:.1} MB, {pods} pods: wall best {:.0} ms, mean {:.0} ms, CPU {:.0} ms per run over 5 runs ({:.0} pods/s, {:.0} MB/s)",
        text.len() as f64 / 1e6,
        best.as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3,
        cpu * 1e3,
        pods as f64 / best.as_secs_f64(),
        text.len() as f64 / 1e6 / best.as_secs_f64(),
    );
}

fn main() {
    let mut pods_yaml = String::new();
    for i in 0..PODS {
        pod_doc(&mut pods_yaml, i);
    }
    // The same pods as a JSON List (what `kubectl get pods -o json` prints).
    let items: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(&pods_yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("generated YAML parses"))
        .collect();
    let pods_json = serde_json::to_string_pretty(&serde_json::json!({
        "apiVersion": "v1", "kind": "List", "items": items
    }))
    .expect("JSON");
    let mut deployments = String::new();
    for i in 0..500 {
        deployment_doc(&mut deployments, i, PODS / 500);
    }

    report("10k Pod documents, YAML", &pods_yaml, "pods-10k.yaml");
    report("10k Pods in a List, JSON", &pods_json, "pods-10k.json");
    report(
        "500 Deployments x 20 replicas, YAML",
        &deployments,
        "deployments.yaml",
    );

    // Where the time goes for YAML: the YAML parser alone (into JSON values).
    let (best, _) = time(5, || {
        serde_yaml::Deserializer::from_str(&pods_yaml)
            .map(|d| <serde_json::Value as serde::Deserialize>::deserialize(d).expect("parses"))
            .collect::<Vec<_>>()
    });
    println!(
        "  of which YAML → JSON values alone: best {:.0} ms",
        best.as_secs_f64() * 1e3
    );

    // The floor for any serde_yaml-based reader: parsing without building anything.
    let (best, _) = time(5, || {
        serde_yaml::Deserializer::from_str(&pods_yaml)
            .map(|d| <serde::de::IgnoredAny as serde::Deserialize>::deserialize(d).is_ok())
            .collect::<Vec<_>>()
    });
    println!(
        "  of which YAML parsing alone (no values built): best {:.0} ms",
        best.as_secs_f64() * 1e3
    );

    if let Some(dir) = std::env::var_os("DOVETAIL_BENCH_WRITE") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("create output dir");
        std::fs::write(dir.join("pods-10k.yaml"), &pods_yaml).expect("write");
        std::fs::write(dir.join("pods-10k.json"), &pods_json).expect("write");
        std::fs::write(dir.join("deployments.yaml"), &deployments).expect("write");
        println!(
            "wrote pods-10k.yaml, pods-10k.json, deployments.yaml to {}",
            dir.display()
        );
    }
}
