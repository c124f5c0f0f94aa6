//! The simulated kubelet and workload controllers with the simulated cloud: nodes register,
//! become Ready and go away with their instances; Deployments scale; fault injection.

mod support;

use std::time::Duration;

use cloud::{
    CapacityType, CloudProvider, InterruptionKind, InterruptionQueue, LaunchRequest, OfferingKey,
    Tags,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;

use support::{CACHE_POLL, CACHE_WAIT, client_without_retries, eventually, start};

fn launch(token: &str, claim: &str, ct: CapacityType) -> LaunchRequest {
    LaunchRequest {
        client_token: token.into(),
        offerings: vec![OfferingKey {
            instance_type: "m5.large".into(),
            zone: "us-east-1b".into(),
            capacity_type: ct,
        }],
        tags: Tags::from([
            (cloud::TAG_NODECLAIM.into(), claim.into()),
            (cloud::TAG_NODEPOOL.into(), "default".into()),
        ]),
        node_class: Some("default".into()),
        image_id: None,
        node: None,
    }
}

#[tokio::test]
async fn kubelet_registers_nodes_for_running_instances_and_removes_them() {
    let sim = start().await;
    let client = sim.kube_client().unwrap();
    // The NodeClaim the instance is launched for: its labels and taints go onto the Node.
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    );
    let claims: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let claim = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-abc12", "labels": {"karpenter.sh/nodepool": "default", "team": "web"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}],
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "example.com/agent-not-ready", "effect": "NoExecute"}],
        },
    });
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(claim).unwrap(),
        )
        .await
        .unwrap();

    let inst = sim
        .cloud()
        .create(&launch("tok-1", "default-abc12", CapacityType::OnDemand))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = eventually(&sim, "a ready node", || async {
        let n = nodes.get_opt(&inst.private_dns_name).await.ok()??;
        let ready = n
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(n)
    })
    .await;
    let spec = node.spec.clone().unwrap();
    assert_eq!(
        spec.provider_id.as_deref(),
        Some(inst.provider_id.to_string().as_str())
    );
    assert!(
        spec.provider_id
            .unwrap()
            .starts_with("aws:///us-east-1b/i-")
    );
    let labels = node.metadata.labels.clone().unwrap();
    for (k, v) in [
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("topology.kubernetes.io/zone", "us-east-1b"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("karpenter.sh/nodepool", "default"),
        ("team", "web"),
        ("kubernetes.io/hostname", inst.private_dns_name.as_str()),
    ] {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "label {k}");
    }
    let taints: Vec<String> = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(
        taints,
        vec!["dedicated", "example.com/agent-not-ready"],
        "not-ready taint gone once Ready"
    );
    let status = node.status.unwrap();
    let alloc = status.allocatable.unwrap();
    let cap = status.capacity.unwrap();
    assert_eq!(cap["cpu"].0, "2");
    assert_eq!(cap["pods"].0, "29");
    assert_eq!(alloc["cpu"].0, "1930m", "capacity minus kube-reserved");

    // Terminating the instance removes the node.
    CloudProvider::delete(sim.cloud(), &inst.provider_id)
        .await
        .unwrap();
    eventually(&sim, "the node removed", || async {
        nodes
            .get_opt(&inst.private_dns_name)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
}

/// Under paused time the notice period is exact: the node stays for the whole notice
/// (120 s), then the instance shuts down (5 s) and the node goes away.
#[tokio::test(start_paused = true)]
async fn spot_interruption_warns_then_the_node_goes_away() {
    let sim = simulator::Simulation::start(simulator::Config {
        scheduler: false,
        ..simulator::Config::default()
    })
    .await
    .unwrap();
    let nodes = sim.store().kinds().find("", "v1", "nodes").unwrap();
    let inst = sim
        .cloud()
        .create(&launch("tok-spot", "c-spot", CapacityType::Spot))
        .await
        .unwrap();
    let node =
        |sim: &simulator::Simulation| sim.store().get(&nodes, "", &inst.private_dns_name).ok();
    // Pending 5 s, registered 3 s later.
    tokio::time::sleep(Duration::from_secs(9)).await;
    let n = node(&sim).expect("the spot node registered");
    assert_eq!(
        n["metadata"]["labels"]["karpenter.sh/capacity-type"],
        "spot"
    );

    sim.cloud().interrupt(&inst.provider_id).unwrap();
    let events = sim.cloud().receive(10).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == InterruptionKind::SpotInterruptionWarning
                && e.provider_id == inst.provider_id)
    );
    tokio::time::sleep(Duration::from_millis(119_900)).await;
    assert!(node(&sim).is_some(), "still there during the 120 s notice");
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(node(&sim).is_none(), "gone once the instance shut down");
    sim.shutdown().await;
}

