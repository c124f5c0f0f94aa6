//! The same Kubernetes objects through both doors: as the watcher receives them from the API
//! (typed k8s-openapi objects and Karpenter objects as JSON, converted by `watcher::convert`,
//! the shared `k8s-reader`, then decoded by `planner-wire` as a planner decodes a Session) and
//! as `dovetail plan` reads them from a manifest (`planner-manifests`: text → the same typed
//! objects → `k8s-reader` → `planner-wire` → the model's validation). Both share the
//! conversion; what this compares is what each door adds around it (the CLI's parsing,
//! typing, defaulting and error mapping; the watcher's choice of which pods to mirror), which
//! must give the planner the same model and refuse the same objects.
//!
//! The objects are written as the API server returns them: what admission and controllers fill
//! in is present (a claim's `storageClassName`, a NodeClaim's `expireAfter`, a pending pod's
//! `PodScheduled=False` condition), since only the manifest door completes what they would.

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::scheduling::v1 as scheduling;
use k8s_openapi::api::storage::v1 as storage;
use planner::model::ClusterSnapshot;
use proto::v1 as pb;
use serde::Deserialize;
use serde_json::Value;
use watcher::convert::{self, PodDisposition, PriorityClasses};

const OBJECTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop, uid: ns-1, labels: {team: web}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high, uid: pc-1}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: everyday, uid: pc-2}
value: 10
globalDefault: true
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-5.ec2.internal
  uid: node-1
  creationTimestamp: "2026-11-01T00:00:00Z"
  labels:
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-east-1a
    karpenter.sh/capacity-type: on-demand
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: ip-10-0-1-5
  annotations: {karpenter.sh/nodepool-hash: "123"}
spec:
  providerID: aws:///us-east-1a/i-0123
  taints: [{key: dedicated, value: web, effect: NoSchedule}]
status:
  capacity: {cpu: "2", memory: 8Gi, pods: "29", ephemeral-storage: 20Gi}
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29", ephemeral-storage: 18Gi}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: v1
kind: Pod
metadata:
  name: api-0
  namespace: shop
  uid: pod-1
  labels: {app: api}
  annotations: {karpenter.sh/do-not-disrupt: "true", controller.kubernetes.io/pod-deletion-cost: "5"}
  creationTimestamp: "2026-11-02T00:00:00Z"
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: api-7f9, uid: rs-1, controller: true}]
spec:
  nodeName: ip-10-0-1-5.ec2.internal
  priority: 1000
  priorityClassName: high
  tolerations: [{key: dedicated, operator: Equal, value: web, effect: NoSchedule}]
  containers:
    - name: api
      resources: {requests: {cpu: 500m, memory: 1Gi}}
      ports: [{containerPort: 8080, hostPort: 8080}]
status:
  phase: Running
  startTime: "2026-11-02T00:00:05Z"
---
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  namespace: shop
  uid: pod-2
  labels: {app: web}
  ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: web, uid: ss-1, controller: true}]
spec:
  priority: 10
  containers:
    - name: web
      resources: {requests: {cpu: 250m, memory: 512Mi}, limits: {nvidia.com/gpu: "1"}}
    - name: log
      resources: {limits: {cpu: 100m, memory: 64Mi}}
  initContainers:
    - name: proxy
      restartPolicy: Always
      resources: {requests: {cpu: 50m}}
    - name: migrate
      resources: {requests: {cpu: "1", memory: 256Mi}}
  overhead: {cpu: 10m}
  nodeSelector: {kubernetes.io/arch: amd64}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 10
          preference:
            matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {app: web}}
          topologyKey: kubernetes.io/hostname
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 50
          podAffinityTerm:
            labelSelector:
              matchExpressions: [{key: app, operator: In, values: [web]}]
            namespaceSelector: {matchLabels: {team: web}}
            topologyKey: topology.kubernetes.io/zone
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
      labelSelector: {matchLabels: {app: web}}
      minDomains: 2
    - maxSkew: 2
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: ScheduleAnyway
      labelSelector: {matchLabels: {app: web}}
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: data-web-0}
    - name: scratch
      ephemeral:
        volumeClaimTemplate:
          spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logs, namespace: kube-system, uid: ds-1}
