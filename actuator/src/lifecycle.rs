//! The NodeClaim lifecycle, as Karpenter users see it, driven from the ledger.
//!
//! - [`nodeclaim`]: the `karpenter.sh/v1` NodeClaim is created (or adopted) BEFORE the launch,
//!   by the worker's [`crate::worker::Lifecycle::before_launch`] hook ([`NodeClaims`]), and its
//!   status conditions.
//! - After the launch a [`Controller`] pass, every [`Options::interval`], compares each claim of
//!   the ledger with its NodeClaim and its Node and takes the next step:
//!   `launched` → status `Launched` (providerID, imageID, capacity, allocatable, offering
//!   labels) → [`registration`] (`registered`; the instance then [`tagging`]) →
//!   [`initialization`] (`initialized`);
//!   [`liveness`] (no Node within the registration timeout → `terminating` → `failed`);
//!   a NodeClaim or a Node deleted by a user → [`termination`] (`terminating` → `terminated`,
//!   finalizers released); a terminal claim's leftover NodeClaim is removed.
//! - A NodeClaim a user created is recorded for launch like the planner's ([`adopt`]).
//! - Garbage collection ([`gc`]) runs from the same loop.
//!
//! Each step leases the one claim it changes ([`Ledger::acquire_claim`], under its own lease
//! owner, so the launch worker and other replicas never act on it at the same time) and writes
//! the new state BEFORE acting on Kubernetes or the cloud; every action is idempotent, so a
//! crash between the write and the action is repaired by the next pass (registration re-syncs
//! a Node missing `karpenter.sh/registered`, termination repeats until the instance is gone).
//! Claims with nothing to do are only read: a resting claim costs no ledger write.
//!
//! Why not the worker's round-based [`crate::worker::Lifecycle::advance`]: it leases every claim
//! in the hooked states each round and writes a history entry for each that has nothing to do,
//! so resting `initialized` claims would fill the history and the batch (starving new launches).

pub mod adopt;
pub mod drain;
pub mod gc;
pub mod initialization;
pub mod liveness;
pub mod nodeclaim;
pub mod registration;
pub mod registration_health;
pub mod tagging;
pub mod termination;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cloud::{Catalog, CloudProvider, InstanceState, ProviderId};
use crds::{ConditionStatus, NodeClaim, NodeClaimStatus, Quantity, ResourceList};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::sync::{Mutex, watch};

use crate::ledger::{self, ClaimRecord, ClaimState, Ledger, Transition};
use crate::metrics::Metrics;
use nodeclaim::{
    INITIALIZED, INITIALIZED_LABEL, INSTANCE_TERMINATING, LAUNCHED, REGISTERED,
    TERMINATION_FINALIZER, is_true, rfc3339, set_condition, set_ready,
};
use service_shell::backoff::Backoff;
use service_shell::clock::{Clock, millis};
use termination::Cause;

pub use nodeclaim::NodeClaims;

/// Conflicts (the Node written by its kubelet meanwhile) a Node sync re-reads and retries at
/// once before leaving the step to the next pass.
const SYNC_CONFLICT_RETRIES: u32 = 3;

/// Errors of a lifecycle step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("{what}")]
    Kube {
        /// What was being done, naming the object.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The ledger failed.
    #[error("ledger call failed")]
    Ledger(#[from] ledger::Error),
    /// A cloud call failed.
    #[error("{what}")]
    Cloud {
        /// What was being done, naming the instance.
        what: String,
        /// The provider's error.
        #[source]
        source: cloud::Error,
    },
}

/// Result of a lifecycle step.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn kube_err(what: String) -> impl FnOnce(kube::Error) -> Error {
    move |source| Error::Kube { what, source }
}

pub(crate) fn cloud_err(what: String) -> impl FnOnce(cloud::Error) -> Error {
    move |source| Error::Cloud { what, source }
}

/// How the lifecycle controller runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Lease owner of its steps (distinct from the launch worker's).
    pub owner: String,
    /// Time between passes.
    pub interval: Duration,
    /// A launched claim with no Node after this long is terminated and failed.
    pub registration_timeout: Duration,
    /// Lease length of a step.
    pub lease: Duration,
    /// Garbage collection.
    pub gc: gc::Options,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            owner: "actuator-lifecycle".into(),
            interval: Duration::from_secs(2),
            registration_timeout: liveness::REGISTRATION_TIMEOUT,
            lease: Duration::from_secs(30),
            gc: gc::Options::default(),
        }
    }
}

