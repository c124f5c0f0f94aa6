//! [`Ec2Provider`]: `cloud::CloudProvider` over EC2.
//!
//! `create` resolves the node class (subnets, security groups, AMIs, and for `role` the managed
//! instance profile, `crate::instance_profile`), renders
//! the user data, makes sure one launch template exists per AMI and sends one instant
//! CreateFleet with overrides for the offerings × their zones' subnets and the caller's client
//! token; `get`/`list` are DescribeInstances, `delete` is TerminateInstances.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, InstanceStateName, InstanceType as Ec2InstanceType,
    OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag,
    TagSpecification, TargetCapacitySpecificationRequest,
};
use cloud::{
    CapacityType, Catalog, CloudProvider, Error, Instance, InstanceState, LaunchRequest,
    ListFilter, NodeSpec, OfferingKey, ProviderId, Result, TAG_CLUSTER_PREFIX,
    TAG_EKS_CLUSTER_NAME, TAG_NODECLASS, Tags,
};
use common::ec2::overhead;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::error::{FleetError, from_fleet_errors, from_sdk};
use crate::instance_profile;
use crate::launch_template::{TemplateSpec, Templates};
use crate::resolve::{self, Resolved, Variant};
use crate::user_data::{self, AmiFamily, Bootstrap};

/// CreateFleet takes at most this many overrides per request (Karpenter's limit too).
pub const MAX_OVERRIDES: usize = 60;

/// How often `create` reads a just-launched instance before it gives up waiting for EC2's
/// eventual consistency and answers from the fleet response.
const DESCRIBE_ATTEMPTS: u32 = 5;

/// The EC2 provider.
#[derive(Debug)]
pub struct Ec2Provider {
    config: Config,
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
    iam: aws_sdk_iam::Client,
    /// Managed instance profiles made ready, by (class, role): launches do not ask IAM again;
    /// the status pass does, every time.
    profiles: Mutex<HashMap<(String, String), String>>,
    /// Held while a launch makes a managed instance profile ready, so concurrent launches of one
    /// class do not race each other through IAM.
    ensuring: tokio::sync::Mutex<()>,
    templates: Templates,
    /// Architecture, AMI variant and network facts per instance type.
    architectures: Mutex<HashMap<String, Hardware>>,
    /// Zones of every node class resolved so far: the live catalog's offerings are restricted
    /// to them once known.
    zones: Mutex<BTreeSet<String>>,
    /// The Pricing API client (`None`: the region has no Pricing API, or the VPC is isolated).
    pricing: Option<aws_sdk_pricing::Client>,
    /// On-demand prices from the Pricing API, with when they were asked for.
    on_demand: tokio::sync::Mutex<OnDemand>,
    /// The node class resolutions of recent launches (see [`Ec2Provider::resolve_for_launch`]).
    launch_resolutions: tokio::sync::Mutex<HashMap<String, (tokio::time::Instant, Resolved)>>,
}

/// How soon the Pricing API is asked again after it failed to answer.
pub const PRICING_RETRY: Duration = Duration::from_secs(5 * 60);

/// On-demand prices from the Pricing API as held between catalog reads.
#[derive(Debug, Default)]
struct OnDemand {
    /// USD per hour by instance type, every answer assigned over the earlier ones.
    prices: BTreeMap<String, f64>,
    /// Why the last ask failed, if it did.
    error: Option<String>,
    /// When to ask again (`None`: never asked).
    next_ask: Option<std::time::Instant>,
}

/// How long a launch reuses a resolution made for another launch of the same node class.
pub const LAUNCH_RESOLUTION_REUSE: Duration = Duration::from_secs(2);

// === impl Ec2Provider ===

