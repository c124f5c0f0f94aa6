//! The EC2 provider through the real AWS SDK against moto_server on a loopback port.
//!
//! Each test starts its own moto (own state), seeds it (`cloud_aws::testing::seed`) and drives
//! `Ec2Provider`. What moto cannot show, and where it is covered instead:
//! - it launches the first override of a fleet only, so "cheapest first" is checked by which
//!   subnet the instance lands in (the first override's), not by a price choice;
//! - it ignores `ClientToken` (a second CreateFleet with the same token launches again), so
//!   idempotency at EC2 is not shown here; `provider::client_token` is unit-tested;
//! - it never runs out of capacity, throttles or fails: the mapping of those errors is
//!   unit-tested in `error.rs`;
//! - it ignores the launch template's security groups on fleet launches (the instance's
//!   top-level groups are empty, its interface has the VPC's default group), so the groups the
//!   provider reads back are set by ModifyInstanceAttribute first.

use anyhow::Result;
use base64::Engine as _;
use cloud::node_class::{AmiSelectorTerm, NodeClassSpec, SelectorTerm};
use cloud::{
    CapacityType, CloudProvider, Error, InstanceState, LaunchRequest, ListFilter, NodeSpec,
    OfferingKey, TAG_NODECLAIM, TAG_NODEPOOL, Tags,
};
use cloud_aws::Ec2Provider;
use cloud_aws::instance_profile::profile_name;
use cloud_aws::testing::{self, ARM_IMAGE, MotoServer, World, X86_IMAGE};

async fn setup() -> Option<(MotoServer, Ec2Provider, World)> {
    let moto = MotoServer::start_or_skip()?;
    let config = moto.config();
    let world = testing::seed(&config).await;
    let provider = Ec2Provider::new(config).await;
    Some((moto, provider, world))
}

fn offering(t: &str, zone: &str, ct: CapacityType) -> OfferingKey {
    OfferingKey {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type: ct,
    }
}

