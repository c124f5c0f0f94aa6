//! Test support (feature `test-util`): a moto_server process on a loopback port as the EC2/SSM
//! stand-in, and a seeded world in it (a VPC with tagged subnets in three zones, security
//! groups, AMI alias parameters under a test prefix, tagged images, the node role in IAM).
//!
//! The binary comes from `DOVETAIL_MOTO_SERVER` (scripts/test.sh exports it from the project's
//! venv), else `moto_server` on `PATH`. [`MotoServer::start_or_skip`] fails when there is
//! none, unless `DOVETAIL_ALLOW_MISSING` names `moto_server` (`test_support::missing_tool`).
//!
//! What moto cannot show: it launches only the first override of a fleet, ignores
//! `ClientToken` (a repeated CreateFleet launches again), never runs out of capacity, ignores
//! ListInstanceProfiles' `PathPrefix` (the provider filters by path itself); the
//! error mapping is covered by unit tests in `error.rs` instead. Its SQS is a real queue
//! (visibility timeout, receipt handles, long polling), but nothing feeds it: EventBridge rules
//! are not evaluated, so tests send the EventBridge bodies themselves ([`create_queue`],
//! [`send`]).

use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use cloud::Tags;
use cloud::node_class::{AmiSelectorTerm, NodeClassSpec, SelectorTerm};

use crate::config::{Cluster, Config};

/// Environment variable naming the moto_server binary.
pub const MOTO_SERVER_ENV: &str = "DOVETAIL_MOTO_SERVER";
/// The SSM prefix the seeded alias parameters live under (moto reserves `/aws/`).
pub const TEST_SSM_PREFIX: &str = "/dovetail-test/aws/service";
/// The Kubernetes version of the seeded parameters.
pub const TEST_K8S_VERSION: &str = "1.33";
/// The cluster name of the test world.
pub const TEST_CLUSTER: &str = "test-cluster";
/// The node role `seed` creates in IAM (the seeded node class's `role`).
pub const TEST_ROLE: &str = "KarpenterNodeRole-test-cluster";
/// The zones of the seeded subnets.
pub const TEST_ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// A moto built-in x86_64 image.
pub const X86_IMAGE: &str = "ami-1e749f67";
/// A moto built-in arm64 image.
pub const ARM_IMAGE: &str = "ami-0e9271c829888680e";
/// How long moto may take to start on a loaded machine (a guard, not a timing assertion).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// A moto_server child process, killed on drop.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    url: String,
}

// === impl MotoServer ===

impl MotoServer {
    /// The moto_server binary: `DOVETAIL_MOTO_SERVER`, else `moto_server` found on `PATH`.
    pub fn binary() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os(MOTO_SERVER_ENV).filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("moto_server"))
                .find(|p| p.is_file())
        })
    }

    /// Starts moto, or returns `None` (after saying so) when no binary is found and
    /// `DOVETAIL_ALLOW_MISSING` names `moto_server`.
    ///
    /// # Panics
    /// Without a binary (unless allowed to be missing), and when moto does not start.
    pub fn start_or_skip() -> Option<Self> {
        let Some(bin) = Self::binary() else {
            test_support::missing_tool(
                "moto_server",
                &format!("set {MOTO_SERVER_ENV} (scripts/moto.sh installs it into its venv)"),
            );
            return None;
        };
        Some(Self::start(&bin).unwrap_or_else(|e| panic!("starting {}: {e}", bin.display())))
    }

    /// Starts `bin` on a free loopback port (moto binds port 0 and prints the port it got).
    ///
    /// # Errors
    /// When the process cannot be spawned or does not report its address in time.
    pub fn start(bin: &std::path::Path) -> io::Result<Self> {
        let mut child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| io::Error::other("no stderr"))?;
        let (tx, rx) = mpsc::channel();
        // moto logs every request to stderr: keep draining it so it never blocks.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.split("Running on ").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(url) => Ok(Self { child, url }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(io::Error::other("moto_server did not report its address"))
            }
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A provider configuration pointing at this server: static credentials, `us-east-1`,
    /// the test SSM prefix and cluster.
    pub fn config(&self) -> Config {
        Config::new(
            "us-east-1",
            Cluster {
                name: TEST_CLUSTER.into(),
                endpoint: "https://test-cluster.example".into(),
                ca_bundle: Some("Y2EtYnVuZGxl".into()),
                service_cidr: Some("10.100.0.0/16".into()),
                kubernetes_version: TEST_K8S_VERSION.into(),
            },
        )
        .with_endpoint_url(self.url.clone())
        .with_static_credentials("testing", "testing")
        .with_ssm_parameter_prefix(TEST_SSM_PREFIX)
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What [`seed`] created.
#[derive(Clone, Debug)]
pub struct World {
    /// The VPC.
    pub vpc_id: String,
    /// The tagged subnets, one per zone of [`TEST_ZONES`], in that order.
    pub subnets: Vec<String>,
    /// A subnet in `us-east-1d` without the discovery tag.
    pub untagged_subnet: String,
    /// The security group with the discovery tag.
    pub security_group: String,
    /// A second group, found by name (`dovetail-extra`).
    pub named_security_group: String,
    /// A node class selecting all of it by tag, with `al2023@latest`.
    pub node_class: NodeClassSpec,
}

/// The discovery tag of the seeded resources.
pub fn discovery_tags() -> Tags {
    Tags::from([(
        "karpenter.sh/discovery".to_string(),
        TEST_CLUSTER.to_string(),
    )])
}

fn tagged(rt: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(rt)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                .collect(),
        ))
        .build()
}