impl Ec2Provider {
    /// A provider for `config`. Makes no call to AWS.
    pub async fn new(config: Config) -> Self {
        let sdk = config.sdk_config().await;
        let pricing = (crate::pricing::has_api(&config.region) && !config.isolated_vpc)
            .then(|| crate::pricing::client(&sdk, &config.region));
        let mut provider = Self::from_clients(
            config,
            aws_sdk_ec2::Client::new(&sdk),
            aws_sdk_ssm::Client::new(&sdk),
            aws_sdk_iam::Client::new(&sdk),
        );
        provider.pricing = pricing;
        provider
    }

    /// A provider over given clients (tests with other SDK settings).
    pub fn from_clients(
        config: Config,
        ec2: aws_sdk_ec2::Client,
        ssm: aws_sdk_ssm::Client,
        iam: aws_sdk_iam::Client,
    ) -> Self {
        Self {
            config,
            ec2,
            ssm,
            iam,
            profiles: Mutex::new(HashMap::new()),
            ensuring: tokio::sync::Mutex::new(()),
            templates: Templates::default(),
            architectures: Mutex::new(HashMap::new()),
            zones: Mutex::new(BTreeSet::new()),
            pricing: None,
            on_demand: tokio::sync::Mutex::new(OnDemand::default()),
            launch_resolutions: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// [`Ec2Provider::resolve`] for a launch: the launches of one burst (a plan's claims,
    /// created in parallel) share one resolution of their node class, made at most
    /// [`LAUNCH_RESOLUTION_REUSE`] before, instead of asking EC2 and SSM for subnets, security
    /// groups and AMIs once per launch. One launch resolves at a time; the others wait for it
    /// and take its result (a failed resolution is not kept). A changed class is another key.
    async fn resolve_for_launch(&self, class: &cloud::NodeClassSpec) -> Result<Resolved> {
        let key = format!("{class:?}");
        let mut recent = self.launch_resolutions.lock().await;
        let now = tokio::time::Instant::now();
        recent.retain(|_, (at, _)| now.duration_since(*at) < LAUNCH_RESOLUTION_REUSE);
        if let Some((_, r)) = recent.get(&key) {
            return Ok(r.clone());
        }
        let r = self.resolve(class).await?;
        recent.insert(key, (tokio::time::Instant::now(), r.clone()));
        Ok(r)
    }

    /// Drops the launches' resolution of `class` (after a failed launch).
    async fn forget_resolution(&self, class: &cloud::NodeClassSpec) {
        self.launch_resolutions
            .lock()
            .await
            .remove(&format!("{class:?}"));
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The EC2 client (tests inspect the stand-in with it).
    pub fn ec2(&self) -> &aws_sdk_ec2::Client {
        &self.ec2
    }

    /// Resolves a node class: subnets (and so the zones it can be offered in), security groups,
    /// AMIs, instance profile.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] naming the node class field that matched nothing or is
    /// invalid; AWS errors mapped as everywhere.
    pub async fn resolve(&self, class: &cloud::NodeClassSpec) -> Result<Resolved> {
        let mut resolved = resolve::resolve(&self.ec2, &self.ssm, &self.config, class).await?;
        if let Some(role) = &class.role {
            let key = (class.name.clone(), role.clone());
            let known = self.lock_profiles().get(&key).cloned();
            let name = match known {
                Some(name) => name,
                None => {
                    // One IAM conversation at a time: a plan's launches resolve their class
                    // concurrently, and all but the first find the profile made ready here.
                    let _one = self.ensuring.lock().await;
                    let known = self.lock_profiles().get(&key).cloned();
                    match known {
                        Some(name) => name,
                        None => self
                            .ensure_profile(class, role)
                            .await
                            .map_err(profile_error)?,
                    }
                }
            };
            resolved.instance_profile = Some(name);
        }
        self.zones
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(resolved.zones());
        Ok(resolved)
    }

    fn lock_profiles(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), String>> {
        self.profiles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the managed instance profile of `class` ready for `role` through IAM and remembers
    /// it.
    async fn ensure_profile(
        &self,
        class: &cloud::NodeClassSpec,
        role: &str,
    ) -> std::result::Result<String, instance_profile::Error> {
        let ensured = instance_profile::ensure(
            &self.iam,
            &self.config.cluster.name,
            &self.config.region,
            class,
            role,
        )
        .await?;
        if ensured.created || ensured.role_attached {
            tracing::info!(
                class = %class.name,
                profile = %ensured.name,
                role,
                created = ensured.created,
                "Instance profile ready"
            );
        }
        self.lock_profiles()
            .insert((class.name.clone(), role.to_string()), ensured.name.clone());
        Ok(ensured.name)
    }

    /// The instance profile part of a class's status, as IAM says now: for `role` the managed
    /// profile (made ready), for `instanceProfile` the named one (it must exist). A refusal
    /// (unknown role or profile, access denied) is the part's error; throttling and outages
    /// fail the whole resolution.
    async fn profile_status(
        &self,
        class: &cloud::NodeClassSpec,
    ) -> Result<std::result::Result<Option<String>, String>> {
        let checked = match (&class.role, &class.instance_profile) {
            (Some(role), None) => self.ensure_profile(class, role).await.map(Some),
            (None, Some(p)) => instance_profile::check(&self.iam, class, p)
                .await
                .map(|()| Some(p.clone())),
            _ => return Ok(Ok(None)),
        };
        match checked {
            Ok(name) => Ok(Ok(name)),
            Err(instance_profile::Error::Cloud(Error::InvalidRequest { reason })) => Ok(Err(
                format!("EC2NodeClass {}: instance profile: {reason}", class.name),
            )),
            Err(instance_profile::Error::Cloud(e)) => Err(e),
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    /// The Pricing API's on-demand prices: asked for when none are held or they are older than
    /// [`crate::pricing::REFRESH`]; after a failed ask, the prices held (or none: the built-in
    /// table) are used and the API is asked again after [`PRICING_RETRY`].
    async fn on_demand_prices(&self) -> Option<crate::catalog::LivePrices> {
        let pricing = self.pricing.as_ref()?;
        let mut held = self.on_demand.lock().await;
        // When to ask is the adapter's edge (as DescribeSpotPriceHistory's `now`), not a
        // decision of the system's clock.
        #[allow(clippy::disallowed_methods)]
        let now = std::time::Instant::now();
        if held.next_ask.is_none_or(|at| now >= at) {
            match crate::pricing::on_demand(pricing, &self.config.region).await {
                Ok(prices) => {
                    tracing::info!(
                        region = %self.config.region,
                        instance_types = prices.len(),
                        "On-demand prices from the Pricing API"
                    );
                    held.prices.extend(prices);
                    held.error = None;
                    held.next_ask = Some(now + crate::pricing::REFRESH);
                }
                Err(e) => {
                    tracing::warn!(
                        region = %self.config.region,
                        error = %e,
                        "The Pricing API did not answer: on-demand prices stay as they were"
                    );
                    held.error = Some(e.to_string());
                    held.next_ask = Some(now + PRICING_RETRY);
                }
            }
        }
        Some(crate::catalog::LivePrices {
            prices: held.prices.clone(),
            error: held.error.clone(),
        })
    }

    /// Zones the live catalog is restricted to: those of the node classes resolved so far
    /// (empty: every zone of the region).
    pub fn known_zones(&self) -> BTreeSet<String> {
        self.zones.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

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

    /// The architecture (`x86_64`, `arm64`) and the AMI variant (GPUs, accelerators, neither)
    /// of each instance type, from DescribeInstanceTypes (remembered), falling back to AWS's
    /// naming (a `g` after the generation means Graviton; `g`/`p` families have GPUs, `inf`/`trn`
    /// Neuron accelerators).
    async fn hardware(&self, types: &[&str]) -> Result<HashMap<String, Hardware>> {
        let missing: Vec<String> = {
            let known = self.architectures.lock().unwrap_or_else(|e| e.into_inner());
            let mut m: Vec<String> = types
                .iter()
                .filter(|t| !known.contains_key(**t))
                .map(|t| t.to_string())
                .collect();
            m.sort();
            m.dedup();
            m
        };
        if !missing.is_empty() {
            let out = self
                .ec2
                .describe_instance_types()
                .set_instance_types(Some(
                    missing
                        .iter()
                        .map(|t| Ec2InstanceType::from(t.as_str()))
                        .collect(),
                ))
                .send()
                .await;
            let mut found = HashMap::new();
            match out {
                Ok(out) => {
                    for it in out.instance_types() {
                        // The first architecture Kubernetes knows, as Karpenter reads it
                        // (`getArchitecture`, aws/karpenter-provider-aws
                        // `pkg/providers/instancetype/types.go`): old types list `i386`
                        // first (m1.small: i386, x86_64), and no AMI is ever `i386`.
                        let (Some(name), Some(arch)) = (
                            it.instance_type(),
                            it.processor_info().and_then(|p| {
                                p.supported_architectures()
                                    .iter()
                                    .find(|a| KNOWN_ARCHITECTURES.contains(&a.as_str()))
                            }),
                        ) else {
                            continue;
                        };
                        let gpus = it.gpu_info().is_some_and(|g| !g.gpus().is_empty());
                        let accelerators = it.neuron_info().is_some()
                            || it
                                .inference_accelerator_info()
                                .is_some_and(|a| !a.accelerators().is_empty());
                        let network = it.network_info().map(|n| {
                            let card0 = n
                                .network_cards()
                                .iter()
                                .find(|c| c.network_card_index() == Some(0))
                                .and_then(|c| c.maximum_network_interfaces());
                            Network {
                                vcpus: it
                                    .v_cpu_info()
                                    .and_then(|v| v.default_v_cpus())
                                    .map_or(0, i64::from),
                                enis: i64::from(
                                    card0.or(n.maximum_network_interfaces()).unwrap_or(0),
                                ),
                                ipv4_per_eni: i64::from(
                                    n.ipv4_addresses_per_interface().unwrap_or(0),
                                ),
                            }
                        });
                        found.insert(
                            name.as_str().to_string(),
                            Hardware {
                                arch: arch.as_str().to_string(),
                                variant: Variant::for_hardware(gpus, accelerators),
                                network,
                            },
                        );
                    }
                }
                Err(e) => {
                    let err = from_sdk("DescribeInstanceTypes", &e, &[]);
                    if !matches!(err, Error::InvalidRequest { .. }) {
                        return Err(err);
                    }
                    tracing::debug!(error = %err, "DescribeInstanceTypes failed, guessing hardware from names");
                }
            }
            let mut known = self.architectures.lock().unwrap_or_else(|e| e.into_inner());
            for t in missing {
                let hw = found.remove(&t).unwrap_or_else(|| {
                    let (arch, variant) = guess_hardware(&t);
                    Hardware {
                        arch,
                        variant,
                        network: None,
                    }
                });
                known.insert(t, hw);
            }
        }
        let known = self.architectures.lock().unwrap_or_else(|e| e.into_inner());
        Ok(types
            .iter()
            .filter_map(|t| known.get(*t).map(|a| (t.to_string(), a.clone())))
            .collect())
    }

    /// Reads one instance, `None` when EC2 does not know it.
    async fn describe(&self, instance_id: &str) -> Result<Option<Instance>> {
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

/// What a launch needs to know of an instance type's hardware.
#[derive(Clone, Debug)]
struct Hardware {
    /// The EC2 architecture its AMI is for.
    arch: String,
    /// The AMI variant (GPUs, accelerators, neither).
    variant: Variant,
    /// vCPUs and ENIs, for the kubelet's max pods; `None` when EC2 did not describe the type.
    network: Option<Network>,
}

/// The facts Karpenter sizes max pods from.
#[derive(Clone, Copy, Debug)]
struct Network {
    vcpus: i64,
    /// ENIs of the default network card.
    enis: i64,
    ipv4_per_eni: i64,
}

// === impl Hardware ===

impl Hardware {
    /// The kubelet's max pods on this type for a node class of `family` with `kubelet`, the
    /// count the planner's allocatable assumes (`reserved_enis`: Karpenter's `reservedENIs`);
    /// `None` when the type's ENIs are not known and the class sets no `maxPods`.
    fn max_pods(
        &self,
        family: AmiFamily,
        kubelet: Option<&cloud::node_class::KubeletConfig>,
        reserved_enis: u32,
    ) -> Option<i64> {
        let max = kubelet.and_then(|k| k.max_pods).map(i64::from);
        let per_core = kubelet.and_then(|k| k.pods_per_core).map(i64::from);
        let Some(n) = self.network else {
            return max;
        };
        Some(overhead::max_pods(
            overhead::eni_limited_pods_reserving(n.enis, n.ipv4_per_eni, i64::from(reserved_enis)),
            n.vcpus,
            // Every family this provider launches (not Windows) has ENI-limited pod density.
            true,
            family != AmiFamily::Bottlerocket,
            max,
            per_core,
        ))
    }
}

/// A profile that cannot be made ready fails the launch naming the class's field.
fn profile_error(e: instance_profile::Error) -> Error {
    match e {
        instance_profile::Error::Cloud(e) => e,
        other => Error::InvalidRequest {
            reason: other.to_string(),
        },
    }
}

/// `x86_64` unless the family has a `g` after its generation digit (`m7g`, `c6gd`, `t4g`).
fn guess_architecture(instance_type: &str) -> &'static str {
    let family = instance_type.split('.').next().unwrap_or_default();
    let after_digit = family
        .find(|c: char| c.is_ascii_digit())
        .map(|i| &family[i + 1..])
        .unwrap_or_default();
    if after_digit.starts_with('g') {
        "arm64"
    } else {
        "x86_64"
    }
}

/// The EC2 architectures Karpenter maps to Kubernetes' (`AWSToKubeArchitectures`,
/// aws/karpenter-provider-aws `pkg/apis/v1/labels.go`).
const KNOWN_ARCHITECTURES: [&str; 2] = ["x86_64", "arm64"];

/// The architecture and variant of a type EC2 did not describe, from its name: `g`/`p`
/// families (`g5`, `p4d`, `g5g`) have GPUs, `inf`/`trn` families Neuron accelerators.
fn guess_hardware(instance_type: &str) -> (String, Variant) {
    let family = instance_type.split('.').next().unwrap_or_default();
    let letters: String = family
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    let variant = match letters.as_str() {
        "g" | "p" | "gr" => Variant::Nvidia,
        "inf" | "trn" => Variant::Neuron,
        _ => Variant::Standard,
    };
    (guess_architecture(instance_type).to_string(), variant)
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

fn convert(i: &aws_sdk_ec2::types::Instance) -> Option<Instance> {
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
    async fn create_resolved(
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

#[async_trait]
impl CloudProvider for Ec2Provider {
    async fn create(&self, request: &LaunchRequest) -> Result<Instance> {
        if request.client_token.is_empty() {
            return Err(Error::InvalidRequest {
                reason: "client_token: must not be empty".into(),
            });
        }
        let Some(first) = request.offerings.first() else {
            return Err(Error::InvalidRequest {
                reason: "offerings: at least one offering is required".into(),
            });
        };
        if let Some(o) = request
            .offerings
            .iter()
            .find(|o| o.capacity_type != first.capacity_type)
        {
            return Err(Error::InvalidRequest {
                reason: format!("offerings: {o} mixes capacity types with {first}"),
            });
        }
        let Some(node) = &request.node else {
            return Err(Error::InvalidRequest {
                reason: "node: EC2 launches need the node class (subnets, security groups, AMI)"
                    .into(),
            });
        };
        let resolved = self.resolve_for_launch(&node.class).await?;
        let launched = self.create_resolved(request, first, node, &resolved).await;
        if launched.is_err() {
            // The next launch resolves the class again (an image or subnet may have appeared).
            self.forget_resolution(&node.class).await;
        }
        launched
    }

    async fn get(&self, provider_id: &ProviderId) -> Result<Instance> {
        self.describe(provider_id.instance_id())
            .await?
            .ok_or_else(|| Error::NotFound {
                provider_id: provider_id.to_string(),
            })
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<Instance>> {
        let mut filters: Vec<Filter> = filter
            .tags
            .iter()
            .map(|(k, v)| Filter::builder().name(format!("tag:{k}")).values(v).build())
            .collect();
        if !filter.include_terminated {
            filters.push(
                Filter::builder()
                    .name("instance-state-name")
                    .set_values(Some(
                        ["pending", "running", "shutting-down", "stopping", "stopped"]
                            .map(String::from)
                            .to_vec(),
                    ))
                    .build(),
            );
        }
        let mut instances = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let out = self
                .ec2
                .describe_instances()
                .set_filters(Some(filters.clone()))
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| from_sdk("DescribeInstances (list)", &e, &[]))?;
            instances.extend(
                out.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .filter_map(convert)
                    .filter(|i| filter.matches(i)),
            );
            match out.next_token() {
                Some(t) if !t.is_empty() => next = Some(t.to_string()),
                _ => break,
            }
        }
        instances.sort_by(|a, b| a.id.cmp(&b.id));
        instances.dedup_by(|a, b| a.id == b.id);
        Ok(instances)
    }

    async fn delete(&self, provider_id: &ProviderId) -> Result<()> {
        let not_found = || Error::NotFound {
            provider_id: provider_id.to_string(),
        };
        let id = provider_id.instance_id();
        let out = self
            .ec2
            .terminate_instances()
            .instance_ids(id)
            .send()
            .await
            .map_err(
                |e| match from_sdk(&format!("TerminateInstances {id}"), &e, &[]) {
                    Error::NotFound { .. } => not_found(),
                    other => other,
                },
            )?;
        let previous = out
            .terminating_instances()
            .iter()
            .find(|c| c.instance_id() == Some(id))
            .and_then(|c| c.previous_state())
            .and_then(|s| s.name());
        match previous {
            None | Some(InstanceStateName::Terminated) => Err(not_found()),
            Some(_) => Ok(()),
        }
    }

    async fn tag(&self, provider_id: &ProviderId, tags: &cloud::Tags) -> Result<()> {
        let id = provider_id.instance_id();
        let mut req = self.ec2.create_tags().resources(id);
        for (k, v) in tags {
            req = req.tags(aws_sdk_ec2::types::Tag::builder().key(k).value(v).build());
        }
        req.send()
            .await
            .map_err(|e| match from_sdk(&format!("CreateTags {id}"), &e, &[]) {
                Error::NotFound { .. } => Error::NotFound {
                    provider_id: provider_id.to_string(),
                },
                other => other,
            })?;
        Ok(())
    }

    async fn instance_types(&self) -> Result<Catalog> {
        Ok(self.catalog_facts().await?.to_catalog())
    }

    /// One DescribeInstanceTypes call for `name`; the type comes without offerings (capacity
    /// and labels do not depend on them). EC2 refuses an unknown name
    /// (`InvalidInstanceType`), which is `None` here.
    async fn instance_type(&self, name: &str) -> Result<Option<cloud::InstanceType>> {
        let out = self
            .ec2
            .describe_instance_types()
            .instance_types(Ec2InstanceType::from(name))
            .send()
            .await;
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                let err = from_sdk("DescribeInstanceTypes", &e, &[]);
                if matches!(err, Error::InvalidRequest { .. }) {
                    return Ok(None);
                }
                return Err(err);
            }
        };
        Ok(out
            .instance_types()
            .iter()
            .filter_map(crate::catalog::info)
            .find(|i| i.name == name)
            .and_then(|i| common::ec2::instance_type(&i, &self.config.region, Vec::new())))
    }

    async fn collect_node_classes(&self, classes: &[cloud::NodeClassSpec]) -> Result<Vec<String>> {
        let cluster = &self.config.cluster.name;
        let region = &self.config.region;
        let mut keep: BTreeSet<String> = classes
            .iter()
            .filter(|c| c.role.is_some())
            .map(|c| instance_profile::profile_name(cluster, region, &c.name))
            .collect();
        // Instances launched with a profile keep it until they are gone.
        let mut pages = self
            .ec2
            .describe_instances()
            .filters(
                Filter::builder()
                    .name(format!("tag:{TAG_CLUSTER_PREFIX}{cluster}"))
                    .values("owned")
                    .build(),
            )
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| from_sdk("DescribeInstances of the cluster", &e, &[]))?;
            for i in page.reservations().iter().flat_map(|r| r.instances()) {
                if i.state().and_then(|s| s.name()) == Some(&InstanceStateName::Terminated) {
                    continue;
                }
                if let Some(arn) = i.iam_instance_profile().and_then(|p| p.arn()) {
                    keep.insert(arn.rsplit('/').next().unwrap_or(arn).to_string());
                }
            }
        }
        let deleted = instance_profile::collect(&self.iam, cluster, region, &keep)
            .await
            .map_err(profile_error)?;
        if !deleted.is_empty() {
            self.lock_profiles()
                .retain(|_, name| !deleted.contains(name));
            tracing::info!(profiles = ?deleted, "Instance profiles of deleted EC2NodeClasses removed");
        }
        Ok(deleted)
    }

    async fn resolve_node_class(
        &self,
        class: &cloud::NodeClassSpec,
    ) -> Result<cloud::NodeClassResolution> {
        let mut r = resolve::resolution(&self.ec2, &self.ssm, &self.config, class).await?;
        if r.instance_profile.is_ok() {
            r.instance_profile = self.profile_status(class).await?;
        }
        if let Ok(subnets) = &r.subnets {
            self.zones
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(subnets.iter().map(|s| s.zone.clone()));
        }
        Ok(r)
    }

    async fn catalog_facts(&self) -> Result<cloud::CatalogFacts> {
        // DescribeSpotPriceHistory takes a wall time (prices in effect from then on): the
        // adapter's edge, not a decision.
        #[allow(clippy::disallowed_methods)]
        let now = aws_sdk_ec2::primitives::DateTime::from(std::time::SystemTime::now());
        let live = self.on_demand_prices().await;
        crate::catalog::read(
            &self.ec2,
            &self.config.region,
            &self.known_zones(),
            now,
            live.as_ref(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graviton_types_are_arm64() {
        assert_eq!(guess_architecture("m7g.large"), "arm64");
        assert_eq!(guess_architecture("c6gd.xlarge"), "arm64");
        assert_eq!(guess_architecture("t4g.micro"), "arm64");
        assert_eq!(guess_architecture("m5.large"), "x86_64");
        assert_eq!(guess_architecture("g5.xlarge"), "x86_64");
        assert_eq!(guess_architecture("m7i.large"), "x86_64");
    }

    #[test]
    fn gpu_and_neuron_families_are_guessed_by_name() {
        assert_eq!(guess_hardware("g5.xlarge").1, Variant::Nvidia);
        assert_eq!(guess_hardware("p4d.24xlarge").1, Variant::Nvidia);
        assert_eq!(
            guess_hardware("g5g.xlarge"),
            ("arm64".into(), Variant::Nvidia)
        );
        assert_eq!(guess_hardware("inf2.xlarge").1, Variant::Neuron);
        assert_eq!(guess_hardware("trn1.2xlarge").1, Variant::Neuron);
        assert_eq!(guess_hardware("m5.large").1, Variant::Standard);
    }

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
