//! The narrow cloud-provider interface the actuator uses to launch and terminate machines.
//!
//! Production implements it over EC2 (CreateFleet, DescribeInstances, TerminateInstances); the
//! simulator (`simulator::cloud`) implements it in memory for tests and the demo. The interface
//! follows Karpenter's `CloudProvider`: create, get, list and delete by provider ID, the instance
//! types with their offerings and prices, and typed errors so that callers can tell insufficient
//! capacity (mark the offering unavailable, try another) from a missing instance (already gone:
//! success for a delete) from throttling (back off) from a bug.
//!
//! The trait uses `async_trait` so that services can hold an `Arc<dyn CloudProvider>` and pick
//! EC2 or the simulator from configuration at run time.

pub mod interruption;
pub mod node_class;
mod provider_id;
pub mod zonal_shift;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use common::Timestamp;
pub use common::catalog::{Catalog, InstanceType, Offering};
pub use common::ec2::InstanceTypeInfo;
pub use interruption::{
    InterruptionEvent, InterruptionKind, InterruptionQueue, Message, Notice, Unreadable,
};
pub use node_class::{
    NodeClassResolution, NodeClassSpec, NodeSpec, ResolvedAmi, ResolvedSecurityGroup,
    ResolvedSubnet, Taint, TaintEffect,
};
pub use provider_id::{ParseProviderIdError, ProviderId};
pub use zonal_shift::{ZonalShift, ZonalShiftSource};

/// Tag key carrying the NodeClaim name on every instance the actuator launches.
pub const TAG_NODECLAIM: &str = "karpenter.sh/nodeclaim";
/// Tag key carrying the NodePool name.
pub const TAG_NODEPOOL: &str = "karpenter.sh/nodepool";
/// Tag key carrying the EC2NodeClass name.
pub const TAG_NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// Tag key marking instances owned by a cluster (`kubernetes.io/cluster/<name>` = `owned`).
pub const TAG_CLUSTER_PREFIX: &str = "kubernetes.io/cluster/";
/// Tag key carrying the EKS cluster name.
pub const TAG_EKS_CLUSTER_NAME: &str = "eks:eks-cluster-name";
/// Tag key of the instance's Node name (EC2's console name).
pub const TAG_NAME: &str = "Name";

/// Key/value tags on an instance.
pub type Tags = BTreeMap<String, String>;

/// Errors of a cloud provider.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The instance does not exist (or is already terminated). A delete that gets this has
    /// nothing left to do.
    #[error("instance {provider_id} not found")]
    NotFound {
        /// The provider ID asked for.
        provider_id: String,
    },
    /// None of the requested offerings had capacity. Each offering listed here should be marked
    /// unavailable for a while.
    #[error("insufficient capacity for {}", fmt_offerings(.offerings))]
    InsufficientCapacity {
        /// The offerings that were tried and had no capacity.
        offerings: Vec<OfferingKey>,
    },
    /// The provider rate-limited the call; retry after the given delay.
    #[error("request throttled, retry after {retry_after:?}")]
    Throttled {
        /// How long to wait before retrying.
        retry_after: Duration,
    },
    /// The request itself is wrong (unknown instance type, empty offering list, bad tag, ...).
    /// Retrying the same request will fail the same way.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong, naming the field at fault.
        reason: String,
    },
    /// A provider ID could not be parsed.
    #[error(transparent)]
    ProviderId(#[from] ParseProviderIdError),
    /// The provider failed in a way that may succeed on retry (5xx, timeouts).
    #[error("cloud provider unavailable: {message}")]
    Unavailable {
        /// What the provider said.
        message: String,
    },
}

// === impl Error ===

impl Error {
    /// A short name of the kind of failure, for metric labels (`unavailable`, `throttled`,
    /// `invalid_request`, `insufficient_capacity`, `not_found`, `provider_id`).
    pub fn reason(&self) -> &'static str {
        match self {
            Error::NotFound { .. } => "not_found",
            Error::InsufficientCapacity { .. } => "insufficient_capacity",
            Error::Throttled { .. } => "throttled",
            Error::InvalidRequest { .. } => "invalid_request",
            Error::ProviderId(_) => "provider_id",
            Error::Unavailable { .. } => "unavailable",
        }
    }

    /// The earliest retry the provider asked for (a throttled call), if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Throttled { retry_after } => Some(*retry_after),
            _ => None,
        }
    }
}

