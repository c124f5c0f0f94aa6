//! Tests of the manifests reader, one group per rule: what the conversion gives for each kind
//! read from text, what the reader adds (controllers, defaults, warnings) and how refusals are
//! named.

use planner_manifests::*;

use planner::model::{
    BudgetNodes, ConsolidationPolicy, IntOrPercent, NodeInclusionPolicy, Operator, Pod, Resources,
    TaintEffect, TolerationOperator, VolumeBindingMode, WhenUnsatisfiable,
};

const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;

fn load(text: &str) -> Loaded {
    let mut b = Reader::new();
    match b
        .add_document_text(text, "test.yaml")
        .and_then(|()| b.finish())
    {
        Ok(l) => l,
        Err(e) => panic!("load failed: {e}"),
    }
}

fn load_err(text: &str, source: &str) -> String {
    let mut b = Reader::new();
    match b.add_document_text(text, source).and_then(|()| b.finish()) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn pod<'a>(l: &'a Loaded, name: &str) -> &'a Pod {
    l.snapshot
        .pods
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

fn pod_with_spec(spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n{spec}")
}

// === requests ===

#[test]
fn requests_sum_app_containers_and_take_the_largest_init_container() {
    let l = load(&pod_with_spec(
        r#"
  initContainers:
  - {name: i1, resources: {requests: {cpu: 500m, memory: 64Mi}}}
  containers:
  - {name: a, resources: {requests: {cpu: 100m, memory: 100Mi}}}
  - {name: b, resources: {requests: {cpu: 200m, memory: 100Mi, nvidia.com/gpu: 1}}}
"#,
    ));
    let r = &pod(&l, "p").requests;
    assert_eq!(
        r.cpu, 500,
        "the init container is larger than the sum (300m)"
    );
    assert_eq!(
        r.memory,
        200 * MI,
        "the sum is larger than the init container"
    );
    assert_eq!(r.pods, 1);
    assert_eq!(r.extended.get("nvidia.com/gpu"), Some(&1000));
}

#[test]
fn sidecars_add_to_the_sum_and_to_later_init_containers_only() {
    // Sidecar first: the regular init container runs next to it (250m + 200m).
    let sidecar_first = load(&pod_with_spec(
        r#"
  initContainers:
  - {name: s, restartPolicy: Always, resources: {requests: {cpu: 200m}}}
  - {name: i, resources: {requests: {cpu: 250m}}}
  containers:
  - {name: a, resources: {requests: {cpu: 100m}}}
"#,
    ));
    assert_eq!(pod(&sidecar_first, "p").requests.cpu, 450);
    // Sidecar after the regular init container: it does not overlap with it.
    let sidecar_last = load(&pod_with_spec(
        r#"
  initContainers:
  - {name: i, resources: {requests: {cpu: 250m}}}
  - {name: s, restartPolicy: Always, resources: {requests: {cpu: 200m}}}
  containers:
  - {name: a, resources: {requests: {cpu: 100m}}}
"#,
    ));
    assert_eq!(
        pod(&sidecar_last, "p").requests.cpu,
        300,
        "100m app + 200m sidecar"
    );
}

#[test]
fn overhead_is_added_and_limits_stand_in_for_missing_requests() {
    let l = load(&pod_with_spec(
        r#"
  overhead: {cpu: 50m, memory: 10Mi}
  containers:
  - {name: a, resources: {limits: {cpu: "1", memory: 1Gi}}}
  - {name: b, resources: {requests: {cpu: "0"}, limits: {cpu: 2, memory: 512Mi}}}
"#,
    ));
    let r = &pod(&l, "p").requests;
    assert_eq!(
        r.cpu,
        1000 + 50,
        "b's explicit zero request is kept, not its limit"
    );
    assert_eq!(r.memory, GI + 512 * MI + 10 * MI);
}

#[test]
fn pod_level_resources_replace_cpu_and_memory() {
    let l = load(&pod_with_spec(
        r#"
  resources: {requests: {cpu: "2"}, limits: {memory: 4Gi}}
  containers:
  - {name: a, resources: {requests: {cpu: 100m, memory: 1Gi, ephemeral-storage: 1Gi}}}
"#,
    ));
    let r = &pod(&l, "p").requests;
    assert_eq!((r.cpu, r.memory, r.ephemeral_storage), (2000, 4 * GI, GI));
}

#[test]
fn host_ports_come_from_every_container_and_host_network() {
    let l = load(&pod_with_spec(
        r#"
  hostNetwork: true
  initContainers:
  - {name: i, ports: [{containerPort: 9000, hostPort: 9000, protocol: UDP}]}
  containers:
  - {name: a, ports: [{containerPort: 8080}, {containerPort: 80, hostPort: 0}]}
"#,
    ));
    let ports: Vec<(String, String, i32)> = pod(&l, "p")
        .host_ports
        .iter()
        .map(|h| (h.ip.clone(), h.protocol.clone(), h.port))
        .collect();
    assert_eq!(
        ports,
        vec![
            ("0.0.0.0".into(), "UDP".into(), 9000),
            ("0.0.0.0".into(), "TCP".into(), 8080),
        ]
    );
}

// === scheduling constraints ===

#[test]
fn node_affinity_match_fields_become_hostname_requirements() {
    let l = load(&pod_with_spec(
        r#"
  nodeSelector: {team: web}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
          matchFields:
          - {key: metadata.name, operator: In, values: [node-1]}
        - matchExpressions:
          - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["4"]}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        preference:
          matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
"#,
    ));
    let p = pod(&l, "p");
    assert_eq!(p.node_selector.get("team").map(String::as_str), Some("web"));
    assert_eq!(p.required_node_affinity.len(), 2);
    let first = &p.required_node_affinity[0].requirements;
    assert_eq!(first[1].key, "kubernetes.io/hostname");
    assert_eq!(first[1].values, vec!["node-1"]);
    assert_eq!(
        p.required_node_affinity[1].requirements[0].operator,
        Operator::Gt
    );
    assert_eq!(p.preferred_node_affinity[0].weight, 50);
    assert_eq!(
        p.preferred_node_affinity[0].term.requirements[0].values,
        vec!["spot"]
    );
}

