//! AMI drift the actuator can see, through real parts: moto_server's EC2 and SSM (seeded by
//! `cloud_aws::testing::seed`) resolved by the production `cloud_aws::Ec2Provider`, the
//! actuator's EC2NodeClass status writer against the simulator's Kubernetes API, and the
//! planner library on the cluster as read back from that API.
//!
//! A node whose NodeClaim runs the image `al2023@latest` resolves to is not drifted; a new AMI
//! release (the alias's SSM parameter moves) is written to the EC2NodeClass status by the next
//! pass, and the next plan says the node is Drifted.
//!
//! Subnet and security group drift, from a real instance launched in moto by the production
//! provider: the pass copies the instance's subnet and groups onto its NodeClaim; the subnet
//! losing its discovery tag drifts the node (SubnetDrift), tagging it again undrifts it; a
//! second group gaining the discovery tag drifts it (SecurityGroupDrift: the instance has one
//! of the two), and the instance being given both groups (ModifyInstanceAttribute) undrifts it
//! at the next pass. The plan's note names what drifted (`SubnetDrift: ...`,
//! `SecurityGroupDrift: ...`).
//!
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it (then skipped, saying so).

use std::sync::Arc;

use actuator::node_class_status::{self, StatusWriter};
use cloud::{CapacityType, CloudProvider, LaunchRequest, NodeSpec, OfferingKey, Tags};
use cloud_aws::testing::{self as aws_testing, MotoServer, TEST_CLUSTER};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use planner::model::PlanOptions;
use planner_manifests::Reader;
use serde_json::{Value, json};
use service_shell::clock::Clock;

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

/// A simulated cluster with the EC2NodeClass `default` selecting the seeded world by its
/// discovery tag, with `al2023@latest`; no status yet.
async fn cluster_with_class() -> (simulator::Simulation, kube::Client) {
    let sim = simulator::Simulation::start(simulator::Config::default())
        .await
        .expect("simulation");
    let client = sim.kube_client().expect("client");
    let class: DynamicObject =
        serde_json::from_value(integration_tests::system::default_node_class()).expect("class");
    classes(&client)
        .create(&PostParams::default(), &class)
        .await
        .expect("create the EC2NodeClass");
    (sim, client)
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
    let mut objects = vec![class];
    objects.extend(cluster_objects(image));
    drifted_nodes(&plan_objects(&objects))
}

/// Plans `objects` with the built-in catalog an hour after their creation (long before they
/// expire).
fn plan_objects(objects: &[Value]) -> planner::plan::Plan {
    let mut b = Reader::new();
    for (i, o) in objects.iter().enumerate() {
        b.add_value(o, &format!("object {i}")).expect("object");
    }
    let snapshot = b.finish().expect("valid objects").snapshot;
    let catalog = planner::catalog::aws::builtin("us-east-1").expect("catalog");
    planner::plan(
        &snapshot,
        &catalog,
        &PlanOptions {
            now: 1_767_225_600 + 3600,
            ..PlanOptions::default()
        },
    )
}

/// The names of the nodes `plan` says are Drifted.
fn drifted_nodes(plan: &planner::plan::Plan) -> Vec<String> {
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
    let (sim, client) = cluster_with_class().await;
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

fn node_claims(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim")),
    )
}

