//! The simulated kube-scheduler through the API: binds pending pods to Ready nodes where they
//! fit and marks the rest Unschedulable (filters and scoring have unit tests next to the code).

mod common;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use common::{eventually, pod_json, start};

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
