//! The launch: one launch template per AMI and kubelet max pods, and one instant CreateFleet
//! with overrides for the offerings × their zones' subnets and the caller's client token.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, InstanceType as Ec2InstanceType,
    OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag,
    TagSpecification, TargetCapacitySpecificationRequest,
};
use cloud::{
    CapacityType, Error, Instance, InstanceState, LaunchRequest, NodeSpec, OfferingKey, ProviderId,
    Result, TAG_CLUSTER_PREFIX, TAG_EKS_CLUSTER_NAME, TAG_NODECLASS, Tags,
};
use sha2::{Digest, Sha256};

use super::Ec2Provider;
use crate::error::{FleetError, from_fleet_errors, from_sdk};
use crate::launch_template::TemplateSpec;
use crate::resolve::{Resolved, Variant};
use crate::user_data::{self, Bootstrap};

/// CreateFleet takes at most this many overrides per request (Karpenter's limit too).
pub const MAX_OVERRIDES: usize = 60;

/// How often `create` reads a just-launched instance before it gives up waiting for EC2's
/// eventual consistency and answers from the fleet response.
const DESCRIBE_ATTEMPTS: u32 = 5;

// === impl Ec2Provider ===

impl Ec2Provider {
    /// The tags that mark an instance or template as this cluster's and this node class's; they
    /// win over the node class's and the caller's tags of the same key.
    fn ownership_tags(&self, node_class: &str) -> Tags {
        let cluster = &self.config.cluster.name;
        Tags::from([
            (
                format!("{TAG_CLUSTER_PREFIX}{cluster}"),
                "owned".to_string(),
            ),
            (TAG_EKS_CLUSTER_NAME.to_string(), cluster.clone()),
            (TAG_NODECLASS.to_string(), node_class.to_string()),
        ])
    }

    /// The node class's tags with the ownership tags over them.
    fn base_tags(&self, node: &NodeSpec) -> Tags {
        let mut tags = node.class.tags.clone();
        tags.extend(self.ownership_tags(&node.class.name));
        tags
    }

    /// The template of `node` for one AMI and kubelet max pods.
    fn template_spec(
        &self,
        node: &NodeSpec,
        resolved: &Resolved,
        image_id: &str,
        max_pods: Option<i64>,
    ) -> Result<TemplateSpec> {
        let class = &node.class;
        let user_data = user_data::render(
            resolved.family,
            &Bootstrap {
                cluster: &self.config.cluster,
                labels: &node.labels,
                taints: &node.taints,
                kubelet: class.kubelet.as_ref(),
                max_pods,
                custom: class.user_data.as_deref(),
            },
        )
        .map_err(|e| Error::InvalidRequest {
            reason: format!("EC2NodeClass {}: spec.userData: {e}", class.name),
        })?;
        Ok(TemplateSpec {
            node_class: class.name.clone(),
            family: resolved.family,
            image_id: image_id.to_string(),
            user_data,
            security_groups: resolved.security_groups.clone(),
            instance_profile: resolved.instance_profile.clone(),
            block_device_mappings: class.block_device_mappings.clone(),
            metadata_options: class.metadata_options.clone(),
            associate_public_ip_address: class.associate_public_ip_address,
            detailed_monitoring: class.detailed_monitoring,
            tags: self.base_tags(node),
        })
    }
}

