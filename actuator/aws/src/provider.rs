//! [`Ec2Provider`]: `cloud::CloudProvider` over EC2.
//!
//! `create` resolves the node class (subnets, security groups, AMIs, and for `role` the managed
//! instance profile, `crate::instance_profile`), then `fleet` renders the user data, makes sure
//! one launch template exists per AMI and max pods (from `hardware`) and sends one instant
//! CreateFleet with overrides for the offerings × their zones' subnets and the caller's client
//! token; `get`/`list` are DescribeInstances (`instances`), `delete` is TerminateInstances.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, InstanceStateName, InstanceType as Ec2InstanceType};
use cloud::{
    Catalog, CloudProvider, Error, Instance, LaunchRequest, ListFilter, ProviderId, Result,
    TAG_CLUSTER_PREFIX,
};

use crate::config::Config;
use crate::error::from_sdk;
use crate::instance_profile;
use crate::launch_template::Templates;
use crate::resolve::{self, Resolved};

mod fleet;
mod hardware;
mod instances;

pub use fleet::{MAX_OVERRIDES, client_token};
use hardware::Hardware;
use instances::convert;

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
