//! API semantics through the `kube` client: evictions honour PodDisruptionBudgets, optimistic
//! concurrency, finalizers, status subresources, binding, server-side apply, discovery of the
//! Karpenter CRDs, and error bodies.

mod support;

use k8s_openapi::api::core::v1::{Binding, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, Patch, PatchParams,
    PostParams,
};
use kube::discovery::Discovery;
use kube::{Api, Client};
use serde_json::json;

use support::{client_without_retries, eventually, pod_json, start_without_scheduler};

async fn running_pod(client: &Client, name: &str, node: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod_json(name, json!({"app": "web"}), "100m");
    p["spec"]["nodeName"] = json!(node);
    pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
        .await
        .unwrap();
}

async fn ready_node(client: &Client, name: &str) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let n = json!({"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}});
    nodes
        .create(&PostParams::default(), &serde_json::from_value(n).unwrap())
        .await
        .unwrap();
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn eviction_honours_the_disruption_budget() {
    let sim = start_without_scheduler().await;
    let client = client_without_retries(&sim);
    ready_node(&client, "n1").await;
    for name in ["web-1", "web-2", "web-3"] {
        running_pod(&client, name, "n1").await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(&sim, "pods running and ready", || async {
        let l = pods.list(&Default::default()).await.ok()?;
        l.items
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .then_some(())
    })
    .await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb = json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}});
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(pdb).unwrap(),
    )
    .await
    .unwrap();

    pods.evict("web-1", &EvictParams::default())
        .await
        .expect("first eviction is allowed");
    let e = pods
        .evict("web-2", &EvictParams::default())
        .await
        .unwrap_err();
    match e {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 429);
            assert_eq!(s.reason, "TooManyRequests");
        }
        other => panic!("expected 429, got {other:?}"),
    }
    // An eviction deletes gracefully, as a real API server does: the pod goes once its
    // containers have stopped.
    eventually(&sim, "the evicted pod gone", || async {
        pods.get_opt("web-1").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(pods.get_opt("web-2").await.unwrap().is_some());
    // The PDB controller keeps the status current.
    eventually(&sim, "pdb status", || async {
        let p = pdbs.get("web").await.ok()?;
        let s = p.status?;
        (s.disruptions_allowed == 0 && s.current_healthy == 2 && s.desired_healthy == 2)
            .then_some(())
    })
    .await;
    // Pending pods are not protected.
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("web-pending", json!({"app": "web"}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    pods.evict("web-pending", &EvictParams::default())
        .await
        .expect("pending pods are evictable");
    let e = pods
        .evict("missing", &EvictParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 404),
        "{e:?}"
    );
}

#[tokio::test]
async fn conflicts_finalizers_and_status_subresource() {
    let sim = start_without_scheduler().await;
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod_json("a", json!({}), "100m");
    p["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let created = pods
        .create(&PostParams::default(), &serde_json::from_value(p).unwrap())
        .await
        .unwrap();
    let mut first = created.clone();
    first.metadata.labels = Some([("x".to_string(), "1".to_string())].into());
    pods.replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut stale = created.clone();
    stale.metadata.labels = Some([("x".to_string(), "2".to_string())].into());
    let e = pods
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{e:?}"
    );

    // Status is a subresource: a main-resource patch cannot change it, a status patch can.
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .unwrap();
    assert_eq!(
        pods.get("a")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Pending")
    );
    pods.patch_status(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .unwrap();
    assert_eq!(
        pods.get("a")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Failed")
    );

    // Finalizers hold the deletion.
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let held = pods.get("a").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert!(pods.get_opt("a").await.unwrap().is_none());

    // Invalid objects get 422 naming the field.
    let e = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "b"}, "spec": {"containers": []}}))
                .unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 422 && s.message.contains("spec.containers")),
        "{e:?}"
    );
    let e = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod_json("a", json!({}), "1")).unwrap(),
        )
        .await;
    assert!(e.is_ok(), "the name is free again");
    let e = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod_json("a", json!({}), "1")).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{e:?}"
    );
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let sim = start_without_scheduler().await;
    let client = sim.kube_client().unwrap();
    ready_node(&client, "n1").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("p", json!({}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    let binding: Binding = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}),
    )
    .unwrap();
    let body = serde_json::to_vec(&binding).unwrap();
    let req = http::Request::post("/api/v1/namespaces/default/pods/p/binding")
        .header("content-type", "application/json")
        .body(body.clone())
        .unwrap();
    let status: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(status["status"], "Success");
    let p = eventually(&sim, "the pod running on n1", || async {
        let p = pods.get("p").await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
    })
    .await;
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("n1"));
    let req = http::Request::post("/api/v1/namespaces/default/pods/p/binding")
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let e = client.request::<serde_json::Value>(req).await.unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 409),
        "{e:?}"
    );
}