spec:
  selector: {matchLabels: {app: logs}}
  template:
    metadata: {labels: {app: logs}}
    spec:
      priorityClassName: high
      tolerations: [{operator: Exists}]
      containers:
        - name: fluent
          resources: {requests: {cpu: 100m, memory: 200Mi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: api, namespace: shop, uid: pdb-1}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: api}}
status:
  disruptionsAllowed: 1
  currentHealthy: 1
  desiredHealthy: 0
  expectedPods: 1
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-web-0, namespace: shop, uid: pvc-1}
spec:
  storageClassName: gp3
  volumeName: pv-1
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1, uid: pv-1}
spec:
  storageClassName: gp3
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3, uid: sc-1}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1a, us-east-1b]}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default, uid: np-1, annotations: {karpenter.sh/nodepool-hash-version: v3}}
spec:
  weight: 10
  template:
    metadata:
      labels: {team: web}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 336h
      taints: [{key: dedicated, value: web, effect: NoSchedule}]
      startupTaints: [{key: example.com/booting, effect: NoExecute}]
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r], minValues: 2}
  limits: {cpu: "100", memory: 400Gi}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
    budgets:
      - nodes: "20%"
      - nodes: "0"
        reasons: [Drifted]
        schedule: "0 9 * * 1-5"
        duration: 8h
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
  uid: nc-1
  creationTimestamp: "2026-11-01T00:00:00Z"
  labels: {karpenter.sh/nodepool: default}
  annotations: {karpenter.sh/nodepool-hash: "123", dovetail.io/subnet-id: subnet-1}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  expireAfter: 336h
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
  resources: {requests: {cpu: 600m, pods: "2"}}
status:
  nodeName: ip-10-0-1-5.ec2.internal
  providerID: aws:///us-east-1a/i-0123
  imageID: ami-1
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29"}
  lastPodEventTime: "2026-11-02T00:00:05Z"
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default, uid: nclass-1}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs: {volumeSize: 50Gi}
  kubelet:
    maxPods: 58
    kubeReserved: {cpu: 100m, memory: 500Mi}
    systemReserved: {memory: 100Mi, pid: "1000"}
    evictionHard: {memory.available: 5%, nodefs.available: 1Gi}
status:
  amis: [{id: ami-1, requirements: []}]
  subnets: [{id: subnet-1, zone: us-east-1a}]
  securityGroups: [{id: sg-1}]
"#;

fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).expect("a Kubernetes object")
}

/// The watcher's door: each object as the API gives it, converted one by one, gathered into a
/// snapshot as the watcher's mirror sends it, decoded as a planner decodes a Session.
fn through_the_watcher(text: &str) -> ClusterSnapshot {
    watch(&documents(text))
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).expect("YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn watch(objects: &[Value]) -> ClusterSnapshot {
    let mut classes = PriorityClasses::default();
    for o in objects.iter().filter(|o| o["kind"] == "PriorityClass") {
        let (name, value, global_default) = convert::priority_class(&typed(o));
        classes.insert(name, value, global_default);
    }
    let mut s = pb::ClusterSnapshot::default();
    let at = |kind: &str, e: convert::Error| -> ! { panic!("{kind}: {e}") };
    for o in objects {
        let kind = o["kind"].as_str().expect("kind");
        match kind {
            "Pod" => match convert::pod(&typed(o), &classes) {
                PodDisposition::Keep(p) => s.pods.push(*p),
                other => panic!("pod not mirrored: {other:?}"),
            },
            "Node" => s
                .nodes
                .push(convert::node(&typed(o)).unwrap_or_else(|e| at(kind, e))),
            "Namespace" => s
                .namespaces
                .push(convert::namespace(&typed::<core::Namespace>(o).metadata)),
            "DaemonSet" => s.daemon_sets.push(
                convert::daemon_set(&typed::<apps::DaemonSet>(o), &classes)
                    .unwrap_or_else(|e| at(kind, e)),
            ),
            "PodDisruptionBudget" => s.pdbs.push(
                convert::pdb(&typed::<policy::PodDisruptionBudget>(o))
                    .unwrap_or_else(|e| at(kind, e)),
            ),
            "PersistentVolumeClaim" => s
                .pvcs
                .push(convert::pvc(&typed::<core::PersistentVolumeClaim>(o))),
            "PersistentVolume" => s.pvs.push(
                convert::pv(&typed::<core::PersistentVolume>(o)).unwrap_or_else(|e| at(kind, e)),
            ),
            "StorageClass" => s.storage_classes.push(
                convert::storage_class(&typed::<storage::StorageClass>(o))
                    .unwrap_or_else(|e| at(kind, e)),
            ),
            "PriorityClass" => {
                let _: scheduling::PriorityClass = typed(o);
            }
            "NodePool" => s
                .node_pools
                .push(convert::node_pool(o).unwrap_or_else(|e| at(kind, e))),
            "NodeClaim" => s
                .node_claims
                .push(convert::node_claim(o).unwrap_or_else(|e| at(kind, e))),
            "EC2NodeClass" => s
                .node_classes
                .push(convert::node_class(o).unwrap_or_else(|e| at(kind, e))),
            other => panic!("no informer for {other}"),
        }
    }
    planner_wire::to_model::snapshot(s, planner_wire::At::ROOT).expect("the planner decodes it")
}

