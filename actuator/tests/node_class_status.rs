//! The EC2NodeClass status against real parts: moto_server's EC2 and SSM (seeded by
//! `cloud_aws::testing::seed`), read through the production `cloud_aws::Ec2Provider`, and the
//! simulator's Kubernetes API (EC2NodeClass CRD with its status subresource).
//!
//! A class selecting the seeded world is written Ready with its AMIs (one per architecture,
//! with the architecture requirement), subnets (zone, zone ID), security groups (with names)
//! and instance profile; a class whose subnet selector matches nothing is SubnetsReady=False
//! (SubnetsNotFound) and Ready=False. A second pass writes nothing. Then the AMI alias's SSM
//! parameter moves to a new image and a subnet loses its discovery tag: the next pass writes
//! the new AMI and drops the subnet, keeping the transition times of conditions that did not
//! change.

use std::sync::Arc;

use actuator::node_class_status::{self, StatusWriter};
use cloud::CloudProvider;
use cloud_aws::testing::{self as aws_testing, MotoServer, TEST_CLUSTER};
use crds::EC2NodeClass;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use service_shell::clock::Clock;
use simulator::{Config, Simulation};

async fn create_class(client: &kube::Client, name: &str, subnet_tag: &str) {
    let class: EC2NodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
        "spec": {
            "role": "KarpenterNodeRole-test-cluster",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": subnet_tag}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}]
        }
    }))
    .expect("class");
    Api::<EC2NodeClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("create the EC2NodeClass");
}

async fn status(client: &kube::Client, name: &str) -> Value {
    let c = Api::<EC2NodeClass>::all(client.clone())
        .get(name)
        .await
        .expect("read the EC2NodeClass");
    serde_json::to_value(c.status).expect("status")
}

fn condition(status: &Value, t: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .cloned()
        .unwrap_or_else(|| panic!("no condition {t} in {status}"))
}

