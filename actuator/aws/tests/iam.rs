//! Instance profiles for `role:` against moto_server's IAM through the real AWS SDK, as Karpenter
//! manages them: the provider creates the class's profile (its name derived from cluster,
//! region and class; Karpenter's tags; the path `/dovetail/<region>/<cluster>/`), attaches the
//! role, reuses the profile afterwards, swaps the role when the class's role changes, reports an
//! unknown role or `instanceProfile` as the class's instance profile error, launches with the
//! profile, and deletes it once no class derives it and no instance uses it.
//!
//! What moto cannot show: it ignores ListInstanceProfiles' `PathPrefix` (so a profile at
//! another path is listed too; the provider must skip it itself, shown below), IAM's eventual
//! consistency (a new profile is usable at once; on AWS a launch right after creation can be
//! refused for a few seconds and is retried), and whether DescribeInstances reports the
//! profile of fleet instances (the garbage collection keeps a profile an instance uses; that
//! case is not shown here).

use anyhow::Result;
use cloud::CloudProvider;
use cloud_aws::Ec2Provider;
use cloud_aws::instance_profile::{TAG_NODECLASS, path, profile_name};
use cloud_aws::testing::{self, MotoServer, TEST_CLUSTER, TEST_ROLE};

const REGION: &str = "us-east-1";

async fn iam(moto: &MotoServer) -> aws_sdk_iam::Client {
    aws_sdk_iam::Client::new(&moto.config().sdk_config().await)
}

async fn profile(
    iam: &aws_sdk_iam::Client,
    name: &str,
) -> Option<aws_sdk_iam::types::InstanceProfile> {
    iam.get_instance_profile()
        .instance_profile_name(name)
        .send()
        .await
        .ok()
        .and_then(|o| o.instance_profile().cloned())
}

fn roles(p: &aws_sdk_iam::types::InstanceProfile) -> Vec<&str> {
    p.roles().iter().map(|r| r.role_name()).collect()
}

async fn create_role(iam: &aws_sdk_iam::Client, name: &str) -> Result<()> {
    iam.create_role()
        .role_name(name)
        .assume_role_policy_document(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#,
        )
        .send()
        .await?;
    Ok(())
}

/// Launches of one class resolve it at once (the worker launches a plan's claims in
/// parallel): each finds no profile or no role yet, and all but one are refused a second role
/// (`LimitExceeded`, one role per instance profile). None may fail for it: the demo's first
/// burst lost six of eight launches this way.
#[tokio::test]
async fn concurrent_resolutions_of_a_class_share_one_profile_and_role() -> Result<()> {
    let Some(moto) = MotoServer::start_or_skip() else {
        return Ok(());
    };
    let world = testing::seed(&moto.config()).await;
    let iam = iam(&moto).await;
    let mut launches = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let provider = Ec2Provider::new(moto.config()).await;
        let class = world.node_class.clone();
        launches.spawn(async move { provider.resolve(&class).await.map(|r| r.instance_profile) });
    }
    let name = profile_name(TEST_CLUSTER, REGION, "default");
    while let Some(r) = launches.join_next().await {
        assert_eq!(r??.as_deref(), Some(name.as_str()));
    }
    assert_eq!(
        roles(&profile(&iam, &name).await.expect("created")),
        [TEST_ROLE]
    );
    Ok(())
}