/// `dovetail plan`'s door.
fn through_the_manifests(text: &str) -> ClusterSnapshot {
    let mut reader = planner_manifests::Reader::new();
    reader
        .add_document_text(text, "objects.yaml")
        .expect("the manifests read");
    let loaded = reader.finish().expect("the manifests are valid");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    loaded.snapshot
}

/// Compares list by list and item by item, so that a failure names what differs.
fn assert_same(watcher: &ClusterSnapshot, manifests: &ClusterSnapshot) {
    macro_rules! same {
        ($($field:ident),*) => {$(
            assert_eq!(
                watcher.$field.len(),
                manifests.$field.len(),
                concat!("number of ", stringify!($field))
            );
            for (w, m) in watcher.$field.iter().zip(&manifests.$field) {
                assert_eq!(w, m, concat!("one of ", stringify!($field), ": watcher (left), manifests (right)"));
            }
        )*};
    }
    same!(
        pods,
        nodes,
        node_claims,
        node_pools,
        node_classes,
        daemon_sets,
        pdbs,
        namespaces,
        pvcs,
        pvs,
        storage_classes
    );
    assert_eq!(watcher, manifests);
}

#[test]
fn the_watcher_and_the_manifests_read_the_same_objects_the_same_way() {
    let watcher = through_the_watcher(OBJECTS);
    let manifests = through_the_manifests(OBJECTS);
    assert_eq!(watcher.pods.len(), 2);
    assert_same(&watcher, &manifests);
}

#[test]
fn a_node_pool_the_manifests_refuse_the_watcher_refuses_alone() {
    let pool = OBJECTS
        .split("---")
        .find(|d| d.contains("kind: NodePool"))
        .expect("a NodePool");
    let unknown = pool.replace(
        "consolidationPolicy: WhenEmpty",
        "consolidationPolicy: Cheapest",
    );
    let mut reader = planner_manifests::Reader::new();
    let refused = reader
        .add_document_text(&unknown, "np.yaml")
        .and_then(|()| reader.finish())
        .expect_err("the manifests refuse it");
    assert!(
        refused
            .to_string()
            .contains("spec.disruption.consolidationPolicy: unknown variant `Cheapest`"),
        "{refused}"
    );
    let value: Value = serde_yaml::from_str(&unknown).expect("YAML");
    let e =
        convert::node_pool(&value).expect_err("the watcher refuses the object, not the Session");
    assert!(
        e.to_string()
            .starts_with("spec.disruption.consolidationPolicy: unknown variant `Cheapest`"),
        "{e}"
    );
}

/// The kinds the watcher has an informer for; the workload controllers' pods reach it as pods.
const WATCHED: [&str; 12] = [
    "Pod",
    "Node",
    "Namespace",
    "DaemonSet",
    "PodDisruptionBudget",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "NodePool",
    "NodeClaim",
    "EC2NodeClass",
];

