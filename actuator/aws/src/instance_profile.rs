//! Instance profiles for `spec.role`, managed as Karpenter manages them
//! (`pkg/providers/instanceprofile/instanceprofile.go`, `pkg/controllers/nodeclass/instanceprofile.go`
//! and `pkg/controllers/nodeclass/garbagecollection/controller.go` of aws/karpenter-provider-aws):
//!
//! - **Name**: `<cluster>_<hash>`, the hash being FNV-1a 64 of `<region><class name>` in decimal:
//!   Karpenter's `LegacyInstanceProfileName` (hashstructure v2 hashes a string as FNV-1a 64 of
//!   its bytes). Karpenter's current name adds a random UUID and keeps it in the class's status;
//!   a name derived from cluster, region and class alone lets every actuator replica find the
//!   profile without reading status first.
//! - **Ensure** ([`ensure`]): GetInstanceProfile; when missing, CreateInstanceProfile with
//!   Karpenter's tags (`kubernetes.io/cluster/<cluster>: owned`, `eks:eks-cluster-name`,
//!   `karpenter.k8s.aws/ec2nodeclass`, `topology.kubernetes.io/region`, plus the class's
//!   `tags`) under the path `/dovetail/<region>/<cluster>/` (Karpenter's is `/karpenter/…`; a
//!   path of its own keeps dovetail's garbage collection away from profiles Karpenter made);
//!   then the role: kept when it is the one attached, else RemoveRoleFromInstanceProfile of
//!   the other and AddRoleToInstanceProfile (an instance profile holds one role; a role ARN's
//!   path is dropped, AddRoleToInstanceProfile takes a bare name).
//! - **Garbage collection** ([`collect`]): ListInstanceProfiles under the path; a profile that
//!   no current class derives and no live instance of the cluster uses loses its role and is
//!   deleted (RemoveRoleFromInstanceProfile, DeleteInstanceProfile).
//!
//! A role IAM does not know is an error naming `spec.role` ([`Error::RoleNotFound`]), so the
//! class's `InstanceProfileReady` says what IAM said.

use std::collections::BTreeSet;

use aws_sdk_iam::error::ProvideErrorMetadata;
use aws_sdk_iam::types::Tag;

use crate::error::from_sdk;

/// The tag naming the EC2NodeClass (Karpenter's `LabelNodeClass`).
pub const TAG_NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";

/// Why a profile could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// IAM does not know the role.
    #[error("EC2NodeClass {class}: spec.role: IAM role {role:?} not found ({message})")]
    RoleNotFound {
        /// The class.
        class: String,
        /// The role.
        role: String,
        /// IAM's message.
        message: String,
    },
    /// IAM does not know the instance profile named by `spec.instanceProfile`.
    #[error(
        "EC2NodeClass {class}: spec.instanceProfile: IAM instance profile {profile:?} not found"
    )]
    ProfileNotFound {
        /// The class.
        class: String,
        /// The profile.
        profile: String,
    },
    /// IAM failed otherwise.
    #[error(transparent)]
    Cloud(#[from] cloud::Error),
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// FNV-1a 64 of `bytes` (hashstructure v2's hash of a string).
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The instance profile name of `class` in `cluster` and `region`.
pub fn profile_name(cluster: &str, region: &str, class: &str) -> String {
    format!(
        "{cluster}_{}",
        fnv1a64(format!("{region}{class}").as_bytes())
    )
}

/// The IAM path of the profiles this cluster's actuator manages.
pub fn path(cluster: &str, region: &str) -> String {
    format!("/dovetail/{region}/{cluster}/")
}

/// A role's name: `arn:aws:iam::1:role/path/Name` and `path/Name` → `Name`.
pub fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

/// Karpenter's tags of a managed profile: the class's `tags`, then the cluster, class and region
/// tags (which win).
pub fn tags(cluster: &str, region: &str, class: &str, class_tags: &cloud::Tags) -> cloud::Tags {
    let mut t = class_tags.clone();
    t.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    t.insert(cloud::TAG_EKS_CLUSTER_NAME.into(), cluster.into());
    t.insert(TAG_NODECLASS.into(), class.into());
    t.insert("topology.kubernetes.io/region".into(), region.into());
    t
}

fn is_no_such_entity<E: ProvideErrorMetadata>(e: &aws_sdk_iam::error::SdkError<E>) -> bool {
    e.as_service_error()
        .and_then(ProvideErrorMetadata::code)
        .is_some_and(|c| c == "NoSuchEntity")
}

/// The roles attached to `profile` now, `None` when IAM has no such profile.
///
/// # Errors
/// IAM errors other than NoSuchEntity.
pub async fn get(iam: &aws_sdk_iam::Client, profile: &str) -> Result<Option<Vec<String>>> {
    match iam
        .get_instance_profile()
        .instance_profile_name(profile)
        .send()
        .await
    {
        Ok(out) => Ok(Some(
            out.instance_profile()
                .map(|p| {
                    p.roles()
                        .iter()
                        .map(|r| r.role_name().to_string())
                        .collect()
                })
                .unwrap_or_default(),
        )),
        Err(e) if is_no_such_entity(&e) => Ok(None),
        Err(e) => Err(from_sdk(&format!("GetInstanceProfile {profile}"), &e, &[]).into()),
    }
}

/// What [`ensure`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ensured {
    /// The profile's name.
    pub name: String,
    /// It was created now.
    pub created: bool,
    /// Its role was attached (or replaced) now.
    pub role_attached: bool,
}