#[test]
fn tolerations_spreads_and_pod_affinity_keep_every_field() {
    let l = load(&pod_with_spec(
        r#"
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  - {key: team, value: web}
  - {operator: Exists}
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {app: web}}
    minDomains: 3
    matchLabelKeys: [pod-template-hash]
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, nodeAffinityPolicy: Ignore, nodeTaintsPolicy: Honor}
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchExpressions: [{key: app, operator: In, values: [web]}]}
        topologyKey: kubernetes.io/hostname
        namespaces: [web, api]
        matchLabelKeys: [version]
        mismatchLabelKeys: [tenant]
    podAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        podAffinityTerm:
          labelSelector: {matchLabels: {app: cache}}
          namespaceSelector: {}
          topologyKey: topology.kubernetes.io/zone
"#,
    ));
    let p = pod(&l, "p");
    assert_eq!(p.tolerations[0].operator, TolerationOperator::Exists);
    assert_eq!(p.tolerations[0].effect, Some(TaintEffect::NoSchedule));
    assert_eq!(
        p.tolerations[1].operator,
        TolerationOperator::Equal,
        "empty operator is Equal"
    );
    assert_eq!(
        p.tolerations[1].effect, None,
        "empty effect means all effects"
    );
    assert!(p.tolerations[2].key.is_empty());
    let s = &p.topology_spread;
    assert_eq!(s[0].min_domains, Some(3));
    assert_eq!(s[0].match_label_keys, vec!["pod-template-hash"]);
    assert_eq!(
        s[0].node_affinity_policy,
        NodeInclusionPolicy::Honor,
        "default Honor"
    );
    assert_eq!(
        s[0].node_taints_policy,
        NodeInclusionPolicy::Ignore,
        "default Ignore"
    );
    assert_eq!(s[1].when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
    assert_eq!(s[1].node_affinity_policy, NodeInclusionPolicy::Ignore);
    assert_eq!(s[1].node_taints_policy, NodeInclusionPolicy::Honor);
    let anti = &p.pod_anti_affinity[0];
    assert_eq!(anti.namespaces, vec!["web", "api"]);
    assert_eq!(anti.match_label_keys, vec!["version"]);
    assert_eq!(anti.mismatch_label_keys, vec!["tenant"]);
    let pref = &p.preferred_pod_affinity[0];
    assert_eq!(pref.weight, 10);
    assert!(
        pref.term
            .namespace_selector
            .as_ref()
            .is_some_and(|s| s.is_empty())
    );
}

#[test]
fn volumes_list_claims_including_ephemeral_ones() {
    let l = load(&pod_with_spec(
        r#"
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data-claim}}
  - {name: scratch, ephemeral: {volumeClaimTemplate: {spec: {}}}}
  - {name: cfg, configMap: {name: x}}
  containers: [{name: a}]
"#,
    ));
    assert_eq!(pod(&l, "p").volume_claims, vec!["data-claim", "p-scratch"]);
}

// === workloads ===

#[test]
fn deployments_expand_into_named_pending_pods() {
    let l = load(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  template:
    metadata: {labels: {app: web}, annotations: {karpenter.sh/do-not-disrupt: "true"}}
    spec:
      containers: [{name: a, resources: {requests: {cpu: 250m}}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  template:
    spec: {containers: [{name: a}]}
"#,
    );
    let names: Vec<String> = l.snapshot.pods.iter().map(Pod::key).collect();
    assert_eq!(
        names,
        vec![
            "default/web-0",
            "default/web-1",
            "default/web-2",
            "data/db-0"
        ]
    );
    let p = pod(&l, "web-1");
    assert!(p.is_pending());
    assert_eq!(p.labels.get("app").map(String::as_str), Some("web"));
    assert!(p.annotations.contains_key("karpenter.sh/do-not-disrupt"));
    assert_eq!(p.requests.cpu, 250);
    let owner = p.owner.as_ref().unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "web")
    );
    assert_eq!(p.uid, "default/web-1");
}

#[test]
fn jobs_run_parallelism_capped_by_remaining_completions() {
    let job = |parallelism: &str, completions: &str, succeeded: &str| {
        let l = load(&format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j}}\nspec:\n{parallelism}{completions}  template: {{spec: {{containers: [{{name: a}}]}}}}\n{succeeded}"
        ));
        l.snapshot.pods.len()
    };
    assert_eq!(job("", "", ""), 1, "parallelism defaults to 1");
    assert_eq!(job("  parallelism: 4\n", "", ""), 4);
    assert_eq!(
        job("  parallelism: 4\n  suspend: true\n", "", ""),
        0,
        "suspended"
    );
    assert_eq!(
        job(
            "  parallelism: 4\n",
            "  completions: 5\n",
            "status: {succeeded: 3}"
        ),
        2
    );
}

#[test]
fn statefulset_ordinals_start_where_asked() {
    let l = load(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 2\n  ordinals: {start: 5}\n  template: {spec: {containers: [{name: a}]}}\n",
    );
    let names: Vec<&str> = l.snapshot.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["db-5", "db-6"]);
}

#[test]
fn controllers_only_add_the_replicas_that_are_missing() {
    let l = load(
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web}
  spec: {replicas: 3, template: {spec: {containers: [{name: a}]}}}
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata:
    name: web-5d9c
    ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, controller: true}]
  spec: {replicas: 3, template: {spec: {containers: [{name: a}]}}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: web-5d9c-abcde
    labels: {pod-template-hash: 5d9c}
    ownerReferences: [{kind: ReplicaSet, name: web-5d9c, controller: true}]
  spec: {nodeName: n1, containers: [{name: a}]}
  status: {phase: Running}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: db}
  spec:
    replicas: 3
    template: {spec: {containers: [{name: a}]}}
    volumeClaimTemplates: [{metadata: {name: data}}]
