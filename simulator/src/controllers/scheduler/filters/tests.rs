//! Each filter against the behaviour the Kubernetes docs describe (the section is cited on each
//! test).

use serde_json::{Value, json};

use super::*;
use crate::controllers::scheduler::filter;

fn node(name: &str, extra: Value) -> NodeInfo {
    let mut n = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "3"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    });
    merge(&mut n, extra);
    NodeInfo::new(n)
}

fn pod(name: &str, extra: Value) -> Value {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "default", "labels": {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
    });
    merge(&mut p, extra);
    p
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn run(p: &Value, n: &NodeInfo) -> Vec<String> {
    filter(p, n, std::slice::from_ref(n), &Namespaces::new())
}

/// "Resource Management for Pods and Containers § How Pods with resource requests are
/// scheduled": the sum of requests of the pods on the node plus the new pod's must not exceed
/// the node's allocatable, per resource; the pod count is bounded by allocatable pods.
#[test]
fn node_resources_fit_counts_the_pods_already_there() {
    let mut n = node("n", json!({}));
    let p = pod("p", json!({}));
    assert!(run(&p, &n).is_empty());
    n.add_pod(pod("a", json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})));
    assert!(run(&p, &n).is_empty(), "1.5 of 2 cpu");
    n.add_pod(pod("b", json!({})));
    assert!(run(&p, &n).is_empty(), "exactly 2 of 2 cpu, 3 of 3 pods");
    n.add_pod(pod(
        "c",
        json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "100m"}}}]}}),
    ));
    assert_eq!(
        run(&p, &n),
        vec!["Too many pods", "Insufficient cpu"],
        "4 pods, 2.1 cpu"
    );
    let big = pod(
        "big",
        json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "8Gi"}}}]}}),
    );
    let empty = node("e", json!({}));
    assert_eq!(run(&big, &empty), vec!["Insufficient memory"]);
    let gpu = pod(
        "g",
        json!({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}),
    );
    assert_eq!(
        run(&gpu, &empty),
        vec!["Insufficient nvidia.com/gpu"],
        "limit-only extended resource"
    );
}

/// Requests are summed with checked arithmetic: four containers of 4Ei memory ask for 2^64
/// bytes, which must not wrap round to a request that fits (kube-scheduler sums `Quantity`s,
/// which do not overflow). Without checks the sum overflows `i64` (a panic in debug builds, a
/// tiny request in release).
#[test]
fn requests_summing_past_i64_fit_nowhere() {
    let n = node(
        "n",
        json!({"status": {"allocatable": {"cpu": "1000", "memory": "7Ei", "pods": "110"}}}),
    );
    let c = |name: &str| json!({"name": name, "resources": {"requests": {"memory": "4Ei"}}});
    let p = pod(
        "huge",
        json!({"spec": {"containers": [c("a"), c("b"), c("c"), c("d")]}}),
    );
    assert_eq!(run(&p, &n), vec!["Insufficient memory".to_string()]);
    assert_eq!(pod_requests(&p, false).memory, i64::MAX);
}

/// "Pod Overhead": the overhead is added to the container requests when scheduling; "Init
/// Containers § Resource sharing": the effective request is max(largest init, sum of app).
#[test]
fn node_resources_fit_uses_effective_requests() {
    let n = node("n", json!({}));
    let with_overhead = pod("o", json!({"spec": {"overhead": {"cpu": "1600m"}}}));
    assert_eq!(
        run(&with_overhead, &n),
        vec!["Insufficient cpu"],
        "500m + 1600m > 2"
    );
    let init = pod(
        "i",
        json!({"spec": {"initContainers": [{"resources": {"requests": {"cpu": "3"}}}]}}),
    );
    assert_eq!(run(&init, &n), vec!["Insufficient cpu"], "init 3 > 2");
}