#[tokio::test]
async fn deployments_scale_and_pods_land_on_ready_nodes() {
    let sim = start().await;
    let client = sim.kube_client().unwrap();
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}}},
    });
    deploys
        .create(&PostParams::default(), &serde_json::from_value(d).unwrap())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().labels("app=web");
    eventually(&sim, "3 pods", || async {
        (pods.list(&lp).await.ok()?.items.len() == 3).then_some(())
    })
    .await;
    let p = &pods.list(&lp).await.unwrap().items[0];
    let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "ReplicaSet");
    assert!(owner.name.starts_with("web-"));

    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually(&sim, "1 pod", || async {
        (pods.list(&lp).await.ok()?.items.len() == 1).then_some(())
    })
    .await;

    // Bind the remaining pod by hand to a Ready node: it starts Running, and the Deployment
    // reports it ready.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap(),
        )
        .await
        .unwrap();
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    let name = pods.list(&lp).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"nodeName": "n1"}})),
    )
    .await
    .unwrap();
    eventually(&sim, "deployment ready", || async {
        let d = deploys.get("web").await.ok()?;
        (d.status?.ready_replicas == Some(1)).then_some(())
    })
    .await;

    // Deleting the Deployment collects its ReplicaSet and pods.
    deploys.delete("web", &Default::default()).await.unwrap();
    eventually(&sim, "pods collected", || async {
        pods.list(&lp).await.ok()?.items.is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn fault_injection_fails_and_slows_requests() {
    let sim = start().await;
    let client = client_without_retries(&sim);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    sim.faults()
        .fail_requests(2, 500, Some("/api/v1/namespaces/default/pods"));
    for _ in 0..2 {
        let e = pods.list(&Default::default()).await.unwrap_err();
        assert!(
            matches!(e, kube::Error::Api(ref s) if s.code == 500),
            "{e:?}"
        );
    }
    nodes
        .list(&Default::default())
        .await
        .expect("other paths are not affected");
    pods.list(&Default::default())
        .await
        .expect("only two failures");

    sim.faults().fail_requests(1, 503, None);
    let e = nodes.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 503 && s.reason == "ServiceUnavailable"),
        "{e:?}"
    );

    // A delay of an hour: the slowed request is still waiting when the next one has been
    // answered, which shows the delay applies to exactly one request without reading a clock.
    sim.faults()
        .slow_requests(1, Duration::from_secs(3600), Some("/api/v1/nodes"));
    let injected = sim.faults().injected();
    let slowed = tokio::spawn({
        let nodes = nodes.clone();
        async move { nodes.list(&Default::default()).await }
    });
    test_support::eventually("the delay applied", CACHE_WAIT, CACHE_POLL, || async {
        (sim.faults().injected() > injected).then_some(())
    })
    .await;
    nodes
        .list(&Default::default())
        .await
        .expect("the next request is not slowed");
    assert!(!slowed.is_finished(), "the slowed request is still waiting");
    slowed.abort();

    // kube's default client retries 503s on its own.
    sim.faults().fail_requests(2, 503, Some("/api/v1/nodes"));
    let retrying: Api<Node> = Api::all(sim.kube_client().unwrap());
    retrying
        .list(&Default::default())
        .await
        .expect("retried past two 503s");
}