- apiVersion: v1
  kind: Pod
  metadata:
    name: db-0
    ownerReferences: [{kind: StatefulSet, name: db, controller: true}]
  spec: {nodeName: n1, containers: [{name: a}]}
"#,
    );
    let pending: Vec<String> = l
        .snapshot
        .pods
        .iter()
        .filter(|p| p.is_pending())
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(pending, vec!["web-0", "web-1", "db-1", "db-2"]);
    assert_eq!(pod(&l, "db-2").volume_claims, vec!["data-db-2"]);
}

#[test]
fn daemon_sets_keep_their_template_as_a_pod() {
    let l = load(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-exporter, namespace: monitoring}
spec:
  template:
    metadata: {labels: {app: node-exporter}}
    spec:
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      containers: [{name: a, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
"#,
    );
    let ds = &l.snapshot.daemon_sets[0];
    assert_eq!(
        (ds.namespace.as_str(), ds.name.as_str()),
        ("monitoring", "node-exporter")
    );
    assert_eq!(ds.template.requests, {
        let mut r = Resources::cpu_memory(100, 128 * MI);
        r.pods = 1;
        r
    });
    assert_eq!(ds.template.priority, 2_000_001_000);
    assert!(ds.template.is_daemonset_pod());
    assert!(l.snapshot.pods.is_empty());
}

// === priority ===

#[test]
fn priority_comes_from_value_class_or_global_default() {
    let l = load(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: explicit}
spec: {priority: 7, priorityClassName: high, containers: [{name: a}]}
---
apiVersion: v1
kind: Pod
metadata: {name: classed}
spec: {priorityClassName: high, containers: [{name: a}]}
---
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec: {containers: [{name: a}]}
---
apiVersion: v1
kind: Pod
metadata: {name: lost}
spec: {priorityClassName: nope, containers: [{name: a}]}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: base}
value: 10
globalDefault: true
"#,
    );
    assert_eq!(pod(&l, "explicit").priority, 7);
    assert_eq!(
        pod(&l, "classed").priority,
        1000,
        "class read after the pod"
    );
    assert_eq!(pod(&l, "plain").priority, 10, "globalDefault");
    assert_eq!(pod(&l, "lost").priority, 0);
    assert!(
        l.warnings
            .iter()
            .any(|w| w.contains("\"nope\"") && w.contains("default/lost"))
    );
}

// === Karpenter ===

#[test]
fn nodepool_defaults_follow_the_v1_crd() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}]
"#,
    );
    let np = &l.snapshot.node_pools[0];
    assert_eq!(np.expire_after, Some(720 * 3600));
    assert_eq!(np.weight, 0);
    assert_eq!(np.node_class.as_deref(), Some("default"));
    assert_eq!(
        np.disruption.consolidation_policy,
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
    assert_eq!(np.disruption.consolidate_after, Some(0));
    assert_eq!(np.disruption.budgets.len(), 1);
    assert_eq!(np.disruption.budgets[0].nodes, BudgetNodes::Percent(10));
    assert_eq!(np.limits, None);
    assert_eq!(np.template_hash.len(), 16);
}

#[test]
fn nodepool_fields_durations_and_budgets() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu, annotations: {karpenter.sh/nodepool-hash: "123", karpenter.sh/nodepool-hash-version: v3}}
spec:
  weight: 50
  limits: {cpu: "100", memory: 400Gi, nvidia.com/gpu: 8}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 1h30m
    budgets:
    - nodes: "0"
      schedule: "0 9 * * mon-fri"
      duration: 8h
      reasons: [Drifted, Underutilized]
    - nodes: 25%
    - {}
  template:
    metadata: {labels: {team: ml}, annotations: {a: b}}
    spec:
      expireAfter: Never
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
      taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
      startupTaints: [{key: node.cilium.io/agent-not-ready, effect: NoExecute}]
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge, g5.2xlarge, g6.xlarge], minValues: 2}
      - {key: karpenter.k8s.aws/instance-generation, operator: Gte, values: ["5"]}
      - {key: karpenter.k8s.aws/instance-family, operator: NotIn, values: [p3]}
      - {key: example.com/x, operator: DoesNotExist}
"#,
    );
    let np = &l.snapshot.node_pools[0];
    assert_eq!(np.weight, 50);
    assert_eq!(np.expire_after, None, "Never");
    assert_eq!(
        np.disruption.consolidation_policy,
        ConsolidationPolicy::WhenEmpty
    );
    assert_eq!(np.disruption.consolidate_after, Some(5400));
    let b = &np.disruption.budgets;
    assert_eq!(b[0].nodes, BudgetNodes::Count(0));
    assert_eq!(b[0].schedule.as_deref(), Some("0 9 * * mon-fri"));
    assert_eq!(b[0].duration, Some(8 * 3600));
    assert_eq!(b[0].reasons, vec!["Drifted", "Underutilized"]);
    assert_eq!(b[1].nodes, BudgetNodes::Percent(25));
    assert_eq!(
        b[2].nodes,
        BudgetNodes::Percent(10),
        "nodes defaults to 10%"
    );
    let limits = np.limits.as_ref().unwrap();
    assert_eq!((limits.cpu, limits.memory), (100_000, 400 * GI));
    assert_eq!(limits.extended.get("nvidia.com/gpu"), Some(&8000));
    assert_eq!(
        np.limited_resources,
        vec!["cpu", "memory", "nvidia.com/gpu"]
    );
    assert_eq!(np.labels.get("team").map(String::as_str), Some("ml"));
    assert_eq!(np.annotations.get("a").map(String::as_str), Some("b"));
    assert_eq!(np.taints[0].effect, TaintEffect::NoSchedule);
    assert_eq!(np.startup_taints[0].effect, TaintEffect::NoExecute);
    assert_eq!(np.requirements[0].min_values, Some(2));
    assert_eq!(np.requirements[1].operator, Operator::Gte);
    assert_eq!(np.requirements[3].operator, Operator::DoesNotExist);
    assert_eq!(
        np.metadata_annotations
            .get("karpenter.sh/nodepool-hash-version")
            .map(String::as_str),
        Some("v3")
    );
}