fn ids(status: &Value, field: &str) -> Vec<String> {
    let mut v: Vec<String> = status[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in {status}"))
        .iter()
        .map(|x| x["id"].as_str().expect("id").to_string())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_follows_the_account_and_says_what_matched_nothing() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let world = aws_testing::seed(&moto.config()).await;
    let cloud: Arc<dyn CloudProvider> = Arc::new(cloud_aws::Ec2Provider::new(moto.config()).await);
    let sim = Simulation::start(Config::default())
        .await
        .expect("simulation");
    let client = sim.kube_client().expect("client");
    create_class(&client, "default", TEST_CLUSTER).await;
    create_class(&client, "nowhere", "nobody").await;
    let writer = StatusWriter::new(
        client.clone(),
        cloud,
        Clock::new(),
        node_class_status::Options::default(),
    );

    let pass = writer.pass().await.expect("pass");
    assert!(pass.errors.is_empty(), "{pass:?}");
    assert_eq!(pass.written.len(), 2, "{pass:?}");

    let s = status(&client, "default").await;
    let mut amis: Vec<(String, Value)> = s["amis"]
        .as_array()
        .expect("amis")
        .iter()
        .map(|a| {
            (
                a["id"].as_str().expect("id").to_string(),
                a["requirements"].clone(),
            )
        })
        .collect();
    amis.sort_by(|a, b| a.0.cmp(&b.0));
    // The seeded alias parameters are the standard images: Karpenter's requirements of the
    // standard variant (no GPUs, no accelerators) come with the architecture.
    let standard = |arch: &str| {
        json!([
            {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]},
            {"key": "karpenter.k8s.aws/instance-accelerator-count", "operator": "DoesNotExist"},
            {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"},
        ])
    };
    let mut expected = vec![
        (aws_testing::X86_IMAGE.to_string(), standard("amd64")),
        (aws_testing::ARM_IMAGE.to_string(), standard("arm64")),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(amis, expected, "{s}");
    let mut subnets = world.subnets.clone();
    subnets.sort();
    assert_eq!(ids(&s, "subnets"), subnets, "{s}");
    for sn in s["subnets"].as_array().expect("subnets") {
        assert!(
            aws_testing::TEST_ZONES.contains(&sn["zone"].as_str().expect("zone")),
            "{sn}"
        );
    }
    assert_eq!(
        ids(&s, "securityGroups"),
        vec![world.security_group.clone()]
    );
    assert_eq!(s["securityGroups"][0]["name"], "dovetail-nodes", "{s}");
    // The instance profile the provider made for the role through (moto's) IAM.
    assert_eq!(
        s["instanceProfile"],
        cloud_aws::instance_profile::profile_name(TEST_CLUSTER, "us-east-1", "default")
    );
    for t in [
        "AMIsReady",
        "SubnetsReady",
        "SecurityGroupsReady",
        "InstanceProfileReady",
        "Ready",
    ] {
        assert_eq!(condition(&s, t)["status"], "True", "{t}: {s}");
    }

    let n = status(&client, "nowhere").await;
    let subnets_ready = condition(&n, "SubnetsReady");
    assert_eq!(subnets_ready["status"], "False", "{n}");
    assert_eq!(subnets_ready["reason"], "SubnetsNotFound", "{n}");
    assert!(
        subnets_ready["message"]
            .as_str()
            .is_some_and(|m| m.contains("EC2NodeClass nowhere: spec.subnetSelectorTerms")),
        "{n}"
    );
    assert_eq!(condition(&n, "Ready")["status"], "False", "{n}");
    assert_eq!(condition(&n, "AMIsReady")["status"], "True", "{n}");
    assert_eq!(n["subnets"], json!([]), "{n}");

    // Nothing changed: nothing is written.
    let pass = writer.pass().await.expect("pass");
    assert!(pass.written.is_empty(), "{pass:?}");
    assert_eq!(pass.unchanged.len(), 2, "{pass:?}");

    // The alias's parameter moves to a new image; a subnet loses its discovery tag.
    let (param, _) = aws_testing::alias_parameters()
        .into_iter()
        .find(|(p, _)| p.ends_with("amazon-linux-2023/x86_64/standard/recommended/image_id"))
        .expect("the AL2023 x86_64 alias parameter");
    let new_image = "ami-0a1b2c3d4e5f60718";
    aws_testing::put_parameter(&moto.config(), &param, new_image).await;
    let retagged = world.subnets[0].clone();
    aws_testing::delete_tag(&moto.config(), &retagged, "karpenter.sh/discovery").await;
    let pass = writer.pass().await.expect("pass");
    // Both classes use the alias: both get the new image.
    assert_eq!(pass.written, ["default", "nowhere"], "{pass:?}");
    assert!(
        ids(&status(&client, "nowhere").await, "amis").contains(&new_image.to_string()),
        "the other class follows the alias too"
    );
    let after = status(&client, "default").await;
    let ami_ids = ids(&after, "amis");
    assert!(ami_ids.contains(&new_image.to_string()), "{after}");
    assert!(
        !ami_ids.contains(&aws_testing::X86_IMAGE.to_string()),
        "{after}"
    );
    let subnet_ids = ids(&after, "subnets");
    assert!(!subnet_ids.contains(&retagged), "{after}");
    assert_eq!(subnet_ids.len(), world.subnets.len() - 1, "{after}");
    assert_eq!(
        condition(&after, "AMIsReady")["lastTransitionTime"],
        condition(&s, "AMIsReady")["lastTransitionTime"],
        "an unchanged condition keeps its transition time"
    );
    sim.shutdown().await;
}

/// A field that is set but that dovetail does not honour makes the class
/// `ValidationSucceeded=False` (and not Ready), naming the field, while the rest resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_set_but_not_honoured_fails_validation_naming_it() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    aws_testing::seed(&moto.config()).await;
    let cloud: Arc<dyn CloudProvider> = Arc::new(cloud_aws::Ec2Provider::new(moto.config()).await);
    let sim = Simulation::start(Config::default())
        .await
        .expect("simulation");
    let client = sim.kube_client().expect("client");
    let class: EC2NodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "efa"},
        "spec": {
            "role": aws_testing::TEST_ROLE,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}],
            "networkInterfaces": [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}],
            "kubelet": {"evictionMaxPodGracePeriod": 60}
        }
    }))
    .expect("class");
    Api::<EC2NodeClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("create the EC2NodeClass");
    let writer = StatusWriter::new(
        client.clone(),
        cloud,
        Clock::new(),
        node_class_status::Options::default(),
    );
    let pass = writer.pass().await.expect("pass");
    assert!(pass.errors.is_empty(), "{pass:?}");
    let s = status(&client, "efa").await;
    let v = condition(&s, "ValidationSucceeded");
    assert_eq!(v["status"], "False", "{s}");
    assert_eq!(v["reason"], "UnsupportedField", "{s}");
    let msg = v["message"].as_str().expect("message");
    assert!(
        msg.contains("spec.networkInterfaces")
            && msg.contains("spec.kubelet.evictionMaxPodGracePeriod"),
        "{msg}"
    );
    assert_eq!(condition(&s, "AMIsReady")["status"], "True", "{s}");
    assert_eq!(condition(&s, "Ready")["status"], "False", "{s}");
}