/// The examples' objects of watched kinds, completed as the API server would hold them: an
/// unbound pod marked unschedulable by the scheduler, a NodeClaim with the `expireAfter`
/// Karpenter gave it from its NodePool (the CRD's 720h without one).
fn as_the_api_holds(dir: &str) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the examples")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut objects: Vec<Value> = files
        .iter()
        .flat_map(|f| documents(&std::fs::read_to_string(f).expect("readable")))
        .filter(|o| WATCHED.contains(&o["kind"].as_str().unwrap_or_default()))
        .collect();
    let expiry: Vec<(Value, Value)> = objects
        .iter()
        .filter(|o| o["kind"] == "NodePool")
        .map(|p| {
            let e = &p["spec"]["template"]["spec"]["expireAfter"];
            (
                p["metadata"]["name"].clone(),
                if e.is_null() {
                    "720h".into()
                } else {
                    e.clone()
                },
            )
        })
        .collect();
    for o in &mut objects {
        if o["kind"] == "Pod" && o["spec"]["nodeName"].is_null() {
            o["status"] = serde_json::json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            ]});
        }
        if o["kind"] == "NodeClaim" && o["spec"]["expireAfter"].is_null() {
            let pool = &o["metadata"]["labels"]["karpenter.sh/nodepool"];
            let e = expiry
                .iter()
                .find(|(name, _)| name == pool)
                .map_or_else(|| "720h".into(), |(_, e)| e.clone());
            o["spec"]["expireAfter"] = e;
        }
    }
    objects
}

#[test]
fn the_examples_read_the_same_through_both_doors() {
    for dir in ["examples/minimal", "examples/realistic", "examples/demo"] {
        let objects = as_the_api_holds(dir);
        let text = objects
            .iter()
            .map(|o| serde_yaml::to_string(o).expect("YAML"))
            .collect::<Vec<_>>()
            .join("---\n");
        let watcher = watch(&objects);
        let manifests = through_the_manifests(&text);
        assert!(!watcher.node_pools.is_empty(), "{dir}");
        assert_same(&watcher, &manifests);
    }
}

/// The object of `kind` in the fixture, with `value` put at the JSON pointer `at`.
fn broken(kind: &str, at: &str, value: Value) -> Value {
    let mut o = documents(OBJECTS)
        .into_iter()
        .find(|o| o["kind"] == kind && (kind != "Pod" || o["spec"]["nodeName"].is_null()))
        .expect("the kind is in the fixture");
    let (parent, last) = at.rsplit_once('/').expect("a pointer");
    let slot = o.pointer_mut(parent).expect("the parent exists");
    match slot {
        Value::Array(a) => a[last.parse::<usize>().expect("an index")] = value,
        Value::Object(m) => {
            m.insert(last.to_string(), value);
        }
        _ => panic!("{parent} holds no fields"),
    }
    o
}

/// Why the watcher's door refuses one object, or `None` when it passes it on.
fn watcher_refusal(o: &Value) -> Option<String> {
    let classes = PriorityClasses::default();
    let refused = |r: Result<(), convert::Error>| r.err().map(|e| e.to_string());
    match o["kind"].as_str().expect("kind") {
        "Pod" => match convert::pod(&typed(o), &classes) {
            PodDisposition::Invalid(e) => Some(e.to_string()),
            PodDisposition::Keep(_) => None,
            PodDisposition::Ignore => Some("ignored".into()),
        },
        "Node" => refused(convert::node(&typed(o)).map(drop)),
        "DaemonSet" => refused(convert::daemon_set(&typed(o), &classes).map(drop)),
        "StorageClass" => refused(convert::storage_class(&typed(o)).map(drop)),
        "PodDisruptionBudget" => refused(convert::pdb(&typed(o)).map(drop)),
        "PersistentVolume" => refused(convert::pv(&typed(o)).map(drop)),
        "NodePool" => refused(convert::node_pool(o).map(drop)),
        "NodeClaim" => refused(convert::node_claim(o).map(drop)),
        "EC2NodeClass" => refused(convert::node_class(o).map(drop)),
        other => panic!("no case for {other}"),
    }
}

