//! The launch worker: leases unfinished claims from the ledger and drives each through
//! requested → launching → launched, writing every step BEFORE it acts.
//!
//! - `requested`: nothing sent yet. The worker writes `launching`, then acts.
//! - `launching`: an instance may exist (the worker may have crashed after the create call).
//!   The worker first looks for an instance tagged with the claim's name
//!   ([`cloud::CloudProvider::list`]) and only calls create when there is none, with the claim's
//!   deterministic client token; then it writes `launched` with the instance. The look-up is
//!   what keeps a launch exactly-once where the cloud ignores client tokens (moto); the token
//!   covers a create whose response was lost on a cloud that honours it (EC2).
//! - Past `launched`, a [`Lifecycle`] hook drives the claim (registration, initialization,
//!   liveness, termination: [`crate::lifecycle`], with a cluster). [`NoLifecycle`] drives
//!   nothing, so launched claims rest.
//!
//! Exactly one worker per claim: the worker holds the claim's lease for every step, renews it
//! just before the create call and while it runs (the call is given up half a lease after the
//! last renewal, before another worker could take the claim over), and every ledger write is
//! conditional on the lease; a worker whose lease was taken over stops.
//!
//! Claims are driven as a fan-out ([`Worker::run`]): each claim in hand has its own task, up to
//! [`Options::concurrency`] at once, so the claims of one plan create their NodeClaims, launch
//! templates and instances in parallel.
//!
//! For the crash tests, [`Options::pause_at`] makes the worker stop for good at a named step
//! (after printing `DOVETAIL_PAUSED step=<step> claim=<name>` on stdout), so that a test can
//! SIGKILL the process exactly there.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cloud::{CloudProvider, Instance, ListFilter, NodeSpec};
use futures::StreamExt;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::class_gate::{ClassGate, class_failure};
use crate::ledger::{self, ClaimRecord, ClaimState, InstanceRecord, Ledger, Transition};
use crate::metrics::Metrics;
use service_shell::clock::{Clock, millis};

/// The longest a create call is waited for, however long its lease is kept.
pub const CREATE_LIMIT: Duration = Duration::from_secs(60);

/// A step of a launch at which a test may pause the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A requested claim was leased; nothing written by the worker yet.
    Requested,
    /// `launching` was written; the cloud not called yet.
    Launching,
    /// The create call returned an instance; `launched` not written yet.
    Created,
    /// `launched` was written.
    Launched,
}

// === impl Step ===

impl Step {
    /// Every step, in order.
    pub const ALL: [Step; 4] = [
        Step::Requested,
        Step::Launching,
        Step::Created,
        Step::Launched,
    ];

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Requested => "requested",
            Step::Launching => "launching",
            Step::Created => "created",
            Step::Launched => "launched",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// A lifecycle hook's failure.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// The step could not be taken now; the claim is retried later.
    #[error("{reason}")]
    Retry {
        /// Why.
        reason: String,
    },
}

/// Drives claims past `launched` (registration, initialization, liveness, termination).
#[async_trait]
pub trait Lifecycle: Send + Sync {
    /// The states this hook drives; the worker leases claims in them and calls
    /// [`Lifecycle::advance`].
    fn states(&self) -> Vec<ClaimState>;

    /// The next state of `claim` and a detail for its history, or `None` when there is nothing
    /// to do now (the lease is released and the claim offered again on the next round).
    ///
    /// # Errors
    /// [`LifecycleError::Retry`].
    async fn advance(
        &self,
        claim: &ClaimRecord,
    ) -> Result<Option<(ClaimState, String)>, LifecycleError>;

    /// Called in `launching` (written) before the worker looks for or creates the instance,
    /// again after every crash or retry, so it must be idempotent: the NodeClaim lifecycle
    /// creates (or adopts) the claim's NodeClaim object here, so that it exists before the
    /// instance does.
    ///
    /// # Errors
    /// [`LifecycleError::Retry`]: the launch waits and is tried again later.
    async fn before_launch(&self, _claim: &ClaimRecord) -> Result<(), LifecycleError> {
        Ok(())
    }

    /// The node `claim` becomes (its EC2NodeClass, labels and taints) when the lifecycle can
    /// read it from the cluster; `None` without a cluster.
    ///
    /// # Errors
    /// [`LifecycleError::Retry`]: the launch waits and is tried again later.
    async fn node_spec(&self, _claim: &ClaimRecord) -> Result<Option<NodeSpec>, LifecycleError> {
        Ok(None)
    }
}

