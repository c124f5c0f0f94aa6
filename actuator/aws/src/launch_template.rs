//! Launch templates: one per (EC2NodeClass, AMI, user data and the rest of the template), named
//! by a hash of its content, created once and reused. After a restart the provider finds an
//! existing template by name, so nothing is created twice; a concurrent creator losing the race
//! (`AlreadyExists`) reads the winner's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use aws_sdk_ec2::types::{
    LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplateTagSpecificationRequest, LaunchTemplatesMonitoringRequest,
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, VolumeType,
};
use base64::Engine as _;
use cloud::node_class::{BlockDeviceMapping as Bdm, Ebs, MetadataOptions};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::from_sdk;
use crate::user_data::AmiFamily;

/// Tag carrying the content hash on the launch templates this provider creates.
pub const TAG_TEMPLATE_HASH: &str = "dovetail.io/launch-template-hash";

/// Everything a launch template holds. Its hash names the template, so any change (a new AMI,
/// new user data, another security group) makes a new template and old ones stay untouched.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TemplateSpec {
    /// The node class it belongs to.
    pub node_class: String,
    /// AMI family (chooses the default block devices).
    #[serde(skip)]
    pub family: AmiFamily,
    /// The image.
    pub image_id: String,
    /// User data, plain text (base64-encoded when sent).
    pub user_data: String,
    /// Security group IDs.
    pub security_groups: Vec<String>,
    /// Instance profile name.
    pub instance_profile: Option<String>,
    /// Block devices; empty means the family's default.
    pub block_device_mappings: Vec<Bdm>,
    /// Metadata options; `None` means Karpenter's defaults.
    pub metadata_options: Option<MetadataOptions>,
    /// Public IPv4 address on the primary interface.
    pub associate_public_ip_address: Option<bool>,
    /// Detailed monitoring.
    pub detailed_monitoring: Option<bool>,
    /// Tags for the template, and for instances and volumes launched from it.
    pub tags: BTreeMap<String, String>,
}

// === impl TemplateSpec ===

impl TemplateSpec {
    /// The template name: `<prefix>/<cluster>/<node class>/<first 16 hex digits of the hash>`.
    pub fn name(&self, prefix: &str, cluster: &str) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let hash = hex(&Sha256::digest(&json));
        format!("{prefix}/{cluster}/{}/{}", self.node_class, &hash[..16])
    }

    /// The block devices: the node class's, or the family's default root volume (20 GiB gp3,
    /// encrypted; Bottlerocket: 4 GiB OS volume plus a 20 GiB data volume).
    pub fn block_devices(&self) -> Vec<Bdm> {
        if !self.block_device_mappings.is_empty() {
            return self.block_device_mappings.clone();
        }
        let volume = |device: &str, gib: i32, root: bool| Bdm {
            device_name: device.to_string(),
            ebs: Ebs {
                volume_size_gib: Some(gib),
                volume_type: Some("gp3".into()),
                encrypted: Some(true),
                delete_on_termination: Some(true),
                ..Ebs::default()
            },
            root_volume: root,
        };
        match self.family {
            AmiFamily::Bottlerocket => {
                vec![volume("/dev/xvda", 4, false), volume("/dev/xvdb", 20, true)]
            }
            AmiFamily::Custom => Vec::new(),
            AmiFamily::Al2023 | AmiFamily::Al2 => vec![volume("/dev/xvda", 20, true)],
        }
    }

    fn data(&self) -> RequestLaunchTemplateData {
        let tags: Vec<Tag> = self
            .tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let mut data = RequestLaunchTemplateData::builder()
            .image_id(&self.image_id)
            .user_data(base64::engine::general_purpose::STANDARD.encode(&self.user_data))
            .set_block_device_mappings(Some(
                self.block_devices().iter().map(block_device).collect(),
            ))
            .metadata_options(metadata(self.metadata_options.as_ref()))
            .monitoring(
                LaunchTemplatesMonitoringRequest::builder()
                    .enabled(self.detailed_monitoring.unwrap_or(false))
                    .build(),
            );
        for rt in [ResourceType::Instance, ResourceType::Volume] {
            data = data.tag_specifications(
                LaunchTemplateTagSpecificationRequest::builder()
                    .resource_type(rt)
                    .set_tags(Some(tags.clone()))
                    .build(),
            );
        }
        if let Some(p) = &self.instance_profile {
            data = data.iam_instance_profile(
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(p)
                    .build(),
            );
        }
        match self.associate_public_ip_address {
            // A public-IP choice needs an explicit interface, which then carries the groups.
            Some(public) => {
                data = data.network_interfaces(
                    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                        .device_index(0)
                        .associate_public_ip_address(public)
                        .set_groups(Some(self.security_groups.clone()))
                        .build(),
                );
            }
            None => data = data.set_security_group_ids(Some(self.security_groups.clone())),
        }
        data.build()
    }
}

fn block_device(b: &Bdm) -> LaunchTemplateBlockDeviceMappingRequest {
    let e = &b.ebs;
    LaunchTemplateBlockDeviceMappingRequest::builder()
        .device_name(&b.device_name)
        .ebs(
            LaunchTemplateEbsBlockDeviceRequest::builder()
                .set_volume_size(e.volume_size_gib)
                .set_volume_type(e.volume_type.as_deref().map(VolumeType::from))
                .set_iops(e.iops)
                .set_throughput(e.throughput)
                .set_encrypted(e.encrypted)
                .set_kms_key_id(e.kms_key_id.clone())
                .set_snapshot_id(e.snapshot_id.clone())
                .delete_on_termination(e.delete_on_termination.unwrap_or(true))
                .build(),
        )
        .build()
}

