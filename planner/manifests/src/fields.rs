//! Unknown-field warnings, as `kubectl apply --validate=warn` gives them: a field that the
//! object's schema does not have (most often a misspelling, `nodeSelecter`, `requirments`) is
//! ignored by Kubernetes and by the planner, which silently changes the plan; the warning names
//! the field, the document and, when one is close, the field that was meant.
//!
//! NodePools and EC2NodeClasses are checked against the `openAPIV3Schema` of the CRDs in
//! `deploy/crds/` (generated from `watcher/crds`, Karpenter v1's schemas). Pods and the pod
//! templates of workload controllers are checked against the table below, which lists every
//! field of the Kubernetes types the planner reads into (Pod, PodSpec, Container, affinity,
//! tolerations, topology spread) and leaves the others' insides unchecked.

use std::sync::OnceLock;

use serde_json::Value;

/// The NodePool CRD.
const NODEPOOL_CRD: &str = include_str!("../../../deploy/crds/karpenter.sh_nodepools.yaml");
/// The EC2NodeClass CRD.
const EC2NODECLASS_CRD: &str =
    include_str!("../../../deploy/crds/karpenter.k8s.aws_ec2nodeclasses.yaml");

/// Object types of the table: `(type, [(field, child)])`. A child is `-` for a value not looked
/// into, `map` for a map with free keys, `T` for an object of type `T`, `[T]` for a list of
/// them.
const TABLE: &[(&str, &[(&str, &str)])] = &[
    (
        "Pod",
        &[
            ("apiVersion", "-"),
            ("kind", "-"),
            ("metadata", "ObjectMeta"),
            ("spec", "PodSpec"),
            ("status", "-"),
        ],
    ),
    (
        "Workload",
        &[
            ("apiVersion", "-"),
            ("kind", "-"),
            ("metadata", "ObjectMeta"),
            ("spec", "WorkloadSpec"),
            ("status", "-"),
        ],
    ),
    (
        "ObjectMeta",
        &[
            ("name", "-"),
            ("generateName", "-"),
            ("namespace", "-"),
            ("selfLink", "-"),
            ("uid", "-"),
            ("resourceVersion", "-"),
            ("generation", "-"),
            ("creationTimestamp", "-"),
            ("deletionTimestamp", "-"),
            ("deletionGracePeriodSeconds", "-"),
            ("labels", "map"),
            ("annotations", "map"),
            ("ownerReferences", "[OwnerReference]"),
            ("finalizers", "-"),
            ("managedFields", "-"),
        ],
    ),
    (
        "OwnerReference",
        &[
            ("apiVersion", "-"),
            ("kind", "-"),
            ("name", "-"),
            ("uid", "-"),
            ("controller", "-"),
            ("blockOwnerDeletion", "-"),
        ],
    ),
    (
        // Deployment, ReplicaSet, StatefulSet, Job and DaemonSet specs together.
        "WorkloadSpec",
        &[
            ("replicas", "-"),
            ("selector", "LabelSelector"),
            ("template", "PodTemplateSpec"),
            ("strategy", "-"),
            ("updateStrategy", "-"),
            ("minReadySeconds", "-"),
            ("revisionHistoryLimit", "-"),
            ("paused", "-"),
            ("progressDeadlineSeconds", "-"),
            ("serviceName", "-"),
            ("podManagementPolicy", "-"),
            ("volumeClaimTemplates", "-"),
            ("persistentVolumeClaimRetentionPolicy", "-"),
            ("ordinals", "-"),
            ("parallelism", "-"),
            ("completions", "-"),
            ("activeDeadlineSeconds", "-"),
            ("podFailurePolicy", "-"),
            ("successPolicy", "-"),
            ("backoffLimit", "-"),
            ("backoffLimitPerIndex", "-"),
            ("maxFailedIndexes", "-"),
            ("manualSelector", "-"),
            ("ttlSecondsAfterFinished", "-"),
            ("completionMode", "-"),
            ("suspend", "-"),
            ("podReplacementPolicy", "-"),
            ("managedBy", "-"),
        ],
    ),
    (
        "PodTemplateSpec",
        &[("metadata", "ObjectMeta"), ("spec", "PodSpec")],
    ),
    (
        "PodSpec",
        &[
            ("volumes", "-"),
            ("initContainers", "[Container]"),
            ("containers", "[Container]"),
            ("ephemeralContainers", "-"),
            ("restartPolicy", "-"),
            ("terminationGracePeriodSeconds", "-"),
            ("activeDeadlineSeconds", "-"),
            ("dnsPolicy", "-"),
            ("nodeSelector", "map"),
            ("serviceAccountName", "-"),
            ("serviceAccount", "-"),
            ("automountServiceAccountToken", "-"),
            ("nodeName", "-"),
            ("hostNetwork", "-"),
            ("hostPID", "-"),
            ("hostIPC", "-"),
            ("shareProcessNamespace", "-"),
            ("securityContext", "-"),
            ("imagePullSecrets", "-"),
            ("hostname", "-"),
            ("hostnameOverride", "-"),
            ("subdomain", "-"),
            ("affinity", "Affinity"),
            ("schedulerName", "-"),
            ("tolerations", "[Toleration]"),
            ("hostAliases", "-"),
            ("priorityClassName", "-"),
            ("priority", "-"),
            ("dnsConfig", "-"),
            ("readinessGates", "-"),
            ("runtimeClassName", "-"),
            ("enableServiceLinks", "-"),
            ("preemptionPolicy", "-"),
            ("overhead", "map"),
            ("topologySpreadConstraints", "[TopologySpreadConstraint]"),
            ("setHostnameAsFQDN", "-"),
            ("os", "-"),
            ("hostUsers", "-"),
            ("schedulingGates", "-"),
            ("resourceClaims", "-"),
            ("resources", "ResourceRequirements"),
        ],
    ),
    (
        "Container",
        &[
            ("name", "-"),
            ("image", "-"),
            ("command", "-"),
            ("args", "-"),
            ("workingDir", "-"),
            ("ports", "[ContainerPort]"),
            ("envFrom", "-"),
            ("env", "-"),
            ("resources", "ResourceRequirements"),
            ("resizePolicy", "-"),
            ("restartPolicy", "-"),
            ("restartPolicyRules", "-"),
            ("volumeMounts", "-"),
            ("volumeDevices", "-"),
            ("livenessProbe", "-"),
            ("readinessProbe", "-"),
            ("startupProbe", "-"),
            ("lifecycle", "-"),
            ("terminationMessagePath", "-"),
            ("terminationMessagePolicy", "-"),
            ("imagePullPolicy", "-"),
            ("securityContext", "-"),
            ("stdin", "-"),
            ("stdinOnce", "-"),
            ("tty", "-"),
        ],
    ),
    (
        "ContainerPort",
        &[
            ("name", "-"),
            ("hostPort", "-"),
            ("containerPort", "-"),
            ("protocol", "-"),
            ("hostIP", "-"),
        ],
    ),
    (
        "ResourceRequirements",
        &[("limits", "map"), ("requests", "map"), ("claims", "-")],
    ),
    (
        "Affinity",
        &[
            ("nodeAffinity", "NodeAffinity"),
            ("podAffinity", "PodAffinity"),
            ("podAntiAffinity", "PodAffinity"),
        ],
    ),
    (
        "NodeAffinity",
        &[
            (
                "requiredDuringSchedulingIgnoredDuringExecution",
                "NodeSelector",
            ),
            (
                "preferredDuringSchedulingIgnoredDuringExecution",
                "[PreferredSchedulingTerm]",
            ),
        ],
    ),
    (
        "NodeSelector",
        &[("nodeSelectorTerms", "[NodeSelectorTerm]")],
    ),
    (
        "NodeSelectorTerm",
        &[
            ("matchExpressions", "[SelectorRequirement]"),
            ("matchFields", "[SelectorRequirement]"),
        ],
    ),
    (
        "SelectorRequirement",
        &[("key", "-"), ("operator", "-"), ("values", "-")],
    ),
    (
        "PreferredSchedulingTerm",
        &[("weight", "-"), ("preference", "NodeSelectorTerm")],
    ),
    (
        "PodAffinity",
        &[
            (
                "requiredDuringSchedulingIgnoredDuringExecution",
                "[PodAffinityTerm]",
            ),
            (
                "preferredDuringSchedulingIgnoredDuringExecution",
                "[WeightedPodAffinityTerm]",
            ),
        ],
    ),
    (
        "PodAffinityTerm",
        &[
            ("labelSelector", "LabelSelector"),
            ("namespaces", "-"),
            ("topologyKey", "-"),
            ("namespaceSelector", "LabelSelector"),
            ("matchLabelKeys", "-"),
            ("mismatchLabelKeys", "-"),
        ],
    ),
    (
        "WeightedPodAffinityTerm",
        &[("weight", "-"), ("podAffinityTerm", "PodAffinityTerm")],
    ),
    (
        "LabelSelector",
        &[
            ("matchLabels", "map"),
            ("matchExpressions", "[SelectorRequirement]"),
        ],
    ),
    (
        "Toleration",
        &[
            ("key", "-"),
            ("operator", "-"),
            ("value", "-"),
            ("effect", "-"),
            ("tolerationSeconds", "-"),
        ],
    ),
    (
        "TopologySpreadConstraint",
        &[
            ("maxSkew", "-"),
            ("topologyKey", "-"),
            ("whenUnsatisfiable", "-"),
            ("labelSelector", "LabelSelector"),
            ("minDomains", "-"),
            ("nodeAffinityPolicy", "-"),
            ("nodeTaintsPolicy", "-"),
            ("matchLabelKeys", "-"),
        ],
    ),
];

