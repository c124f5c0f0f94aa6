//! AMI drift the actuator can see, through real parts: moto_server's EC2 and SSM (seeded by
//! `cloud_aws::testing::seed`) resolved by the production `cloud_aws::Ec2Provider`, the
//! actuator's EC2NodeClass status writer against the simulator's Kubernetes API, and the
//! planner library on the cluster as read back from that API.
//!
//! A node whose NodeClaim runs the image `al2023@latest` resolves to is not drifted; a new AMI
//! release (the alias's SSM parameter moves) is written to the EC2NodeClass status by the next
//! pass, and the next plan says the node is Drifted.
//!
//! Skipped (saying so) when moto_server is not installed, except under `CI=true`.

use std::sync::Arc;

use actuator::clock::Clock;
use actuator::node_class_status::{self, StatusWriter};
use cloud::CloudProvider;
use cloud_aws::testing::{self as aws_testing, MotoServer, TEST_CLUSTER};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use planner::manifests::SnapshotBuilder;
use planner::model::PlanOptions;
use serde_json::{Value, json};

fn classes(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "karpenter.k8s.aws",
            "v1",
            "EC2NodeClass",
        )),
    )
}

/// The NodePool, NodeClaim and Node of one on-demand m5.large running `image` (consolidation
/// off, so that only drift can disrupt it).
fn cluster_objects(image: &str) -> Vec<Value> {
    let labels = json!({
        "karpenter.sh/nodepool": "default",
        "karpenter.sh/capacity-type": "on-demand",
        "node.kubernetes.io/instance-type": "m5.large",
        "topology.kubernetes.io/zone": "us-east-1a",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "karpenter.sh/registered": "true",
        "karpenter.sh/initialized": "true",
    });
    let provider_id = "aws:///us-east-1a/i-0123456789abcdef0";
    let resources = json!({"cpu": "2", "memory": "8Gi", "pods": "29"});
    vec![
        json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {
                "disruption": {"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]},
                "template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
                }}
            }
        }),
        json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-n0", "labels": labels,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []
            },
            "status": {"nodeName": "n0", "providerID": provider_id, "imageID": image,
                       "capacity": resources, "allocatable": resources}
        }),
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n0", "labels": labels,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"providerID": provider_id},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }),
    ]
}

/// Plans the cluster objects with the EC2NodeClass as the API server has it now; the names of
/// the nodes the plan says are Drifted.
async fn drifted(client: &kube::Client, image: &str) -> Vec<String> {
    let class = classes(client)
        .get("default")
        .await
        .expect("read the EC2NodeClass");
    let mut class = serde_json::to_value(&class).expect("json");
    class["apiVersion"] = json!("karpenter.k8s.aws/v1");
    class["kind"] = json!("EC2NodeClass");
    let mut b = SnapshotBuilder::new();
    b.add_value(&class, "EC2NodeClass default").expect("class");
    for (i, o) in cluster_objects(image).iter().enumerate() {
        b.add_value(o, &format!("object {i}")).expect("object");
    }
    let snapshot = b.finish().snapshot;
    let catalog = planner::catalog::aws::builtin("us-east-1").expect("catalog");
    let plan = planner::plan(
        &snapshot,
        &catalog,
        &PlanOptions {
            // An hour after the objects' creation (long before they expire).
            now: 1_767_225_600 + 3600,
            ..PlanOptions::default()
        },
    );
    plan.disruptions
        .iter()
        .filter(|d| d.reason == "Drifted")
        .flat_map(|d| d.nodes.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_ami_behind_the_alias_reaches_the_status_and_the_plan_says_drifted() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    aws_testing::seed(&moto.config()).await;
    let cloud: Arc<dyn CloudProvider> = Arc::new(cloud_aws::Ec2Provider::new(moto.config()).await);
    let sim = simulator::Simulation::start(simulator::Config::default())
        .await
        .expect("simulation");
    let client = sim.kube_client().expect("client");
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-test-cluster",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}]
        }
    }))
    .expect("class");
    classes(&client)
        .create(&PostParams::default(), &class)
        .await
        .expect("create the EC2NodeClass");
    let writer = StatusWriter::new(
        client.clone(),
        cloud,
        Clock::new(),
        node_class_status::Options::default(),
    );

    // Before any status: no AMI decision.
    assert!(drifted(&client, aws_testing::X86_IMAGE).await.is_empty());
    // The status lists the node's image: not drifted.
    let pass = writer.pass().await.expect("pass");
    assert_eq!(pass.written, ["default"], "{pass:?}");
    assert!(drifted(&client, aws_testing::X86_IMAGE).await.is_empty());

    // A new release: the alias's parameter moves; the next pass writes it; the plan drifts n0.
    let (param, _) = aws_testing::alias_parameters()
        .into_iter()
        .find(|(p, _)| p.ends_with("amazon-linux-2023/x86_64/standard/recommended/image_id"))
        .expect("the AL2023 x86_64 alias parameter");
    aws_testing::put_parameter(&moto.config(), &param, "ami-0a1b2c3d4e5f60718").await;
    assert!(
        drifted(&client, aws_testing::X86_IMAGE).await.is_empty(),
        "the plan follows the status, not the cloud"
    );
    let pass = writer.pass().await.expect("pass");
    assert_eq!(pass.written, ["default"], "{pass:?}");
    assert_eq!(drifted(&client, aws_testing::X86_IMAGE).await, ["n0"]);
    // A node already on the new image is not drifted.
    assert!(drifted(&client, "ami-0a1b2c3d4e5f60718").await.is_empty());
    sim.shutdown().await;
}
