//! The NodeClaim lifecycle, as Karpenter users see it, driven from the ledger.
//!
//! - [`nodeclaim`]: the `karpenter.sh/v1` NodeClaim is created (or adopted) BEFORE the launch,
//!   by the worker's [`crate::worker::Lifecycle::before_launch`] hook ([`NodeClaims`]), and its
//!   status conditions.
//! - After the launch a [`Controller`] pass, every [`Options::interval`], compares each claim of
//!   the ledger with its NodeClaim and its Node and takes the next step:
//!   `launched` → status `Launched` (providerID, imageID, capacity, allocatable, offering
//!   labels: [`launched`]) → [`registration`] (`registered`; the instance then [`tagging`]) →
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
//! A pass steps up to [`PASS_CONCURRENCY`] claims at once (each step leases only its own
//! claim), so a burst's registrations do not queue behind each other.
//!
//! Why not the worker's round-based [`crate::worker::Lifecycle::advance`]: it leases every claim
//! in the hooked states each round and writes a history entry for each that has nothing to do,
//! so resting `initialized` claims would fill the history and the batch (starving new launches).

pub mod adopt;
pub mod drain;
pub mod gc;
pub mod initialization;
pub mod launched;
pub mod liveness;
pub mod nodeclaim;
pub mod registration;
pub mod registration_health;
pub mod tagging;
pub mod termination;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use cloud::CloudProvider;
use crds::{ConditionStatus, NodeClaim, NodeClaimStatus};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use tokio::sync::watch;

use crate::catalog::LiveCatalog;
use crate::ledger::{self, ClaimRecord, ClaimState, Ledger, Transition};
use crate::metrics::Metrics;
use launched::TypeReads;
use nodeclaim::{INITIALIZED, REGISTERED, rfc3339, set_condition, set_ready};
use service_shell::clock::{Clock, millis};
use termination::Cause;

pub use nodeclaim::NodeClaims;

/// Conflicts (the Node written by its kubelet meanwhile) a Node sync re-reads and retries at
/// once before leaving the step to the next pass.
const SYNC_CONFLICT_RETRIES: u32 = 3;

/// Claims a pass steps at the same time. Each step leases only its own claim, so the steps of a
/// burst's claims (registration: a ledger write, a Node patch, a NodeClaim status) overlap
/// rather than queue one behind the other, as Karpenter's NodeClaim lifecycle controller
/// reconciles NodeClaims concurrently.
pub const PASS_CONCURRENCY: usize = 32;

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

/// The NodeClaim lifecycle controller (see the module docs).
#[derive(Clone)]
pub struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) ledger: Arc<dyn Ledger>,
    pub(crate) cloud: Arc<dyn CloudProvider>,
    pub(crate) clock: Clock,
    pub(crate) metrics: Metrics,
    pub(crate) options: Options,
    /// The instance types read ([`launched`]).
    types: launched::SharedTypeReads,
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

/// True for a Node that registration has yet to sync: it still carries the
/// `karpenter.sh/unregistered` taint its user data registered it with, and no
/// `karpenter.sh/registered` label. Nodes Karpenter did not launch never carry the taint.
fn awaits_registration(node: &Node) -> bool {
    !registration::is_synced(node)
        && node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == nodeclaim::UNREGISTERED_TAINT))
}

/// Watches the Nodes and notifies `arrivals` whenever a change is seen to one that awaits
/// registration ([`awaits_registration`]) or is being deleted. Errors are retried with the
/// watcher's default backoff; the interval's passes go on meanwhile.
async fn node_arrivals(client: kube::Client, arrivals: Arc<tokio::sync::Notify>) {
    use kube::runtime::{WatchStreamExt, watcher};
    let stream = watcher(Api::<Node>::all(client), watcher::Config::default())
        .default_backoff()
        .touched_objects();
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(node)
                if awaits_registration(&node) || node.metadata.deletion_timestamp.is_some() =>
            {
                arrivals.notify_one();
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "Watching Nodes failed; retrying"),
        }
    }
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
            types: Arc::default(),
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

    /// Takes the instance types from the actuator's live catalog (the one planners are served),
    /// when there is one, instead of reading them from the cloud again.
    pub fn with_catalog_from(mut self, live: Option<Arc<LiveCatalog>>) -> Self {
        if let Some(live) = live {
            self.types = Arc::new(std::sync::Mutex::new(TypeReads::from_live(live)));
        }
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
        // A Node that registers wakes the next pass at once (as Karpenter's registration
        // reconciles on Node events) instead of waiting out the interval.
        let arrivals = Arc::new(tokio::sync::Notify::new());
        let arrivals_task = tokio::spawn(node_arrivals(self.client.clone(), arrivals.clone()));
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
                _ = arrivals.notified() => {}
                _ = shutdown.changed() => {}
            }
        }
        arrivals_task.abort();
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
        // Every claim's step at once (bounded): each leases only its own claim. The results
        // keep the ledger's order.
        let mut by_provider: HashMap<&str, Vec<&Node>> = HashMap::new();
        for n in &nodes {
            if let Some(p) = provider_id(n) {
                by_provider.entry(p).or_default().push(n);
            }
        }
        let steps: Vec<_> = claims
            .iter()
            .map(|claim| self.claim_step(claim, &ncs, &by_provider))
            .collect();
        let results: Vec<Result<Option<ClaimState>>> = futures::stream::iter(steps)
            .buffered(PASS_CONCURRENCY)
            .collect()
            .await;
        for (claim, r) in claims.iter().zip(results) {
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

    /// The next step of one claim of the ledger, given every NodeClaim and the Nodes by
    /// providerID.
    async fn claim_step(
        &self,
        claim: &ClaimRecord,
        ncs: &BTreeMap<String, NodeClaim>,
        nodes: &HashMap<&str, Vec<&Node>>,
    ) -> Result<Option<ClaimState>> {
        let nc = ncs.get(&claim.name);
        let of_claim: &[&Node] = claim
            .instance
            .as_ref()
            .and_then(|i| nodes.get(i.provider_id.as_str()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let node = of_claim
            .iter()
            .copied()
            .find(|n| n.metadata.deletion_timestamp.is_none());
        // `kubectl delete node`: held by the termination finalizer (see [`termination`]).
        let node_deleted = of_claim
            .iter()
            .copied()
            .find(|n| n.metadata.deletion_timestamp.is_some() && termination::has_finalizer(n));
        match claim.state {
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
        }
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
}