/// The loop name of the instance types read in `dovetail_actuator_loop_failures_total`.
pub const INSTANCE_TYPES_LOOP: &str = "instance_types";

/// The instance types read once per process, and the backoff of failed reads.
struct CatalogRead {
    read: Option<Catalog>,
    /// Until when no read is tried, and the last error.
    failed: Option<(tokio::time::Instant, cloud::Error)>,
    backoff: Backoff,
}

impl Default for CatalogRead {
    fn default() -> Self {
        Self {
            read: None,
            failed: None,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
        }
    }
}

/// The NodeClaim lifecycle controller (see the module docs).
#[derive(Clone)]
pub struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) ledger: Arc<dyn Ledger>,
    pub(crate) cloud: Arc<dyn CloudProvider>,
    pub(crate) clock: Clock,
    pub(crate) metrics: Metrics,
    pub(crate) options: Options,
    catalog: Arc<Mutex<CatalogRead>>,
    /// The client evictions go through: built with kube's default retry off, so that a 429 of a
    /// PodDisruptionBudget comes back at once and [`drain`] owns the backoff.
    pub(crate) evictions: kube::Client,
    pub(crate) backoff: Arc<std::sync::Mutex<drain::Backoff>>,
    /// Registration outcomes per NodePool (`NodeRegistrationHealthy`).
    registration: Arc<registration_health::RegistrationHealth>,
    /// Writes the Events Karpenter's termination writes (`TerminationGracePeriodExpiring`,
    /// `Disrupted`).
    pub(crate) recorder: kube::runtime::events::Recorder,
}

fn deleting(nc: &NodeClaim) -> bool {
    nc.metadata.deletion_timestamp.is_some()
}

fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

fn cpu(millicores: i64) -> Quantity {
    if millicores % 1000 == 0 {
        Quantity::String((millicores / 1000).to_string())
    } else {
        Quantity::String(format!("{millicores}m"))
    }
}

fn bytes(b: i64) -> Quantity {
    for (unit, size) in [("Gi", 1i64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if b != 0 && b % size == 0 {
            return Quantity::String(format!("{}{unit}", b / size));
        }
    }
    Quantity::String(b.to_string())
}

/// A catalog resource amount (millicores, bytes, pods, extended counts in milli-units) as a
/// Kubernetes resource list.
macro_rules! resource_list {
    ($r:expr) => {{
        let r = $r;
        let mut m = ResourceList::new();
        m.insert("cpu".into(), cpu(r.cpu));
        m.insert("memory".into(), bytes(r.memory));
        m.insert("pods".into(), Quantity::String(r.pods.to_string()));
        if r.ephemeral_storage != 0 {
            m.insert("ephemeral-storage".into(), bytes(r.ephemeral_storage));
        }
        for (k, v) in &r.extended {
            m.insert(k.clone(), cpu(*v));
        }
        m
    }};
}

/// What one pass did, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Claims moved, as `(claim, new state)`.
    pub steps: Vec<(String, ClaimState)>,
    /// Claims whose step failed, with the error.
    pub errors: Vec<(String, String)>,
}

// === impl Controller ===

impl Controller {
    /// A controller over the cluster behind `client`.
    pub fn new(
        client: kube::Client,
        ledger: Arc<dyn Ledger>,
        cloud: Arc<dyn CloudProvider>,
        clock: Clock,
        metrics: Metrics,
        options: Options,
    ) -> Self {
        let recorder = kube::runtime::events::Recorder::new(
            client.clone(),
            kube::runtime::events::Reporter {
                controller: "dovetail-actuator".into(),
                instance: Some(options.owner.clone()),
            },
        );
        Self {
            evictions: client.clone(),
            recorder,
            client,
            ledger,
            cloud,
            clock,
            metrics,
            options,
            catalog: Arc::default(),
            backoff: Arc::default(),
            registration: Arc::default(),
        }
    }

    /// Sends evictions through `client`, which must have kube's default retry turned off
    /// (`kube::Config::default_retry = false`): kube retries a 429 itself for minutes, which
    /// would hold a whole lifecycle pass on one PodDisruptionBudget.
    pub fn with_eviction_client(mut self, client: kube::Client) -> Self {
        self.evictions = client;
        self
    }

    /// The Kubernetes client this controller acts through (node repair shares it).
    pub fn kube_client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The NodeClaim-creating launch hook for the worker, sharing this controller's client.
    pub fn launch_hook(&self) -> NodeClaims {
        NodeClaims::new(self.client.clone(), self.clock.clone()).with_metrics(self.metrics.clone())
    }