/// Result of a cloud call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn fmt_offerings(o: &[OfferingKey]) -> String {
    o.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// One offering: an instance type in a zone as a capacity type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OfferingKey {
    /// Instance type, e.g. `m5.large`.
    pub instance_type: String,
    /// Availability zone, e.g. `us-east-1a`.
    pub zone: String,
    /// `spot` or `on-demand`.
    pub capacity_type: CapacityType,
}

impl fmt::Display for OfferingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.instance_type, self.zone, self.capacity_type
        )
    }
}

/// How an instance is bought.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CapacityType {
    /// Spot: cheaper, can be interrupted with a two-minute warning.
    Spot,
    /// On-demand.
    OnDemand,
}

// === impl CapacityType ===

impl CapacityType {
    /// The Karpenter label value: `spot` or `on-demand`.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::Spot => "spot",
            CapacityType::OnDemand => "on-demand",
        }
    }

    /// Parses the Karpenter label value.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for anything but `spot` or `on-demand`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "spot" => Ok(CapacityType::Spot),
            "on-demand" => Ok(CapacityType::OnDemand),
            other => Err(Error::InvalidRequest {
                reason: format!("capacity type {other:?} is not spot or on-demand"),
            }),
        }
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A launch request, shaped like an instant CreateFleet call for one instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchRequest {
    /// Idempotency token: the same token always returns the same instance, never a second one
    /// (the actuator uses the NodeClaim's command ID).
    pub client_token: String,
    /// Offerings it may launch as. Spot requests take the cheapest offering with capacity
    /// (price-capacity-optimized in spirit); on-demand requests take them in the given order.
    /// All offerings must share one capacity type.
    pub offerings: Vec<OfferingKey>,
    /// Tags for the instance (at least [`TAG_NODECLAIM`] and [`TAG_NODEPOOL`]).
    pub tags: Tags,
    /// Launch template / node class name the instance is launched from, if any.
    pub node_class: Option<String>,
    /// Machine image, if chosen by the caller.
    pub image_id: Option<String>,
    /// The node class and registration (labels, taints) of the node. Providers that build the
    /// machine themselves (EC2: subnets, security groups, AMI, user data) require it; the
    /// simulator ignores it.
    #[serde(default)]
    pub node: Option<NodeSpec>,
}

/// Lifecycle state of an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InstanceState {
    /// Launched, not yet running.
    Pending,
    /// Running.
    Running,
    /// Terminating.
    ShuttingDown,
    /// Gone.
    Terminated,
}

/// An instance as the provider reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// Instance ID, e.g. `i-0123456789abcdef0`.
    pub id: String,
    /// `aws:///<zone>/<instance-id>`.
    pub provider_id: ProviderId,
    /// Instance type.
    pub instance_type: String,
    /// Availability zone.
    pub zone: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// State.
    pub state: InstanceState,
    /// Tags.
    pub tags: Tags,
    /// Private DNS name, which is also the Node name on EKS.
    pub private_dns_name: String,
    /// Private IPv4 address.
    pub private_ip: String,
    /// Machine image.
    pub image_id: Option<String>,
    /// Subnet of its primary network interface, when the provider says.
    #[serde(default)]
    pub subnet_id: Option<String>,
    /// Security group IDs of its network interfaces, sorted; empty when the provider does not
    /// say.
    #[serde(default)]
    pub security_group_ids: Vec<String>,
    /// Launch time.
    pub launch_time: Timestamp,
    /// Price per hour of the offering it was launched as (USD).
    pub price: f64,
}

/// Filter for [`CloudProvider::list`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only instances carrying every one of these tags with these values.
    pub tags: Tags,
    /// Include terminated instances (EC2 reports them for about an hour).
    pub include_terminated: bool,
}

// === impl ListFilter ===