/// With paused tokio time the delays are exact: pending 5 s, register 3 s, ready 2 s.
#[tokio::test(start_paused = true)]
async fn kubelet_delays_are_exact_under_paused_time() {
    let sim = simulator::Simulation::start(simulator::Config {
        scheduler: false,
        ..simulator::Config::default()
    })
    .await
    .unwrap();
    let nodes = sim.store().kinds().find("", "v1", "nodes").unwrap();
    let inst = sim
        .cloud()
        .create(&launch("paused", "c1", CapacityType::OnDemand))
        .await
        .unwrap();
    let node =
        |sim: &simulator::Simulation| sim.store().get(&nodes, "", &inst.private_dns_name).ok();
    let ready = |n: &serde_json::Value| {
        n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    };
    tokio::time::sleep(Duration::from_millis(7_900)).await;
    assert!(node(&sim).is_none(), "not registered before 5 s + 3 s");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n = node(&sim).expect("registered after 8 s");
    assert!(!ready(&n));
    let taints = n["spec"]["taints"].as_array().unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/not-ready")
    );
    tokio::time::sleep(Duration::from_millis(1_900)).await;
    assert!(!ready(&node(&sim).unwrap()), "not Ready before another 2 s");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(ready(&node(&sim).unwrap()), "Ready after 10 s");
    sim.shutdown().await;
}

#[tokio::test]
async fn daemonsets_run_on_matching_ready_nodes() {
    let sim = start().await;
    let client = sim.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, labels, taints) in [
        ("n-linux", json!({"kubernetes.io/os": "linux"}), json!([])),
        (
            "n-windows",
            json!({"kubernetes.io/os": "windows"}),
            json!([]),
        ),
        (
            "n-tainted",
            json!({"kubernetes.io/os": "linux"}),
            json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        ),
    ] {
        nodes
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}})).unwrap())
            .await
            .unwrap();
        nodes
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                ),
            )
            .await
            .unwrap();
    }
    let ds: Api<k8s_openapi::api::apps::v1::DaemonSet> =
        Api::namespaced(client.clone(), "kube-system");
    let d = json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
                                       "containers": [{"name": "a", "image": "agent", "resources": {"requests": {"cpu": "50m"}}}]}}},
    });
    ds.create(&PostParams::default(), &serde_json::from_value(d).unwrap())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let on = || async {
        let mut v: Vec<String> = pods
            .list(&ListParams::default().labels("app=agent"))
            .await
            .ok()?
            .items
            .into_iter()
            .filter_map(|p| p.spec?.node_name)
            .collect();
        v.sort();
        Some(v)
    };
    eventually(&sim, "one agent on the linux node", || async {
        (on().await? == ["n-linux"]).then_some(())
    })
    .await;
    // Tolerating the taint brings it onto the tainted node too.
    ds.patch(
        "agent",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}}})),
    )
    .await
    .unwrap();
    eventually(&sim, "agents on both linux nodes", || async {
        (on().await? == ["n-linux", "n-tainted"]).then_some(())
    })
    .await;
    eventually(&sim, "status", || async {
        let s = ds.get("agent").await.ok()?.status?;
        (s.desired_number_scheduled == 2 && s.number_ready == 2).then_some(())
    })
    .await;
}

#[tokio::test]
async fn bad_config_is_an_error_naming_the_field() {
    let e = simulator::Simulation::start(simulator::Config {
        bookmark_interval: Duration::ZERO,
        ..simulator::Config::default()
    })
    .await
    .unwrap_err();
    assert!(e.to_string().contains("bookmark_interval"), "{e}");
    let e = simulator::Simulation::start(simulator::Config {
        watch_history: 0,
        ..simulator::Config::default()
    })
    .await
    .unwrap_err();
    assert!(e.to_string().contains("watch_history"), "{e}");
}