/// "Taints and Tolerations § Concepts": NoSchedule and NoExecute taints repel pods that do not
/// tolerate them; PreferNoSchedule is only a preference; an empty key with Exists tolerates
/// everything; Equal compares values; an empty effect matches all effects.
#[test]
fn taints_and_tolerations() {
    let tainted = |effect: &str| {
        node(
            "n",
            json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": effect}]}}),
        )
    };
    let p = pod("p", json!({}));
    assert_eq!(
        run(&p, &tainted("NoSchedule")),
        vec!["node(s) had untolerated taint {dedicated: gpu}"]
    );
    assert_eq!(run(&p, &tainted("NoExecute")).len(), 1);
    assert!(
        run(&p, &tainted("PreferNoSchedule")).is_empty(),
        "only a preference"
    );
    for (toleration, ok) in [
        (
            json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}),
            true,
        ),
        (json!({"key": "dedicated", "value": "gpu"}), true),
        (
            json!({"key": "dedicated", "operator": "Equal", "value": "cpu"}),
            false,
        ),
        (json!({"key": "dedicated", "operator": "Exists"}), true),
        (json!({"operator": "Exists"}), true),
        (
            json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}),
            false,
        ),
        (json!({"key": "other", "operator": "Exists"}), false),
    ] {
        let p = pod("p", json!({"spec": {"tolerations": [toleration.clone()]}}));
        assert_eq!(
            run(&p, &tainted("NoSchedule")).is_empty(),
            ok,
            "{toleration}"
        );
    }
}