impl ListFilter {
    /// True when `instance` passes the filter.
    pub fn matches(&self, instance: &Instance) -> bool {
        (self.include_terminated || instance.state != InstanceState::Terminated)
            && self
                .tags
                .iter()
                .all(|(k, v)| instance.tags.get(k) == Some(v))
    }
}

/// One instance type of the live catalog: its raw EC2 facts and its offerings with prices.
/// No capacity or allocatable: whoever plans computes those (`common::ec2::instance_type`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceTypeFacts {
    /// What DescribeInstanceTypes says about the type.
    pub info: InstanceTypeInfo,
    /// Zone × capacity type with the current price; `available: false` when known to be out
    /// of capacity.
    pub offerings: Vec<Offering>,
}

/// The live catalog as the provider reports it: facts, offerings and prices of one region.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CatalogFacts {
    /// The region, e.g. `us-east-1`.
    pub region: String,
    /// Instance types sorted by name, offerings sorted by zone then capacity type.
    pub instance_types: Vec<InstanceTypeFacts>,
    /// How it was made (price sources, what was left out).
    pub notes: Vec<String>,
}

// === impl CatalogFacts ===

impl CatalogFacts {
    /// The catalog with capacity, overhead and labels computed by Karpenter's rules
    /// (`common::ec2::instance_type`); types Kubernetes cannot run (Mac) are left out.
    pub fn to_catalog(&self) -> Catalog {
        Catalog {
            instance_types: self
                .instance_types
                .iter()
                .filter_map(|t| {
                    common::ec2::instance_type(&t.info, &self.region, t.offerings.clone())
                })
                .collect(),
            notes: self.notes.clone(),
        }
    }
}

/// The cloud-provider interface.
#[async_trait]
pub trait CloudProvider: Send + Sync {
    /// Launches one instance. Idempotent on `request.client_token`.
    ///
    /// # Errors
    /// [`Error::InsufficientCapacity`] when no offering has capacity, [`Error::InvalidRequest`]
    /// for an empty offering list, mixed capacity types or an unknown type, [`Error::Throttled`],
    /// [`Error::Unavailable`].
    async fn create(&self, request: &LaunchRequest) -> Result<Instance>;

    /// One instance by provider ID (terminated instances are reported while the provider keeps
    /// them).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::ProviderId`], [`Error::Throttled`], [`Error::Unavailable`].
    async fn get(&self, provider_id: &ProviderId) -> Result<Instance>;

    /// Instances that pass the filter, ordered by ID.
    ///
    /// # Errors
    /// [`Error::Throttled`], [`Error::Unavailable`].
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Instance>>;

    /// Terminates an instance.
    ///
    /// # Errors
    /// [`Error::NotFound`] when it does not exist or is already terminated (callers treat that
    /// as done), [`Error::Throttled`], [`Error::Unavailable`].
    async fn delete(&self, provider_id: &ProviderId) -> Result<()>;

    /// Adds (or overwrites) tags on an instance, as EC2's CreateTags: the lifecycle tags each
    /// instance with its Node's name once it registers (`Name`, Karpenter's tagging
    /// controller). Providers without tags keep this default, which says so.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::InvalidRequest`] from providers without tags,
    /// [`Error::Throttled`], [`Error::Unavailable`].
    async fn tag(&self, provider_id: &ProviderId, tags: &Tags) -> Result<()> {
        let _ = tags;
        Err(Error::InvalidRequest {
            reason: format!("this cloud provider does not tag instances ({provider_id})"),
        })
    }

    /// Instance types with their offerings and current prices. An offering currently out of
    /// capacity has `available: false` when the provider knows it.
    ///
    /// # Errors
    /// [`Error::Throttled`], [`Error::Unavailable`].
    async fn instance_types(&self) -> Result<Catalog>;