/// Seeds moto: a VPC, subnets in three zones tagged for discovery (and one more untagged),
/// security groups, the AMI alias parameters of AL2023, AL2 and Bottlerocket under
/// [`TEST_SSM_PREFIX`], and the discovery tag on two built-in images.
///
/// # Panics
/// When moto rejects a call (a broken test environment).
pub async fn seed(config: &Config) -> World {
    let sdk = config.sdk_config().await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let vpc_id = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc")
        .vpc()
        .and_then(|v| v.vpc_id())
        .expect("vpc id")
        .to_string();
    let discovery = ("karpenter.sh/discovery", TEST_CLUSTER);
    let mut subnets = Vec::new();
    for (i, zone) in TEST_ZONES.iter().enumerate() {
        let name = format!("private-{zone}");
        let id = ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .cidr_block(format!("10.0.{i}.0/24"))
            .availability_zone(*zone)
            .tag_specifications(tagged(
                ResourceType::Subnet,
                &[discovery, ("Name", &name), ("tier", "private")],
            ))
            .send()
            .await
            .expect("CreateSubnet")
            .subnet()
            .and_then(|s| s.subnet_id())
            .expect("subnet id")
            .to_string();
        subnets.push(id);
    }
    let untagged_subnet = ec2
        .create_subnet()
        .vpc_id(&vpc_id)
        .cidr_block("10.0.9.0/24")
        .availability_zone("us-east-1d")
        .send()
        .await
        .expect("CreateSubnet")
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id")
        .to_string();
    let mut groups = Vec::new();
    for (name, tags) in [
        ("dovetail-nodes", vec![discovery]),
        ("dovetail-extra", vec![("team", "x")]),
    ] {
        let id = ec2
            .create_security_group()
            .group_name(name)
            .description(name)
            .vpc_id(&vpc_id)
            .tag_specifications(tagged(ResourceType::SecurityGroup, &tags))
            .send()
            .await
            .expect("CreateSecurityGroup")
            .group_id()
            .expect("group id")
            .to_string();
        groups.push(id);
    }
    for (path, image) in alias_parameters() {
        ssm.put_parameter()
            .name(path)
            .value(image)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .expect("PutParameter");
    }
    ec2.create_tags()
        .resources(X86_IMAGE)
        .resources(ARM_IMAGE)
        .tags(
            Tag::builder()
                .key("dovetail/test-image")
                .value("yes")
                .build(),
        )
        .send()
        .await
        .expect("CreateTags on images");
    // The node role the class names (moto's IAM: the instance profile is the provider's to make).
    aws_sdk_iam::Client::new(&sdk)
        .create_role()
        .role_name(TEST_ROLE)
        .assume_role_policy_document(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#,
        )
        .send()
        .await
        .expect("CreateRole");
    World {
        vpc_id,
        subnets,
        untagged_subnet,
        security_group: groups[0].clone(),
        named_security_group: groups[1].clone(),
        node_class: NodeClassSpec {
            name: "default".into(),
            ami_selector_terms: vec![AmiSelectorTerm {
                alias: Some("al2023@latest".into()),
                ..AmiSelectorTerm::default()
            }],
            subnet_selector_terms: vec![SelectorTerm {
                tags: discovery_tags(),
                ..SelectorTerm::default()
            }],
            security_group_selector_terms: vec![SelectorTerm {
                tags: discovery_tags(),
                ..SelectorTerm::default()
            }],
            role: Some(TEST_ROLE.into()),
            tags: Tags::from([("team".to_string(), "platform".to_string())]),
            ..NodeClassSpec::default()
        },
    }
}