/// A lifecycle that drives nothing: launched claims rest in `launched`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoLifecycle;

#[async_trait]
impl Lifecycle for NoLifecycle {
    fn states(&self) -> Vec<ClaimState> {
        Vec::new()
    }

    async fn advance(
        &self,
        _claim: &ClaimRecord,
    ) -> Result<Option<(ClaimState, String)>, LifecycleError> {
        Ok(None)
    }
}

/// How the worker runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// This worker's lease owner ID (unique per process).
    pub owner: String,
    /// Cluster name for the `kubernetes.io/cluster/<name>` tag.
    pub cluster_name: String,
    /// Lease length.
    pub lease: Duration,
    /// How often to look for work when not woken.
    pub poll: Duration,
    /// Claims leased per round.
    pub batch: u32,
    /// Claims driven at once.
    pub concurrency: usize,
    /// Retryable failures before a claim fails.
    pub max_attempts: i64,
    /// Stop for good at this step (crash tests only).
    pub pause_at: Option<Step>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            owner: "actuator".into(),
            cluster_name: "dovetail".into(),
            lease: Duration::from_secs(15),
            poll: Duration::from_secs(1),
            batch: 64,
            concurrency: 64,
            max_attempts: 10,
            pause_at: None,
        }
    }
}

/// The launch worker.
#[derive(Clone)]
pub struct Worker {
    ledger: Arc<dyn Ledger>,
    cloud: Arc<dyn CloudProvider>,
    lifecycle: Arc<dyn Lifecycle>,
    clock: Clock,
    metrics: Metrics,
    options: Options,
    wake: Arc<Notify>,
    gate: Arc<ClassGate>,
}

/// How a claim's round ended.
enum Done {
    /// Nothing more to do now.
    Rest,
    /// The ledger failed or the lease was lost: stop touching the claim.
    Abandon,
}

// === impl Worker ===

impl Worker {
    /// A worker over `ledger` and `cloud`.
    pub fn new(
        ledger: Arc<dyn Ledger>,
        cloud: Arc<dyn CloudProvider>,
        clock: Clock,
        metrics: Metrics,
        options: Options,
    ) -> Self {
        Self {
            ledger,
            cloud,
            lifecycle: Arc::new(NoLifecycle),
            clock,
            metrics,
            options,
            wake: Arc::new(Notify::new()),
            gate: Arc::default(),
        }
    }

    /// Drives states past `launched` with `lifecycle`.
    pub fn with_lifecycle(mut self, lifecycle: Arc<dyn Lifecycle>) -> Self {
        self.lifecycle = lifecycle;
        self
    }