    /// One instance type by name (capacity, overhead, labels; offerings as the provider knows
    /// them, possibly none), `None` when the provider has no such type. The lifecycle reads
    /// the launched type's labels and capacity with it; a provider whose whole catalog is
    /// costly to read (EC2: many DescribeInstanceTypes pages, offerings and spot prices)
    /// answers from one call. This default reads the whole catalog.
    ///
    /// # Errors
    /// [`Error::Throttled`], [`Error::Unavailable`].
    async fn instance_type(&self, name: &str) -> Result<Option<InstanceType>> {
        Ok(self
            .instance_types()
            .await?
            .instance_types
            .into_iter()
            .find(|t| t.name == name))
    }

    /// The live catalog's raw facts: instance types, their offerings in the zones the provider
    /// launches in, and current prices. Providers that have none (the simulator, the
    /// stand-in) keep this default, which says so.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] from providers without a live catalog, [`Error::Throttled`],
    /// [`Error::Unavailable`].
    async fn catalog_facts(&self) -> Result<CatalogFacts> {
        Err(Error::InvalidRequest {
            reason: "this cloud provider serves no live catalog".to_string(),
        })
    }

    /// What `class`'s selectors resolve to now (subnets, security groups, AMIs, instance
    /// profile): the EC2NodeClass status the actuator writes. Providers without selectors to
    /// resolve (the simulator, the stand-in) keep this default, which says so.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] from providers that resolve nothing, [`Error::Throttled`],
    /// [`Error::Unavailable`].
    async fn resolve_node_class(&self, class: &NodeClassSpec) -> Result<NodeClassResolution> {
        Err(Error::InvalidRequest {
            reason: format!(
                "this cloud provider does not resolve node classes (EC2NodeClass {})",
                class.name
            ),
        })
    }

    /// Deletes what the provider made for node classes that are gone (EC2: the instance
    /// profiles of `role`s), keeping what `classes` (every class that exists, by its spec) and
    /// live instances still use; returns what was deleted. Providers that make nothing for
    /// node classes keep this default, which deletes nothing.
    ///
    /// # Errors
    /// [`Error::Throttled`], [`Error::Unavailable`], [`Error::InvalidRequest`].
    async fn collect_node_classes(&self, classes: &[NodeClassSpec]) -> Result<Vec<String>> {
        let _ = classes;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(state: InstanceState, tags: &[(&str, &str)]) -> Instance {
        Instance {
            id: "i-1".into(),
            provider_id: ProviderId::new("us-east-1a", "i-1"),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            state,
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            private_dns_name: "ip-10-0-0-1.ec2.internal".into(),
            private_ip: "10.0.0.1".into(),
            image_id: None,
            subnet_id: None,
            security_group_ids: Vec::new(),
            launch_time: 0,
            price: 0.1,
        }
    }

    #[test]
    fn list_filter_matches_tags_and_hides_terminated() {
        let f = ListFilter {
            tags: Tags::from([(TAG_NODEPOOL.to_string(), "default".to_string())]),
            include_terminated: false,
        };
        assert!(f.matches(&instance(
            InstanceState::Running,
            &[(TAG_NODEPOOL, "default")]
        )));
        assert!(!f.matches(&instance(
            InstanceState::Running,
            &[(TAG_NODEPOOL, "other")]
        )));
        assert!(!f.matches(&instance(
            InstanceState::Terminated,
            &[(TAG_NODEPOOL, "default")]
        )));
        let all = ListFilter {
            include_terminated: true,
            ..ListFilter::default()
        };
        assert!(all.matches(&instance(InstanceState::Terminated, &[])));
    }

    #[test]
    fn capacity_types_parse_and_name_bad_input() {
        assert_eq!(CapacityType::parse("spot").unwrap(), CapacityType::Spot);
        assert_eq!(
            CapacityType::parse("on-demand").unwrap(),
            CapacityType::OnDemand
        );
        let e = CapacityType::parse("reserved").unwrap_err();
        assert!(e.to_string().contains("\"reserved\""), "{e}");
    }

    #[test]
    fn insufficient_capacity_lists_offerings() {
        let e = Error::InsufficientCapacity {
            offerings: vec![OfferingKey {
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: CapacityType::Spot,
            }],
        };
        assert_eq!(
            e.to_string(),
            "insufficient capacity for m5.large/us-east-1a/spot"
        );
    }
}