#[tokio::test]
async fn karpenter_crds_are_discovered_and_served_with_apply() {
    let sim = start_without_scheduler().await;
    let client = sim.kube_client().unwrap();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut found = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if ar.group.starts_with("karpenter") {
                assert_eq!(
                    caps.scope,
                    kube::discovery::Scope::Cluster,
                    "{} is cluster-scoped",
                    ar.kind
                );
                found.push(format!("{}/{}", ar.api_version, ar.kind));
            }
        }
    }
    found.sort();
    assert_eq!(
        found,
        vec![
            "karpenter.k8s.aws/v1/EC2NodeClass",
            "karpenter.sh/v1/NodeClaim",
            "karpenter.sh/v1/NodePool"
        ]
    );

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    );
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let pool = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                 "limits": {"cpu": "100"}},
    });
    let applied = pools
        .patch(
            "default",
            &PatchParams::apply("test").force(),
            &Patch::Apply(pool.clone()),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.generation, Some(1));
    let mut changed = pool.clone();
    changed["spec"]["limits"]["cpu"] = json!("200");
    let applied = pools
        .patch(
            "default",
            &PatchParams::apply("test").force(),
            &Patch::Apply(changed),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["spec"]["limits"]["cpu"], "200");
    assert_eq!(
        applied.metadata.generation,
        Some(2),
        "spec changes bump the generation"
    );
    let st = pools
        .patch_status(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"resources": {"cpu": "4"}}})),
        )
        .await
        .unwrap();
    assert_eq!(st.metadata.generation, Some(2), "status writes do not");
    assert_eq!(st.data["status"]["resources"]["cpu"], "4");

    // A namespaced path for a cluster-scoped kind is not served.
    let e = Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar)
        .list(&Default::default())
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 404),
        "{e:?}"
    );
}

#[tokio::test]
async fn dry_run_validates_without_persisting() {
    let sim = start_without_scheduler().await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "default");
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let p = pods
        .create(
            &pp,
            &serde_json::from_value(pod_json("dry", json!({}), "100m")).unwrap(),
        )
        .await
        .unwrap();
    assert!(
        p.metadata.uid.is_some(),
        "the answer is the object as it would be stored"
    );
    assert!(
        pods.get_opt("dry").await.unwrap().is_none(),
        "nothing was stored"
    );
    let e = pods
        .create(
            &pp,
            &serde_json::from_value(
                json!({"metadata": {"name": "Bad"}, "spec": {"containers": [{"name": "c"}]}}),
            )
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 422),
        "{e:?}"
    );
}

#[tokio::test]
async fn new_crds_are_served_until_deleted() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    let sim = start_without_scheduler().await;
    let client = sim.kube_client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    crds.patch(
        "widgets.example.com",
        &PatchParams::apply("test"),
        &Patch::Apply(crd),
    )
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1alpha1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w = json!({"apiVersion": "example.com/v1alpha1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}});
    widgets
        .create(&PostParams::default(), &serde_json::from_value(w).unwrap())
        .await
        .unwrap();
    assert_eq!(
        widgets.list(&Default::default()).await.unwrap().items.len(),
        1
    );
    let established = crds.get("widgets.example.com").await.unwrap();
    assert!(
        established
            .status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let e = widgets.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 404),
        "{e:?}"
    );
}

#[tokio::test]
async fn malformed_requests_get_400s_naming_the_input() {
    let sim = start_without_scheduler().await;
    let client = sim.kube_client().unwrap();
    let send = |req: http::Request<Vec<u8>>| {
        let client = client.clone();
        async move { client.request::<serde_json::Value>(req).await.unwrap_err() }
    };
    let bad_json = http::Request::post("/api/v1/namespaces/default/pods")
        .header("content-type", "application/json")
        .body(b"{not json".to_vec())
        .unwrap();
    let e = send(bad_json).await;
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 400 && s.message.contains("not valid JSON")),
        "{e:?}"
    );
    let bad_rv = http::Request::get("/api/v1/pods?watch=1&resourceVersion=abc")
        .body(vec![])
        .unwrap();
    let e = send(bad_rv).await;
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 400 && s.message.contains("\"abc\"")),
        "{e:?}"
    );
    let bad_timeout = http::Request::get("/api/v1/pods?timeoutSeconds=soon")
        .body(vec![])
        .unwrap();
    let e = send(bad_timeout).await;
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 400 && s.message.contains("timeoutSeconds")),
        "{e:?}"
    );
    let bad_patch = http::Request::patch("/api/v1/namespaces/default")
        .header("content-type", "text/plain")
        .body(b"x".to_vec())
        .unwrap();
    let e = send(bad_patch).await;
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 415 && s.message.contains("text/plain")),
        "{e:?}"
    );
    let wrong_kind = http::Request::post("/api/v1/namespaces/default/pods")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"kind": "Node", "metadata": {"name": "x"}})).unwrap())
        .unwrap();
    let e = send(wrong_kind).await;
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 400 && s.message.contains("Node")),
        "{e:?}"
    );
    let unknown = http::Request::get("/apis/example.com/v1/things")
        .body(vec![])
        .unwrap();
    let e = send(unknown).await;
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 404),
        "{e:?}"
    );
}