    /// Notifying this wakes the worker at once (the API does after accepting launches).
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// The worker's options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Runs until `shutdown` turns true, then finishes the claims in hand and releases every
    /// lease it holds, leaving the ledger consistent for the next owner.
    ///
    /// Claims are driven as a fan-out, not in rounds: up to [`Options::concurrency`] claims are
    /// in hand at once, each driven by its own task (its NodeClaim, its launch template and its
    /// create call run alongside the others'), and a slot that frees is filled at once while
    /// more claims wait. New claims are leased as soon as a submission wakes the worker
    /// ([`Worker::waker`]); the poll interval only paces the look for claims whose retry time
    /// has come. (Karpenter creates a batch's NodeClaims in parallel too:
    /// `pkg/controllers/provisioning/provisioner.go`, `CreateNodeClaims` with
    /// `workqueue.ParallelizeUntil`.)
    pub async fn run(&self, mut shutdown: watch::Receiver<bool>) {
        let slots = self.options.concurrency.max(1);
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut in_hand: HashMap<tokio::task::Id, String> = HashMap::new();
        let mut poll = tokio::time::interval(self.options.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut look = true;
        loop {
            if *shutdown.borrow() {
                break;
            }
            if look && in_hand.len() < slots {
                look = false;
                match self.lease(slots - in_hand.len(), &in_hand).await {
                    Ok((claims, more)) => {
                        for c in claims {
                            let name = c.name.clone();
                            let w = self.clone();
                            let task = tasks.spawn(async move { w.drive_claim(c).await });
                            in_hand.insert(task.id(), name);
                        }
                        // More claims wait: lease again as soon as a slot frees.
                        look = more;
                    }
                    Err(e) => {
                        self.metrics.ledger_error();
                        tracing::warn!(error = %e, "Ledger unavailable; retrying");
                    }
                }
            }
            tokio::select! {
                _ = self.wake.notified() => look = true,
                _ = poll.tick() => look = true,
                _ = shutdown.changed() => {}
                Some(done) = tasks.join_next_with_id() => {
                    let id = match done {
                        Ok((id, ())) => id,
                        Err(e) => {
                            tracing::error!(error = %e, "A launch task failed; its claim resumes when its lease expires");
                            e.id()
                        }
                    };
                    in_hand.remove(&id);
                }
            }
        }
        while tasks.join_next().await.is_some() {}
        match self.ledger.release_all(&self.options.owner).await {
            Ok(n) => tracing::info!(released = n, "Worker stopped"),
            Err(e) => tracing::warn!(error = %e, "Leases not released; they expire"),
        }
    }

    /// Leases up to `free` claims that are not in hand. The lease statement also renews the
    /// leases of the claims in hand (they are this owner's), so it asks for that many more and
    /// skips them. The flag says whether more claims may be waiting (the statement returned
    /// all it was asked for).
    async fn lease(
        &self,
        free: usize,
        in_hand: &HashMap<tokio::task::Id, String>,
    ) -> ledger::Result<(Vec<ClaimRecord>, bool)> {
        let mut states = vec![ClaimState::Requested, ClaimState::Launching];
        states.extend(self.lifecycle.states());
        let limit = u32::try_from(in_hand.len() + free).unwrap_or(u32::MAX);
        let claims = self
            .ledger
            .acquire(
                &self.options.owner,
                &states,
                self.clock.now_ms(),
                millis(self.options.lease),
                limit,
            )
            .await?;
        let more = claims.len() >= limit as usize;
        let held: HashSet<&str> = in_hand.values().map(String::as_str).collect();
        let new = claims
            .into_iter()
            .filter(|c| !held.contains(c.name.as_str()))
            .take(free)
            .collect();
        Ok((new, more))
    }

    async fn drive_claim(&self, c: ClaimRecord) {
        let name = c.name.clone();
        if let Done::Abandon = self.drive(c).await {
            tracing::debug!(claim = %name, "Claim abandoned for now");
        }
    }

    /// One round: leases a batch of claims and drives each as far as it goes now. Returns how
    /// many claims it leased.
    ///
    /// # Errors
    /// When leasing fails (the ledger is unreachable).
    pub async fn round(&self) -> ledger::Result<usize> {
        let mut states = vec![ClaimState::Requested, ClaimState::Launching];
        states.extend(self.lifecycle.states());
        let now = self.clock.now_ms();
        let claims = self
            .ledger
            .acquire(
                &self.options.owner,
                &states,
                now,
                millis(self.options.lease),
                self.options.batch,
            )
            .await?;
        let n = claims.len();
        futures::stream::iter(claims)
            .for_each_concurrent(self.options.concurrency.max(1), |c| self.drive_claim(c))
            .await;
        Ok(n)
    }

    async fn pause(&self, step: Step, claim: &str) {
        if self.options.pause_at == Some(step) {
            {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "DOVETAIL_PAUSED step={} claim={claim}", step.as_str());
                let _ = out.flush();
            }
            tracing::warn!(step = step.as_str(), %claim, "Paused for a crash test");
            std::future::pending::<()>().await;
        }
    }

