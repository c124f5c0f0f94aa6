//! The simulator's AWS endpoint through the real AWS SDK: `cloud-aws`'s `Ec2Provider` (the
//! production adapter, built as the actuator builds it, with an endpoint override) launches
//! instances the simulated kubelet turns into Nodes and terminates them; the simulation's
//! insufficient capacity comes back as EC2's `InsufficientInstanceCapacity`; errors have EC2's
//! shapes and name what was wrong. Unlike moto, the simulator honours `ClientToken` and can run
//! out of capacity, so both are shown here.

mod support;

use anyhow::{Context, Result};
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceType as Ec2InstanceType, TargetCapacitySpecificationRequest,
};
use cloud::node_class::{AmiSelectorTerm, NodeClassSpec, SelectorTerm};
use cloud::{
    CapacityType, CloudProvider, Error, InstanceState, LaunchRequest, ListFilter, NodeSpec,
    OfferingKey, TAG_NODECLAIM, TAG_NODEPOOL, Tags,
};
use cloud_aws::Ec2Provider;
use cloud_aws::config::{Cluster, Config as AwsConfig};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use simulator::Simulation;
use simulator::aws::network::ImageFamily;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `Ec2Provider` as `dovetail-actuator --cloud aws --aws-endpoint <sim>` builds it: AWS's
/// public SSM prefix (`/aws/service`), static credentials (the simulator checks none).
async fn provider(sim: &Simulation) -> Ec2Provider {
    let config = AwsConfig::new(
        "us-east-1",
        Cluster {
            name: "demo".into(),
            endpoint: "https://demo.example".into(),
            ca_bundle: Some("Y2EtYnVuZGxl".into()),
            service_cidr: Some("10.100.0.0/16".into()),
            kubernetes_version: "1.33".into(),
        },
    )
    .with_endpoint_url(sim.aws_endpoint())
    .with_static_credentials("simulated", "simulated");
    Ec2Provider::new(config).await
}

/// Karpenter's getting-started EC2NodeClass: discovery tags and `al2023@latest`.
fn node() -> NodeSpec {
    let discovery = Tags::from([("karpenter.sh/discovery".to_string(), "demo".to_string())]);
    NodeSpec {
        class: NodeClassSpec {
            name: "default".into(),
            ami_selector_terms: vec![AmiSelectorTerm {
                alias: Some("al2023@latest".into()),
                ..AmiSelectorTerm::default()
            }],
            subnet_selector_terms: vec![SelectorTerm {
                tags: discovery.clone(),
                ..SelectorTerm::default()
            }],
            security_group_selector_terms: vec![SelectorTerm {
                tags: discovery,
                ..SelectorTerm::default()
            }],
            role: Some("KarpenterNodeRole-demo".into()),
            ..NodeClassSpec::default()
        },
        labels: [("karpenter.sh/nodepool".to_string(), "default".to_string())].into(),
        taints: vec![],
    }
}

fn offering(t: &str, zone: &str, ct: CapacityType) -> OfferingKey {
    OfferingKey {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type: ct,
    }
}

fn request(claim: &str, offerings: Vec<OfferingKey>) -> LaunchRequest {
    LaunchRequest {
        client_token: format!("token-{claim}"),
        offerings,
        tags: Tags::from([
            (TAG_NODECLAIM.to_string(), claim.to_string()),
            (TAG_NODEPOOL.to_string(), "default".to_string()),
        ]),
        node_class: Some("default".into()),
        image_id: None,
        node: Some(node()),
    }
}

async fn node_of(sim: &Simulation, provider_id: &str) -> Option<Node> {
    let nodes: Api<Node> = Api::all(sim.kube_client().ok()?);
    nodes
        .list(&Default::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id))
}