/// One unknown field: its path in the document and the known field closest to it, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Unknown {
    /// `spec.template.spec.requirments`, `spec.containers[0].resources.request`.
    pub(super) path: String,
    /// A field of the same object whose name is close (edit distance ≤ 2, or equal ignoring
    /// case).
    pub(super) suggestion: Option<String>,
}

/// Where a value sits in a schema.
#[derive(Clone, Copy)]
enum Schema<'s> {
    /// A type of [`TABLE`].
    Table(&'static str),
    /// A node of a CRD's `openAPIV3Schema`.
    Open(&'s Value),
}

/// The unknown fields of an object of `api_version` `kind`, in document order; empty for kinds
/// that are not checked.
pub(super) fn unknown(api_version: &str, kind: &str, value: &Value) -> Vec<Unknown> {
    let root = match (api_version, kind) {
        ("v1", "Pod") => Schema::Table("Pod"),
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch/v1", "Job") => Schema::Table("Workload"),
        ("karpenter.sh/v1", "NodePool") => match crd(&NODEPOOL, NODEPOOL_CRD) {
            Some(s) => Schema::Open(s),
            None => return Vec::new(),
        },
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => match crd(&EC2NODECLASS, EC2NODECLASS_CRD) {
            Some(s) => Schema::Open(s),
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    walk(value, root, "", true, &mut out);
    out
}

static NODEPOOL: OnceLock<Option<Value>> = OnceLock::new();
static EC2NODECLASS: OnceLock<Option<Value>> = OnceLock::new();

/// The `openAPIV3Schema` of a CRD's `v1` version (parsed once).
fn crd<'c>(cell: &'c OnceLock<Option<Value>>, text: &str) -> Option<&'c Value> {
    cell.get_or_init(|| {
        let doc: Value = serde_yaml::from_str(text.trim_start_matches("---\n")).ok()?;
        doc.get("spec")?
            .get("versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some("v1"))?
            .get("schema")?
            .get("openAPIV3Schema")
            .cloned()
    })
    .as_ref()
}

fn table(name: &str) -> &'static [(&'static str, &'static str)] {
    TABLE
        .iter()
        .find(|(t, _)| *t == name)
        .map(|(_, f)| *f)
        .unwrap_or(&[])
}

fn walk(value: &Value, schema: Schema<'_>, path: &str, root: bool, out: &mut Vec<Unknown>) {
    match schema {
        Schema::Table(t) => {
            let Some(obj) = value.as_object() else {
                return;
            };
            let fields = table(t);
            for (k, v) in obj {
                let at = join(path, k);
                match fields.iter().find(|(f, _)| f == k) {
                    None => out.push(Unknown {
                        suggestion: closest(k, fields.iter().map(|(f, _)| *f)),
                        path: at,
                    }),
                    Some((_, child)) => table_child(v, child, &at, out),
                }
            }
        }
        Schema::Open(node) => {
            if node
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true)
            {
                return;
            }
            if let Some(items) = node.get("items") {
                if let Some(list) = value.as_array() {
                    for (i, v) in list.iter().enumerate() {
                        walk(v, Schema::Open(items), &format!("{path}[{i}]"), false, out);
                    }
                }
                return;
            }
            let Some(obj) = value.as_object() else {
                return;
            };
            let props = node.get("properties").and_then(Value::as_object);
            let Some(props) = props else {
                // A map (`additionalProperties`) or an object the schema leaves open.
                if let Some(extra) = node.get("additionalProperties").filter(|a| a.is_object()) {
                    for (k, v) in obj {
                        walk(v, Schema::Open(extra), &join(path, k), false, out);
                    }
                }
                return;
            };
            for (k, v) in obj {
                let at = join(path, k);
                if root && k == "metadata" {
                    walk(v, Schema::Table("ObjectMeta"), &at, false, out);
                    continue;
                }
                if root && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                match props.get(k) {
                    Some(child) => walk(v, Schema::Open(child), &at, false, out),
                    None => out.push(Unknown {
                        suggestion: closest(k, props.keys().map(String::as_str)),
                        path: at,
                    }),
                }
            }
        }
    }
}