fn node(world: &World) -> NodeSpec {
    NodeSpec {
        class: world.node_class.clone(),
        labels: [("karpenter.sh/nodepool", "default"), ("team", "platform")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        taints: vec![],
    }
}

fn request(claim: &str, offerings: Vec<OfferingKey>, node: NodeSpec) -> LaunchRequest {
    LaunchRequest {
        client_token: format!("token-{claim}"),
        offerings,
        tags: Tags::from([
            (TAG_NODECLAIM.to_string(), claim.to_string()),
            (TAG_NODEPOOL.to_string(), "default".to_string()),
        ]),
        node_class: Some(node.class.name.clone()),
        image_id: None,
        node: Some(node),
    }
}

async fn launch_template_names(ec2: &aws_sdk_ec2::Client) -> Result<Vec<String>> {
    let out = ec2.describe_launch_templates().send().await?;
    let mut names: Vec<String> = out
        .launch_templates()
        .iter()
        .filter_map(|t| t.launch_template_name().map(str::to_string))
        .filter(|n| n.starts_with("dovetail/"))
        .collect();
    names.sort();
    Ok(names)
}

#[tokio::test]
async fn create_get_list_delete() -> Result<()> {
    let Some((_moto, provider, world)) = setup().await else {
        return Ok(());
    };
    // us-east-1b first: moto launches the first override, so the instance must land there.
    let req = request(
        "claim-1",
        vec![
            offering("m5.large", "us-east-1b", CapacityType::OnDemand),
            offering("m5.xlarge", "us-east-1a", CapacityType::OnDemand),
        ],
        node(&world),
    );
    let instance = provider.create(&req).await?;
    assert_eq!(instance.instance_type, "m5.large");
    assert_eq!(instance.zone, "us-east-1b");
    assert_eq!(instance.capacity_type, CapacityType::OnDemand);
    assert_eq!(instance.image_id.as_deref(), Some(X86_IMAGE));
    assert!(matches!(
        instance.state,
        InstanceState::Pending | InstanceState::Running
    ));
    assert_eq!(
        instance.provider_id.to_string(),
        format!("aws:///us-east-1b/{}", instance.id)
    );
    for (k, v) in [
        (TAG_NODECLAIM, "claim-1"),
        (TAG_NODEPOOL, "default"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("kubernetes.io/cluster/test-cluster", "owned"),
        ("eks:eks-cluster-name", "test-cluster"),
        ("team", "platform"),
    ] {
        assert_eq!(instance.tags.get(k).map(String::as_str), Some(v), "tag {k}");
    }

    // The instance in EC2: subnet, security group, user data.
    let ec2 = provider.ec2();
    let described = ec2
        .describe_instances()
        .instance_ids(&instance.id)
        .send()
        .await?;
    let raw = &described.reservations()[0].instances()[0];
    assert_eq!(raw.subnet_id(), Some(world.subnets[1].as_str()));
    // What the provider reads back: the subnet and the groups (for SubnetDrift and
    // SecurityGroupDrift).
    let got = provider.get(&instance.provider_id).await?;
    assert_eq!(got.subnet_id.as_deref(), Some(world.subnets[1].as_str()));
    // moto leaves a fleet instance's top-level groups empty (it ignores the template's); give
    // the instance the groups EC2 would have, then the provider reads them back sorted.
    let mut groups = vec![
        world.security_group.clone(),
        world.named_security_group.clone(),
    ];
    testing::set_instance_security_groups(provider.config(), &instance.id, &groups).await;
    groups.sort();
    let got = provider.get(&instance.provider_id).await?;
    assert_eq!(got.security_group_ids, groups);
    let user_data = ec2
        .describe_instance_attribute()
        .instance_id(&instance.id)
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
        .send()
        .await?;
    let encoded = user_data
        .user_data()
        .and_then(|u| u.value())
        .unwrap_or_default();
    let text = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded)?)?;
    assert!(text.contains("kind: NodeConfig"), "{text}");
    assert!(text.contains("name: test-cluster"), "{text}");
    assert!(
        text.contains("--node-labels=\"karpenter.sh/nodepool=default,team=platform\""),
        "{text}"
    );

    // get and list.
    let got = provider.get(&instance.provider_id).await?;
    assert_eq!(got.id, instance.id);
    assert_eq!(got.tags, instance.tags);
    let other = provider
        .create(&request(
            "claim-2",
            vec![offering("c5.large", "us-east-1c", CapacityType::OnDemand)],
            node(&world),
        ))
        .await?;
    let by_claim = ListFilter {
        tags: Tags::from([(TAG_NODECLAIM.to_string(), "claim-1".to_string())]),
        include_terminated: false,
    };
    let listed = provider.list(&by_claim).await?;
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [instance.id.as_str()]
    );
    let by_pool = ListFilter {
        tags: Tags::from([(TAG_NODEPOOL.to_string(), "default".to_string())]),
        include_terminated: false,
    };
    let mut both = vec![instance.id.clone(), other.id.clone()];
    both.sort();
    assert_eq!(
        provider
            .list(&by_pool)
            .await?
            .into_iter()
            .map(|i| i.id)
            .collect::<Vec<_>>(),
        both
    );

    // delete, then again: NotFound, which callers treat as done.
    provider.delete(&instance.provider_id).await?;
    let again = provider.delete(&instance.provider_id).await;
    assert!(matches!(again, Err(Error::NotFound { .. })), "{again:?}");
    let listed = provider.list(&by_pool).await?;
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [other.id.as_str()]
    );
    let terminated = provider
        .list(&ListFilter {
            include_terminated: true,
            ..by_claim
        })
        .await?;
    assert_eq!(terminated.len(), 1);
    assert_eq!(terminated[0].state, InstanceState::Terminated);
    // An instance EC2 never had.
    let unknown = cloud::ProviderId::new("us-east-1a", "i-00000000000000000");
    assert!(matches!(
        provider.get(&unknown).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        provider.delete(&unknown).await,
        Err(Error::NotFound { .. })
    ));
    Ok(())
}