#[tokio::test]
async fn cloud_aws_launches_a_node_and_terminates_it() -> Result<()> {
    let sim = support::start().await;
    let provider = provider(&sim).await;
    let spot = offering("m5.large", "us-east-1b", CapacityType::Spot);
    let instance = provider
        .create(&request("claim-1", vec![spot.clone()]))
        .await?;
    assert_eq!(instance.instance_type, "m5.large");
    assert_eq!(instance.zone, "us-east-1b");
    assert_eq!(instance.capacity_type, CapacityType::Spot);
    let al2023 = sim
        .aws()
        .network()
        .image(ImageFamily::Al2023, "x86_64")
        .map(|i| i.id.clone());
    assert_eq!(
        instance.image_id, al2023,
        "al2023@latest through SSM's public parameter"
    );
    for (k, v) in [
        (TAG_NODECLAIM, "claim-1"),
        (TAG_NODEPOOL, "default"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("kubernetes.io/cluster/demo", "owned"),
        ("eks:eks-cluster-name", "demo"),
    ] {
        assert_eq!(instance.tags.get(k).map(String::as_str), Some(v), "tag {k}");
    }
    // The same client token gives the same instance (moto ignores ClientToken; EC2 and the
    // simulator do not).
    let again = provider.create(&request("claim-1", vec![spot])).await?;
    assert_eq!(again.id, instance.id);
    assert_eq!(sim.cloud().instances().len(), 1);

    // The simulated kubelet registers a Node for it, labelled from the instance.
    let pid = instance.provider_id.to_string();
    let node = support::eventually(&sim, "the node registers", || node_of(&sim, &pid)).await;
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-east-1b");
    assert_eq!(labels["karpenter.sh/capacity-type"], "spot");
    assert_eq!(
        node.metadata.name.as_deref(),
        Some(instance.private_dns_name.as_str())
    );

    // Launched into the class's subnet of that zone, with its security group and a launch
    // template made once.
    let ec2 = provider.ec2();
    let raw = ec2
        .describe_instances()
        .instance_ids(&instance.id)
        .send()
        .await?;
    let raw = &raw.reservations()[0].instances()[0];
    let subnet = sim
        .aws()
        .network()
        .subnets
        .iter()
        .find(|s| s.zone == "us-east-1b")
        .map(|s| s.id.clone());
    assert_eq!(raw.subnet_id().map(str::to_string), subnet);
    assert_eq!(raw.security_groups().len(), 1);
    // The instance profile cloud-aws made for the class's role through the simulator's IAM.
    let profile = cloud_aws::instance_profile::profile_name("demo", "us-east-1", "default");
    assert_eq!(
        raw.iam_instance_profile().and_then(|p| p.arn()),
        Some(
            format!("arn:aws:iam::123456789012:instance-profile/dovetail/us-east-1/demo/{profile}")
                .as_str()
        )
    );
    let profiles = sim.aws().iam().all();
    assert_eq!(profiles[&profile].roles, ["KarpenterNodeRole-demo"]);
    let other = provider
        .create(&request(
            "claim-2",
            vec![offering("c5.large", "us-east-1c", CapacityType::OnDemand)],
        ))
        .await?;
    assert_eq!(other.capacity_type, CapacityType::OnDemand);
    let templates = ec2.describe_launch_templates().send().await?;
    assert_eq!(
        templates.launch_templates().len(),
        1,
        "one template per class and AMI"
    );

    // get / list by tag.
    let got = support::eventually(&sim, "the instance runs", || async {
        let i = provider.get(&instance.provider_id).await.ok()?;
        (i.state == InstanceState::Running).then_some(i)
    })
    .await;
    assert_eq!(got.tags, instance.tags);
    let by_claim = ListFilter {
        tags: Tags::from([(TAG_NODECLAIM.to_string(), "claim-1".to_string())]),
        include_terminated: false,
    };
    let listed = provider.list(&by_claim).await?;
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [instance.id.as_str()]
    );

    // Terminate: the Node goes, the instance ends terminated, a second delete is NotFound.
    provider.delete(&instance.provider_id).await?;
    support::eventually(&sim, "the node is removed", || async {
        node_of(&sim, &pid).await.is_none().then_some(())
    })
    .await;
    support::eventually(&sim, "the instance terminates", || async {
        let i = provider.get(&instance.provider_id).await.ok()?;
        (i.state == InstanceState::Terminated).then_some(())
    })
    .await;
    let again = provider.delete(&instance.provider_id).await;
    assert!(matches!(again, Err(Error::NotFound { .. })), "{again:?}");
    assert!(provider.list(&by_claim).await?.is_empty());
    let unknown = cloud::ProviderId::new("us-east-1a", "i-00000000000000000");
    assert!(matches!(
        provider.get(&unknown).await,
        Err(Error::NotFound { .. })
    ));
    sim.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn insufficient_capacity_comes_back_through_the_sdk() -> Result<()> {
    let sim = support::start().await;
    let provider = provider(&sim).await;
    let a = offering("m5.large", "us-east-1a", CapacityType::Spot);
    let b = offering("m5.xlarge", "us-east-1a", CapacityType::Spot);
    sim.cloud().insufficient_capacity(a.clone());
    let i = provider
        .create(&request("c1", vec![a.clone(), b.clone()]))
        .await?;
    assert_eq!(i.instance_type, "m5.xlarge", "the offering with capacity");
    sim.cloud().insufficient_capacity(b.clone());
    let e = provider
        .create(&request("c2", vec![a.clone(), b.clone()]))
        .await
        .expect_err("no offering has capacity");
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(
        e,
        Error::InsufficientCapacity {
            offerings: expected
        }
    );

    // What the SDK itself sees: a successful CreateFleet with InsufficientInstanceCapacity per
    // override, naming the type and zone.
    let ec2 = provider.ec2();
    let template = ec2.describe_launch_templates().send().await?;
    let template_id = template.launch_templates()[0]
        .launch_template_id()
        .context("template id")?
        .to_string();
    let out = ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .client_token("raw-1")
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(DefaultTargetCapacityType::Spot)
                .build(),
        )
        .launch_template_configs(
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_id(template_id)
                        .version("$Latest")
                        .build(),
                )
                .overrides(
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(Ec2InstanceType::M5Large)
                        .availability_zone("us-east-1a")
                        .build(),
                )
                .build(),
        )
        .send()
        .await?;
    assert!(out.instances().is_empty());
    let errors = out.errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].error_code(), Some("InsufficientInstanceCapacity"));
    let o = errors[0]
        .launch_template_and_overrides()
        .and_then(|l| l.overrides())
        .context("overrides")?;
    assert_eq!(o.instance_type(), Some(&Ec2InstanceType::M5Large));
    assert_eq!(o.availability_zone(), Some("us-east-1a"));

    // Capacity back: the same claim launches.
    sim.cloud().restore_capacity(&a);
    let i = provider.create(&request("c2", vec![a.clone(), b])).await?;
    assert_eq!(i.instance_type, "m5.large");
    sim.shutdown().await;
    Ok(())
}