    async fn write(&self, t: Transition) -> Result<(), Done> {
        match self.ledger.transition(&t, self.clock.now_ms()).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.ledger_failed(&t.name, e)),
        }
    }

    fn ledger_failed(&self, claim: &str, e: ledger::Error) -> Done {
        match e {
            ledger::Error::LeaseLost { .. } => {
                self.metrics.failure("lease_lost");
                tracing::warn!(%claim, error = %e, "Lease lost; another worker owns the claim");
            }
            e => {
                self.metrics.ledger_error();
                tracing::warn!(%claim, error = %e, "Ledger write failed; the claim resumes when its lease expires");
            }
        }
        Done::Abandon
    }

    fn handles(&self, state: ClaimState) -> bool {
        self.lifecycle.states().contains(&state)
    }

    #[tracing::instrument(skip_all, fields(claim = %claim.name))]
    async fn drive(&self, mut claim: ClaimRecord) -> Done {
        let owner = self.options.owner.clone();
        // Set once this drive wrote `launching` itself: no create call was made before (the
        // state is written before any), so there is no instance to look for.
        let mut fresh = false;
        loop {
            let step = match claim.state {
                ClaimState::Requested => {
                    self.pause(Step::Requested, &claim.name).await;
                    let t = Transition::new(
                        &claim.name,
                        &owner,
                        ClaimState::Requested,
                        ClaimState::Launching,
                        "launch started",
                    );
                    if let Err(d) = self.write(t).await {
                        return d;
                    }
                    self.pause(Step::Launching, &claim.name).await;
                    fresh = true;
                    ClaimState::Launching
                }
                ClaimState::Launching => match self.launch(&claim, fresh).await {
                    Ok(s) => s,
                    Err(d) => return d,
                },
                s if self.handles(s) => match self.lifecycle.advance(&claim).await {
                    Ok(Some((to, detail))) => {
                        let t = Transition::new(&claim.name, &owner, s, to, detail);
                        if let Err(d) = self.write(t).await {
                            return d;
                        }
                        to
                    }
                    Ok(None) => return self.release(&claim).await,
                    Err(LifecycleError::Retry { reason }) => {
                        let mut t = Transition::new(&claim.name, &owner, s, s, &reason);
                        t.retry_at = Some(self.clock.now_ms() + millis(self.options.poll));
                        t.failure_reason = Some(reason);
                        return match self.write(t).await {
                            Ok(()) => Done::Rest,
                            Err(d) => d,
                        };
                    }
                },
                _ => return self.release(&claim).await,
            };
            claim.state = step;
            if step.is_terminal() || (!self.handles(step) && step != ClaimState::Launching) {
                return Done::Rest;
            }
        }
    }

    async fn release(&self, claim: &ClaimRecord) -> Done {
        // A same-state write with release drops the lease and records why.
        let mut t = Transition::new(
            &claim.name,
            &self.options.owner,
            claim.state,
            claim.state,
            "nothing to do now",
        );
        t.release = true;
        match self.write(t).await {
            Ok(()) => Done::Rest,
            Err(d) => d,
        }
    }

    /// Looks for the claim's instance by its NodeClaim tag.
    async fn find(&self, claim: &ClaimRecord) -> cloud::Result<Option<Instance>> {
        let tags = claim.spec.tags(&self.options.cluster_name);
        let filter = ListFilter {
            tags: tags
                .into_iter()
                .filter(|(k, _)| {
                    k == cloud::TAG_NODECLAIM || k.starts_with(cloud::TAG_CLUSTER_PREFIX)
                })
                .collect(),
            include_terminated: false,
        };
        let mut found = self.cloud.list(&filter).await?;
        if found.len() > 1 {
            tracing::error!(
                count = found.len(),
                "Several instances carry this claim's tag; keeping the first"
            );
        }
        Ok((!found.is_empty()).then(|| found.swap_remove(0)))
    }

    /// The `launching` step: find or create the instance, then write `launched` (or a failure
    /// or a retry). Returns the state written. `fresh`: this drive moved the claim out of
    /// `requested`, so no instance can exist yet and the look-up by tag is skipped (it is what
    /// keeps a claim resumed in `launching` exactly-once).
    async fn launch(&self, claim: &ClaimRecord, fresh: bool) -> Result<ClaimState, Done> {
        let owner = &self.options.owner;
        if let Err(LifecycleError::Retry { reason }) = self.lifecycle.before_launch(claim).await {
            let mut t = Transition::new(
                &claim.name,
                owner,
                ClaimState::Launching,
                ClaimState::Launching,
                format!("before launch: {reason}"),
            );
            t.retry_at = Some(self.clock.now_ms() + millis(self.options.poll));
            t.failure_reason = Some(reason);
            self.write(t).await?;
            return Err(Done::Rest);
        }
        let found = if fresh {
            Ok(None)
        } else {
            self.find(claim).await
        };
        let (instance, detail) = match found {
            Ok(Some(i)) => (i, "found the instance tagged with this claim".to_string()),
            Ok(None) => {
                // The create call is waited for half a lease past the last renewal (see
                // `create_under_lease`), so it must start with at least that much left:
                // renew unless at least three quarters of a lease are left (a claim leased just
                // now, which saves a write per launch).
                let now = self.clock.now_ms();
                let lease = millis(self.options.lease);
                let left = claim.lease_expires_at.unwrap_or(now) - now;
                if left < lease * 3 / 4
                    && let Err(e) = self
                        .ledger
                        .renew(&claim.name, owner, now, now + lease)
                        .await
                {
                    return Err(self.ledger_failed(&claim.name, e));
                }
                let node = match self.lifecycle.node_spec(claim).await {
                    Ok(n) => n,
                    Err(LifecycleError::Retry { reason }) => {
                        let mut t = Transition::new(
                            &claim.name,
                            owner,
                            ClaimState::Launching,
                            ClaimState::Launching,
                            format!("node class: {reason}"),
                        );
                        t.retry_at = Some(self.clock.now_ms() + millis(self.options.poll));
                        t.failure_reason = Some(reason);
                        self.write(t).await?;
                        return Err(Done::Rest);
                    }
                };
                // A class that just failed to resolve is not launched from until it changes or
                // its backoff ends: the claim waits, counted by the planner as in flight.
                let class = node.as_ref().map(|n| n.class.clone());
                if let Some(c) = &class
                    && let Some(closed) = self.gate.check(c, now)
                {
                    self.metrics.failure("node_class_backoff");
                    let why = format!("EC2NodeClass {} cannot launch: {}", c.name, closed.reason);
                    let mut t = Transition::new(
                        &claim.name,
                        owner,
                        ClaimState::Launching,
                        ClaimState::Launching,
                        format!("waiting for the node class: {why}"),
                    );
                    t.retry_at = Some(closed.until_ms);
                    t.failure_reason = Some(why);
                    self.write(t).await?;
                    return Err(Done::Rest);
                }
                let request =
                    claim
                        .spec
                        .request(&claim.client_token, &self.options.cluster_name, node);
                self.metrics.create_call();
                let created = self.create_under_lease(claim, &request).await;
                match created {
                    Ok(i) => {
                        if let Some(c) = &class {
                            self.gate.succeeded(&c.name);
                        }
                        (i, "created".to_string())
                    }
                    Err(e) => {
                        if let (Some(c), cloud::Error::InvalidRequest { .. }) = (&class, &e) {
                            self.note_class_failure(c).await;
                        }
                        return self.create_failed(claim, e).await;
                    }
                }
            }
            Err(e) => return self.create_failed(claim, e).await,
        };
        self.pause(Step::Created, &claim.name).await;
        self.record_launched(claim, &instance, detail).await?;
        self.pause(Step::Launched, &claim.name).await;
        Ok(ClaimState::Launched)
    }

    /// The create call, waited for only while the claim's lease is sure to hold: at first for
    /// half a lease (the lease has at least three quarters left, see [`Worker::launch`]), and
    /// half a lease past each renewal, which this makes every quarter of a lease while the
    /// call runs; at most [`CREATE_LIMIT`] in all. A create not answered by then is given up
    /// (retried later, when the look-up by tag adopts an instance it may have made) before
    /// another worker could take the claim over. A slow cloud (CreateFleet under load, a
    /// cold node class resolution) therefore does not fail launches that would succeed.
    async fn create_under_lease(
        &self,
        claim: &ClaimRecord,
        request: &cloud::LaunchRequest,
    ) -> cloud::Result<Instance> {
        let lease = self.options.lease;
        let started = tokio::time::Instant::now();
        let mut deadline = started + lease / 2;
        let create = self.cloud.create(request);
        tokio::pin!(create);
        let mut renew = tokio::time::interval_at(started + lease / 4, lease / 4);
        loop {
            let now = tokio::time::Instant::now();
            let stop = deadline.min(started + CREATE_LIMIT);
            if now >= stop {
                return Err(cloud::Error::Unavailable {
                    message: format!(
                        "create did not answer within {:?} (the lease could not be kept longer)",
                        now - started
                    ),
                });
            }
            tokio::select! {
                r = &mut create => return r,
                _ = tokio::time::sleep_until(stop) => {}
                _ = renew.tick() => {
                    let at = self.clock.now_ms();
                    match self
                        .ledger
                        .renew(&claim.name, &self.options.owner, at, at + millis(lease))
                        .await
                    {
                        Ok(()) => deadline = tokio::time::Instant::now() + lease / 2,
                        Err(e @ ledger::Error::LeaseLost { .. }) => {
                            return Err(cloud::Error::Unavailable {
                                message: format!("create given up: {e}"),
                            });
                        }
                        Err(e) => tracing::warn!(error = %e, "Lease not renewed during the create call"),
                    }
                }
            }
        }
    }

    /// After a create refused as invalid: when the claim's class itself does not resolve, back
    /// the class off (see [`crate::class_gate`]).
    async fn note_class_failure(&self, class: &cloud::NodeClassSpec) {
        let Ok(resolution) = self.cloud.resolve_node_class(class).await else {
            return;
        };
        if let Some(reason) = class_failure(&resolution) {
            let wait = self.gate.failed(class, reason.clone(), self.clock.now_ms());
            self.metrics.failure("node_class_not_ready");
            tracing::warn!(node_class = %class.name, %reason, ?wait, "EC2NodeClass cannot launch; its claims wait");
        }
    }

    async fn record_launched(
        &self,
        claim: &ClaimRecord,
        instance: &Instance,
        detail: String,
    ) -> Result<(), Done> {
        let mut t = Transition::new(
            &claim.name,
            &self.options.owner,
            ClaimState::Launching,
            ClaimState::Launched,
            format!(
                "{detail}: {} ({} in {})",
                instance.id, instance.instance_type, instance.zone
            ),
        );
        t.instance = Some(InstanceRecord {
            instance_id: instance.id.clone(),
            provider_id: instance.provider_id.to_string(),
            instance_type: instance.instance_type.clone(),
            zone: instance.zone.clone(),
            capacity_type: instance.capacity_type.as_str().to_string(),
        });
        t.release = !self.handles(ClaimState::Launched);
        self.write(t).await?;
        self.metrics.launched();
        tracing::info!(instance = %instance.id, "Launched");
        Ok(())
    }

    async fn create_failed(
        &self,
        claim: &ClaimRecord,
        e: cloud::Error,
    ) -> Result<ClaimState, Done> {
        use cloud::Error as E;
        let owner = &self.options.owner;
        let now = self.clock.now_ms();
        let (reason, fatal, wait) = match &e {
            E::InsufficientCapacity { .. } => ("insufficient_capacity", true, Duration::ZERO),
            E::InvalidRequest { .. } | E::ProviderId(_) => {
                ("invalid_request", true, Duration::ZERO)
            }
            E::Throttled { retry_after } => ("throttled", false, *retry_after),
            E::Unavailable { .. } | E::NotFound { .. } => {
                let exp = u32::try_from(claim.attempts.clamp(0, 6)).unwrap_or(6);
                ("unavailable", false, Duration::from_secs(1u64 << exp))
            }
        };
        self.metrics.failure(reason);
        if let E::InsufficientCapacity { offerings } = &e {
            // Karpenter counts each offering a create call failed, and names insufficient
            // capacity `LaunchFailed` (aws/karpenter-provider-aws `pkg/errors` `ToReasonMessage`).
            // The zone ID is not known here.
            for o in offerings {
                self.metrics.instance_launch_failure(
                    &o.zone,
                    "",
                    o.capacity_type.as_str(),
                    "LaunchFailed",
                );
            }
        }
        let give_up = !fatal && claim.attempts + 1 >= self.options.max_attempts;
        if fatal || give_up {
            // The last create may have made an instance whose answer was lost: adopt it
            // rather than leak it.
            if give_up && let Ok(Some(i)) = self.find(claim).await {
                self.record_launched(claim, &i, "found after failures".into())
                    .await?;
                return Ok(ClaimState::Launched);
            }
            let why = if give_up {
                format!("gave up after {} attempts: {e}", claim.attempts + 1)
            } else {
                e.to_string()
            };
            tracing::warn!(reason, error = %e, "Launch failed");
            let mut t = Transition::new(
                &claim.name,
                owner,
                ClaimState::Launching,
                ClaimState::Failed,
                why.clone(),
            );
            t.failure_reason = Some(why);
            t.release = true;
            self.write(t).await?;
            return Ok(ClaimState::Failed);
        }
        tracing::info!(reason, error = %e, ?wait, "Launch attempt failed; retrying later");
        let mut t = Transition::new(
            &claim.name,
            owner,
            ClaimState::Launching,
            ClaimState::Launching,
            format!("retry in {wait:?}: {e}"),
        );
        t.failure_reason = Some(e.to_string());
        t.retry_at = Some(now + millis(wait));
        self.write(t).await?;
        Err(Done::Rest)
    }
}

/// Refreshes the claims-by-state gauges from the ledger every `every` until `shutdown`.
pub async fn report_counts(
    ledger: Arc<dyn Ledger>,
    metrics: Metrics,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        match ledger.counts().await {
            Ok(c) => metrics.set_claims(&c),
            Err(e) => tracing::debug!(error = %e, "Cannot count claims"),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Claims per state as a map with every state present (for reports).
pub fn full_counts(counts: &BTreeMap<ClaimState, i64>) -> BTreeMap<ClaimState, i64> {
    ClaimState::ALL
        .into_iter()
        .map(|s| (s, counts.get(&s).copied().unwrap_or(0)))
        .collect()
}