#[tokio::test]
async fn role_gets_a_managed_instance_profile_created_reused_and_collected() -> Result<()> {
    let Some(moto) = MotoServer::start_or_skip() else {
        return Ok(());
    };
    let world = testing::seed(&moto.config()).await;
    let provider = Ec2Provider::new(moto.config()).await;
    let iam = iam(&moto).await;
    let name = profile_name(TEST_CLUSTER, REGION, "default");

    // 1. The status pass's resolution creates the profile with the role and Karpenter's tags.
    let r = provider.resolve_node_class(&world.node_class).await?;
    assert_eq!(r.instance_profile, Ok(Some(name.clone())));
    let p = profile(&iam, &name).await.expect("created");
    assert_eq!(p.path(), path(TEST_CLUSTER, REGION));
    assert_eq!(roles(&p), [TEST_ROLE]);
    // GetInstanceProfile's tags (moto has no ListInstanceProfileTags).
    let tags: Vec<(&str, &str)> = p.tags().iter().map(|t| (t.key(), t.value())).collect();
    for want in [
        ("team", "platform"),
        (TAG_NODECLASS, "default"),
        ("kubernetes.io/cluster/test-cluster", "owned"),
        ("eks:eks-cluster-name", TEST_CLUSTER),
        ("topology.kubernetes.io/region", REGION),
    ] {
        assert!(tags.contains(&want), "{want:?} in {tags:?}");
    }

    // 2. Reused: another pass and a launch make no second profile, and the launch uses it.
    provider.resolve_node_class(&world.node_class).await?;
    let resolved = provider.resolve(&world.node_class).await?;
    assert_eq!(resolved.instance_profile.as_deref(), Some(name.as_str()));
    let listed = iam.list_instance_profiles().send().await?;
    assert_eq!(listed.instance_profiles().len(), 1, "{listed:?}");

    // 3. The class's role changes: the profile's role is swapped (one role per profile).
    create_role(&iam, "OtherNodeRole").await?;
    let mut other = world.node_class.clone();
    other.role = Some("arn:aws:iam::123456789012:role/nodes/OtherNodeRole".into());
    let r = provider.resolve_node_class(&other).await?;
    assert_eq!(r.instance_profile, Ok(Some(name.clone())));
    assert_eq!(
        roles(&profile(&iam, &name).await.expect("kept")),
        ["OtherNodeRole"]
    );

    // 4. A role IAM does not know: InstanceProfileReady's message names spec.role.
    let mut unknown = world.node_class.clone();
    unknown.name = "gpu".into();
    unknown.role = Some("NoSuchRole".into());
    let r = provider.resolve_node_class(&unknown).await?;
    let e = r.instance_profile.expect_err("unknown role");
    assert!(e.contains("spec.role") && e.contains("NoSuchRole"), "{e}");
    let e = provider
        .resolve(&unknown)
        .await
        .expect_err("no launch either");
    assert!(e.to_string().contains("spec.role"), "{e}");

    // 5. `instanceProfile`: it must exist; it is never created.
    let mut named = world.node_class.clone();
    named.role = None;
    named.instance_profile = Some("MadeByHand".into());
    let r = provider.resolve_node_class(&named).await?;
    let e = r.instance_profile.expect_err("missing profile");
    assert!(
        e.contains("spec.instanceProfile") && e.contains("MadeByHand"),
        "{e}"
    );
    iam.create_instance_profile()
        .instance_profile_name("MadeByHand")
        .send()
        .await?;
    let r = provider.resolve_node_class(&named).await?;
    assert_eq!(r.instance_profile, Ok(Some("MadeByHand".into())));

    // 6. Garbage collection: kept while its class exists; deleted (role removed first) once
    //    it is gone. Profiles at other paths (moto lists them despite PathPrefix) stay, and
    //    so does the "gpu" class's profile whose role failed (created, then kept: the class
    //    still exists).
    assert!(
        provider
            .collect_node_classes(&[world.node_class.clone(), unknown.clone()])
            .await?
            .is_empty()
    );
    assert!(profile(&iam, &name).await.is_some());
    let deleted = provider
        .collect_node_classes(std::slice::from_ref(&unknown))
        .await?;
    assert_eq!(deleted, std::slice::from_ref(&name));
    assert!(profile(&iam, &name).await.is_none());
    assert!(profile(&iam, "MadeByHand").await.is_some());
    let deleted = provider.collect_node_classes(&[]).await?;
    assert_eq!(deleted, [profile_name(TEST_CLUSTER, REGION, "gpu")]);
    assert!(profile(&iam, "MadeByHand").await.is_some());

    // 7. A deleted profile is made again on the next need (the launch cache forgot it).
    let resolved = provider.resolve(&world.node_class).await?;
    assert_eq!(resolved.instance_profile.as_deref(), Some(name.as_str()));
    assert!(profile(&iam, &name).await.is_some());
    Ok(())
}

/// A plan's launches resolve their class at once, and two actuator replicas may too: every one
/// gets the profile, which ends with exactly one profile holding the role. (IAM holds one role
/// per profile: a second AddRoleToInstanceProfile is refused with LimitExceeded, by moto as by
/// AWS; before, the launches that lost the race failed with that refusal.)
#[tokio::test]
async fn concurrent_launches_of_one_class_share_one_profile() -> Result<()> {
    let Some(moto) = MotoServer::start_or_skip() else {
        return Ok(());
    };
    let world = testing::seed(&moto.config()).await;
    let replicas = [
        std::sync::Arc::new(Ec2Provider::new(moto.config()).await),
        std::sync::Arc::new(Ec2Provider::new(moto.config()).await),
    ];
    let mut launches = tokio::task::JoinSet::new();
    for i in 0..12 {
        let provider = replicas[i % 2].clone();
        let class = world.node_class.clone();
        launches.spawn(async move { provider.resolve(&class).await.map(|r| r.instance_profile) });
    }
    let name = profile_name(TEST_CLUSTER, REGION, "default");
    while let Some(joined) = launches.join_next().await {
        assert_eq!(joined??.as_deref(), Some(name.as_str()));
    }
    let iam = iam(&moto).await;
    assert_eq!(
        roles(&profile(&iam, &name).await.expect("created")),
        [TEST_ROLE]
    );
    assert_eq!(
        iam.list_instance_profiles()
            .send()
            .await?
            .instance_profiles()
            .len(),
        1
    );
    Ok(())
}