/// "Assigning Pods to Nodes § nodeSelector" (every label must match) and "§ Node affinity"
/// (terms are ORed, expressions within a term ANDed; nodeSelector and affinity must both hold).
#[test]
fn node_selector_and_required_node_affinity() {
    let n = node(
        "n",
        json!({"metadata": {"labels": {"disk": "ssd", "cores": "8"}}}),
    );
    let reason = vec!["node(s) didn't match Pod's node affinity/selector".to_string()];
    assert!(
        run(
            &pod("p", json!({"spec": {"nodeSelector": {"disk": "ssd"}}})),
            &n
        )
        .is_empty()
    );
    assert_eq!(
        run(
            &pod("p", json!({"spec": {"nodeSelector": {"disk": "hdd"}}})),
            &n
        ),
        reason
    );
    let affinity = |terms: Value, selector: Value| {
        pod(
            "p",
            json!({"spec": {"nodeSelector": selector, "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}}),
        )
    };
    let miss = json!({"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]});
    let hit = json!({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]});
    assert!(
        run(&affinity(json!([miss.clone(), hit.clone()]), json!({})), &n).is_empty(),
        "ORed"
    );
    assert_eq!(run(&affinity(json!([miss]), json!({})), &n), reason);
    assert_eq!(
        run(&affinity(json!([hit]), json!({"disk": "hdd"})), &n),
        reason,
        "both must hold"
    );
    assert_eq!(
        run(&affinity(json!([]), json!({})), &n),
        reason,
        "no terms: no node"
    );
}

/// "Scheduling Framework" NodeUnschedulable plugin and "Safely Drain a Node": a cordoned node
/// takes only pods tolerating `node.kubernetes.io/unschedulable:NoSchedule`.
#[test]
fn cordoned_nodes_take_only_tolerating_pods() {
    let n = node("n", json!({"spec": {"unschedulable": true}}));
    assert_eq!(
        run(&pod("p", json!({})), &n),
        vec!["node(s) were unschedulable"]
    );
    let tolerant = pod(
        "p",
        json!({"spec": {"tolerations": [
        {"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]}}),
    );
    assert!(run(&tolerant, &n).is_empty());
}

/// Node conditions: a node that is not Ready takes nothing.
#[test]
fn not_ready_nodes_take_nothing() {
    let n = node(
        "n",
        json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    );
    assert_eq!(
        run(&pod("p", json!({})), &n),
        vec!["node(s) were not ready"]
    );
}

/// "Scheduling Framework" NodePorts plugin / Pod `hostPort`: a host port is taken per
/// (protocol, host IP, port), `0.0.0.0` overlapping every IP.
#[test]
fn host_ports_conflict_per_protocol_and_ip() {
    let with_port = |name: &str, port: Value| {
        pod(
            name,
            json!({"spec": {"containers": [{"name": "c", "ports": [port]}]}}),
        )
    };
    let mut n = node("n", json!({"status": {"allocatable": {"pods": "10"}}}));
    n.add_pod(with_port(
        "a",
        json!({"containerPort": 80, "hostPort": 8080}),
    ));
    let reason = vec!["node(s) didn't have free ports for the requested pod ports".to_string()];
    assert_eq!(
        run(
            &with_port("b", json!({"containerPort": 80, "hostPort": 8080})),
            &n
        ),
        reason
    );
    assert_eq!(
        run(
            &with_port(
                "b",
                json!({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"})
            ),
            &n
        ),
        reason,
        "0.0.0.0 overlaps every IP"
    );
    assert!(
        run(
            &with_port(
                "b",
                json!({"containerPort": 80, "hostPort": 8080, "protocol": "UDP"})
            ),
            &n
        )
        .is_empty()
    );
    assert!(
        run(
            &with_port("b", json!({"containerPort": 80, "hostPort": 8081})),
            &n
        )
        .is_empty()
    );
    assert!(
        run(&with_port("b", json!({"containerPort": 80})), &n).is_empty(),
        "no host port"
    );
}

/// "Assigning Pods to Nodes § Inter-pod affinity and anti-affinity": with topologyKey
/// `kubernetes.io/hostname` a pod does not go on a node running a pod its required
/// anti-affinity selects (in its own namespace unless `namespaces`/`namespaceSelector` say
/// otherwise), and the rule is symmetric for existing pods' required anti-affinity.
#[test]
fn required_pod_anti_affinity_on_hostname() {
    let anti = |name: &str, ns: &str, term_extra: Value| {
        let mut term = json!({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"});
        merge(&mut term, term_extra);
        pod(
            name,
            json!({"metadata": {"namespace": ns, "labels": {"app": "web"}}, "spec": {"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term]}}}}),
        )
    };
    let mut busy = node("busy", json!({}));
    busy.add_pod(pod("w1", json!({"metadata": {"labels": {"app": "web"}}})));
    let free = node("free", json!({}));
    let all = vec![busy.clone(), free.clone()];
    let ns = Namespaces::from([(
        "other".to_string(),
        Labels::from([("team".to_string(), "x".to_string())]),
    )]);
    let p = anti("w2", "default", json!({}));
    assert_eq!(
        filter(&p, &busy, &all, &ns),
        vec!["node(s) didn't match pod anti-affinity rules"]
    );
    assert!(filter(&p, &free, &all, &ns).is_empty());
    let elsewhere = anti("w2", "other", json!({}));
    assert!(
        filter(&elsewhere, &busy, &all, &ns).is_empty(),
        "own namespace only"
    );
    let listed = anti("w2", "other", json!({"namespaces": ["default"]}));
    assert_eq!(filter(&listed, &busy, &all, &ns).len(), 1);
    let all_ns = anti("w2", "other", json!({"namespaceSelector": {}}));
    assert_eq!(
        filter(&all_ns, &busy, &all, &ns).len(),
        1,
        "empty selector: all namespaces"
    );

    // Symmetry: an existing pod's anti-affinity keeps matching pods away.
    let mut guarded = node("guarded", json!({}));
    guarded.add_pod(anti("w0", "default", json!({})));
    let all = vec![guarded.clone()];
    let plain = pod("w3", json!({"metadata": {"labels": {"app": "web"}}}));
    assert_eq!(
        filter(&plain, &guarded, &all, &ns),
        vec!["node(s) didn't satisfy existing pods anti-affinity rules"]
    );
    let unrelated = pod("db", json!({"metadata": {"labels": {"app": "db"}}}));
    assert!(filter(&unrelated, &guarded, &all, &ns).is_empty());
}