/// Makes the managed profile of `class` exist with `role` attached; reuses it when it does.
///
/// # Errors
/// [`Error::RoleNotFound`] when IAM does not know the role; other IAM errors.
pub async fn ensure(
    iam: &aws_sdk_iam::Client,
    cluster: &str,
    region: &str,
    class: &cloud::node_class::NodeClassSpec,
    role: &str,
) -> Result<Ensured> {
    let name = profile_name(cluster, region, &class.name);
    let role = role_name(role);
    let mut ensured = Ensured {
        name: name.clone(),
        ..Ensured::default()
    };
    let roles = match get(iam, &name).await? {
        Some(roles) => roles,
        None => {
            let tags: Vec<Tag> = tags(cluster, region, &class.name, &class.tags)
                .into_iter()
                .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
                .collect();
            let created = iam
                .create_instance_profile()
                .instance_profile_name(&name)
                .path(path(cluster, region))
                .set_tags(Some(tags))
                .send()
                .await;
            match created {
                Ok(_) => ensured.created = true,
                // Another replica created it between the two calls: reuse it.
                Err(e)
                    if e.as_service_error()
                        .and_then(ProvideErrorMetadata::code)
                        .is_some_and(|c| c == "EntityAlreadyExists") => {}
                Err(e) => {
                    return Err(from_sdk(&format!("CreateInstanceProfile {name}"), &e, &[]).into());
                }
            }
            Vec::new()
        }
    };
    if roles.iter().any(|r| r == role) {
        return Ok(ensured);
    }
    for other in &roles {
        iam.remove_role_from_instance_profile()
            .instance_profile_name(&name)
            .role_name(other)
            .send()
            .await
            .map_err(|e| {
                from_sdk(
                    &format!("RemoveRoleFromInstanceProfile {name} role {other}"),
                    &e,
                    &[],
                )
            })?;
    }
    match iam
        .add_role_to_instance_profile()
        .instance_profile_name(&name)
        .role_name(role)
        .send()
        .await
    {
        Ok(_) => {
            ensured.role_attached = true;
            Ok(ensured)
        }
        // Another launch (or replica) attached a role between the read and this call: an
        // instance profile holds one role, so IAM refuses a second. Fine when it is this role.
        Err(e)
            if e.as_service_error()
                .and_then(ProvideErrorMetadata::code)
                .is_some_and(|c| c == "LimitExceeded")
                && get(iam, &name)
                    .await?
                    .is_some_and(|now| now.iter().any(|r| r == role)) =>
        {
            Ok(ensured)
        }
        Err(e) if is_no_such_entity(&e) => Err(Error::RoleNotFound {
            class: class.name.clone(),
            role: role.to_string(),
            message: e
                .as_service_error()
                .and_then(ProvideErrorMetadata::message)
                .unwrap_or("NoSuchEntity")
                .to_string(),
        }),
        Err(e) => Err(from_sdk(
            &format!("AddRoleToInstanceProfile {name} role {role}"),
            &e,
            &[],
        )
        .into()),
    }
}

