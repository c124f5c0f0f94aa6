//! [`cloud::ZonalShiftSource`] over ARC's `GetManagedResource` (aws-sdk-arczonalshift), as
//! Karpenter's provider reads it (aws/karpenter-provider-aws v1.14.1
//! `pkg/providers/arczonalshift/arczonalshift.go` `UpdateZonalShifts`: the EKS cluster's ARN as
//! the resource identifier, each shift's `awayFrom`, `expiryTime` and `appliedStatus`).
//!
//! ARC names zones by ID (`use1-az1`); the planner's offerings name them (`us-east-1a`), and
//! the mapping differs between accounts, so the IDs are translated with EC2's
//! `DescribeAvailabilityZones`, read once and again when a shift names an ID not seen before.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_arczonalshift::types::AppliedStatus;
use cloud::{Result, ZonalShift};
use tokio::sync::Mutex;

use crate::Config;
use crate::error::from_sdk;

/// The cluster's zonal shifts from ARC.
pub struct ArcZonalShifts {
    arc: aws_sdk_arczonalshift::Client,
    ec2: aws_sdk_ec2::Client,
    resource: String,
    /// Zone ID → zone name, as DescribeAvailabilityZones last said.
    zones: Mutex<HashMap<String, String>>,
}

// === impl ArcZonalShifts ===

impl ArcZonalShifts {
    /// Reads the shifts of `resource` (the EKS cluster's ARN) with `config`'s region, endpoint
    /// and credentials; `arc_endpoint` overrides the endpoint of ARC alone. Makes no call to AWS.
    pub async fn new(
        config: &Config,
        resource: impl Into<String>,
        arc_endpoint: Option<&str>,
    ) -> Self {
        let sdk = config.sdk_config().await;
        let mut arc = aws_sdk_arczonalshift::config::Builder::from(&sdk);
        if let Some(url) = arc_endpoint {
            arc = arc.endpoint_url(url);
        }
        Self::from_clients(
            aws_sdk_arczonalshift::Client::from_conf(arc.build()),
            aws_sdk_ec2::Client::new(&sdk),
            resource,
        )
    }

    /// Over given clients.
    pub fn from_clients(
        arc: aws_sdk_arczonalshift::Client,
        ec2: aws_sdk_ec2::Client,
        resource: impl Into<String>,
    ) -> Self {
        Self {
            arc,
            ec2,
            resource: resource.into(),
            zones: Mutex::new(HashMap::new()),
        }
    }

    /// The name of each of `ids`, reading the account's zones when one is not known yet.
    async fn names(&self, ids: &[&str]) -> Result<HashMap<String, String>> {
        let mut zones = self.zones.lock().await;
        if ids.iter().any(|id| !zones.contains_key(*id)) {
            let out = self
                .ec2
                .describe_availability_zones()
                .send()
                .await
                .map_err(|e| from_sdk("DescribeAvailabilityZones", &e, &[]))?;
            for z in out.availability_zones() {
                if let (Some(id), Some(name)) = (z.zone_id(), z.zone_name()) {
                    zones.insert(id.to_string(), name.to_string());
                }
            }
        }
        Ok(zones.clone())
    }
}

#[async_trait]
impl cloud::ZonalShiftSource for ArcZonalShifts {
    async fn zonal_shifts(&self) -> Result<Vec<ZonalShift>> {
        let out = self
            .arc
            .get_managed_resource()
            .resource_identifier(&self.resource)
            .send()
            .await
            .map_err(|e| from_sdk(&format!("GetManagedResource {}", self.resource), &e, &[]))?;
        let shifts = out.zonal_shifts();
        if shifts.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = shifts.iter().map(|s| s.away_from()).collect();
        let names = self.names(&ids).await?;
        Ok(shifts
            .iter()
            .map(|s| ZonalShift {
                zone_id: s.away_from().to_string(),
                zone: names.get(s.away_from()).cloned(),
                expiry: s.expiry_time().secs(),
                applied: *s.applied_status() == AppliedStatus::Applied,
            })
            .collect())
    }
}