#[tokio::test]
async fn spot_and_arm64_launches() -> Result<()> {
    let Some((_moto, provider, world)) = setup().await else {
        return Ok(());
    };
    let spot = provider
        .create(&request(
            "spot-1",
            vec![offering("m5.large", "us-east-1a", CapacityType::Spot)],
            node(&world),
        ))
        .await?;
    assert_eq!(spot.capacity_type, CapacityType::Spot);
    assert_eq!(spot.zone, "us-east-1a");
    // A Graviton type gets the arm64 AMI of the alias (its own launch template).
    let arm = provider
        .create(&request(
            "arm-1",
            vec![offering("m6g.large", "us-east-1c", CapacityType::OnDemand)],
            node(&world),
        ))
        .await?;
    assert_eq!(arm.image_id.as_deref(), Some(ARM_IMAGE));
    assert_eq!(launch_template_names(provider.ec2()).await?.len(), 2);
    Ok(())
}

#[tokio::test]
async fn launch_templates_are_created_once_and_found_after_restart() -> Result<()> {
    let Some((moto, provider, world)) = setup().await else {
        return Ok(());
    };
    let offerings = vec![offering("m5.large", "us-east-1a", CapacityType::OnDemand)];
    provider
        .create(&request("a", offerings.clone(), node(&world)))
        .await?;
    provider
        .create(&request("b", offerings.clone(), node(&world)))
        .await?;
    let names = launch_template_names(provider.ec2()).await?;
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("dovetail/test-cluster/default/"));

    // What the template holds: AMI, profile, groups, IMDSv2 with hop limit 1, a 20 GiB gp3
    // root volume, the node class's and the ownership tags.
    let versions = provider
        .ec2()
        .describe_launch_template_versions()
        .launch_template_name(&names[0])
        .send()
        .await?;
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .expect("launch template data");
    assert_eq!(data.image_id(), Some(X86_IMAGE));
    // The profile the provider made for the class's role (see tests/iam.rs).
    let profile = profile_name(testing::TEST_CLUSTER, "us-east-1", "default");
    assert_eq!(
        data.iam_instance_profile().and_then(|p| p.name()),
        Some(profile.as_str())
    );
    assert_eq!(
        data.security_group_ids(),
        std::slice::from_ref(&world.security_group)
    );
    let imds = data.metadata_options().expect("metadata options");
    assert_eq!(imds.http_tokens().map(|t| t.as_str()), Some("required"));
    assert_eq!(imds.http_put_response_hop_limit(), Some(1));
    let root = &data.block_device_mappings()[0];
    assert_eq!(root.device_name(), Some("/dev/xvda"));
    assert_eq!(root.ebs().and_then(|e| e.volume_size()), Some(20));
    let instance_tags: Vec<(&str, &str)> = data
        .tag_specifications()
        .iter()
        .filter(|s| s.resource_type().map(|r| r.as_str()) == Some("instance"))
        .flat_map(|s| s.tags())
        .filter_map(|t| Some((t.key()?, t.value()?)))
        .collect();
    assert!(
        instance_tags.contains(&("team", "platform")),
        "{instance_tags:?}"
    );
    assert!(
        instance_tags.contains(&("kubernetes.io/cluster/test-cluster", "owned")),
        "{instance_tags:?}"
    );

    // A restarted provider (empty memory) finds the template by name.
    let restarted = Ec2Provider::new(moto.config()).await;
    restarted
        .create(&request("c", offerings.clone(), node(&world)))
        .await?;
    assert_eq!(launch_template_names(provider.ec2()).await?, names);

    // Other labels → other user data → another template.
    let mut tainted = node(&world);
    tainted.taints.push(cloud::Taint {
        key: "dedicated".into(),
        value: "batch".into(),
        effect: cloud::TaintEffect::NoSchedule,
    });
    restarted.create(&request("d", offerings, tainted)).await?;
    assert_eq!(launch_template_names(provider.ec2()).await?.len(), 2);
    Ok(())
}