/// Checks that the unmanaged profile `spec.instanceProfile` exists.
///
/// # Errors
/// [`Error::ProfileNotFound`]; IAM errors.
pub async fn check(
    iam: &aws_sdk_iam::Client,
    class: &cloud::node_class::NodeClassSpec,
    profile: &str,
) -> Result<()> {
    match get(iam, profile).await? {
        Some(_) => Ok(()),
        None => Err(Error::ProfileNotFound {
            class: class.name.clone(),
            profile: profile.to_string(),
        }),
    }
}

/// Deletes the managed profiles of this cluster that are not in `keep` (the names current
/// classes derive and the profiles of live instances); returns the deleted names, sorted.
///
/// # Errors
/// IAM errors (profiles deleted before the error stay deleted).
pub async fn collect(
    iam: &aws_sdk_iam::Client,
    cluster: &str,
    region: &str,
    keep: &BTreeSet<String>,
) -> Result<Vec<String>> {
    let prefix = path(cluster, region);
    let mut pages = iam
        .list_instance_profiles()
        .path_prefix(&prefix)
        .into_paginator()
        .items()
        .send();
    let mut doomed = Vec::new();
    while let Some(p) = pages.next().await {
        let p = p.map_err(|e| from_sdk(&format!("ListInstanceProfiles {prefix}"), &e, &[]))?;
        // IAM filters by path already; a stand-in that does not (moto) must not make this
        // delete another path's profiles.
        if p.path() != prefix || keep.contains(p.instance_profile_name()) {
            continue;
        }
        let roles: Vec<String> = p
            .roles()
            .iter()
            .map(|r| r.role_name().to_string())
            .collect();
        doomed.push((p.instance_profile_name().to_string(), roles));
    }
    let mut deleted = Vec::new();
    for (name, roles) in doomed {
        for role in roles {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(&name)
                .role_name(&role)
                .send()
                .await
                .map_err(|e| {
                    from_sdk(
                        &format!("RemoveRoleFromInstanceProfile {name} role {role}"),
                        &e,
                        &[],
                    )
                })?;
        }
        match iam
            .delete_instance_profile()
            .instance_profile_name(&name)
            .send()
            .await
        {
            Ok(_) => {}
            Err(e) if is_no_such_entity(&e) => {}
            Err(e) => {
                return Err(from_sdk(&format!("DeleteInstanceProfile {name}"), &e, &[]).into());
            }
        }
        deleted.push(name);
    }
    deleted.sort();
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_karpenters_legacy_names() {
        // FNV-1a 64 test vectors: "" and "a".
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        let n = profile_name("test-cluster", "eu-west-1", "default");
        assert!(n.starts_with("test-cluster_"), "{n}");
        assert_eq!(n, profile_name("test-cluster", "eu-west-1", "default"));
        assert_ne!(n, profile_name("test-cluster", "us-east-1", "default"));
        assert_ne!(n, profile_name("test-cluster", "eu-west-1", "gpu"));
        assert!(n.len() <= 128, "IAM names are at most 128 characters");
    }

    #[test]
    fn role_arns_and_paths_give_the_bare_name() {
        assert_eq!(
            role_name("arn:aws:iam::123456789012:role/nodes/KarpenterNodeRole"),
            "KarpenterNodeRole"
        );
        assert_eq!(role_name("KarpenterNodeRole"), "KarpenterNodeRole");
    }

    #[test]
    fn karpenters_tags_win_over_the_class_tags() {
        let class_tags = cloud::Tags::from([
            ("team".to_string(), "a".to_string()),
            (TAG_NODECLASS.to_string(), "spoofed".to_string()),
        ]);
        let t = tags("c", "eu-west-1", "default", &class_tags);
        assert_eq!(t["team"], "a");
        assert_eq!(t[TAG_NODECLASS], "default");
        assert_eq!(t["kubernetes.io/cluster/c"], "owned");
        assert_eq!(t["eks:eks-cluster-name"], "c");
        assert_eq!(t["topology.kubernetes.io/region"], "eu-west-1");
    }
}