#[test]
fn nodepool_consolidate_after_never_and_explicit_empty_budgets() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: p}
spec:
  disruption: {consolidateAfter: Never, budgets: []}
  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: [], expireAfter: 24h}}
"#,
    );
    let np = &l.snapshot.node_pools[0];
    assert_eq!(np.disruption.consolidate_after, None);
    assert!(np.disruption.budgets.is_empty());
    assert_eq!(np.expire_after, Some(86_400));
}

#[test]
fn nodepool_hash_ignores_requirements_but_not_labels() {
    let pool = |labels: &str, values: &str| {
        let l = load(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: p}}\nspec:\n  template:\n    metadata: {{labels: {{{labels}}}}}\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}}\n      requirements: [{{key: k, operator: In, values: [{values}]}}]\n"
        ));
        l.snapshot.node_pools[0].template_hash.clone()
    };
    assert_eq!(pool("a: b", "x"), pool("a: b", "x, y"));
    assert_ne!(pool("a: b", "x"), pool("a: c", "x"));
}

#[test]
fn ec2nodeclass_status_amis_and_nodeclaim_image_are_read() {
    let l = load(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
status:
  amis:
  - id: ami-new
    name: al2023-new
    requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
  - id: ami-arm
    requirements: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]
  subnets: [{id: subnet-1, zone: us-east-1a, zoneID: use1-az1}]
  securityGroups: [{id: sg-1, name: nodes}, {id: sg-2}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: fresh}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-abc}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: []
status:
  imageID: ami-old
  providerID: aws:///us-east-1a/i-0123
"#,
    );
    let classes = &l.snapshot.node_classes;
    assert_eq!(
        classes[0].resolved_amis,
        Some(vec!["ami-new".to_string(), "ami-arm".to_string()])
    );
    assert_eq!(classes[1].resolved_amis, None, "no status, no AMIs");
    assert_eq!(
        classes[0].resolved_subnets,
        Some(vec!["subnet-1".to_string()])
    );
    assert_eq!(
        classes[0].resolved_security_groups,
        Some(vec!["sg-1".to_string(), "sg-2".to_string()])
    );
    assert_eq!(classes[1].resolved_subnets, None);
    assert_eq!(classes[1].resolved_security_groups, None);
    assert_eq!(
        l.snapshot.node_claims[0].image_id.as_deref(),
        Some("ami-old")
    );
}

#[test]
fn ec2nodeclass_kubelet_and_ami_family() {
    let l = load(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  blockDeviceMappings:
  - deviceName: /dev/xvda
    ebs: {volumeSize: 100Gi, volumeType: gp3}
  kubelet:
    maxPods: 58
    podsPerCore: 4
    kubeReserved: {cpu: 200m, memory: 1Gi, pid: "100"}
    systemReserved: {memory: 256Mi}
    evictionHard: {memory.available: 5%, nodefs.available: 10Gi, nodefs.inodesFree: 5%}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: br}
spec:
  amiFamily: Bottlerocket
  amiSelectorTerms: [{id: ami-123}]
  blockDeviceMappings:
  - {deviceName: /dev/xvda, ebs: {volumeSize: 4Gi}}
  - {deviceName: /dev/xvdb, ebs: {volumeSize: 50Gi}}
  kubelet: {evictionHard: {memory.available: 100Mi}}
"#,
    );
    let nc = &l.snapshot.node_classes[0];
    assert_eq!(nc.ami_family.as_deref(), Some("AL2023"));
    assert_eq!(nc.root_volume_size, Some(100 * GI));
    let k = &nc.kubelet;
    assert_eq!((k.max_pods, k.pods_per_core), (Some(58), Some(4)));
    let kube = k.kube_reserved.as_ref().unwrap();
    assert_eq!((kube.cpu, kube.memory), (200, GI));
    assert!(
        kube.extended.is_empty(),
        "pid is not a schedulable resource"
    );
    assert_eq!(k.system_reserved.as_ref().unwrap().memory, 256 * MI);
    assert_eq!(k.eviction_hard.as_ref().unwrap().ephemeral_storage, 10 * GI);
    assert_eq!(k.eviction_hard.as_ref().unwrap().memory, 0);
    assert_eq!(k.eviction_hard_percent.get("memory"), Some(&5000));
    assert_eq!(nc.spec_hash.len(), 16);

    let br = &l.snapshot.node_classes[1];
    assert_eq!(br.ami_family.as_deref(), Some("Bottlerocket"));
    assert_eq!(
        br.root_volume_size,
        Some(50 * GI),
        "Bottlerocket's data volume is xvdb"
    );
    assert_eq!(br.kubelet.eviction_hard.as_ref().unwrap().memory, 100 * MI);
    assert!(br.kubelet.eviction_hard_percent.is_empty());
}

#[test]
fn nodeclaims_and_nodes_carry_status() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abc
  labels: {karpenter.sh/nodepool: default}
  annotations: {karpenter.sh/nodepool-hash: "42"}
  creationTimestamp: "2024-05-01T10:00:00Z"
spec:
  nodeClassRef: {name: default}
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
  resources: {requests: {cpu: 1500m}}
status:
  nodeName: ip-10-0-1-5.ec2.internal
  providerID: aws:///us-east-1a/i-0123
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29"}
  lastPodEventTime: "2024-05-01T11:00:00Z"
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-5.ec2.internal
  labels: {node.kubernetes.io/instance-type: m5.large}
  creationTimestamp: "2024-05-01T10:01:00Z"
spec:
  providerID: aws:///us-east-1a/i-0123
  unschedulable: true
  taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]
status:
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29"}
  conditions: [{type: MemoryPressure, status: "False"}, {type: Ready, status: "True"}]