#[tokio::test]
async fn selectors_and_ami_aliases_resolve() -> Result<()> {
    let Some((_moto, provider, world)) = setup().await else {
        return Ok(());
    };
    let resolved = provider.resolve(&world.node_class).await?;
    let mut subnets: Vec<&str> = resolved.subnets.iter().map(|s| s.id.as_str()).collect();
    subnets.sort();
    let mut want = world.subnets.iter().map(String::as_str).collect::<Vec<_>>();
    want.sort();
    assert_eq!(subnets, want);
    assert_eq!(
        resolved.zones().into_iter().collect::<Vec<_>>(),
        testing::TEST_ZONES
    );
    assert_eq!(
        resolved.security_groups,
        std::slice::from_ref(&world.security_group)
    );
    let profile = profile_name(testing::TEST_CLUSTER, "us-east-1", "default");
    assert_eq!(resolved.instance_profile.as_deref(), Some(profile.as_str()));
    let amis: Vec<(&str, &str)> = resolved
        .amis
        .iter()
        .map(|a| (a.architecture.as_str(), a.id.as_str()))
        .collect();
    assert_eq!(amis, [("arm64", ARM_IMAGE), ("x86_64", X86_IMAGE)]);

    let term = |tags: &[(&str, &str)], id: Option<&str>, name: Option<&str>| SelectorTerm {
        tags: tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        id: id.map(str::to_string),
        name: name.map(str::to_string),
    };
    // Wildcard tag value, ids and names, ORed across terms.
    let class = NodeClassSpec {
        subnet_selector_terms: vec![
            term(&[("tier", "*")], None, None),
            term(&[], Some(&world.untagged_subnet), None),
        ],
        security_group_selector_terms: vec![
            term(&[], None, Some("dovetail-extra")),
            term(&[], Some(&world.security_group), None),
        ],
        ..world.node_class.clone()
    };
    let r = provider.resolve(&class).await?;
    assert_eq!(r.subnets.len(), 4);
    assert!(r.zones().contains("us-east-1d"));
    let mut groups = vec![
        world.security_group.clone(),
        world.named_security_group.clone(),
    ];
    groups.sort();
    assert_eq!(r.security_groups, groups);

    // Aliases: pinned, AL2 (x86_64 only seeded), Bottlerocket.
    let with_alias = |alias: &str| NodeClassSpec {
        ami_selector_terms: vec![AmiSelectorTerm {
            alias: Some(alias.into()),
            ..AmiSelectorTerm::default()
        }],
        ..world.node_class.clone()
    };
    let pinned = provider.resolve(&with_alias("al2023@v20240807")).await?;
    assert_eq!(pinned.amis.len(), 2);
    let al2 = provider.resolve(&with_alias("al2@latest")).await?;
    assert_eq!(al2.family, cloud_aws::user_data::AmiFamily::Al2);
    assert_eq!(al2.amis.len(), 1);
    assert_eq!(al2.amis[0].id, X86_IMAGE);
    let br = provider.resolve(&with_alias("bottlerocket@latest")).await?;
    assert_eq!(br.family, cloud_aws::user_data::AmiFamily::Bottlerocket);
    let missing = provider
        .resolve(&with_alias("al2023@v19990101"))
        .await
        .unwrap_err();
    assert!(
        missing.to_string().contains("amiSelectorTerms"),
        "{missing}"
    );

    // AMIs by tags, by name, by id (newest per architecture).
    let by = |term: AmiSelectorTerm| NodeClassSpec {
        ami_family: Some("AL2023".into()),
        ami_selector_terms: vec![term],
        ..world.node_class.clone()
    };
    let tagged = provider
        .resolve(&by(AmiSelectorTerm {
            tags: Tags::from([("dovetail/test-image".to_string(), "yes".to_string())]),
            ..AmiSelectorTerm::default()
        }))
        .await?;
    assert_eq!(
        tagged
            .amis
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        [ARM_IMAGE, X86_IMAGE]
    );
    let named = provider
        .resolve(&by(AmiSelectorTerm {
            name: Some("al2022-ami-*-arm64".into()),
            ..AmiSelectorTerm::default()
        }))
        .await?;
    assert_eq!(named.amis.len(), 1);
    assert_eq!(named.amis[0].id, ARM_IMAGE);
    let by_id = provider
        .resolve(&by(AmiSelectorTerm {
            id: Some(X86_IMAGE.into()),
            ..AmiSelectorTerm::default()
        }))
        .await?;
    assert_eq!(by_id.amis.len(), 1);
    Ok(())
}