/// Plans the NodePool, the EC2NodeClass and the NodeClaim as the API server has them now, with
/// an empty Node for the claim; when the plan says the node is Drifted, the plan's note of what
/// drifted.
async fn claim_drift(client: &kube::Client, provider_id: &str) -> Option<String> {
    let read = |mut o: Value, api_version: &str, kind: &str| {
        o["apiVersion"] = json!(api_version);
        o["kind"] = json!(kind);
        o
    };
    let class = classes(client).get("default").await.expect("class");
    let claim = node_claims(client).get("default-n0").await.expect("claim");
    let mut objects = vec![
        read(
            serde_json::to_value(&class).expect("json"),
            "karpenter.k8s.aws/v1",
            "EC2NodeClass",
        ),
        read(
            serde_json::to_value(&claim).expect("json"),
            "karpenter.sh/v1",
            "NodeClaim",
        ),
    ];
    let mut base = cluster_objects("unused");
    // The NodePool as before; the Node with the real instance's provider ID.
    let mut node = base.pop().expect("node");
    node["spec"]["providerID"] = json!(provider_id);
    objects.push(base.swap_remove(0));
    objects.push(node);
    let plan = plan_objects(&objects);
    if drifted_nodes(&plan).is_empty() {
        return None;
    }
    assert_eq!(drifted_nodes(&plan), ["n0"]);
    let note = plan
        .notes
        .iter()
        .find(|n| n.starts_with("Drifted: decision 0 replaces node n0: "))
        .unwrap_or_else(|| panic!("no drift note in {:?}", plan.notes));
    Some(note.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subnet_and_security_group_drift_follow_the_instance_and_the_status() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let config = moto.config();
    let world = aws_testing::seed(&config).await;
    let provider = cloud_aws::Ec2Provider::new(config.clone()).await;
    let instance = provider
        .create(&LaunchRequest {
            client_token: "token-default-n0".into(),
            offerings: vec![OfferingKey {
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: CapacityType::OnDemand,
            }],
            tags: Tags::from([
                (cloud::TAG_NODECLAIM.to_string(), "default-n0".to_string()),
                (cloud::TAG_NODEPOOL.to_string(), "default".to_string()),
            ]),
            node_class: Some("default".into()),
            image_id: None,
            node: Some(NodeSpec {
                class: world.node_class.clone(),
                ..NodeSpec::default()
            }),
        })
        .await
        .expect("launch");
    // moto ignores the launch template's security groups on fleet launches (the instance lists
    // none): give it the groups EC2 would have (the class's one group).
    aws_testing::set_instance_security_groups(
        &config,
        &instance.id,
        std::slice::from_ref(&world.security_group),
    )
    .await;
    let cloud: Arc<dyn CloudProvider> = Arc::new(provider);
    let (sim, client) = cluster_with_class().await;
    // The NodeClaim of the instance, as the lifecycle leaves it (labels, providerID), without
    // an image ID or hash annotations.
    let mut claim = cluster_objects("unused").swap_remove(1);
    claim["status"]
        .as_object_mut()
        .expect("status")
        .remove("imageID");
    claim["status"]["providerID"] = json!(instance.provider_id.to_string());
    let created = node_claims(&client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(claim.clone()).expect("claim"),
        )
        .await
        .expect("create the NodeClaim");
    if created
        .data
        .get("status")
        .is_none_or(|s| s.get("providerID").is_none())
    {
        node_claims(&client)
            .patch_status(
                "default-n0",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"status": claim["status"]})),
            )
            .await
            .expect("NodeClaim status");
    }
    let writer = StatusWriter::new(
        client.clone(),
        cloud,
        Clock::new(),
        node_class_status::Options {
            cluster_name: Some(TEST_CLUSTER.into()),
            ..node_class_status::Options::default()
        },
    );
    let pid = instance.provider_id.to_string();

    // The first pass writes the status and the instance's network onto the claim.
    let pass = writer.pass().await.expect("pass");
    assert!(pass.errors.is_empty(), "{pass:?}");
    assert_eq!(pass.annotated, ["default-n0"], "{pass:?}");
    let annotations = node_claims(&client)
        .get("default-n0")
        .await
        .expect("claim")
        .metadata
        .annotations
        .unwrap_or_default();
    assert_eq!(
        annotations.get("dovetail.io/subnet-id"),
        Some(&world.subnets[0]),
        "launched in us-east-1a: {annotations:?}"
    );
    assert_eq!(
        annotations.get("dovetail.io/security-group-ids"),
        Some(&world.security_group)
    );
    assert_eq!(claim_drift(&client, &pid).await, None, "in place");
    let pass = writer.pass().await.expect("pass");
    assert!(pass.annotated.is_empty(), "nothing changed: {pass:?}");

    // The instance's subnet leaves the selection: SubnetDrift. Back in: not drifted.
    aws_testing::delete_tag(&config, &world.subnets[0], "karpenter.sh/discovery").await;
    writer.pass().await.expect("pass");
    let why = claim_drift(&client, &pid)
        .await
        .expect("subnet left the status");
    assert!(
        why.contains(&format!("SubnetDrift: subnet {} ", world.subnets[0])),
        "{why}"
    );
    aws_testing::create_tag(
        &config,
        &world.subnets[0],
        "karpenter.sh/discovery",
        TEST_CLUSTER,
    )
    .await;
    writer.pass().await.expect("pass");
    assert_eq!(claim_drift(&client, &pid).await, None, "subnet back");

    // A second group joins the selection: the instance has one of two, SecurityGroupDrift.
    aws_testing::create_tag(
        &config,
        &world.named_security_group,
        "karpenter.sh/discovery",
        TEST_CLUSTER,
    )
    .await;
    writer.pass().await.expect("pass");
    let why = claim_drift(&client, &pid)
        .await
        .expect("a group joined the status");
    assert!(
        why.contains(&format!(
            "SecurityGroupDrift: security groups ({}) ",
            world.security_group
        )),
        "{why}"
    );
    // The instance is given both groups: the next pass reads it off EC2, not drifted.
    let both = vec![
        world.security_group.clone(),
        world.named_security_group.clone(),
    ];
    aws_testing::set_instance_security_groups(&config, &instance.id, &both).await;
    let pass = writer.pass().await.expect("pass");
    assert_eq!(pass.annotated, ["default-n0"], "{pass:?}");
    let mut sorted = both.clone();
    sorted.sort();
    assert_eq!(
        node_claims(&client)
            .get("default-n0")
            .await
            .expect("claim")
            .metadata
            .annotations
            .unwrap_or_default()
            .get("dovetail.io/security-group-ids"),
        Some(&sorted.join(","))
    );
    assert_eq!(
        claim_drift(&client, &pid).await,
        None,
        "the instance follows"
    );
    sim.shutdown().await;
}