/// The alias parameters seeded: AL2023 latest and `v20240807`, AL2 latest, Bottlerocket latest,
/// each for x86_64 ([`X86_IMAGE`]) and arm64 ([`ARM_IMAGE`]).
pub fn alias_parameters() -> Vec<(String, &'static str)> {
    let p = TEST_SSM_PREFIX;
    let k = TEST_K8S_VERSION;
    let mut out = Vec::new();
    for (arch, image) in [("x86_64", X86_IMAGE), ("arm64", ARM_IMAGE)] {
        out.push((
            format!(
                "{p}/eks/optimized-ami/{k}/amazon-linux-2023/{arch}/standard/recommended/image_id"
            ),
            image,
        ));
        out.push((
            format!(
                "{p}/eks/optimized-ami/{k}/amazon-linux-2023/{arch}/standard/amazon-eks-node-al2023-{arch}-standard-{k}-v20240807/image_id"
            ),
            image,
        ));
        out.push((
            format!("{p}/bottlerocket/aws-k8s-{k}/{arch}/latest/image_id"),
            image,
        ));
    }
    out.push((
        format!("{p}/eks/optimized-ami/{k}/amazon-linux-2/recommended/image_id"),
        X86_IMAGE,
    ));
    out
}

/// Instances in the stand-in carrying `tag` = `value`, in any state but terminated.
///
/// # Panics
/// When moto rejects the call.
pub async fn instances_tagged(ec2: &aws_sdk_ec2::Client, tag: &str, value: &str) -> Vec<String> {
    let out = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name(format!("tag:{tag}"))
                .values(value)
                .build(),
        )
        .send()
        .await
        .expect("DescribeInstances");
    let mut ids: Vec<String> = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.state().and_then(|s| s.name()).map(|n| n.as_str()) != Some("terminated"))
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

/// Creates the SQS queue `name` in the stand-in with a visibility timeout of
/// `visibility_secs`, and returns it read through [`crate::SqsQueue`] (by name) with a one
/// second long poll.
///
/// # Panics
/// When moto rejects the call.
pub async fn create_queue(config: &Config, name: &str, visibility_secs: u32) -> crate::SqsQueue {
    let sdk = config.sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    sqs.create_queue()
        .queue_name(name)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            visibility_secs.to_string(),
        )
        .send()
        .await
        .expect("CreateQueue");
    crate::SqsQueue::new(config, name)
        .await
        .expect("the queue just created")
        .with_wait(Duration::from_secs(1))
}

/// Sends `body` to `queue` with the real SDK (as EventBridge would) and returns its message ID.
///
/// # Panics
/// When moto rejects the call.
pub async fn send(queue: &crate::SqsQueue, body: &str) -> String {
    queue
        .client()
        .send_message()
        .queue_url(queue.url())
        .message_body(body)
        .send()
        .await
        .expect("SendMessage")
        .message_id()
        .unwrap_or_default()
        .to_string()
}

/// Sets SSM parameter `name` to `value` in the stand-in (overwriting it), as a new AMI release
/// does to the public alias parameters.
///
/// # Panics
/// When moto rejects the call.
pub async fn put_parameter(config: &Config, name: &str, value: &str) {
    let sdk = config.sdk_config().await;
    aws_sdk_ssm::Client::new(&sdk)
        .put_parameter()
        .name(name)
        .value(value)
        .overwrite(true)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .expect("PutParameter");
}

/// Removes tag `key` from EC2 resource `id` in the stand-in.
///
/// # Panics
/// When moto rejects the call.
pub async fn delete_tag(config: &Config, id: &str, key: &str) {
    let sdk = config.sdk_config().await;
    aws_sdk_ec2::Client::new(&sdk)
        .delete_tags()
        .resources(id)
        .tags(Tag::builder().key(key).build())
        .send()
        .await
        .expect("DeleteTags");
}

/// Sets tag `key` to `value` on EC2 resource `id` in the stand-in.
///
/// # Panics
/// When moto rejects the call.
pub async fn create_tag(config: &Config, id: &str, key: &str, value: &str) {
    let sdk = config.sdk_config().await;
    aws_sdk_ec2::Client::new(&sdk)
        .create_tags()
        .resources(id)
        .tags(Tag::builder().key(key).value(value).build())
        .send()
        .await
        .expect("CreateTags");
}

/// Replaces the security groups of running instance `instance_id` (ModifyInstanceAttribute), as
/// an operator changing a node's groups by hand does.
///
/// # Panics
/// When moto rejects the call.
pub async fn set_instance_security_groups(config: &Config, instance_id: &str, groups: &[String]) {
    let sdk = config.sdk_config().await;
    aws_sdk_ec2::Client::new(&sdk)
        .modify_instance_attribute()
        .instance_id(instance_id)
        .set_groups(Some(groups.to_vec()))
        .send()
        .await
        .expect("ModifyInstanceAttribute");
}