#[test]
fn what_dovetail_plan_refuses_the_watcher_refuses_naming_the_same_field() {
    use serde_json::json;
    let cases = [
        (
            "Pod",
            "/spec/containers/0/resources/requests/cpu",
            json!("lots"),
        ),
        ("Pod", "/spec/overhead/cpu", json!("-1")),
        ("Pod", "/spec/topologySpreadConstraints/0/maxSkew", json!(0)),
        (
            "Pod",
            "/spec/topologySpreadConstraints/0/whenUnsatisfiable",
            json!("Maybe"),
        ),
        (
            "Pod",
            "/spec/topologySpreadConstraints/0/nodeAffinityPolicy",
            json!("Maybe"),
        ),
        (
            "Pod",
            "/spec/tolerations",
            json!([{"key": "k", "operator": "Sometimes"}]),
        ),
        (
            "Pod",
            "/spec/tolerations",
            json!([{"key": "k", "effect": "NoWay"}]),
        ),
        (
            "Pod",
            "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0/operator",
            json!("Near"),
        ),
        (
            "Pod",
            "/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/podAffinityTerm/labelSelector/matchExpressions/0/operator",
            json!("Has"),
        ),
        (
            "Pod",
            "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/weight",
            json!(0),
        ),
        ("Node", "/status/allocatable/cpu", json!("x")),
        ("Node", "/spec/taints/0/effect", json!("Bad")),
        (
            "DaemonSet",
            "/spec/template/spec/containers/0/resources/requests/cpu",
            json!("x"),
        ),
        ("StorageClass", "/volumeBindingMode", json!("Later")),
        ("PodDisruptionBudget", "/spec/maxUnavailable", json!("x%")),
        ("PodDisruptionBudget", "/spec/maxUnavailable", json!("150%")),
        (
            "PodDisruptionBudget",
            "/spec/selector/matchExpressions",
            json!([{"key": "a", "operator": "Has"}]),
        ),
        ("Node", "/status/capacity/memory", json!("-1Gi")),
        (
            "Pod",
            "/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/podAffinityTerm/namespaceSelector",
            json!({"matchExpressions": [{"key": "a", "operator": "Near"}]}),
        ),
        (
            "NodePool",
            "/spec/template/spec/requirements/0/operator",
            json!("Within"),
        ),
        (
            "NodePool",
            "/spec/template/spec/requirements/1/minValues",
            json!(-1),
        ),
        (
            "NodePool",
            "/spec/template/spec/taints/0/effect",
            json!("Bad"),
        ),
        ("NodePool", "/spec/weight", json!(0)),
        ("NodePool", "/spec/weight", json!(101)),
        ("NodePool", "/spec/limits/cpu", json!("x")),
        (
            "NodePool",
            "/spec/disruption/consolidationPolicy",
            json!("Cheapest"),
        ),
        (
            "NodePool",
            "/spec/disruption/consolidateAfter",
            json!("soon"),
        ),
        (
            "NodePool",
            "/spec/disruption/budgets/0/nodes",
            json!("150%"),
        ),
        ("NodePool", "/spec/disruption/budgets/0/nodes", json!("-1")),
        (
            "NodePool",
            "/spec/disruption/budgets/1/reasons",
            json!(["Sleepy"]),
        ),
        ("NodePool", "/spec/template/spec/expireAfter", json!("soon")),
        ("NodeClaim", "/spec/resources/requests/cpu", json!("x")),
        ("NodeClaim", "/spec/requirements/0/operator", json!("Near")),
        (
            "EC2NodeClass",
            "/spec/amiSelectorTerms/0/alias",
            json!("windows@latest"),
        ),
        ("EC2NodeClass", "/spec/kubelet/kubeReserved/cpu", json!("x")),
        (
            "EC2NodeClass",
            "/spec/kubelet/evictionHard/memory.available",
            json!("150%"),
        ),
    ];
    let mut disagreements = Vec::new();
    for (kind, at, value) in cases {
        let o = broken(kind, at, value.clone());
        let mut reader = planner_manifests::Reader::new();
        let manifests = reader
            .add_document_text(&serde_yaml::to_string(&o).expect("YAML"), "o.yaml")
            .and_then(|()| reader.finish())
            .err()
            .map(|e| e.to_string());
        let watcher = watcher_refusal(&o);
        // The manifests' message is `o.yaml: document 1 (Kind name): path: reason`; the
        // watcher's is `path: reason`. Both name the same path.
        let path = |m: &str| m.split(": ").next().unwrap_or_default().to_string();
        let agree = match (&manifests, &watcher) {
            (Some(m), Some(w)) => {
                let m = m.split_once("): ").map_or(m.as_str(), |(_, rest)| rest);
                path(m) == path(w)
            }
            (None, None) => true,
            _ => false,
        };
        if !agree {
            disagreements.push(format!(
                "{kind} {at} = {value}: dovetail plan {manifests:?}, watcher {watcher:?}"
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}
