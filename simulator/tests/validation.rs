//! The simulated API server judges writes as a cluster does: real `kubectl apply` is refused, with `422 Invalid` naming the field, for
//! what the CRDs' OpenAPI schemas and CEL rules and the core Pod validation refuse; the
//! project's and Karpenter's example manifests are accepted; and the simulator-only
//! `simulatorSkipValidation=true` parameter still stores such objects (version skew), which
//! later status writes do not undo.
//!
//! kubectl is found as in `kubectl.rs` (`DOVETAIL_KUBECTL`); without it the tests fail unless
//! `DOVETAIL_ALLOW_MISSING` names kubectl.

mod support;

use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use support::{kubectl, run_kubectl, start};

fn node_pool() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                ],
            }},
            "limits": {"cpu": "100"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
        },
    })
}

fn node_class() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    })
}

fn pod(container: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [container]},
    })
}

/// `base` with the value at a JSON pointer set (`Some`) or removed (`None`).
fn with(base: &Value, pointer: &str, value: Option<Value>) -> Value {
    let mut doc = base.clone();
    let (parent, last) = pointer.rsplit_once('/').expect("a pointer");
    let target = doc.pointer_mut(parent).expect("the parent exists");
    match (target, value) {
        (Value::Object(m), Some(v)) => {
            m.insert(last.to_string(), v);
        }
        (Value::Object(m), None) => {
            m.remove(last);
        }
        (Value::Array(a), Some(v)) => a[last.parse::<usize>().expect("an index")] = v,
        _ => panic!("{pointer}: not a container"),
    }
    doc
}

async fn setup() -> Option<(PathBuf, simulator::Simulation, String)> {
    let Some(k) = kubectl() else {
        support::missing("kubectl", "set DOVETAIL_KUBECTL or put kubectl on PATH");
        return None;
    };
    let sim = start().await;
    let url = sim.api_url().to_string();
    Some((k, sim, url))
}

