//! `cloud::CloudProvider` over EC2, SSM and IAM, and `cloud::InterruptionQueue` over SQS, through the
//! real AWS SDK.
//!
//! - [`config`]: region, endpoint override, credentials (static for a stand-in, else the SDK's
//!   default chain with IRSA web identity), the cluster the nodes join, the SSM prefix of the
//!   AMI alias parameters.
//! - [`resolve`]: an EC2NodeClass's subnets, security groups, AMIs and instance profile.
//! - [`instance_profile`]: the instance profiles of `role`s, created, reused and collected
//!   through IAM as Karpenter does.
//! - [`user_data`]: bootstrap user data for AL2023, AL2 and Bottlerocket, merged with the node
//!   class's own.
//! - [`launch_template`]: one launch template per node class, AMI and content, reused.
//! - [`provider`]: [`Ec2Provider`]: instant CreateFleet with a client token, DescribeInstances,
//!   TerminateInstances.
//! - [`catalog`]: the live catalog: DescribeInstanceTypes, DescribeInstanceTypeOfferings,
//!   DescribeSpotPriceHistory and the built-in on-demand prices.
//! - [`error`]: the only place AWS errors become `cloud::Error`s.
//! - [`interruption`]: `cloud::InterruptionQueue` over SQS ([`SqsQueue`]) and the parsers of the
//!   EventBridge messages on it (spot interruption warnings, rebalance recommendations, AWS
//!   Health scheduled changes, instance state changes).
//! - [`zonal_shift`]: `cloud::ZonalShiftSource` over ARC's GetManagedResource ([`ArcZonalShifts`]),
//!   zone IDs named through DescribeAvailabilityZones.
//! - `testing` (feature `test-util`): moto_server as the EC2/SSM stand-in, a seeded world.

pub mod catalog;
pub mod config;
pub mod error;
pub mod instance_profile;
pub mod interruption;
pub mod launch_template;
pub mod pricing;
pub mod provider;
pub mod resolve;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod user_data;
pub mod zonal_shift;

pub use config::{Cluster, Config, Credentials};
pub use interruption::SqsQueue;
pub use provider::Ec2Provider;
pub use zonal_shift::ArcZonalShifts;