/// A client token EC2 accepts (at most 64 ASCII characters): the caller's token when it fits,
/// else its SHA-256 in hex. The same claim always gives the same token.
pub fn client_token(token: &str) -> String {
    if token.len() <= 64 && token.is_ascii() {
        token.to_string()
    } else {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// One instance of `capacity_type`. The per-type target repeats the total: EC2 needs only the
/// total and the default type, but moto launches nothing without the per-type target.
fn target_capacity(capacity_type: CapacityType) -> TargetCapacitySpecificationRequest {
    let b = TargetCapacitySpecificationRequest::builder().total_target_capacity(1);
    match capacity_type {
        CapacityType::Spot => b
            .default_target_capacity_type(DefaultTargetCapacityType::Spot)
            .spot_target_capacity(1),
        CapacityType::OnDemand => b
            .default_target_capacity_type(DefaultTargetCapacityType::OnDemand)
            .on_demand_target_capacity(1),
    }
    .build()
}

/// One override of the fleet: an offering placed in a subnet, from one launch template.
struct Placement<'a> {
    offering: &'a OfferingKey,
    subnet: String,
    template: usize,
}

impl Ec2Provider {
    /// The create call once the node class is resolved: launch templates, CreateFleet and the
    /// instance as EC2 describes it.
    pub(super) async fn create_resolved(
        &self,
        request: &LaunchRequest,
        first: &OfferingKey,
        node: &cloud::NodeSpec,
        resolved: &Resolved,
    ) -> Result<Instance> {
        let types: Vec<&str> = request
            .offerings
            .iter()
            .map(|o| o.instance_type.as_str())
            .collect();
        let hardware = self.hardware(&types).await?;

        // One template per AMI used, and the overrides in the caller's order (cheapest first).
        let mut templates: Vec<(String, TemplateSpec, Option<i64>)> = Vec::new();
        let mut placements: Vec<Placement<'_>> = Vec::new();
        for o in &request.offerings {
            if placements.len() == MAX_OVERRIDES {
                break;
            }
            let Some(subnet) = resolved.subnet_for(&o.zone) else {
                continue;
            };
            // A GPU type boots the NVIDIA image, a Neuron type the Neuron image (Karpenter's
            // AMI variants); a type without an image of its own is not launched here.
            let hw = hardware.get(&o.instance_type);
            let (a, variant) = hw.map_or(("x86_64", Variant::Standard), |h| {
                (h.arch.as_str(), h.variant)
            });
            let Some(ami) = resolved.ami_for(a, variant) else {
                continue;
            };
            // One template per AMI and max-pods value, as Karpenter groups them
            // (`DefaultResolver.Resolve`, aws/karpenter-provider-aws
            // `pkg/providers/amifamily/resolver.go`): the kubelet's `--max-pods` is the count
            // the planner gave the type.
            let max_pods = hw.and_then(|h| {
                h.max_pods(
                    resolved.family,
                    node.class.kubelet.as_ref(),
                    self.config.reserved_enis,
                )
            });
            let template = match templates
                .iter()
                .position(|(_, s, m)| s.image_id == ami.id && *m == max_pods)
            {
                Some(i) => i,
                None => {
                    let spec = self.template_spec(node, resolved, &ami.id, max_pods)?;
                    let name = spec.name(
                        &self.config.launch_template_prefix,
                        &self.config.cluster.name,
                    );
                    templates.push((name, spec, max_pods));
                    templates.len() - 1
                }
            };
            placements.push(Placement {
                offering: o,
                subnet: subnet.id.clone(),
                template,
            });
        }
        if placements.is_empty() {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "offerings: none is in a zone of EC2NodeClass {}'s subnets ({}) with an AMI for its architecture and accelerators",
                    node.class.name,
                    resolved.zones().into_iter().collect::<Vec<_>>().join(", ")
                ),
            });
        }
        let mut configs = Vec::new();
        for (i, (name, spec, _)) in templates.iter().enumerate() {
            let id = self.templates.ensure(&self.ec2, name, spec).await?;
            let overrides = placements
                .iter()
                .filter(|p| p.template == i)
                .map(|p| {
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(Ec2InstanceType::from(p.offering.instance_type.as_str()))
                        .subnet_id(&p.subnet)
                        .availability_zone(&p.offering.zone)
                        .build()
                })
                .collect();
            configs.push(
                FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_id(id)
                            .version("$Latest")
                            .build(),
                    )
                    .set_overrides(Some(overrides))
                    .build(),
            );
        }
        let mut tags = node.class.tags.clone();
        tags.extend(request.tags.clone());
        tags.extend(self.ownership_tags(&node.class.name));
        let tags: Vec<Tag> = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let tried: Vec<OfferingKey> = placements.iter().map(|p| p.offering.clone()).collect();
        let token = client_token(&request.client_token);
        let what = format!("CreateFleet for client token {token}");
        let out = self
            .ec2
            .create_fleet()
            .r#type(FleetType::Instant)
            .client_token(&token)
            .target_capacity_specification(target_capacity(first.capacity_type))
            .on_demand_options(
                OnDemandOptionsRequest::builder()
                    .allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice)
                    .build(),
            )
            .spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .build(),
            )
            .set_launch_template_configs(Some(configs))
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Instance)
                    .set_tags(Some(tags))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| from_sdk(&what, &e, &tried))?;
        let launched = out
            .instances()
            .iter()
            .find_map(|i| Some((i, i.instance_ids().first()?.clone())));
        let Some((fleet_instance, instance_id)) = launched else {
            let zone_of: BTreeMap<&str, &str> = placements
                .iter()
                .map(|p| (p.subnet.as_str(), p.offering.zone.as_str()))
                .collect();
            let errors: Vec<FleetError> = out
                .errors()
                .iter()
                .map(|e| {
                    let o = e
                        .launch_template_and_overrides()
                        .and_then(|l| l.overrides());
                    let offering = o.and_then(|o| {
                        let zone = o
                            .availability_zone()
                            .or_else(|| o.subnet_id().and_then(|s| zone_of.get(s).copied()))?;
                        Some(OfferingKey {
                            instance_type: o.instance_type()?.as_str().to_string(),
                            zone: zone.to_string(),
                            capacity_type: first.capacity_type,
                        })
                    });
                    FleetError {
                        code: e.error_code().unwrap_or_default().to_string(),
                        message: e.error_message().unwrap_or_default().to_string(),
                        offering,
                    }
                })
                .collect();
            return Err(from_fleet_errors(&what, &errors, &tried));
        };
        tracing::info!(instance = %instance_id, client_token = %token, "Launched instance");
        for attempt in 0..DESCRIBE_ATTEMPTS {
            if let Some(instance) = self.describe(&instance_id).await? {
                return Ok(instance);
            }
            tokio::time::sleep(Duration::from_millis(200) * (attempt + 1)).await;
        }
        // EC2 has not caught up: answer from what the fleet said.
        let o = fleet_instance
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        let instance_type = fleet_instance
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default();
        let zone = o
            .and_then(|o| o.availability_zone())
            .map(str::to_string)
            .or_else(|| {
                let subnet = o.and_then(|o| o.subnet_id())?;
                placements
                    .iter()
                    .find(|p| p.subnet == subnet)
                    .map(|p| p.offering.zone.clone())
            })
            .unwrap_or_default();
        Ok(Instance {
            provider_id: ProviderId::new(zone.clone(), instance_id.clone()),
            id: instance_id,
            instance_type,
            zone,
            capacity_type: first.capacity_type,
            state: InstanceState::Pending,
            tags: request.tags.clone(),
            private_dns_name: String::new(),
            private_ip: String::new(),
            image_id: None,
            subnet_id: None,
            security_group_ids: Vec::new(),
            launch_time: 0,
            price: 0.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_tokens_fit_ec2() {
        assert_eq!(client_token("claim-1"), "claim-1");
        let long = "x".repeat(100);
        let t = client_token(&long);
        assert_eq!(t.len(), 64);
        assert_eq!(t, client_token(&long));
        assert_ne!(t, client_token(&"y".repeat(100)));
    }
}