"#,
    );
    let c = &l.snapshot.node_claims[0];
    assert_eq!(c.node_name.as_deref(), Some("ip-10-0-1-5.ec2.internal"));
    assert_eq!(c.provider_id.as_deref(), Some("aws:///us-east-1a/i-0123"));
    assert_eq!(c.allocatable.cpu, 1930);
    assert_eq!(c.capacity.pods, 29);
    assert_eq!(c.requests.cpu, 1500);
    assert_eq!(c.expire_after, Some(720 * 3600));
    assert_eq!(c.last_pod_event_time, Some(1_714_561_200));
    assert_eq!(c.creation_time, Some(1_714_557_600));
    let n = &l.snapshot.nodes[0];
    assert!(n.ready && n.unschedulable);
    assert_eq!(n.allocatable.memory, 7 * GI);
    assert_eq!(n.taints[0].key, "karpenter.sh/disrupted");
    assert_eq!(n.creation_time, Some(1_714_557_660));
}

// === cluster objects ===

#[test]
fn volume_topology_from_pvs_and_storage_classes() {
    let l = load(
        r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [us-east-1a, us-east-1b]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  storageClassName: gp3
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: db}
spec: {volumeName: pv-1, storageClassName: gp3}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: defaulted}
spec: {}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: classless}
spec: {storageClassName: ""}
"#,
    );
    let sc = &l.snapshot.storage_classes[0];
    assert_eq!(
        sc.volume_binding_mode,
        VolumeBindingMode::WaitForFirstConsumer
    );
    let req = &sc.allowed_topologies[0].requirements[0];
    assert_eq!((req.operator, req.values.len()), (Operator::In, 2));
    let pv = &l.snapshot.pvs[0];
    assert_eq!(
        pv.node_affinity[0].requirements[0].values,
        vec!["us-east-1a"]
    );
    let pvcs = &l.snapshot.pvcs;
    assert_eq!(pvcs[0].volume_name.as_deref(), Some("pv-1"));
    assert_eq!(pvcs[0].namespace, "db");
    assert_eq!(
        pvcs[1].storage_class.as_deref(),
        Some("gp3"),
        "default class"
    );
    assert_eq!(
        pvcs[2].storage_class.as_deref(),
        Some(""),
        "an explicit empty class stays empty (no class), as the API holds it"
    );
}

#[test]
fn pdbs_and_namespaces() {
    let l = load(
        r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec: {maxUnavailable: 25%, selector: {matchLabels: {app: web}}}
status: {disruptionsAllowed: 1}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec: {minAvailable: 2}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: web}}
"#,
    );
    let pdbs = &l.snapshot.pdbs;
    assert_eq!(pdbs[0].max_unavailable, Some(IntOrPercent::Percent(25)));
    assert_eq!(pdbs[0].disruptions_allowed, Some(1));
    assert!(pdbs[0].selector.is_some());
    assert_eq!(pdbs[1].min_available, Some(IntOrPercent::Int(2)));
    assert_eq!(pdbs[1].selector, None);
    assert_eq!(pdbs[1].namespace, "default");
    assert_eq!(
        l.snapshot.namespaces[0]
            .labels
            .get("team")
            .map(String::as_str),
        Some("web")
    );
}

#[test]
fn a_node_claim_without_expire_after_takes_its_node_pools() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: never-a, labels: {karpenter.sh/nodepool: never}}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: never-b}
status: {nodeName: node-b}
---
apiVersion: v1
kind: Node
metadata: {name: node-b, labels: {karpenter.sh/nodepool: never}}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: own, labels: {karpenter.sh/nodepool: never}}
spec: {expireAfter: 1h}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: weekly-a, labels: {karpenter.sh/nodepool: weekly}}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: orphan, labels: {karpenter.sh/nodepool: gone}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: never}
spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, expireAfter: Never}}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: weekly}
spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, expireAfter: 168h}}}
"#,
    );
    let expiry = |name: &str| {
        l.snapshot
            .node_claims
            .iter()
            .find(|c| c.name == name)
            .expect(name)
            .expire_after
    };
    assert_eq!(expiry("never-a"), None, "the NodePool's Never");
    assert_eq!(expiry("never-b"), None, "the NodePool of its Node");
    assert_eq!(expiry("own"), Some(3600), "its own value wins");
    assert_eq!(expiry("weekly-a"), Some(168 * 3600));
    assert_eq!(
        expiry("orphan"),
        Some(720 * 3600),
        "no NodePool: the default"
    );
}

#[test]
fn unknown_kinds_are_skipped_with_one_warning_per_kind() {
    let l = load(
        r#"
apiVersion: v1
kind: Service
metadata: {name: a}
---
apiVersion: v1
kind: Service
metadata: {name: b}
---
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
"#,
    );
    assert!(l.snapshot.node_pools.is_empty());
    assert_eq!(l.warnings.len(), 3, "{:?}", l.warnings);
    // Older Karpenter objects get their own warning, as they come.
    assert!(l.warnings[0].starts_with("test.yaml: document 3 (NodePool old): karpenter.sh/v1beta1 NodePool (unsupported apiVersion) is not read; v1 uses apiVersion karpenter.sh/v1"));
    assert!(l.warnings[1].contains("2 objects of kind v1 Service"));
    assert!(l.warnings[1].contains("test.yaml: document 1 (Service a)"));
    assert!(l.warnings[2].contains("1 object of kind v1 ConfigMap"));
}

#[test]
fn fields_of_older_karpenter_apis_are_warned_about_and_ignored() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: migrated}
spec:
  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}
  ttlSecondsUntilExpired: 604800
  ttlSecondsAfterEmpty: 30
  consolidation: {enabled: true}
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 168h
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: clean}
spec:
  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, expireAfter: Never}}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized}