#[tokio::test]
async fn bad_requests_name_what_is_wrong() -> Result<()> {
    let Some((_moto, provider, world)) = setup().await else {
        return Ok(());
    };
    let offerings = vec![offering("m5.large", "us-east-1a", CapacityType::OnDemand)];
    let mut no_node = request("x", offerings.clone(), node(&world));
    no_node.node = None;
    let e = provider.create(&no_node).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidRequest { reason } if reason.starts_with("node:")),
        "{e}"
    );

    let elsewhere = request(
        "y",
        vec![offering("m5.large", "us-east-1e", CapacityType::OnDemand)],
        node(&world),
    );
    let e = provider.create(&elsewhere).await.unwrap_err();
    assert!(
        e.to_string().contains("us-east-1a, us-east-1b, us-east-1c"),
        "{e}"
    );

    let mut nothing = node(&world);
    nothing.class.subnet_selector_terms = vec![SelectorTerm {
        tags: Tags::from([("karpenter.sh/discovery".to_string(), "nope".to_string())]),
        ..SelectorTerm::default()
    }];
    let e = provider
        .create(&request("z", offerings, nothing))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid request: EC2NodeClass default: spec.subnetSelectorTerms matched no subnet"
    );
    assert!(
        testing::instances_tagged(provider.ec2(), TAG_NODEPOOL, "default")
            .await
            .is_empty()
    );
    Ok(())
}

/// The live catalog through DescribeInstanceTypes, DescribeInstanceTypeOfferings and
/// DescribeSpotPriceHistory. What moto cannot show: its spot prices are synthetic (every type
/// and zone costs 0.00001 at one fixed timestamp), so "latest per type and zone" and the price
/// parsing are shown but not real prices (`catalog::assemble` is unit-tested for the rest); it
/// answers every type in one page (no NextToken), so pagination is the SDK paginator's and not
/// exercised here; its facts are a copy of real DescribeInstanceTypes answers. moto serves no
/// Pricing API (GetProducts answers 500), so on-demand prices stay the built-in table's and a
/// note says the API did not answer (the simulator's GetProducts shows the live prices:
/// `simulator/tests/aws.rs`).
#[tokio::test]
async fn live_catalog_from_describe_calls() -> Result<()> {
    let Some((_moto, provider, world)) = setup().await else {
        return Ok(());
    };
    // No node class resolved yet: every zone of the region.
    let all = provider.catalog_facts().await?;
    assert_eq!(all.region, "us-east-1");
    let m5 = all
        .instance_types
        .iter()
        .find(|t| t.info.name == "m5.large")
        .expect("m5.large described");
    assert_eq!(m5.info.vcpu, 2);
    assert_eq!(m5.info.memory_mib, 8192);
    assert_eq!(m5.info.architectures, ["x86_64"]);
    assert_eq!(m5.info.manufacturer.as_deref(), Some("Intel"));
    assert_eq!(
        (m5.info.max_network_interfaces, m5.info.ipv4_per_interface),
        (3, 10)
    );
    assert_eq!(m5.info.network_cards.len(), 1);
    let zones: std::collections::BTreeSet<&str> =
        m5.offerings.iter().map(|o| o.zone.as_str()).collect();
    assert!(zones.len() >= 4, "{zones:?}");
    for o in &m5.offerings {
        match o.capacity_type.as_str() {
            "on-demand" => assert_eq!(o.price, 0.096, "built-in us-east-1 table"),
            "spot" => assert_eq!(o.price, 0.00001, "moto's synthetic spot price"),
            other => panic!("capacity type {other}"),
        }
        assert!(o.available);
    }
    let names: Vec<&str> = all
        .instance_types
        .iter()
        .map(|t| t.info.name.as_str())
        .collect();
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "sorted, no duplicates"
    );
    let g5 = all
        .instance_types
        .iter()
        .find(|t| t.info.name == "g5.xlarge")
        .expect("g5.xlarge");
    assert_eq!(g5.info.gpus.len(), 1);
    assert_eq!(g5.info.gpus[0].name, "A10G");
    let graviton = all
        .instance_types
        .iter()
        .find(|t| t.info.name == "m6g.large")
        .expect("m6g.large");
    assert_eq!(graviton.info.architectures, ["arm64"]);

    // Capacity and allocatable by Karpenter's rules (common::ec2), as the planner computes them.
    let catalog = provider.instance_types().await?;
    let m5 = catalog.get("m5.large").expect("m5.large");
    assert_eq!(m5.capacity.pods, 29);
    assert_eq!(m5.capacity.memory, 7577 << 20);
    assert_eq!(m5.allocatable().cpu, 1930);
    assert_eq!(m5.labels["kubernetes.io/arch"], "amd64");
    assert_eq!(
        catalog
            .get("g5.xlarge")
            .expect("g5")
            .capacity
            .get("nvidia.com/gpu"),
        1000
    );
    assert!(
        catalog.get("mac1.metal").is_none(),
        "Mac types are left out"
    );

    assert!(
        all.notes
            .iter()
            .any(|n| n.contains("The AWS Pricing API did not answer")),
        "{:?}",
        all.notes
    );

    // Once a node class is resolved, offerings are restricted to its subnets' zones.
    let resolved = provider.resolve(&world.node_class).await?;
    let class_zones = resolved.zones();
    assert_eq!(provider.known_zones(), class_zones);
    let restricted = provider.catalog_facts().await?;
    let zones: std::collections::BTreeSet<String> = restricted
        .instance_types
        .iter()
        .flat_map(|t| t.offerings.iter().map(|o| o.zone.clone()))
        .collect();
    assert_eq!(zones, class_zones);
    Ok(())
}

