//! Instances as EC2 describes them, converted to `cloud::Instance`.

use aws_sdk_ec2::types::InstanceStateName;
use cloud::{CapacityType, Error, Instance, InstanceState, ProviderId, Result};

use super::Ec2Provider;
use crate::error::from_sdk;

// === impl Ec2Provider ===

impl Ec2Provider {
    /// Reads one instance, `None` when EC2 does not know it.
    pub(super) async fn describe(&self, instance_id: &str) -> Result<Option<Instance>> {
        let out = self
            .ec2
            .describe_instances()
            .instance_ids(instance_id)
            .send()
            .await;
        match out {
            Ok(out) => Ok(out
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .find(|i| i.instance_id() == Some(instance_id))
                .and_then(convert)),
            Err(e) => match from_sdk(&format!("DescribeInstances {instance_id}"), &e, &[]) {
                Error::NotFound { .. } => Ok(None),
                other => Err(other),
            },
        }
    }
}

pub(super) fn convert(i: &aws_sdk_ec2::types::Instance) -> Option<Instance> {
    let id = i.instance_id()?.to_string();
    let zone = i
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap_or_default()
        .to_string();
    let state = match i.state().and_then(|s| s.name()) {
        Some(InstanceStateName::Pending) => InstanceState::Pending,
        Some(InstanceStateName::Running) => InstanceState::Running,
        Some(InstanceStateName::Terminated) => InstanceState::Terminated,
        // Stopping or stopped nodes are not coming back as Karpenter nodes: treat them as going.
        _ => InstanceState::ShuttingDown,
    };
    let capacity_type = if i.instance_lifecycle().map(|l| l.as_str()) == Some("spot") {
        CapacityType::Spot
    } else {
        CapacityType::OnDemand
    };
    Some(Instance {
        provider_id: ProviderId::new(zone.clone(), id.clone()),
        id,
        instance_type: i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        zone,
        capacity_type,
        state,
        tags: i
            .tags()
            .iter()
            .filter_map(|t| {
                Some((
                    t.key()?.to_string(),
                    t.value().unwrap_or_default().to_string(),
                ))
            })
            .collect(),
        private_dns_name: i.private_dns_name().unwrap_or_default().to_string(),
        private_ip: i.private_ip_address().unwrap_or_default().to_string(),
        image_id: i.image_id().map(str::to_string),
        subnet_id: i.subnet_id().map(str::to_string),
        security_group_ids: security_group_ids(i),
        launch_time: i.launch_time().map(|t| t.secs()).unwrap_or_default(),
        // EC2 does not say what an instance costs; prices come with the catalog
        // (`catalog_facts`: the price table and DescribeSpotPriceHistory).
        price: 0.0,
    })
}

/// The instance's security groups as EC2 lists them at the top level (the primary network
/// interface's, as Karpenter reads them: secondary interfaces the VPC CNI attaches may carry
/// other groups), sorted and without repeats.
fn security_group_ids(i: &aws_sdk_ec2::types::Instance) -> Vec<String> {
    let mut ids: Vec<String> = i
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id())
        .map(str::to_string)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}
