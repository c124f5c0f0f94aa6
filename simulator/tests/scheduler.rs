//! The simulated kube-scheduler through the API: binds pending pods to Ready nodes where they
//! fit and marks the rest Unschedulable (filters and scoring have unit tests next to the code).

mod support;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use support::{eventually, pod_json, start};

async fn ready_node(nodes: &Api<Node>, name: &str, cpu: &str, labels: serde_json::Value) {
    let n = json!({"metadata": {"name": name, "labels": labels}});
    nodes
        .create(&PostParams::default(), &serde_json::from_value(n).unwrap())
        .await
        .unwrap();
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            }})),
        )
        .await
        .unwrap();
}

fn scheduled_condition(p: &Pod) -> Option<(String, Option<String>, Option<String>)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test]
async fn binds_what_fits_and_marks_the_rest_unschedulable() {
    let sim = start().await;
    let client = sim.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    ready_node(
        &nodes,
        "small",
        "2",
        json!({"kubernetes.io/hostname": "small", "disk": "ssd"}),
    )
    .await;
    // A node that is not Ready takes nothing.
    nodes
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "booting"}, "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}})).unwrap())
        .await
        .unwrap();

    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("fits-1", json!({}), "800m")).unwrap(),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("fits-2", json!({}), "800m")).unwrap(),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("too-big", json!({}), "8")).unwrap(),
    )
    .await
    .unwrap();
    let mut wrong = pod_json("wrong-disk", json!({}), "100m");
    wrong["spec"]["nodeSelector"] = json!({"disk": "hdd"});
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(wrong).unwrap(),
    )
    .await
    .unwrap();

    for name in ["fits-1", "fits-2"] {
        let p = eventually(&sim, &format!("{name} bound"), || async {
            let p = pods.get(name).await.ok()?;
            p.spec.as_ref()?.node_name.is_some().then_some(p)
        })
        .await;
        assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("small"));
    }
    for (name, expected) in [
        (
            "too-big",
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were not ready.",
        ),
        (
            "wrong-disk",
            "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were not ready.",
        ),
    ] {
        let (status, reason, message) =
            eventually(&sim, &format!("{name} unschedulable"), || async {
                scheduled_condition(&pods.get(name).await.ok()?)
            })
            .await;
        assert_eq!(status, "False");
        assert_eq!(reason.as_deref(), Some("Unschedulable"));
        assert_eq!(
            message.as_deref(),
            Some(expected),
            "kube-scheduler's FitError format"
        );
        assert!(
            pods.get(name)
                .await
                .unwrap()
                .spec
                .unwrap()
                .node_name
                .is_none()
        );
    }

    // The real scheduler's FailedScheduling event is recorded too.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let evs = events
        .list(&kube::api::ListParams::default().fields("involvedObject.name=too-big"))
        .await
        .unwrap();
    assert!(
        evs.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling")),
        "{evs:?}"
    );

    // A third 800m pod no longer fits next to the first two (2 cpu): unschedulable too.
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("fits-3", json!({}), "800m")).unwrap(),
    )
    .await
    .unwrap();
    let (status, _, _) = eventually(&sim, "fits-3 unschedulable", || async {
        scheduled_condition(&pods.get("fits-3").await.ok()?)
    })
    .await;
    assert_eq!(status, "False");
    // Capacity appears (another Ready node): the pod is bound there.
    ready_node(
        &nodes,
        "second",
        "2",
        json!({"kubernetes.io/hostname": "second"}),
    )
    .await;
    let p = eventually(&sim, "fits-3 bound to the new node", || async {
        let p = pods.get("fits-3").await.ok()?;
        p.spec.as_ref()?.node_name.clone()
    })
    .await;
    assert_eq!(p, "second");
}

/// The demo's story in small: pods wait Unschedulable until a cloud instance becomes a Ready
/// node, then they are bound there and run.
#[tokio::test]
async fn pending_pods_run_once_a_launched_instance_becomes_a_node() {
    use cloud::CloudProvider;

    let sim = start().await;
    let client = sim.kube_client().unwrap();
    let deploys: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "default");
    let d = json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx",
                                                       "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}}},
    });
    deploys
        .create(&PostParams::default(), &serde_json::from_value(d).unwrap())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let lp = kube::api::ListParams::default().labels("app=web");
    eventually(&sim, "3 unschedulable pods", || async {
        let l = pods.list(&lp).await.ok()?;
        let n = l
            .items
            .iter()
            .filter(|p| scheduled_condition(p).is_some_and(|c| c.0 == "False"))
            .count();
        (n == 3).then_some(())
    })
    .await;
    let inst = sim
        .cloud()
        .create(&cloud::LaunchRequest {
            client_token: "demo".into(),
            offerings: vec![cloud::OfferingKey {
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: cloud::CapacityType::Spot,
            }],
            tags: Default::default(),
            node_class: None,
            image_id: None,
            node: None,
        })
        .await
        .unwrap();
    eventually(&sim, "3 running pods on the new node", || async {
        let l = pods.list(&lp).await.ok()?;
        let ok = l.items.iter().all(|p| {
            p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                == Some(inst.private_dns_name.as_str())
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        (ok && l.items.len() == 3).then_some(())
    })
    .await;
    eventually(&sim, "the deployment ready", || async {
        (deploys.get("web").await.ok()?.status?.ready_replicas == Some(3)).then_some(())
    })
    .await;
}

async fn create_pod(pods: &Api<Pod>, p: serde_json::Value) {
    pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
        .await
        .unwrap();
}

async fn node_of(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name).await.ok()?.spec?.node_name
}