/// One instance type by name (what the lifecycle reads for a launched claim's labels and
/// capacity) comes from one DescribeInstanceTypes call and equals the whole catalog's entry in
/// capacity, allocatable and labels, without offerings; an unknown name is `None` (EC2 answers
/// `InvalidInstanceType`). What moto cannot show: the cost it saves against a real endpoint
/// (the whole catalog is many pages there; moto answers every type in one page).
#[tokio::test]
async fn one_instance_type_is_read_alone_as_the_catalog_has_it() -> Result<()> {
    let Some((_moto, provider, _world)) = setup().await else {
        return Ok(());
    };
    let catalog = provider.instance_types().await?;
    for name in ["m5.large", "m6g.large", "g5.xlarge"] {
        let whole = catalog.get(name).expect("in the catalog");
        let one = provider
            .instance_type(name)
            .await?
            .unwrap_or_else(|| panic!("{name} read alone"));
        assert_eq!(one.name, name);
        assert_eq!(one.capacity, whole.capacity, "{name}");
        assert_eq!(one.allocatable(), whole.allocatable(), "{name}");
        assert_eq!(one.labels, whole.labels, "{name}");
        assert!(one.offerings.is_empty(), "{name}: offerings are not read");
    }
    assert_eq!(provider.instance_type("m5.enormous").await?, None);
    Ok(())
}

/// Karpenter tags each instance with its Node's name once it registers
/// (aws/karpenter-provider-aws `pkg/controllers/nodeclaim/tagging/controller.go`): CreateTags,
/// seen by DescribeInstances. And DescribeInstanceTypes' clock speed and EBS bandwidth become
/// the `instance-cpu-sustained-clock-speed-mhz` and `instance-ebs-bandwidth` labels
/// (`pkg/providers/instancetype/types.go`).
#[tokio::test]
async fn instances_get_a_name_tag_and_types_their_clock_and_ebs_labels() -> Result<()> {
    let Some((_moto, provider, world)) = setup().await else {
        return Ok(());
    };
    let req = request(
        "claim-n",
        vec![offering("m5.large", "us-east-1a", CapacityType::OnDemand)],
        node(&world),
    );
    let instance = provider.create(&req).await?;
    provider
        .tag(
            &instance.provider_id,
            &Tags::from([("Name".to_string(), "ip-10-0-1-7.ec2.internal".to_string())]),
        )
        .await?;
    let described = provider
        .ec2()
        .describe_instances()
        .instance_ids(&instance.id)
        .send()
        .await?;
    let raw = &described.reservations()[0].instances()[0];
    let name = raw
        .tags()
        .iter()
        .find(|t| t.key() == Some("Name"))
        .and_then(|t| t.value());
    assert_eq!(name, Some("ip-10-0-1-7.ec2.internal"));
    assert_eq!(
        provider
            .get(&instance.provider_id)
            .await?
            .tags
            .get(TAG_NODECLAIM)
            .map(String::as_str),
        Some("claim-n"),
        "the launch tags stay"
    );

    let catalog = provider.instance_types().await?;
    let m5 = catalog.get("m5.large").expect("m5.large");
    assert_eq!(
        m5.labels["karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"],
        "3100"
    );
    assert_eq!(
        m5.labels["karpenter.k8s.aws/instance-ebs-bandwidth"],
        "4750"
    );
    Ok(())
}

