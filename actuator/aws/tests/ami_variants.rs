//! AMIs for the hardware against moto_server's EC2 and SSM through the real AWS SDK: an alias
//! resolves every SSM parameter Karpenter reads (`pkg/providers/amifamily`: standard, NVIDIA
//! and Neuron variants per architecture); a launch for a GPU type boots the NVIDIA image and
//! one for a plain type the standard image; a GPU type whose alias has no NVIDIA image is not
//! launched with the standard one; `ssmParameter` terms select the image their parameter holds.
//!
//! What moto cannot show: its images are its own fixtures (an Ubuntu, a SUSE, an arm64 image
//! stand in for the EKS ones), it boots nothing (so no driver is shown to load), and it launches
//! only the first override of a fleet (each launch here has one type).

use anyhow::Result;
use cloud::node_class::AmiSelectorTerm;
use cloud::{CapacityType, CloudProvider, LaunchRequest, NodeSpec, OfferingKey, Tags};
use cloud_aws::Ec2Provider;
use cloud_aws::resolve::Variant;
use cloud_aws::testing::{
    self, ARM_IMAGE, MotoServer, TEST_K8S_VERSION, TEST_SSM_PREFIX, World, X86_IMAGE,
};

/// A moto fixture image standing in for the AL2023 NVIDIA image.
const GPU_IMAGE: &str = "ami-35e92e4c";

fn launch(claim: &str, instance_type: &str, world: &World) -> LaunchRequest {
    LaunchRequest {
        client_token: format!("token-{claim}"),
        offerings: vec![OfferingKey {
            instance_type: instance_type.into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::OnDemand,
        }],
        tags: Tags::new(),
        node_class: Some(world.node_class.name.clone()),
        image_id: None,
        node: Some(NodeSpec {
            class: world.node_class.clone(),
            ..NodeSpec::default()
        }),
    }
}

/// A type EC2 describes as `i386` and `x86_64` (m1.small, t2.micro: `i386` listed first) boots
/// the x86_64 image, as Karpenter reads its architecture (the first one Kubernetes knows,
/// `getArchitecture` in aws/karpenter-provider-aws `pkg/providers/instancetype/types.go`). A
/// consolidation replacement whose only cheaper type was such one was refused at launch
/// ("none is in a zone … with an AMI for its architecture and accelerators").
#[tokio::test]
async fn a_type_listing_i386_first_boots_the_x86_64_image() -> Result<()> {
    let Some(moto) = MotoServer::start_or_skip() else {
        return Ok(());
    };
    let config = moto.config();
    let world = testing::seed(&config).await;
    let provider = Ec2Provider::new(config.clone()).await;
    for (claim, t) in [("old-0", "m1.small"), ("old-1", "t2.micro")] {
        let i = provider.create(&launch(claim, t, &world)).await?;
        assert_eq!(i.image_id.as_deref(), Some(X86_IMAGE), "{t}");
        assert_eq!(i.instance_type, t);
    }
    Ok(())
}

#[tokio::test]
async fn gpu_types_boot_the_nvidia_image_of_the_alias() -> Result<()> {
    let Some(moto) = MotoServer::start_or_skip() else {
        return Ok(());
    };
    let config = moto.config();
    let world = testing::seed(&config).await;
    let provider = Ec2Provider::new(config.clone()).await;

    // Without an NVIDIA parameter, a GPU type has no image: it is not launched on the
    // standard one.
    let e = provider
        .create(&launch("gpu-0", "g5.xlarge", &world))
        .await
        .expect_err("no GPU image");
    assert!(e.to_string().contains("accelerators"), "{e}");

    testing::put_parameter(
        &config,
        &format!(
            "{TEST_SSM_PREFIX}/eks/optimized-ami/{TEST_K8S_VERSION}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
        ),
        GPU_IMAGE,
    )
    .await;
    let resolved = provider.resolve(&world.node_class).await?;
    let amis: Vec<(&str, &str, Vec<Variant>)> = resolved
        .amis
        .iter()
        .map(|a| (a.architecture.as_str(), a.id.as_str(), a.variants.clone()))
        .collect();
    assert!(
        amis.contains(&("x86_64", GPU_IMAGE, vec![Variant::Nvidia])),
        "{amis:?}"
    );
    assert!(
        amis.contains(&("x86_64", X86_IMAGE, vec![Variant::Standard])),
        "{amis:?}"
    );
    assert!(
        amis.contains(&("arm64", ARM_IMAGE, vec![Variant::Standard])),
        "{amis:?}"
    );

    let gpu = provider
        .create(&launch("gpu-1", "g5.xlarge", &world))
        .await?;
    assert_eq!(gpu.image_id.as_deref(), Some(GPU_IMAGE));
    let plain = provider
        .create(&launch("plain-1", "m5.large", &world))
        .await?;
    assert_eq!(plain.image_id.as_deref(), Some(X86_IMAGE));

    // The status lists the NVIDIA image with Karpenter's requirement of the variant.
    let status = provider.resolve_node_class(&world.node_class).await?;
    let listed = status.amis.expect("amis");
    let gpu_ami = listed.iter().find(|a| a.id == GPU_IMAGE).expect("listed");
    assert_eq!(gpu_ami.variants, ["nvidia"]);
    Ok(())
}

#[tokio::test]
async fn ssm_parameter_terms_select_the_image_the_parameter_holds() -> Result<()> {
    let Some(moto) = MotoServer::start_or_skip() else {
        return Ok(());
    };
    let config = moto.config();
    let world = testing::seed(&config).await;
    let provider = Ec2Provider::new(config.clone()).await;
    let mut class = world.node_class.clone();
    class.ami_family = Some("AL2023".into());
    class.ami_selector_terms = vec![AmiSelectorTerm {
        ssm_parameter: Some("/team/golden-ami".into()),
        ..AmiSelectorTerm::default()
    }];

    let e = provider
        .resolve(&class)
        .await
        .expect_err("no parameter yet");
    assert!(
        e.to_string().contains("amiSelectorTerms[0].ssmParameter")
            && e.to_string().contains("/team/golden-ami"),
        "{e}"
    );
    testing::put_parameter(&config, "/team/golden-ami", ARM_IMAGE).await;
    let resolved = provider.resolve(&class).await?;
    let amis: Vec<(&str, &str)> = resolved
        .amis
        .iter()
        .map(|a| (a.architecture.as_str(), a.id.as_str()))
        .collect();
    assert_eq!(amis, [("arm64", ARM_IMAGE)]);
    Ok(())
}