/// Every case a cluster refuses, and the field and words kubectl must print.
fn refused() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    let np = node_pool();
    let nc = node_class();
    let req0 = "/spec/template/spec/requirements/0";
    vec![
        (
            "minValues 100",
            with(&np, &format!("{req0}/minValues"), Some(json!(100))),
            "spec.template.spec.requirements[0].minValues",
            "should be less than or equal to 50",
        ),
        (
            "budget nodes 150%",
            with(
                &np,
                "/spec/disruption/budgets",
                Some(json!([{"nodes": "150%"}])),
            ),
            "spec.disruption.budgets[0].nodes",
            r#"Invalid value: "150%""#,
        ),
        (
            "requirement on karpenter.sh/nodepool",
            with(
                &np,
                &format!("{req0}/key"),
                Some(json!("karpenter.sh/nodepool")),
            ),
            "spec.template.spec.requirements",
            r#"label "karpenter.sh/nodepool" is restricted"#,
        ),
        (
            "no nodeClassRef",
            with(&np, "/spec/template/spec/nodeClassRef", None),
            "spec.template.spec.nodeClassRef",
            "Required value",
        ),
        (
            "unknown consolidationPolicy",
            with(
                &np,
                "/spec/disruption/consolidationPolicy",
                Some(json!("Sometimes")),
            ),
            "spec.disruption.consolidationPolicy",
            r#"Unsupported value: "Sometimes""#,
        ),
        (
            "weight 0",
            with(&np, "/spec/weight", Some(json!(0))),
            "spec.weight",
            "should be greater than or equal to 1",
        ),
        (
            "consolidateAfter in words",
            with(
                &np,
                "/spec/disruption/consolidateAfter",
                Some(json!("30 minutes")),
            ),
            "spec.disruption.consolidateAfter",
            "should match",
        ),
        (
            "limits not a quantity",
            with(&np, "/spec/limits/cpu", Some(json!("lots"))),
            "spec.limits.cpu",
            r#"Invalid value: "lots""#,
        ),
        (
            "EC2NodeClass with role and instanceProfile",
            with(&nc, "/spec/instanceProfile", Some(json!("Profile"))),
            "spec",
            "must specify exactly one of ['role', 'instanceProfile']",
        ),
        (
            "EC2NodeClass without subnets",
            with(&nc, "/spec/subnetSelectorTerms", Some(json!([]))),
            "spec.subnetSelectorTerms",
            "should have at least 1 items",
        ),
        (
            "Pod with cpu -2",
            pod(json!({"name": "app", "image": "app", "resources": {"requests": {"cpu": "-2"}}})),
            "spec.containers[0].resources.requests.cpu",
            "must be greater than or equal to 0",
        ),
        (
            "Pod requesting more than its limit",
            pod(json!({"name": "app", "image": "app",
                       "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}})),
            "spec.containers[0].resources.requests",
            "must be less than or equal to memory limit of 1Gi",
        ),
        (
            "Pod with hostPort 70000",
            pod(
                json!({"name": "app", "image": "app", "ports": [{"containerPort": 80, "hostPort": 70000}]}),
            ),
            "spec.containers[0].ports[0].hostPort",
            "must be between 1 and 65535, inclusive",
        ),
    ]
}

#[tokio::test]
async fn kubectl_apply_is_refused_naming_the_field_for_each_invalid_object() {
    let Some((k, sim, url)) = setup().await else {
        return;
    };
    for (case, doc, field, words) in refused() {
        let (ok, out, err) =
            run_kubectl(&k, &url, &["apply", "-f", "-"], Some(&doc.to_string())).await;
        assert!(!ok, "{case}: kubectl apply accepted it:\n{out}");
        assert!(err.contains("is invalid"), "{case}: {err}");
        assert!(
            err.contains(&format!("{field}: ")) || err.contains(&format!("{field}[")),
            "{case}: {field} not named in:\n{err}"
        );
        assert!(err.contains(words), "{case}: {words:?} not in:\n{err}");
    }
    // Nothing of it was stored.
    let (_, out, _) = run_kubectl(
        &k,
        &url,
        &["get", "nodepools,ec2nodeclasses", "-o", "name"],
        None,
    )
    .await;
    assert!(out.trim().is_empty(), "{out}");

    // The status the API answers with, as the real server's `errors.NewInvalid` shapes it.
    let pools = Api::<DynamicObject>::all_with(
        sim.kube_client().unwrap(),
        &ApiResource::erase::<crds::NodePool>(&()),
    );
    let bad: DynamicObject =
        serde_json::from_value(with(&node_pool(), "/spec/weight", Some(json!(0)))).unwrap();
    let Err(kube::Error::Api(status)) = pools.create(&PostParams::default(), &bad).await else {
        panic!("weight 0 was accepted");
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        r#"NodePool.karpenter.sh "general" is invalid: spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"#
    );
    drop(sim);
}

#[tokio::test]
async fn what_a_cluster_accepts_is_accepted_pruned_and_defaulted() {
    let Some((k, sim, url)) = setup().await else {
        return;
    };
    // Karpenter's schedule pattern only checks the shape (five fields), so a cluster accepts
    // minute 61 (Karpenter refuses it when it parses the schedule), and so does the simulator.
    let cron = with(
        &node_pool(),
        "/spec/disruption/budgets",
        Some(json!([{"nodes": "1", "schedule": "61 * * * *", "duration": "1h"}])),
    );
    // A field of an older API version is pruned (kubectl's client-side check is off).
    let old_field = with(
        &cron,
        "/spec/template/spec/kubelet",
        Some(json!({"maxPods": 110})),
    );
    let manifest = format!("{}\n---\n{}", node_class(), old_field);
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &["apply", "--validate=false", "-f", "-"],
        Some(&manifest),
    )
    .await;
    assert!(ok, "refused:\n{out}\n{err}");
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &["get", "nodepool", "general", "-o", "json"],
        None,
    )
    .await;
    assert!(ok, "{err}");
    let stored: Value = serde_json::from_str(&out).unwrap();
    assert!(
        stored.pointer("/spec/template/spec/kubelet").is_none(),
        "{stored:#}"
    );
    assert_eq!(
        stored["spec"]["disruption"]["budgets"][0]["schedule"],
        "61 * * * *"
    );
    // Defaults of the schema are applied.
    assert_eq!(
        stored["spec"]["template"]["spec"]["expireAfter"], "720h",
        "{stored:#}"
    );

    // A transition rule refuses an immutable change on update, naming its message.
    let moved = with(
        &cron,
        "/spec/template/spec/nodeClassRef/kind",
        Some(json!("OtherNodeClass")),
    );
    let (ok, _, err) = run_kubectl(&k, &url, &["apply", "-f", "-"], Some(&moved.to_string())).await;
    assert!(!ok, "an immutable field changed");
    assert!(err.contains("nodeClassRef.kind is immutable"), "{err}");
    drop(sim);
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
    out.sort();
}