/// The user data of a launch template, decoded.
async fn template_user_data(ec2: &aws_sdk_ec2::Client, name: &str) -> Result<String> {
    let versions = ec2
        .describe_launch_template_versions()
        .launch_template_name(name)
        .send()
        .await?;
    let encoded = versions.launch_template_versions()[0]
        .launch_template_data()
        .and_then(|d| d.user_data())
        .unwrap_or_default()
        .to_string();
    Ok(String::from_utf8(
        base64::engine::general_purpose::STANDARD.decode(encoded)?,
    )?)
}

/// The `--max-pods=N` of an AL2 user data.
fn al2_max_pods(user_data: &str) -> Option<i64> {
    let at = user_data.find("--max-pods=")? + "--max-pods=".len();
    let digits: String = user_data[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// AL2 nodes run the kubelet with the max pods the planner counted for their type, one launch
/// template per max-pods value, as Karpenter resolves them (`DefaultResolver.Resolve`,
/// aws/karpenter-provider-aws `pkg/providers/amifamily/resolver.go`, and `pods` in
/// `pkg/providers/instancetype/types.go`): m5.large and c5.large (3 ENIs × 10 IPv4) take
/// 3 × 9 + 2 = 29 pods, m5.xlarge (4 × 15) 58; with `reservedENIs: 1`, 20 and 44; with the
/// class's `maxPods`, that value for every type (one template). Before, every AL2 node ran
/// `--max-pods=110` while the planner packed it by the ENI limit.
///
/// What moto cannot show: it launches only the first override of a fleet and runs no
/// bootstrap, so the kubelet's own reading of the flag is not seen; the templates are.
#[tokio::test]
async fn al2_launch_templates_carry_each_types_max_pods() -> Result<()> {
    let Some(moto) = MotoServer::start_or_skip() else {
        return Ok(());
    };
    let types = ["m5.large", "m5.xlarge", "c5.large"];
    let offerings = || {
        types
            .iter()
            .map(|t| offering(t, "us-east-1a", CapacityType::OnDemand))
            .collect::<Vec<_>>()
    };
    let al2 = |world: &World, class: &str, max_pods: Option<i32>| {
        let mut n = node(world);
        n.class.name = class.into();
        n.class.ami_selector_terms = vec![AmiSelectorTerm {
            alias: Some("al2@latest".into()),
            ..AmiSelectorTerm::default()
        }];
        n.class.kubelet = max_pods.map(|m| cloud::node_class::KubeletConfig {
            max_pods: Some(m),
            ..Default::default()
        });
        n
    };
    let max_pods_by_template = |provider: &Ec2Provider, class: &'static str| {
        let ec2 = provider.ec2().clone();
        async move {
            let mut got = Vec::new();
            for name in launch_template_names(&ec2).await? {
                if name.contains(&format!("/{class}/")) {
                    let text = template_user_data(&ec2, &name).await?;
                    assert!(text.contains("--use-max-pods false"), "{text}");
                    got.push(al2_max_pods(&text).expect("--max-pods"));
                }
            }
            got.sort();
            anyhow::Ok(got)
        }
    };

    let config = moto.config();
    let world = testing::seed(&config).await;
    let provider = Ec2Provider::new(config.clone()).await;
    provider
        .create(&request("eni", offerings(), al2(&world, "eni", None)))
        .await?;
    assert_eq!(max_pods_by_template(&provider, "eni").await?, vec![29, 58]);
    provider
        .create(&request(
            "fixed",
            offerings(),
            al2(&world, "fixed", Some(42)),
        ))
        .await?;
    assert_eq!(max_pods_by_template(&provider, "fixed").await?, vec![42]);

    let reserving = Ec2Provider::new(config.with_reserved_enis(1)).await;
    reserving
        .create(&request(
            "reserved",
            offerings(),
            al2(&world, "reserved", None),
        ))
        .await?;
    assert_eq!(
        max_pods_by_template(&reserving, "reserved").await?,
        vec![20, 44]
    );
    Ok(())
}