    /// Runs passes (and garbage collection every [`gc::Options::interval`]) until
    /// `shutdown` turns true, then releases the leases it holds.
    pub async fn run(&self, mut shutdown: watch::Receiver<bool>) {
        // The instance types are read once per process (`Controller::catalog`); read
        // them now, not when the first burst of launches needs them: a pass waits on the read
        // (many DescribeInstanceTypes pages), and the registrations of the burst with it.
        let warm = self.clone();
        tokio::spawn(async move {
            if let Err(e) = warm.catalog().await {
                tracing::debug!(error = %nodeclaim::error_chain(&e), "Instance types not read yet; read when first needed");
            }
        });
        let mut next_gc = tokio::time::Instant::now();
        loop {
            if *shutdown.borrow() {
                break;
            }
            match self.pass().await {
                Ok(p) => {
                    for (claim, e) in &p.errors {
                        tracing::warn!(%claim, error = %e, "Lifecycle step failed; retrying next pass");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %nodeclaim::error_chain(&e), "Lifecycle pass failed")
                }
            }
            if tokio::time::Instant::now() >= next_gc {
                if let Err(e) = gc::collect(self).await {
                    tracing::warn!(error = %nodeclaim::error_chain(&e), "Garbage collection failed");
                }
                next_gc = tokio::time::Instant::now() + self.options.gc.interval;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.options.interval) => {}
                _ = shutdown.changed() => {}
            }
        }
        if let Err(e) = self.ledger.release_all(&self.options.owner).await {
            tracing::warn!(error = %e, "Lifecycle leases not released; they expire");
        }
    }

    fn nodeclaims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// One pass over every claim of the ledger (see the module docs).
    ///
    /// # Errors
    /// When the ledger, the NodeClaims or the Nodes cannot be read; a failing step is reported
    /// in [`Pass::errors`] and the others go on.
    pub async fn pass(&self) -> Result<Pass> {
        let claims = self.ledger.claims().await?;
        let ncs: BTreeMap<String, NodeClaim> = self
            .nodeclaims()
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing NodeClaims".into()))?
            .items
            .into_iter()
            .filter_map(|nc| Some((nc.metadata.name.clone()?, nc)))
            .collect();
        let nodes = self
            .nodes()
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing Nodes".into()))?
            .items;
        let mut pass = Pass::default();
        match self.adopt(&ncs, &claims).await {
            Ok(names) => {
                for n in names {
                    pass.steps.push((n, ClaimState::Requested));
                }
            }
            Err(e) => pass
                .errors
                .push(("user NodeClaims".into(), nodeclaim::error_chain(&e))),
        }
        for claim in &claims {
            let nc = ncs.get(&claim.name);
            let of_claim = |n: &&Node| {
                claim
                    .instance
                    .as_ref()
                    .is_some_and(|i| provider_id(n) == Some(i.provider_id.as_str()))
            };
            let node = nodes
                .iter()
                .filter(of_claim)
                .find(|n| n.metadata.deletion_timestamp.is_none());
            // `kubectl delete node`: held by the termination finalizer (see [`termination`]).
            let node_deleted = nodes
                .iter()
                .filter(of_claim)
                .find(|n| n.metadata.deletion_timestamp.is_some() && termination::has_finalizer(n));
            let r = match claim.state {
                ClaimState::Requested if nc.is_some_and(deleting) => {
                    self.begin_termination(claim, Cause::Deleted, "NodeClaim deleted before launch")
                        .await
                }
                ClaimState::Requested | ClaimState::Launching => Ok(None),
                ClaimState::Launched | ClaimState::Registered | ClaimState::Initialized
                    if node_deleted.is_some() =>
                {
                    let msg = format!(
                        "Node {} deleted",
                        node_deleted.map(node_name).unwrap_or_default()
                    );
                    self.begin_termination(claim, Cause::Deleted, &msg).await
                }
                ClaimState::Launched | ClaimState::Registered | ClaimState::Initialized => {
                    self.step(claim, nc, node).await
                }
                ClaimState::Terminating => self.terminate(&claim.name).await,
                ClaimState::Terminated | ClaimState::Failed => {
                    self.sweep(claim, nc).await.map(|()| None)
                }
            };
            match r {
                Ok(Some(s)) => pass.steps.push((claim.name.clone(), s)),
                Ok(None) => {}
                Err(e) => pass
                    .errors
                    .push((claim.name.clone(), nodeclaim::error_chain(&e))),
            }
        }
        Ok(pass)
    }

    /// Leases `claim` and writes `from → to`; `None` when another worker holds it or it moved.
    pub(crate) async fn write(
        &self,
        claim: &ClaimRecord,
        to: ClaimState,
        detail: String,
        failure: Option<String>,
        release: bool,
    ) -> Result<bool> {
        let now = self.clock.now_ms();
        let owner = &self.options.owner;
        let Some(held) = self
            .ledger
            .acquire_claim(owner, &claim.name, now, millis(self.options.lease))
            .await?
        else {
            return Ok(false);
        };
        if held.state != claim.state {
            return Ok(false);
        }
        let mut t = Transition::new(&claim.name, owner, claim.state, to, detail);
        t.failure_reason = failure;
        t.release = release;
        match self.ledger.transition(&t, self.clock.now_ms()).await {
            Ok(()) => Ok(true),
            Err(ledger::Error::LeaseLost { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Updates the NodeClaim's status with `f`, writing it only when `f` changed something.
    /// `nc` becomes the NodeClaim as stored, so that the next update starts from it.
    async fn update_status(
        &self,
        nc: &mut NodeClaim,
        f: impl FnOnce(&mut NodeClaimStatus, &str) -> bool,
    ) -> Result<()> {
        let mut status = nc.status.clone().unwrap_or_default();
        let now = rfc3339(self.clock.now_ms());
        let mut changed = f(&mut status, &now);
        changed |= set_ready(status.conditions.get_or_insert_with(Vec::new), &now);
        if changed {
            let name = nc.metadata.name.clone().unwrap_or_default();
            *nc = nodeclaim::patch_status(&self.nodeclaims(), &name, &status).await?;
        }
        Ok(())
    }

    async fn step(
        &self,
        claim: &ClaimRecord,
        nc: Option<&NodeClaim>,
        node: Option<&Node>,
    ) -> Result<Option<ClaimState>> {
        let Some(nc) = nc else {
            // Gone without our finalizer being released (removed by hand, or launched before
            // the lifecycle was on): recreate it rather than terminate a running instance on
            // the absence of an object. A user's deletion shows as a deletionTimestamp.
            tracing::warn!(claim = %claim.name, "NodeClaim missing; recreating it");
            self.launch_hook().ensure(claim).await?;
            return Ok(None);
        };
        let mut nc = nc.clone();
        let nc = &mut nc;
        if deleting(nc) {
            return self
                .begin_termination(claim, Cause::Deleted, "NodeClaim deleted")
                .await;
        }
        if let Some(node) = node
            && claim.state != ClaimState::Launched
        {
            self.ensure_node_finalizer(node).await?;
            self.tag_instance(claim, nc, node).await?;
        }
        match claim.state {
            ClaimState::Launched => {
                self.record_launch(claim, nc).await?;
                match node {
                    Some(node) => self.register(claim, nc, node).await,
                    None => self.await_registration(claim, nc).await,
                }
            }
            ClaimState::Registered => {
                let Some(node) = node else {
                    return Ok(None);
                };
                // Repairs a registration whose Node patch was lost (crash, conflict).
                self.sync_node(nc, node).await?;
                self.update_status(nc, |s, now| {
                    s.node_name = Some(node_name(node));
                    set_condition(
                        s.conditions.get_or_insert_with(Vec::new),
                        REGISTERED,
                        ConditionStatus::True,
                        REGISTERED,
                        "",
                        now,
                    )
                })
                .await?;
                match initialization::blocker(node, nc) {
                    Some((reason, message)) => {
                        self.update_status(nc, |s, now| {
                            set_condition(
                                s.conditions.get_or_insert_with(Vec::new),
                                INITIALIZED,
                                ConditionStatus::Unknown,
                                reason,
                                &message,
                                now,
                            )
                        })
                        .await?;
                        Ok(None)
                    }
                    None => self.initialize(claim, nc, node).await,
                }
            }
            _ => {
                if let Some(node) = node {
                    self.mark_initialized(nc, node).await?;
                }
                Ok(None)
            }
        }
    }

    /// The instance types, read from the cloud once. After a failed read the next is tried
    /// only when its backoff has passed (1 s doubling to 5 min, jittered); meanwhile every
    /// caller gets the last error at once, so that a failing cloud is not asked once per claim
    /// per pass.
    async fn catalog(&self) -> Result<Catalog> {
        let mut c = self.catalog.lock().await;
        if let Some(read) = c.read.as_ref() {
            return Ok(read.clone());
        }
        let now = tokio::time::Instant::now();
        if let Some((until, e)) = &c.failed
            && now < *until
        {
            return Err(cloud_err(format!(
                "reading the instance types (backing off for {:?} after {} failures)",
                *until - now,
                c.backoff.failures()
            ))(e.clone()));
        }
        match self.cloud.instance_types().await {
            Ok(fresh) => {
                if c.backoff.failures() > 0 {
                    tracing::info!(failures = c.backoff.failures(), "Instance types read");
                    self.metrics.loop_recovered(INSTANCE_TYPES_LOOP);
                }
                c.read = Some(fresh.clone());
                c.failed = None;
                c.backoff.succeeded();
                Ok(fresh)
            }
            Err(e) => {
                let wait = c
                    .backoff
                    .failed_at_least(e.retry_after().unwrap_or_default());
                self.metrics
                    .loop_failed(INSTANCE_TYPES_LOOP, e.reason(), wait);
                tracing::warn!(error = %e, reason = e.reason(), failures = c.backoff.failures(), retry_in = ?wait, "Reading the instance types failed; backing off");
                c.failed = Some((now + wait, e.clone()));
                Err(cloud_err("reading the instance types".into())(e))
            }
        }
    }

    /// Writes what the launch produced onto the NodeClaim (once): the offering labels and the
    /// instance type's labels (user labels win), the instance's subnet and security groups
    /// (`nodeclaim::instance_annotations`; the EC2NodeClass status pass keeps them current),
    /// providerID, imageID, capacity and allocatable, and `Launched=True`.
    async fn record_launch(&self, claim: &ClaimRecord, nc: &mut NodeClaim) -> Result<()> {
        let Some(inst) = &claim.instance else {
            return Ok(());
        };
        let status = nc.status.as_ref();
        if is_true(status, LAUNCHED)
            && status.and_then(|s| s.provider_id.as_deref()) == Some(inst.provider_id.as_str())
        {
            return Ok(());
        }
        let catalog = self.catalog().await?;
        let itype = catalog
            .instance_types
            .iter()
            .find(|t| t.name == inst.instance_type);
        let mut labels: BTreeMap<String, String> = itype
            .map(|t| t.labels.clone().into_iter().collect())
            .unwrap_or_default();
        labels.insert(
            nodeclaim::INSTANCE_TYPE_LABEL.into(),
            inst.instance_type.clone(),
        );
        labels.insert(nodeclaim::ZONE_LABEL.into(), inst.zone.clone());
        labels.insert(
            nodeclaim::CAPACITY_TYPE_LABEL.into(),
            inst.capacity_type.clone(),
        );
        let existing = nc.metadata.labels.clone().unwrap_or_default();
        labels.retain(|k, _| !existing.contains_key(k));
        // What EC2 says about the instance now: its image, subnet and security groups.
        let described = match inst.provider_id.parse::<ProviderId>() {
            Ok(pid) => self.cloud.get(&pid).await.ok(),
            Err(_) => None,
        };
        let mut annotations = described
            .as_ref()
            .map(nodeclaim::instance_annotations)
            .unwrap_or_default();
        let present = nc.metadata.annotations.clone().unwrap_or_default();
        annotations.retain(|k, v| present.get(k) != Some(v));
        let name = claim.name.clone();
        if !labels.is_empty() || !annotations.is_empty() {
            *nc = self
                .nodeclaims()
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"metadata": {"labels": labels, "annotations": annotations}}),
                    ),
                )
                .await
                .map_err(kube_err(format!("labelling NodeClaim {name}")))?;
        }
        let image_id = described.and_then(|i| i.image_id);
        self.update_status(nc, |s, now| {
            s.provider_id = Some(inst.provider_id.clone());
            s.image_id = image_id.or(s.image_id.take());
            if let Some(t) = itype {
                s.capacity = Some(resource_list!(&t.capacity));
                s.allocatable = Some(resource_list!(&t.allocatable()));
            }
            set_condition(
                s.conditions.get_or_insert_with(Vec::new),
                LAUNCHED,
                ConditionStatus::True,
                LAUNCHED,
                "",
                now,
            );
            true
        })
        .await
    }

    /// No Node yet: `Registered=Unknown/NodeNotFound`, or liveness once the timeout passed.
    async fn await_registration(
        &self,
        claim: &ClaimRecord,
        nc: &mut NodeClaim,
    ) -> Result<Option<ClaimState>> {
        let now = self.clock.now_ms();
        // `updated_at` is at or after the launch; only then read the history for the exact time.
        if liveness::timed_out(claim.updated_at, now, self.options.registration_timeout) {
            let events = self.ledger.events(&claim.name).await?;
            let at = liveness::launched_at(&events).unwrap_or(claim.updated_at);
            if liveness::timed_out(at, now, self.options.registration_timeout) {
                let msg = format!(
                    "no Node registered within {:?} of the launch",
                    self.options.registration_timeout
                );
                return self
                    .begin_termination(claim, Cause::RegistrationTimeout, &msg)
                    .await;
            }
        }
        self.update_status(nc, |s, now| {
            set_condition(
                s.conditions.get_or_insert_with(Vec::new),
                REGISTERED,
                ConditionStatus::Unknown,
                "NodeNotFound",
                "Node not registered with cluster",
                now,
            )
        })
        .await?;
        Ok(None)
    }

    async fn sync_node(&self, nc: &NodeClaim, node: &Node) -> Result<bool> {
        let name = node_name(node);
        let mut current = node.clone();
        let mut conflicts = 0;
        loop {
            let Some(patch) = registration::sync_patch(nc, &current) else {
                return Ok(false);
            };
            match self
                .nodes()
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => return Ok(true),
                // The kubelet wrote the Node since it was read (the patch carries its
                // resourceVersion): read it again and retry now rather than a pass later.
                Err(kube::Error::Api(s)) if s.code == 409 && conflicts < SYNC_CONFLICT_RETRIES => {
                    conflicts += 1;
                    current = self
                        .nodes()
                        .get(&name)
                        .await
                        .map_err(kube_err(format!("reading Node {name}")))?;
                }
                Err(e) => {
                    return Err(kube_err(format!("syncing Node {name} with its NodeClaim"))(
                        e,
                    ));
                }
            }
        }
    }

    async fn register(
        &self,
        claim: &ClaimRecord,
        nc: &mut NodeClaim,
        node: &Node,
    ) -> Result<Option<ClaimState>> {
        let name = node_name(node);
        if !self
            .write(
                claim,
                ClaimState::Registered,
                format!("node {name}"),
                None,
                true,
            )
            .await?
        {
            return Ok(None);
        }
        self.sync_node(nc, node).await?;
        self.update_status(nc, |s, now| {
            s.node_name = Some(name.clone());
            set_condition(
                s.conditions.get_or_insert_with(Vec::new),
                REGISTERED,
                ConditionStatus::True,
                REGISTERED,
                "",
                now,
            )
        })
        .await?;
        let label = |k: &str| {
            nc.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(k))
                .or_else(|| node.metadata.labels.as_ref().and_then(|l| l.get(k)))
                .cloned()
                .unwrap_or_default()
        };
        self.metrics.node_created(
            &label(common::labels::NODEPOOL),
            &label("topology.kubernetes.io/zone"),
        );
        self.registration
            .record(
                &self.client,
                &claim.node_pool,
                true,
                &rfc3339(self.clock.now_ms()),
            )
            .await;
        tracing::info!(claim = %claim.name, node = %name, "Registered");
        Ok(Some(ClaimState::Registered))
    }

    async fn initialize(
        &self,
        claim: &ClaimRecord,
        nc: &mut NodeClaim,
        node: &Node,
    ) -> Result<Option<ClaimState>> {
        let name = node_name(node);
        if !self
            .write(
                claim,
                ClaimState::Initialized,
                format!("node {name}"),
                None,
                true,
            )
            .await?
        {
            return Ok(None);
        }
        self.mark_initialized(nc, node).await?;
        tracing::info!(claim = %claim.name, node = %name, "Initialized");
        Ok(Some(ClaimState::Initialized))
    }

    /// Labels the Node `karpenter.sh/initialized=true` and sets `Initialized=True` (each only
    /// when missing).
    async fn mark_initialized(&self, nc: &mut NodeClaim, node: &Node) -> Result<()> {
        let labelled = node
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get(INITIALIZED_LABEL).is_some_and(|v| v == "true"));
        if !labelled {
            let name = node_name(node);
            self.nodes()
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {INITIALIZED_LABEL: "true"}}})),
                )
                .await
                .map_err(kube_err(format!("labelling Node {name} initialized")))?;
        }
        self.update_status(nc, |s, now| {
            set_condition(
                s.conditions.get_or_insert_with(Vec::new),
                INITIALIZED,
                ConditionStatus::True,
                INITIALIZED,
                "",
                now,
            )
        })
        .await
    }

    /// Writes `terminating` with `cause` (before anything is deleted), then starts terminating.
    pub(crate) async fn begin_termination(
        &self,
        claim: &ClaimRecord,
        cause: Cause,
        message: &str,
    ) -> Result<Option<ClaimState>> {
        let failure = (cause.end_state() == ClaimState::Failed).then(|| cause.detail(message));
        if !self
            .write(
                claim,
                ClaimState::Terminating,
                cause.detail(message),
                failure,
                false,
            )
            .await?
        {
            return Ok(None);
        }
        tracing::info!(claim = %claim.name, cause = cause.as_str(), message, "Terminating");
        if cause == Cause::RegistrationTimeout {
            // Karpenter's liveness controller counts the claim it deletes as disrupted.
            self.metrics.nodeclaim_disrupted(
                "registration_timeout",
                &claim.node_pool,
                "",
                "",
                "graceful",
            );
            self.registration
                .record(
                    &self.client,
                    &claim.node_pool,
                    false,
                    &rfc3339(self.clock.now_ms()),
                )
                .await;
        }
        if cause.end_state() == ClaimState::Failed {
            self.metrics.failure(cause.as_str());
        }
        // `terminating` is written: whatever happens now, passes carry the termination on.
        match self.terminate(&claim.name).await {
            Ok(end) => Ok(end.or(Some(ClaimState::Terminating))),
            Err(e) => {
                tracing::warn!(claim = %claim.name, error = %nodeclaim::error_chain(&e), "Termination step failed; retrying next pass");
                Ok(Some(ClaimState::Terminating))
            }
        }
    }

    /// The termination steps of a `terminating` claim (see [`termination`]); returns the final
    /// state once written, `None` while the instance is still shutting down.
    async fn terminate(&self, name: &str) -> Result<Option<ClaimState>> {
        let now = self.clock.now_ms();
        let owner = &self.options.owner;
        let Some(claim) = self
            .ledger
            .acquire_claim(owner, name, now, millis(self.options.lease))
            .await?
        else {
            return Ok(None);
        };
        if claim.state != ClaimState::Terminating {
            return Ok(None);
        }
        let mut nc = self
            .nodeclaims()
            .get_opt(name)
            .await
            .map_err(kube_err(format!("reading NodeClaim {name}")))?;
        if let Some(inst) = &claim.instance {
            let nodes = self
                .nodes()
                .list(&ListParams::default())
                .await
                .map_err(kube_err("listing Nodes".into()))?
                .items;
            let of_claim: Vec<&Node> = nodes
                .iter()
                .filter(|n| provider_id(n) == Some(inst.provider_id.as_str()))
                .collect();
            // Drain first (every path that deletes a NodeClaim or a Node comes through here),
            // unless the history says this termination drained already.
            if let Some(node) = of_claim
                .iter()
                .find(|n| n.metadata.deletion_timestamp.is_none())
                .or(of_claim.first())
            {
                let progress = drain::Progress::of(&self.ledger.events(name).await?);
                if !progress.done {
                    let grace = nc
                        .as_ref()
                        .and_then(|nc| nc.spec.termination_grace_period.as_deref())
                        .and_then(|g| common::duration::parse_std_duration(g).ok())
                        .or_else(|| {
                            claim
                                .spec
                                .termination_grace_period
                                .and_then(|s| u64::try_from(s).ok())
                                .map(Duration::from_secs)
                        });
                    // Node repair's `karpenter.sh/nodeclaim-termination-timestamp` ends the
                    // drain at that time (see [`crate::repair`]).
                    let grace = termination::effective_grace(
                        nc.as_ref(),
                        grace,
                        progress.started_at.unwrap_or(now),
                    );
                    if !self
                        .drain(name, node, nc.as_ref(), grace, &progress)
                        .await?
                    {
                        return Ok(None);
                    }
                }
            }
            for n in of_claim
                .iter()
                .filter(|n| n.metadata.deletion_timestamp.is_none())
            {
                let node = node_name(n);
                match self.nodes().delete(&node, &DeleteParams::default()).await {
                    Ok(_) => tracing::info!(claim = %name, %node, "Deleted the Node"),
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(kube_err(format!("deleting Node {node}"))(e)),
                }
            }
            let pid: ProviderId = match inst.provider_id.parse() {
                Ok(p) => p,
                Err(e) => {
                    return Err(cloud_err(format!("claim {name}: provider ID"))(
                        cloud::Error::ProviderId(e),
                    ));
                }
            };
            match self.cloud.delete(&pid).await {
                Ok(()) => {
                    // Shutting down: look again next pass, until the cloud reports it gone.
                    if let Some(nc) = &mut nc {
                        self.update_status(nc, |s, now| {
                            set_condition(
                                s.conditions.get_or_insert_with(Vec::new),
                                INSTANCE_TERMINATING,
                                ConditionStatus::True,
                                INSTANCE_TERMINATING,
                                "",
                                now,
                            )
                        })
                        .await?;
                    }
                    let gone = matches!(
                        self.cloud.get(&pid).await,
                        Ok(cloud::Instance {
                            state: InstanceState::Terminated,
                            ..
                        }) | Err(cloud::Error::NotFound { .. })
                    );
                    if !gone {
                        return Ok(None);
                    }
                }
                Err(cloud::Error::NotFound { .. }) => {}
                Err(e) => return Err(cloud_err(format!("terminating instance {pid}"))(e)),
            }
            // The instance is gone: its Nodes may go too.
            self.release_nodes(&of_claim).await?;
        }
        if let Some(nc) = &nc {
            self.release_nodeclaim(nc).await?;
        }
        let cause = Cause::of(&self.ledger.events(name).await?);
        let end = cause.end_state();
        let mut t = Transition::new(
            name,
            owner,
            ClaimState::Terminating,
            end,
            format!("{}: instance gone, NodeClaim released", cause.as_str()),
        );
        t.release = true;
        match self.ledger.transition(&t, self.clock.now_ms()).await {
            Ok(()) => {}
            Err(ledger::Error::LeaseLost { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        tracing::info!(claim = %name, state = %end, "Terminated");
        Ok(Some(end))
    }

    /// Deletes the NodeClaim (when it is not being deleted yet) and removes the
    /// `karpenter.sh/termination` finalizer, so that it goes away.
    async fn release_nodeclaim(&self, nc: &NodeClaim) -> Result<()> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let api = self.nodeclaims();
        let mut current = nc.clone();
        let nc = &mut current;
        if !deleting(nc) {
            match api.delete(&name, &DeleteParams::default()).await {
                // Held by finalizers: it is now being deleted, with a new resourceVersion.
                Ok(res) => match res.left() {
                    Some(held) => *nc = held,
                    None => return Ok(()),
                },
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(kube_err(format!("deleting NodeClaim {name}"))(e)),
            }
        }
        let finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
        if finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
            let rest: Vec<&String> = finalizers
                .iter()
                .filter(|f| *f != TERMINATION_FINALIZER)
                .collect();
            let patch = json!({"metadata": {
                "resourceVersion": nc.metadata.resource_version,
                "finalizers": if rest.is_empty() { serde_json::Value::Null } else { json!(rest) },
            }});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => {
                    let label = |k: &str| crate::lifecycle::nodeclaim::label(nc, k);
                    self.metrics.nodeclaim_terminated(
                        &label(common::labels::NODEPOOL),
                        &label("karpenter.sh/capacity-type"),
                        &label("topology.kubernetes.io/zone"),
                    );
                    let now = self.clock.since_epoch().as_secs_f64();
                    let secs =
                        |t: &k8s_openapi::jiff::Timestamp| t.as_millisecond() as f64 / 1000.0;
                    let terminating = nc
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .and_then(|cs| cs.iter().find(|c| c.type_ == INSTANCE_TERMINATING))
                        .and_then(|c| {
                            c.last_transition_time
                                .parse::<k8s_openapi::jiff::Timestamp>()
                                .ok()
                        });
                    self.metrics.nodeclaim_termination_times(
                        &label(common::labels::NODEPOOL),
                        nc.metadata
                            .deletion_timestamp
                            .as_ref()
                            .map(|t| now - secs(&t.0)),
                        terminating.map(|t| now - secs(&t)),
                    );
                    tracing::info!(nodeclaim = %name, "Released the NodeClaim")
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    return Err(kube_err(format!(
                        "removing the finalizer of NodeClaim {name}"
                    ))(e));
                }
            }
        }
        Ok(())
    }

    /// A terminal claim's NodeClaim (a failed launch, or a crash before its release) goes away.
    async fn sweep(&self, claim: &ClaimRecord, nc: Option<&NodeClaim>) -> Result<()> {
        let Some(nc) = nc else {
            return Ok(());
        };
        tracing::info!(claim = %claim.name, state = %claim.state, "Removing the NodeClaim of a finished claim");
        self.release_nodeclaim(nc).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_written_like_kubernetes() {
        assert_eq!(cpu(2000), Quantity::String("2".into()));
        assert_eq!(cpu(1500), Quantity::String("1500m".into()));
        assert_eq!(bytes(8 << 30), Quantity::String("8Gi".into()));
        assert_eq!(bytes(3 << 20), Quantity::String("3Mi".into()));
        assert_eq!(bytes(1000), Quantity::String("1000".into()));
    }
}