/// Whether every value set in `a` is in `b` (which may hold more: defaults).
fn within(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .all(|(k, v)| y.get(k).is_some_and(|w| within(v, w))),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| within(v, w))
        }
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[tokio::test]
async fn the_example_manifests_are_accepted_by_kubectl_apply() {
    let Some(k) = kubectl() else {
        support::missing("kubectl", "set DOVETAIL_KUBECTL or put kubectl on PATH");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    yaml_files(&root.join("examples"), &mut files);
    yaml_files(&root.join("watcher/crds/tests/manifests"), &mut files);
    assert!(files.len() >= 8, "{files:?}");
    let read = |file: &Path| -> Vec<Value> {
        let text = std::fs::read_to_string(file).unwrap();
        serde_yaml::Deserializer::from_str(&text)
            .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
            .collect()
    };
    let mut applied = 0;
    for file in &files {
        // Each file on its own cluster, with the namespaces its folder creates.
        let namespaces: Vec<Value> = files
            .iter()
            .filter(|f| f.parent() == file.parent())
            .flat_map(|f| read(f))
            .filter(|v| v["kind"] == "Namespace")
            .collect();
        // Jobs are not a kind the simulator serves.
        let rest: Vec<Value> = read(file)
            .into_iter()
            .filter(|v| v["kind"].is_string() && v["kind"] != "Namespace" && v["kind"] != "Job")
            .collect();
        let sim = start().await;
        let url = sim.api_url().to_string();
        for docs in [namespaces, rest] {
            if docs.is_empty() {
                continue;
            }
            let manifest: Vec<String> = docs.iter().map(Value::to_string).collect();
            let (ok, out, err) = run_kubectl(
                &k,
                &url,
                &["apply", "-f", "-"],
                Some(&manifest.join("\n---\n")),
            )
            .await;
            assert!(ok, "{}: refused:\n{out}\n{err}", file.display());
            applied += docs.len();
            // Pruning kept every field the examples set.
            for d in docs.iter().filter(|d| {
                matches!(
                    d["kind"].as_str(),
                    Some("NodePool" | "EC2NodeClass" | "NodeClaim")
                )
            }) {
                let name = d["metadata"]["name"].as_str().unwrap();
                let what = format!("{}/{name}", d["kind"].as_str().unwrap().to_lowercase());
                let (ok, out, err) =
                    run_kubectl(&k, &url, &["get", &what, "-o", "json"], None).await;
                assert!(ok, "{err}");
                let stored: Value = serde_json::from_str(&out).unwrap();
                assert!(
                    within(&d["spec"], &stored["spec"]),
                    "{}: {what} lost a field:\n{:#}\nstored:\n{:#}",
                    file.display(),
                    d["spec"],
                    stored["spec"]
                );
            }
        }
        drop(sim);
    }
    assert!(applied > 30, "{applied}");
}

#[tokio::test]
async fn skipping_validation_stores_what_a_newer_server_accepted_and_status_writes_keep_it() {
    let Some((k, sim, url)) = setup().await else {
        return;
    };
    let bad = with(
        &node_pool(),
        "/spec/disruption/consolidationPolicy",
        Some(json!("Sometimes")),
    );
    let bad = with(
        &bad,
        "/spec/template/spec/newerField",
        Some(json!({"x": 1})),
    );
    let dir = std::env::temp_dir().join(format!("skip-validation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pool.json");
    std::fs::write(&file, bad.to_string()).unwrap();
    let path = "/apis/karpenter.sh/v1/nodepools?simulatorSkipValidation=true";
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &["create", "--raw", path, "-f", file.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok, "{out}\n{err}");

    // A status write (what the watcher does to a NodePool it cannot use) is accepted and
    // leaves the rest as it was: unchanged values are not judged again.
    let pools = Api::<DynamicObject>::all_with(
        sim.kube_client().unwrap(),
        &ApiResource::erase::<crds::NodePool>(&()),
    );
    pools
        .patch_status(
            "general",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "ValidationSucceeded", "status": "False", "reason": "NodePoolValidationFailed",
                "message": "Sometimes", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
        )
        .await
        .expect("status write on an object stored without validation");
    // A label change (a main-resource write) is accepted too.
    pools
        .patch(
            "general",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .expect("metadata write on an object stored without validation");
    let stored = pools.get("general").await.unwrap();
    assert_eq!(
        stored.data["spec"]["disruption"]["consolidationPolicy"],
        "Sometimes"
    );
    assert_eq!(
        stored.data["spec"]["template"]["spec"]["newerField"],
        json!({"x": 1})
    );

    // The same object without the parameter is refused; a Pod likewise skips with it.
    let (ok, _, err) = run_kubectl(
        &k,
        &url,
        &[
            "create",
            "--raw",
            "/apis/karpenter.sh/v1/nodepools",
            "-f",
            file.to_str().unwrap(),
        ],
        None,
    )
    .await;
    assert!(!ok && err.contains("consolidationPolicy"), "{err}");
    let negative =
        pod(json!({"name": "app", "image": "app", "resources": {"requests": {"cpu": "-2"}}}));
    std::fs::write(&file, negative.to_string()).unwrap();
    let (ok, out, err) = run_kubectl(
        &k,
        &url,
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods?simulatorSkipValidation=true",
            "-f",
            file.to_str().unwrap(),
        ],
        None,
    )
    .await;
    assert!(ok, "{out}\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
    drop(sim);
}