"#,
    );
    let w = &l.warnings;
    assert_eq!(w.len(), 5, "{w:?}");
    let at = "test.yaml: document 1 (NodePool migrated): NodePool migrated: ";
    assert!(w.iter().all(|w| w.starts_with(at)), "{w:?}");
    let has = |text: &str| {
        assert!(
            w.iter().any(|w| w.contains(text)),
            "no warning has {text:?}: {w:?}"
        );
    };
    has(
        "spec.disruption.expireAfter (168h) is not read by karpenter.sh/v1 and is ignored; v1 uses spec.template.spec.expireAfter (in force: 720h)",
    );
    has(
        "spec.ttlSecondsUntilExpired (604800) is not read by karpenter.sh/v1 and is ignored; v1 uses spec.template.spec.expireAfter",
    );
    has(
        "spec.ttlSecondsAfterEmpty (30) is not read by karpenter.sh/v1 and is ignored; v1 uses spec.disruption.consolidationPolicy: WhenEmpty with spec.disruption.consolidateAfter",
    );
    has(
        "spec.consolidation.enabled (true) is not read by karpenter.sh/v1 and is ignored; v1 uses spec.disruption.consolidationPolicy: WhenEmptyOrUnderutilized",
    );
    has(
        "consolidationPolicy WhenUnderutilized is karpenter.sh/v1beta1; read as v1's WhenEmptyOrUnderutilized",
    );
    // Ignored means v1's values are in force.
    let np = &l.snapshot.node_pools[0];
    assert_eq!(np.expire_after, Some(720 * 3600));
    assert_eq!(
        np.disruption.consolidation_policy,
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
    assert_eq!(l.snapshot.node_pools.len(), 2);
}

#[test]
fn older_karpenter_kinds_are_not_read_and_each_is_named() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: legacy}
spec: {ttlSecondsAfterEmpty: 30}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: legacy}
---
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: old}
"#,
    );
    assert!(l.snapshot.node_pools.is_empty() && l.snapshot.node_classes.is_empty());
    let w = &l.warnings;
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].starts_with("test.yaml: document 1 (Provisioner legacy): karpenter.sh/v1alpha5 Provisioner (unsupported apiVersion) is not read; v1 uses a karpenter.sh/v1 NodePool"), "{w:?}");
    assert!(
        w[1].contains("document 2 (AWSNodeTemplate legacy)")
            && w[1].ends_with("v1 uses a karpenter.k8s.aws/v1 EC2NodeClass"),
        "{w:?}"
    );
    assert!(
        w[2].contains(
            "karpenter.k8s.aws/v1beta1 EC2NodeClass (unsupported apiVersion) is not read"
        ),
        "{w:?}"
    );
}

#[test]
fn nulls_are_absent_and_json_streams_are_read() {
    let l = load(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: null}\nspec: {tolerations: ~, containers: [{name: a, resources: {requests: null}}]}\n",
    );
    assert!(pod(&l, "p").labels.is_empty());
    let mut b = Reader::new();
    b.add_document_text(
        r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}}"#,
        "ns.json",
    )
    .unwrap();
    let names: Vec<String> = b
        .finish()
        .unwrap()
        .snapshot
        .namespaces
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(names, vec!["a", "b"]);
}

#[test]
fn add_value_takes_objects_and_lists() {
    let mut b = Reader::new();
    let list = serde_json::json!({
        "apiVersion": "v1", "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": null}, "spec": {"containers": []}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}}
        ]
    });
    b.add_value(&list, "sim").unwrap();
    let l = b.finish().unwrap();
    assert_eq!(l.snapshot.pods.len(), 3);
    let bad = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {"priority": "high"}});
    let e = Reader::new()
        .add_value(&bad, "sim")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("sim (Pod default/x): spec.priority: invalid type"),
        "{e}"
    );
}

// === errors ===

#[test]
fn errors_name_file_document_object_and_field() {
    let text = r#"
apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  template:
    spec:
      containers:
      - name: a
        resources: {requests: {cpu: lots}}
"#;
    let e = load_err(text, "deploy.yaml");
    assert_eq!(
        e,
        "deploy.yaml: document 2 (Deployment default/web): spec.template.spec.containers[0].resources.requests.cpu: invalid quantity \"lots\": expected a number"
    );
}