fn table_child(v: &Value, child: &'static str, path: &str, out: &mut Vec<Unknown>) {
    match child {
        "-" | "map" => {}
        list if list.starts_with('[') => {
            let t = list.trim_start_matches('[').trim_end_matches(']');
            if let Some(items) = v.as_array() {
                for (i, item) in items.iter().enumerate() {
                    walk(item, Schema::Table(t), &format!("{path}[{i}]"), false, out);
                }
            }
        }
        t => walk(v, Schema::Table(t), path, false, out),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The known name closest to `key`: equal ignoring case, else the nearest within an edit
/// distance of 2 (none for very short names, where everything is near).
fn closest<'a>(key: &str, known: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for k in known {
        let d = if k.eq_ignore_ascii_case(key) {
            0
        } else {
            distance(k, key)
        };
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, k));
        }
    }
    best.filter(|(d, _)| *d == 0 || (*d <= 2 && key.len() > 3))
        .map(|(_, k)| k.to_string())
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The warning for one unknown field of a document.
pub(super) fn warning(api_version: &str, kind: &str, u: &Unknown) -> String {
    let hint = match &u.suggestion {
        Some(s) => format!("; did you mean {s}?"),
        None => String::new(),
    };
    format!(
        "unknown field {} ({api_version} {kind} has no such field{hint}); it is ignored",
        u.path
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(api: &str, kind: &str, yaml: &str) -> Vec<(String, Option<String>)> {
        let v: Value = serde_yaml::from_str(yaml).expect("yaml");
        let mut out: Vec<(String, Option<String>)> = unknown(api, kind, &v)
            .into_iter()
            .map(|u| (u.path, u.suggestion))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_misspelt_pod_field_is_named_with_the_field_meant() {
        let found = paths(
            "v1",
            "Pod",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {anything: goes}}\nspec:\n  nodeSelecter: {a: b}\n  containers:\n  - name: c\n    image: x\n    env: [{name: A, valueFrom: {whatever: 1}}]\n    resources: {request: {cpu: 1}}\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpression: []\n  tolerations: [{key: a, operator: Exists, efect: NoSchedule}]\n",
        );
        assert_eq!(
            found,
            vec![
                (
                    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpression".into(),
                    Some("matchExpressions".into())
                ),
                (
                    "spec.containers[0].resources.request".into(),
                    Some("requests".into())
                ),
                ("spec.nodeSelecter".into(), Some("nodeSelector".into())),
                ("spec.tolerations[0].efect".into(), Some("effect".into())),
            ]
        );
    }

    #[test]
    fn a_correct_pod_and_deployment_have_no_unknown_field() {
        let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: b, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: r, uid: u, controller: true}]}\nspec:\n  priorityClassName: high\n  containers: [{name: c, image: x, ports: [{containerPort: 80, hostPort: 80}], resources: {requests: {cpu: 1}, limits: {memory: 1Gi}}}]\n  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {a: b}}}]\nstatus: {phase: Pending, anything: 1}\n";
        assert_eq!(paths("v1", "Pod", pod), vec![]);
        let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec:\n  replicas: 3\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: [{name: c, image: x}]\n      affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: h, labelSelector: {matchLabels: {a: b}}}}]}}\n";
        assert_eq!(paths("apps/v1", "Deployment", deploy), vec![]);
        let bad = deploy.replace("replicas", "replica");
        assert_eq!(
            paths("apps/v1", "Deployment", &bad),
            vec![("spec.replica".into(), Some("replicas".into()))]
        );
    }

    #[test]
    fn node_pools_and_node_classes_are_checked_against_the_crds() {
        let pool = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    metadata: {labels: {team: a}}\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirments: [{key: a, operator: In, values: [b]}]\n      expireAfter: 720h\n  limits: {cpu: 1000, nodes: 10}\n  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1m, budgets: [{nodes: 10%, reason: [Empty]}]}\n";
        assert_eq!(
            paths("karpenter.sh/v1", "NodePool", pool),
            vec![
                (
                    "spec.disruption.budgets[0].reason".into(),
                    Some("reasons".into())
                ),
                (
                    "spec.template.spec.requirments".into(),
                    Some("requirements".into())
                ),
            ]
        );
        let class = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  securityGroupSelectorTerm: [{tags: {a: b}}]\n  tags: {anything: goes}\n";
        assert_eq!(
            paths("karpenter.k8s.aws/v1", "EC2NodeClass", class),
            vec![(
                "spec.securityGroupSelectorTerm".into(),
                Some("securityGroupSelectorTerms".into())
            )]
        );
    }
}