/// The scheduler checks what the planner promises: a hard topology spread (`whenUnsatisfiable:
/// DoNotSchedule`) and required pod affinity, from the Kubernetes docs ("Pod Topology Spread
/// Constraints", "Assigning Pods to Nodes § Inter-pod affinity and anti-affinity"). Four
/// spread pods over two zones land two and two even though one zone's node has room for all;
/// a pod with required affinity to the cache goes to the cache's zone, and one whose affinity
/// nothing satisfies stays Pending with kube-scheduler's reason.
#[tokio::test]
async fn hard_topology_spread_and_required_pod_affinity_are_enforced() {
    let sim = start().await;
    let client = sim.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let zone = "topology.kubernetes.io/zone";
    ready_node(
        &nodes,
        "big-a",
        "16",
        json!({"kubernetes.io/hostname": "big-a", zone: "a"}),
    )
    .await;
    ready_node(
        &nodes,
        "small-b",
        "2",
        json!({"kubernetes.io/hostname": "small-b", zone: "b"}),
    )
    .await;
    for i in 0..4 {
        let mut p = pod_json(&format!("spread-{i}"), json!({"app": "spread"}), "100m");
        p["spec"]["topologySpreadConstraints"] = json!([{
            "maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}}
        }]);
        create_pod(&pods, p).await;
        // One at a time, so that each sees the ones before it bound.
        let name = format!("spread-{i}");
        eventually(&sim, "bound", || async { node_of(&pods, &name).await }).await;
    }
    let mut per_node = std::collections::BTreeMap::new();
    for i in 0..4 {
        let n = node_of(&pods, &format!("spread-{i}")).await.unwrap();
        *per_node.entry(n).or_insert(0) += 1;
    }
    assert_eq!(per_node.get("big-a"), Some(&2), "{per_node:?}");
    assert_eq!(per_node.get("small-b"), Some(&2), "{per_node:?}");

    create_pod(&pods, pod_json("cache", json!({"app": "cache"}), "100m")).await;
    let cache_node = eventually(&sim, "cache bound", || async {
        node_of(&pods, "cache").await
    })
    .await;
    let cache_zone = if cache_node == "big-a" { "a" } else { "b" };
    let mut web = pod_json("web", json!({"app": "web"}), "100m");
    web["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": zone, "labelSelector": {"matchLabels": {"app": "cache"}}}
    ]}});
    create_pod(&pods, web).await;
    let web_node = eventually(&sim, "web bound", || async { node_of(&pods, "web").await }).await;
    let web_zone = if web_node == "big-a" { "a" } else { "b" };
    assert_eq!(web_zone, cache_zone);

    let mut lonely = pod_json("lonely", json!({"app": "lonely"}), "100m");
    lonely["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": zone, "labelSelector": {"matchLabels": {"app": "nothing"}}}
    ]}});
    create_pod(&pods, lonely).await;
    let (status, reason, message) = eventually(&sim, "lonely unschedulable", || async {
        scheduled_condition(&pods.get("lonely").await.ok()?)
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("didn't match pod affinity rules")),
        "{message:?}"
    );
    sim.shutdown().await;
}

/// The NoExecute taint manager (Kubernetes docs "Taints and Tolerations § Taint based
/// Evictions") and graceful termination ("Pod Lifecycle § Termination of Pods"): a NoExecute
/// taint evicts the pod that does not tolerate it, which is first Terminating (its grace period
/// and shutdown time) and then gone; a pod tolerating the taint stays.
#[tokio::test]
async fn a_no_execute_taint_evicts_intolerant_pods_gracefully() {
    let sim = start().await;
    let client = sim.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    ready_node(&nodes, "n1", "4", json!({"kubernetes.io/hostname": "n1"})).await;
    let mut slow = pod_json("slow", json!({}), "100m");
    slow["metadata"]["annotations"] = json!({"simulator.dovetail.dev/shutdown-seconds": "3"});
    slow["spec"]["terminationGracePeriodSeconds"] = json!(10);
    create_pod(&pods, slow).await;
    let mut tolerant = pod_json("tolerant", json!({}), "100m");
    tolerant["spec"]["tolerations"] =
        json!([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]);
    create_pod(&pods, tolerant).await;
    for p in ["slow", "tolerant"] {
        eventually(&sim, "bound", || async { node_of(&pods, p).await }).await;
    }
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}}),
            ),
        )
        .await
        .unwrap();
    let terminating = eventually(&sim, "slow terminating", || async {
        let p = pods.get("slow").await.ok()?;
        p.metadata.deletion_timestamp.is_some().then_some(p)
    })
    .await;
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(10));
    eventually(&sim, "slow gone", || async {
        pods.get_opt("slow").await.ok()?.is_none().then_some(())
    })
    .await;
    let kept = pods.get("tolerant").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());
    sim.shutdown().await;
}

/// LimitRange admission (Kubernetes docs "Limit Ranges"): a pod created without requests in a
/// namespace with a LimitRange gets its defaults, and the scheduler counts them.
#[tokio::test]
async fn a_limit_range_defaults_the_requests_of_new_pods() {
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;
    let sim = start().await;
    let client = sim.kube_client().unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("", "v1", "LimitRange"),
        "limitranges",
    );
    let ranges: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    ranges
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "LimitRange",
                "metadata": {"name": "defaults"},
                "spec": {"limits": [{"type": "Container",
                    "default": {"cpu": "500m", "memory": "256Mi"},
                    "defaultRequest": {"cpu": "250m"}}]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let created = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "bare"},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let r = created.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap();
    let q = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
             k: &str| { m.as_ref().and_then(|m| m.get(k)).map(|q| q.0.clone()) };
    assert_eq!(q(&r.requests, "cpu").as_deref(), Some("250m"));
    assert_eq!(q(&r.requests, "memory").as_deref(), Some("256Mi"));
    assert_eq!(q(&r.limits, "cpu").as_deref(), Some("500m"));
    sim.shutdown().await;
}