#[test]
fn error_cases_each_point_at_their_field() {
    let cases: &[(&str, &str)] = &[
        (
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {disruption: {consolidateAfter: soon}, template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}}}}\n",
            "np.yaml: document 1 (NodePool p): spec.disruption.consolidateAfter: invalid duration \"soon\"",
        ),
        (
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: [{key: k, operator: Gt, values: [big]}]}}}\n",
            "np.yaml: document 1 (NodePool p): spec.template.spec.requirements[0].values: Gt needs exactly one integer value",
        ),
        (
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: [{key: k, operator: Within, values: [a]}]}}}\n",
            "np.yaml: document 1 (NodePool p): spec.template.spec.requirements[0].operator: unknown operator \"Within\"",
        ),
        (
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {disruption: {budgets: [{nodes: 150%}]}, template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}}}}\n",
            "np.yaml: document 1 (NodePool p): spec.disruption.budgets[0].nodes: a percentage must be between 0% and 100%",
        ),
        (
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {disruption: {budgets: [{nodes: '1', schedule: '@daily'}]}, template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}}}}\n",
            "np.yaml: document 1 (NodePool p): spec.disruption.budgets[0].duration: 'schedule' must be set with 'duration'",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: spec.x, operator: In, values: [a]}]}]}}}\n",
            "np.yaml: document 1 (Pod default/p): spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key: unsupported field \"spec.x\"",
        ),
        (
            "kind: Pod\nmetadata: {name: p}\n",
            "np.yaml: document 1: apiVersion: missing",
        ),
        (
            "apiVersion: v1\nmetadata: {name: p}\n",
            "np.yaml: document 1: kind: missing",
        ),
        (
            "apiVersion: v1\nkind: Pod\nspec: {}\n",
            "np.yaml: document 1 (Pod): metadata.name: missing",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, creationTimestamp: yesterday}\n",
            "np.yaml: document 1 (Pod default/p): metadata.creationTimestamp: failed to parse",
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: ok}}\n- {apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: -1}}\n",
            "np.yaml: document 1 (Deployment default/d): items[1].spec.replicas: must not be negative",
        ),
        (
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: n}\nspec: {kubelet: {evictionHard: {memory.available: lots%}}}\n",
            "np.yaml: document 1 (EC2NodeClass n): spec.kubelet.evictionHard.memory.available: \"lots%\" is not a percentage",
        ),
        (
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: n}\nspec: {amiSelectorTerms: [{alias: ubuntu@latest}]}\n",
            "np.yaml: document 1 (EC2NodeClass n): spec.amiSelectorTerms[0].alias: invalid alias \"ubuntu@latest\"",
        ),
        (
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: [unclosed\n",
            "np.yaml: document 2: ",
        ),
        (
            "- just\n- strings\n",
            "np.yaml: document 1: items[0]: expected a Kubernetes object, found a string",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .map(|(text, want)| {
            let mut b = Reader::new();
            let got = match b
                .add_document_text(text, "np.yaml")
                .and_then(|()| b.finish())
            {
                Ok(_) => "(read without an error)".to_string(),
                Err(e) => e.to_string(),
            };
            (got, want)
        })
        .filter(|(got, want)| !got.starts_with(*want))
        .map(|(got, want)| format!("\n got: {got}\nwant: {want}…"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join(""));
}

#[test]
fn a_bad_json_file_names_the_document() {
    let e = load_err("{\"apiVersion\": \"v1\"}\n{\"kind\": ", "dump.json");
    assert!(e.starts_with("dump.json: document 2: invalid JSON"), "{e}");
}

#[test]
fn load_paths_reads_folders_in_sorted_order_and_reports_missing_files() {
    let dir = std::env::temp_dir().join(format!("dovetail-manifests-{}", std::process::id()));
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let ns = |n: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}}}\n");
    std::fs::write(dir.join("b.yaml"), ns("b")).unwrap();
    std::fs::write(dir.join("a.yml"), ns("a")).unwrap();
    std::fs::write(
        sub.join("c.json"),
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"c"}}"#,
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
    std::fs::write(dir.join(".hidden.yaml"), "garbage: [").unwrap();
    let l = load_paths(&[dir.display().to_string()]).unwrap();
    let names: Vec<String> = l
        .snapshot
        .namespaces
        .iter()
        .map(|n| n.name.clone())
        .collect();
    assert_eq!(names, vec!["a", "b", "c"]);
    let missing = dir.join("nope.yaml").display().to_string();
    let e = load_paths(std::slice::from_ref(&missing)).unwrap_err();
    assert!(matches!(e, Error::Read { .. }));
    assert!(e.to_string().starts_with(&missing), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// === documents ===

#[test]
fn documents_are_numbered_as_yaml_numbers_them() {
    let text = "# leading comment\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n...\n# trailing comment\n--- {apiVersion: v1, kind: Namespace, metadata: {name: c}}\n---\nkind: Namespace\n";
    let e = load_err(text, "docs.yaml");
    assert!(
        e.starts_with("docs.yaml: document 5: apiVersion: missing"),
        "{e}"
    );
    let l = load(
        &text
            .replace("kind: Namespace\n---", "kind: Namespace\n--- #")
            .replace(
                "---\nkind: Namespace\n",
                "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: d}\n",
            ),
    );
    let names: Vec<&str> = l
        .snapshot
        .namespaces
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, vec!["a", "b", "c", "d"]);
}

#[test]
fn syntax_errors_give_the_line_in_the_file() {
    let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: [b}\n";
    let e = load_err(text, "ns.yaml");
    assert!(e.starts_with("ns.yaml: document 2: "), "{e}");
    assert!(e.contains("at line 7 column"), "{e}");
}

#[test]
fn json_lists_are_read_item_by_item_with_item_paths() {
    let list = |replicas: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "List", "items": [
                {{"apiVersion": "v1", "kind": "Namespace", "metadata": {{"name": "a"}}}},
                {{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": "d"}},
                  "spec": {{"replicas": {replicas}, "template": {{"spec": {{"containers": [{{"name": "c"}}]}}}}}}}}
            ]}}
            [{{"apiVersion": "v1", "kind": "Namespace", "metadata": {{"name": "b"}}}}]"#
        )
    };
    let mut b = Reader::new();
    b.add_document_text(&list("2"), "dump.json").unwrap();
    let l = b.finish().unwrap();
    assert_eq!(l.snapshot.namespaces.len(), 2);
    assert_eq!(l.snapshot.pods.len(), 2);
    let e = load_err(&list("\"two\""), "dump.json");
    assert!(
        e.starts_with("dump.json: document 1 (Deployment default/d): items[1].spec.replicas: invalid type: string \"two\""),
        "{e}"
    );
    let e = load_err(
        &list("2").replace("\"name\": \"b\"", "\"name\": 3"),
        "dump.json",
    );
    assert!(
        e.starts_with("dump.json: document 2 (Namespace): items[0].metadata.name"),
        "{e}"
    );
}

#[test]
fn controllers_create_their_templated_claims_unless_the_input_has_them() {
    let l = load(
        r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: standard, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: ebs.csi.aws.com
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-0, namespace: prod}
spec: {storageClassName: bound-class, volumeName: pv-0}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: prod}
spec:
  replicas: 2
  template:
    spec:
      containers: [{name: a}]
      volumes:
      - {name: scratch, ephemeral: {volumeClaimTemplate: {spec: {}}}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {storageClassName: gp3}
"#,
    );
    let claim = |name: &str| {
        l.snapshot
            .pvcs
            .iter()
            .find(|p| p.namespace == "prod" && p.name == name)
            .unwrap_or_else(|| panic!("no claim {name}"))
    };
    // The input's own claim wins over the template.
    assert_eq!(
        claim("data-db-0").storage_class.as_deref(),
        Some("bound-class")
    );
    assert_eq!(claim("data-db-0").volume_name.as_deref(), Some("pv-0"));
    // The missing one is made from the template, unbound, with the template's class.
    assert_eq!(claim("data-db-1").storage_class.as_deref(), Some("gp3"));
    assert_eq!(claim("data-db-1").volume_name, None);
    // An ephemeral template without a class gets the default class.
    assert_eq!(
        claim("db-1-scratch").storage_class.as_deref(),
        Some("standard")
    );
    assert_eq!(
        l.snapshot.pvcs.len(),
        4,
        "data-db-0 from the input, three from templates"
    );
}