/// A raw HTTP POST to the endpoint: `(status, body)`.
async fn post(endpoint: &str, headers: &[(&str, &str)], body: &str) -> Result<(u16, String)> {
    let addr = endpoint.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let mut req = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await?;
    let mut out = String::new();
    stream.read_to_string(&mut out).await?;
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("status line")?;
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

#[tokio::test]
async fn errors_have_ec2_shapes_and_name_the_input() -> Result<()> {
    let sim = support::start().await;
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let (status, body) = post(
        &sim.aws_endpoint(),
        &form,
        "Action=DescribeUnicorns&Version=2016-11-15",
    )
    .await?;
    assert_eq!(status, 400);
    assert!(
        body.contains("<Response><Errors><Error><Code>InvalidAction</Code><Message>The action DescribeUnicorns is not valid for this web service.</Message></Error></Errors><RequestID>"),
        "{body}"
    );
    let (status, body) = post(&sim.aws_endpoint(), &form, "Version=2016-11-15").await?;
    assert_eq!(status, 400);
    assert!(body.contains("<Code>MissingAction</Code>"), "{body}");

    // Through the SDK: codes and messages as EC2's.
    let ec2 = provider(&sim).await.ec2().clone();
    let e = ec2
        .describe_instances()
        .filters(Filter::builder().name("colour").values("red").build())
        .send()
        .await
        .expect_err("unknown filter");
    assert_eq!(e.code(), Some("InvalidParameterValue"));
    assert!(
        e.message().unwrap_or_default().contains("'colour'"),
        "{e:?}"
    );
    let e = ec2
        .terminate_instances()
        .instance_ids("i-0123456789abcdef0")
        .send()
        .await
        .expect_err("unknown instance");
    assert_eq!(e.code(), Some("InvalidInstanceID.NotFound"));
    assert!(
        e.message()
            .unwrap_or_default()
            .contains("i-0123456789abcdef0")
    );
    let e = ec2
        .describe_subnets()
        .subnet_ids("subnet-nope")
        .send()
        .await
        .expect_err("unknown subnet");
    assert_eq!(e.code(), Some("InvalidSubnetID.NotFound"));
    let e = ec2
        .describe_launch_templates()
        .launch_template_names("nope")
        .send()
        .await
        .expect_err("unknown template");
    assert!(
        e.code()
            .is_some_and(|c| c.starts_with("InvalidLaunchTemplateName.NotFound")),
        "{e:?}"
    );

    // An EC2NodeClass whose selectors match nothing: cloud-aws names the field.
    let provider = provider(&sim).await;
    let mut req = request(
        "c1",
        vec![offering("m5.large", "us-east-1a", CapacityType::Spot)],
    );
    if let Some(n) = req.node.as_mut() {
        n.class.subnet_selector_terms[0].tags =
            Tags::from([("karpenter.sh/discovery".to_string(), "other".to_string())]);
    }
    let e = provider.create(&req).await.expect_err("no subnet");
    assert!(e.to_string().contains("subnetSelectorTerms"), "{e}");
    sim.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn network_and_images_are_selectable_as_an_ec2nodeclass_selects_them() -> Result<()> {
    let sim = support::start().await;
    let ec2 = provider(&sim).await.ec2().clone();
    let subnets = ec2
        .describe_subnets()
        .filters(
            Filter::builder()
                .name("tag:karpenter.sh/discovery")
                .values("demo")
                .build(),
        )
        .send()
        .await?;
    let zones: Vec<&str> = subnets
        .subnets()
        .iter()
        .filter_map(|s| s.availability_zone())
        .collect();
    assert_eq!(zones.len(), sim.aws().network().subnets.len());
    assert!(zones.contains(&"us-east-1a"), "{zones:?}");
    let by_name = ec2
        .describe_subnets()
        .filters(
            Filter::builder()
                .name("tag:Name")
                .values("demo-private-us-east-1c")
                .build(),
        )
        .send()
        .await?;
    assert_eq!(by_name.subnets().len(), 1);
    let groups = ec2
        .describe_security_groups()
        .filters(
            Filter::builder()
                .name("group-name")
                .values("demo-node")
                .build(),
        )
        .send()
        .await?;
    assert_eq!(groups.security_groups().len(), 1);
    let images = ec2
        .describe_images()
        .owners("amazon")
        .filters(
            Filter::builder()
                .name("name")
                .values("amazon-eks-node-al2023-arm64-*")
                .build(),
        )
        .send()
        .await?;
    assert_eq!(images.images().len(), 1);
    assert_eq!(
        images.images()[0].architecture().map(|a| a.as_str()),
        Some("arm64")
    );

    // SSM: the public EKS parameters resolve to those images.
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(sim.aws_endpoint())
        .credentials_provider(aws_sdk_ssm::config::Credentials::new(
            "a", "b", None, None, "test",
        ))
        .load()
        .await;
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let p = ssm
        .get_parameter()
        .name("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id")
        .send()
        .await?;
    assert_eq!(
        p.parameter().and_then(|p| p.value()),
        images.images()[0].image_id()
    );
    let e = ssm
        .get_parameter()
        .name("/aws/service/eks/optimized-ami/1.33/windows/image_id")
        .send()
        .await
        .expect_err("no such parameter");
    assert!(
        e.as_service_error()
            .is_some_and(|s| s.is_parameter_not_found()),
        "{e:?}"
    );
    sim.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn catalog_calls_describe_the_simulated_catalog() -> Result<()> {
    let sim = support::start().await;
    let ec2 = provider(&sim).await.ec2().clone();
    let out = ec2
        .describe_instance_types()
        .instance_types(Ec2InstanceType::M5Large)
        .instance_types(Ec2InstanceType::M6gLarge)
        .send()
        .await?;
    let types = out.instance_types();
    assert_eq!(types.len(), 2);
    let m5 = types
        .iter()
        .find(|t| t.instance_type() == Some(&Ec2InstanceType::M5Large))
        .context("m5.large")?;
    assert_eq!(m5.v_cpu_info().and_then(|v| v.default_v_cpus()), Some(2));
    assert_eq!(m5.memory_info().and_then(|m| m.size_in_mib()), Some(8192));
    let net = m5.network_info().context("network info")?;
    assert_eq!(net.maximum_network_interfaces(), Some(3));
    assert_eq!(net.ipv4_addresses_per_interface(), Some(10));
    let m6g = types
        .iter()
        .find(|t| t.instance_type() == Some(&Ec2InstanceType::M6gLarge))
        .context("m6g.large")?;
    assert_eq!(
        m6g.processor_info()
            .map(|p| p.supported_architectures()[0].as_str()),
        Some("arm64")
    );
    // Paginated, every type the simulated EC2 sells.
    let all: Vec<_> = ec2
        .describe_instance_types()
        .max_results(100)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await?;
    assert_eq!(all.len(), sim.cloud().catalog().instance_types.len());

    let offerings = ec2
        .describe_instance_type_offerings()
        .location_type(aws_sdk_ec2::types::LocationType::AvailabilityZone)
        .filters(
            Filter::builder()
                .name("instance-type")
                .values("m5.large")
                .build(),
        )
        .send()
        .await?;
    let mut zones: Vec<String> = offerings
        .instance_type_offerings()
        .iter()
        .filter_map(|o| o.location().map(str::to_string))
        .collect();
    zones.sort();
    let catalog_m5 = sim
        .cloud()
        .instance_type("m5.large")
        .context("m5.large")?
        .clone();
    let mut expected: Vec<String> = catalog_m5
        .offerings
        .iter()
        .map(|o| o.zone.clone())
        .collect();
    expected.sort();
    expected.dedup();
    assert_eq!(zones, expected);

    let prices = ec2
        .describe_spot_price_history()
        .instance_types(Ec2InstanceType::M5Large)
        .product_descriptions("Linux/UNIX")
        .send()
        .await?;
    let history = prices.spot_price_history();
    assert_eq!(history.len(), expected.len());
    for p in history {
        let zone = p.availability_zone().context("zone")?;
        let price: f64 = p.spot_price().context("price")?.parse()?;
        let catalog = catalog_m5
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == "spot")
            .context("spot offering")?;
        assert!(
            (price - catalog.price).abs() < 1e-6,
            "{zone}: {price} vs {}",
            catalog.price
        );
    }
    sim.shutdown().await;
    Ok(())
}

/// The live catalog's on-demand prices come from the Pricing API (GetProducts, as Karpenter's
/// AWS provider reads them), over the built-in table: the simulated cloud sells m5.large on
/// demand at a price no table has, and the catalog the actuator serves to planners says so.
#[tokio::test]
async fn the_live_catalog_takes_on_demand_prices_from_the_pricing_api() -> Result<()> {
    let mut config = support::fast_config();
    let mut catalog = simulator::instance_types::default_catalog();
    let m5 = catalog
        .instance_types
        .iter_mut()
        .find(|t| t.name == "m5.large")
        .context("m5.large in the simulated catalog")?;
    for o in m5
        .offerings
        .iter_mut()
        .filter(|o| o.capacity_type == "on-demand")
    {
        o.price = 0.0777;
    }
    config.catalog = catalog;
    let sim = Simulation::start(config).await?;
    let provider = provider(&sim).await;
    let facts = provider.catalog_facts().await?;
    let m5 = facts
        .instance_types
        .iter()
        .find(|t| t.info.name == "m5.large")
        .context("m5.large in the live catalog")?;
    let on_demand: Vec<f64> = m5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == "on-demand")
        .map(|o| o.price)
        .collect();
    assert!(!on_demand.is_empty());
    assert!(
        on_demand.iter().all(|p| (p - 0.0777).abs() < 1e-9),
        "{on_demand:?}"
    );
    assert!(
        facts
            .notes
            .iter()
            .any(|n| n.contains("from the AWS Pricing API")),
        "{:?}",
        facts.notes
    );

    // Paginated and filtered as the API does: shared-tenancy compute in the region only.
    let sdk = provider.config().sdk_config().await;
    let pricing = cloud_aws::pricing::client(&sdk, "us-east-1");
    let prices = cloud_aws::pricing::on_demand(&pricing, "us-east-1").await?;
    let sold = sim
        .cloud()
        .catalog()
        .instance_types
        .iter()
        .filter(|t| t.offerings.iter().any(|o| o.capacity_type == "on-demand"))
        .count();
    assert_eq!(prices.len(), sold);
    assert!(
        cloud_aws::pricing::on_demand(&pricing, "eu-west-1")
            .await
            .is_err()
    );
    sim.shutdown().await;
    Ok(())
}