/// Karpenter's defaults: endpoint on, IPv6 endpoint off, hop limit 1, IMDSv2 required.
fn metadata(m: Option<&MetadataOptions>) -> LaunchTemplateInstanceMetadataOptionsRequest {
    let d = MetadataOptions::default();
    let m = m.unwrap_or(&d);
    LaunchTemplateInstanceMetadataOptionsRequest::builder()
        .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(
            m.http_endpoint.as_deref().unwrap_or("enabled"),
        ))
        .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(
            m.http_protocol_ipv6.as_deref().unwrap_or("disabled"),
        ))
        .http_put_response_hop_limit(m.http_put_response_hop_limit.unwrap_or(1))
        .http_tokens(LaunchTemplateHttpTokensState::from(
            m.http_tokens.as_deref().unwrap_or("required"),
        ))
        .build()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates launch templates once and remembers their IDs.
#[derive(Debug, Default)]
pub struct Templates {
    ids: Mutex<HashMap<String, String>>,
}

// === impl Templates ===

impl Templates {
    /// The ID of the template for `spec`, named `name`: from memory, else found by name, else
    /// created.
    ///
    /// # Errors
    /// The mapped AWS error of DescribeLaunchTemplates or CreateLaunchTemplate.
    pub async fn ensure(
        &self,
        ec2: &aws_sdk_ec2::Client,
        name: &str,
        spec: &TemplateSpec,
    ) -> cloud::Result<String> {
        if let Some(id) = self.cached(name) {
            return Ok(id);
        }
        if let Some(id) = find(ec2, name).await? {
            return Ok(self.remember(name, id));
        }
        let mut tags: Vec<Tag> = spec
            .tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        tags.push(
            Tag::builder()
                .key(TAG_TEMPLATE_HASH)
                .value(name.rsplit('/').next().unwrap_or(name))
                .build(),
        );
        let created = ec2
            .create_launch_template()
            .launch_template_name(name)
            .launch_template_data(spec.data())
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::LaunchTemplate)
                    .set_tags(Some(tags))
                    .build(),
            )
            .send()
            .await;
        match created {
            Ok(out) => {
                let id = out
                    .launch_template()
                    .and_then(|t| t.launch_template_id())
                    .unwrap_or_default()
                    .to_string();
                tracing::info!(launch_template = %name, %id, "Created launch template");
                Ok(self.remember(name, id))
            }
            Err(e)
                if aws_sdk_ec2::error::ProvideErrorMetadata::code(&e)
                    == Some("InvalidLaunchTemplateName.AlreadyExistsException") =>
            {
                match find(ec2, name).await? {
                    Some(id) => Ok(self.remember(name, id)),
                    None => Err(from_sdk(&format!("CreateLaunchTemplate {name}"), &e, &[])),
                }
            }
            Err(e) => Err(from_sdk(&format!("CreateLaunchTemplate {name}"), &e, &[])),
        }
    }

    /// Forgets a template (after EC2 said it no longer exists).
    pub fn forget(&self, name: &str) {
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    fn cached(&self, name: &str) -> Option<String> {
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    fn remember(&self, name: &str, id: String) -> String {
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), id.clone());
        id
    }
}

/// The ID of the template named `name`, if it exists.
async fn find(ec2: &aws_sdk_ec2::Client, name: &str) -> cloud::Result<Option<String>> {
    match ec2
        .describe_launch_templates()
        .launch_template_names(name)
        .send()
        .await
    {
        Ok(out) => Ok(out
            .launch_templates()
            .iter()
            .find_map(|t| t.launch_template_id().map(str::to_string))),
        Err(e)
            if aws_sdk_ec2::error::ProvideErrorMetadata::code(&e)
                .is_some_and(|c| c.starts_with("InvalidLaunchTemplateName.NotFound")) =>
        {
            Ok(None)
        }
        Err(e) => Err(from_sdk(
            &format!("DescribeLaunchTemplates {name}"),
            &e,
            &[],
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TemplateSpec {
        TemplateSpec {
            node_class: "default".into(),
            family: AmiFamily::Al2023,
            image_id: "ami-1".into(),
            user_data: "data".into(),
            security_groups: vec!["sg-1".into()],
            instance_profile: Some("p".into()),
            block_device_mappings: vec![],
            metadata_options: None,
            associate_public_ip_address: None,
            detailed_monitoring: None,
            tags: BTreeMap::new(),
        }
    }

    #[test]
    fn names_change_with_content_only() {
        let a = spec();
        let name = a.name("dovetail", "c");
        assert!(name.starts_with("dovetail/c/default/"), "{name}");
        assert_eq!(name, spec().name("dovetail", "c"));
        let mut b = spec();
        b.user_data = "other".into();
        assert_ne!(name, b.name("dovetail", "c"));
        let mut c = spec();
        c.image_id = "ami-2".into();
        assert_ne!(name, c.name("dovetail", "c"));
    }

    #[test]
    fn default_volumes_per_family() {
        let mut s = spec();
        assert_eq!(s.block_devices().len(), 1);
        assert_eq!(s.block_devices()[0].ebs.volume_size_gib, Some(20));
        s.family = AmiFamily::Bottlerocket;
        let b = s.block_devices();
        assert_eq!(
            b.iter().map(|d| d.device_name.as_str()).collect::<Vec<_>>(),
            ["/dev/xvda", "/dev/xvdb"]
        );
    }
}