/// A NodePool being deleted is passed on as the watcher passes it on (the planner launches
/// nothing from it and says why), with a warning.
#[test]
fn a_deleting_node_pool_is_read_with_a_warning() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: old, deletionTimestamp: "2026-01-01T00:00:00Z"}
spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}}}
"#,
    );
    assert!(l.snapshot.node_pools[0].deletion_time.is_some());
    assert!(
        l.warnings
            .iter()
            .any(|w| w.contains("NodePool old is being deleted")),
        "{:?}",
        l.warnings
    );
}

#[test]
fn unknown_fields_are_warned_about_naming_field_and_document() {
    let l = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: typo}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirments:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  kubelet: {maxPod: 20}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  nodeSelecter: {kubernetes.io/arch: arm64}
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
"#,
    );
    let w = &l.warnings;
    assert_eq!(w.len(), 3, "{w:?}");
    assert_eq!(
        w[0],
        "test.yaml: document 1 (NodePool typo): unknown field spec.template.spec.requirments (karpenter.sh/v1 NodePool has no such field; did you mean requirements?); it is ignored"
    );
    assert!(
        w[1].starts_with(
            "test.yaml: document 2 (EC2NodeClass default): unknown field spec.kubelet.maxPod "
        ) && w[1].contains("did you mean maxPods?"),
        "{}",
        w[1]
    );
    assert!(
        w[2].starts_with("test.yaml: document 3 (Pod shop/web): unknown field spec.nodeSelecter ")
            && w[2].contains("did you mean nodeSelector?"),
        "{}",
        w[2]
    );
    // The misspelt fields are ignored, as Kubernetes ignores them: no requirement, no selector.
    assert!(l.snapshot.node_pools[0].requirements.is_empty());
    assert!(l.snapshot.pods[0].node_selector.is_empty());
}

// === strict reading and bounded work ===

fn deployment(replicas: &str, requests: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: {replicas}\n  template:\n    spec:\n      containers:\n      - name: c\n        resources:\n          requests: {requests}\n"
    )
}

#[test]
fn duplicate_keys_are_errors_naming_key_and_line() {
    let e = load_err(&deployment("1", "{cpu: 500m, cpu: 64}"), "d.yaml");
    assert!(e.contains("duplicate key \"cpu\""), "{e}");
    assert!(e.contains("at line 11"), "{e}");
    let e = load_err(
        "apiVersion: v1\nkind: Pod\nkind: Node\nmetadata: {name: p}\n",
        "p.yaml",
    );
    assert!(
        e.contains("duplicate key \"kind\"") && e.contains("line 3"),
        "{e}"
    );
    let e = load_err(
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1", "a": "2"}}}"#,
        "p.json",
    );
    assert!(
        e.contains("duplicate key \"a\"") && e.contains("line 1"),
        "{e}"
    );
    let e = load_err(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {a: x, a: y}\nspec: {containers: [{name: c}]}\n",
        "p.yaml",
    );
    assert!(e.contains("duplicate key \"a\""), "{e}");
}

#[test]
fn non_finite_and_negative_quantities_are_errors() {
    for q in [".inf", "-.inf", ".nan", ".NaN"] {
        let e = load_err(&deployment("1", &format!("{{cpu: {q}}}")), "d.yaml");
        assert!(e.contains("not a finite number"), "{q}: {e}");
    }
    let e = load_err(&deployment("1", "{cpu: \"-64\"}"), "d.yaml");
    assert!(
        e.contains("requests.cpu") && e.contains("must not be negative"),
        "{e}"
    );
}

#[test]
fn a_workload_without_a_template_is_an_error() {
    let e = load_err(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n",
        "d.yaml",
    );
    assert!(e.contains("spec.template.spec.containers"), "{e}");
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dovetail-strict-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn the_byte_cap_ends_an_endless_input() {
    let limits = Limits {
        max_input_bytes: 1 << 20,
        ..Limits::default()
    };
    let e = load_paths_with(&["/dev/zero".to_string()], &limits)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/dev/zero") && e.contains("not a regular file"),
        "{e}"
    );
    let dir = scratch("big");
    let f = dir.join("big.yaml");
    std::fs::write(&f, "#".repeat(2 << 20)).expect("write");
    let e = load_paths_with(&[f.display().to_string()], &limits)
        .unwrap_err()
        .to_string();
    assert!(e.contains("larger than the limit of 1048576 bytes"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn folders_skip_fifos() {
    let dir = scratch("fifo");
    let fifo = dir.join("x.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    std::fs::write(
        dir.join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
    )
    .expect("write");
    let l = load_paths(&[dir.display().to_string()]).expect("reads the regular file only");
    assert_eq!(l.snapshot.pods.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_same_pod_in_two_files_is_refused_naming_the_second() {
    let dir = scratch("twice");
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n";
    std::fs::write(dir.join("a.yaml"), pod).expect("write");
    std::fs::write(dir.join("b.yaml"), pod).expect("write");
    let e = load_paths(&[dir.display().to_string()])
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("b.yaml: document 1 (Pod default/p): metadata.name: duplicate pod default/p: names are unique per kind and namespace"),
        "{e}"
    );
    // The same file given twice is read once, as applying it twice gives one object.
    let f = dir.join("a.yaml").display().to_string();
    assert_eq!(
        load_paths(&[f.clone(), f])
            .expect("reads")
            .snapshot
            .pods
            .len(),
        1
    );
    let _ = std::fs::remove_dir_all(&dir);
}
