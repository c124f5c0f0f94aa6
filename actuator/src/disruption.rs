//! The disruption executor: carries out the planner's disruption decisions once confirmed, with
//! every step in the ledger before it acts ([`crate::ledger::disruption`] has the states). The
//! actuator never plans: it executes only what a plan proposed twice, the second time at least
//! `--disruption-confirm-after` (15 s) later by the plans' own clocks (`basis.now`), as
//! Karpenter re-validates a command after its 15 s delay.
//!
//! One [`Executor::pass`] per interval, over the active disruptions, each leased by key:
//! - `confirmed`: the candidates are resolved (each Node name to the ledger claim whose instance
//!   it runs; each must be `initialized` and its NodeClaim not being deleted) and the NodePool
//!   budgets re-checked against the nodes already disrupting ([`budget`]); a failed check is
//!   `rejected` with the reason (a later proposal starts a new attempt). Else `replacing` is
//!   written with the candidates.
//! - `replacing`: the candidates' Nodes are tainted `karpenter.sh/disrupted:NoSchedule`, then
//!   the replacements are recorded as claims (the launch worker launches them, the lifecycle
//!   registers and initializes them). All `initialized` → `deleting`; one failed (launch error,
//!   registration timeout) or terminated → `aborting`.
//! - `deleting`: each candidate's claim is written `terminating` (cause `disrupted`), then its
//!   NodeClaim is deleted; termination drains the Node, terminates the instance and releases the
//!   NodeClaim ([`crate::lifecycle`]). All candidates terminal → `done`.
//! - `aborting`: the disrupted taint comes off the candidates' Nodes → `aborted`. Replacements
//!   that did initialize stay (empty nodes the next plan consolidates).

pub mod budget;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crds::{NodeClaim, NodePool};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use tokio::sync::{Notify, watch};

use crate::ledger::{
    self, ClaimRecord, ClaimState, DisruptionRecord, DisruptionState, DisruptionStep,
};
use crate::lifecycle::termination::Cause;
use crate::lifecycle::{self, Controller, drain, kube_err};
use service_shell::clock::millis;

/// How the executor runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Lease owner of its steps.
    pub owner: String,
    /// Time between passes.
    pub interval: Duration,
    /// Lease length of a step.
    pub lease: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            owner: "actuator-disruption".into(),
            interval: Duration::from_secs(2),
            lease: Duration::from_secs(30),
        }
    }
}

/// What one pass did, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Disruptions moved, as `(key, new state)`.
    pub steps: Vec<(String, DisruptionState)>,
    /// Disruptions whose step failed, with the error.
    pub errors: Vec<(String, String)>,
}

/// The disruption executor (see the module docs).
#[derive(Clone)]
pub struct Executor {
    ctl: Controller,
    options: Options,
    wake: Option<Arc<Notify>>,
}

/// What the cluster and the ledger hold, read once per pass.
struct View {
    claims: Vec<ClaimRecord>,
    nodes: Vec<Node>,
    nodeclaims: BTreeMap<String, NodeClaim>,
}

impl View {
    fn claim(&self, name: &str) -> Option<&ClaimRecord> {
        self.claims.iter().find(|c| c.name == name)
    }

    fn node_of(&self, claim: &ClaimRecord) -> Option<&Node> {
        let pid = claim.instance.as_ref()?.provider_id.as_str();
        self.nodes.iter().find(|n| {
            n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid)
                && n.metadata.deletion_timestamp.is_none()
        })
    }

    fn claim_of_node(&self, node: &Node) -> Option<&ClaimRecord> {
        let pid = node.spec.as_ref()?.provider_id.as_deref()?;
        self.claims
            .iter()
            .find(|c| c.instance.as_ref().is_some_and(|i| i.provider_id == pid))
    }
}

// === impl Executor ===

impl Executor {
    /// An executor acting through the lifecycle controller's client, ledger and termination.
    /// Its lease owner should be the controller's, so that the two never wait on each other's
    /// claim leases within one process.
    pub fn new(ctl: Controller, options: Options) -> Self {
        Self {
            ctl,
            options,
            wake: None,
        }
    }

    /// Wakes the launch worker when replacements are recorded.
    pub fn with_worker_waker(mut self, wake: Arc<Notify>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Runs passes until `shutdown` turns true, then releases nothing (disruption leases
    /// expire; claim leases are the lifecycle's).
    pub async fn run(&self, mut shutdown: watch::Receiver<bool>) {
        loop {
            if *shutdown.borrow() {
                break;
            }
            match self.pass().await {
                Ok(p) => {
                    for (key, e) in &p.errors {
                        tracing::warn!(disruption = %key, error = %e, "Disruption step failed; retrying next pass");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %lifecycle::nodeclaim::error_chain(&e), "Disruption pass failed")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.options.interval) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// One pass over the active disruptions.
    ///
    /// # Errors
    /// When the ledger or the cluster cannot be read; a failing step is reported in
    /// [`Pass::errors`] and the others go on.
    pub async fn pass(&self) -> lifecycle::Result<Pass> {
        let active = self.ctl.ledger.disruptions(true).await?;
        let mut pass = Pass::default();
        if active.is_empty() {
            return Ok(pass);
        }
        let mut view = self.view().await?;
        for d in active {
            let now = self.ctl.clock.now_ms();
            let Some(d) = self
                .ctl
                .ledger
                .acquire_disruption(&self.options.owner, &d.key, now, millis(self.options.lease))
                .await?
            else {
                continue;
            };
            let key = d.key.clone();
            match self.step(d, &mut view).await {
                Ok(Some(s)) => pass.steps.push((key, s)),
                Ok(None) => {}
                Err(e) => pass
                    .errors
                    .push((key, lifecycle::nodeclaim::error_chain(&e))),
            }
        }
        Ok(pass)
    }

    async fn view(&self) -> lifecycle::Result<View> {
        let claims = self.ctl.ledger.claims().await?;
        let nodes = Api::<Node>::all(self.ctl.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing Nodes".into()))?
            .items;
        let nodeclaims = Api::<NodeClaim>::all(self.ctl.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing NodeClaims".into()))?
            .items
            .into_iter()
            .filter_map(|nc| Some((nc.metadata.name.clone()?, nc)))
            .collect();
        Ok(View {
            claims,
            nodes,
            nodeclaims,
        })
    }

    /// Writes `d.state → to`; false when the lease was lost.
    async fn advance(
        &self,
        d: &DisruptionRecord,
        mut step: DisruptionStep,
    ) -> lifecycle::Result<bool> {
        step.owner = self.options.owner.clone();
        step.release |= step.to.is_terminal();
        match self
            .ctl
            .ledger
            .advance_disruption(&step, self.ctl.clock.now_ms())
            .await
        {
            Ok(()) => {
                tracing::info!(disruption = %d.key, reason = %d.reason, from = %step.from, to = %step.to, detail = %step.detail, "Disruption step");
                let outcome = match step.to {
                    DisruptionState::Replacing if step.from == DisruptionState::Confirmed => {
                        Some("started")
                    }
                    DisruptionState::Done => Some("done"),
                    DisruptionState::Aborted => Some("aborted"),
                    DisruptionState::Rejected => Some("rejected"),
                    _ => None,
                };
                if let Some(o) = outcome {
                    self.ctl.metrics.disruption(&d.reason, o);
                }
                // Karpenter's names: a decision found invalid before it ran failed validation; one
                // that failed while it ran is a queue failure.
                if let Some(t) = consolidation_type(d) {
                    match step.to {
                        DisruptionState::Rejected => self.ctl.metrics.failed_validation(t),
                        DisruptionState::Aborted => self.ctl.metrics.queue_failure(
                            &d.reason.to_lowercase(),
                            t,
                            if d.launches().is_empty() {
                                "delete"
                            } else {
                                "replace"
                            },
                        ),
                        _ => {}
                    }
                }
                Ok(true)
            }
            Err(ledger::Error::DisruptionLost { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn step_of(d: &DisruptionRecord, to: DisruptionState, detail: String) -> DisruptionStep {
        DisruptionStep::new(&d.key, "", d.state, to, detail)
    }

    async fn step(
        &self,
        mut d: DisruptionRecord,
        view: &mut View,
    ) -> lifecycle::Result<Option<DisruptionState>> {
        let start = d.state;
        loop {
            let next = match d.state {
                DisruptionState::Confirmed => self.validate(&d, view).await?,
                DisruptionState::Replacing => self.replace(&d, view).await?,
                DisruptionState::Deleting => self.delete(&d, view).await?,
                DisruptionState::Aborting => self.abort(&d, view).await?,
                _ => None,
            };
            match next {
                Some(s) if s != d.state => {
                    if s.is_terminal() {
                        return Ok(Some(s));
                    }
                    // Refresh what the next state acts on (the record holds the candidates).
                    match self.ctl.ledger.disruption(&d.key).await? {
                        Some(fresh) if fresh.state == s => d = fresh,
                        _ => return Ok(Some(s)),
                    }
                    *view = self.view().await?;
                }
                _ => return Ok((d.state != start).then_some(d.state)),
            }
        }
    }

    /// `confirmed`: candidates resolved and budgets re-checked → `replacing` or `rejected`.
    async fn validate(
        &self,
        d: &DisruptionRecord,
        view: &View,
    ) -> lifecycle::Result<Option<DisruptionState>> {
        let reject = |why: String| {
            let mut s = Self::step_of(d, DisruptionState::Rejected, why.clone());
            s.failure_reason = Some(why);
            s
        };
        let mut candidates = Vec::new();
        for n in &d.nodes {
            let why = match view
                .nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == Some(n.as_str()))
            {
                None => Some(format!("node {n} not found")),
                Some(node) if node.metadata.deletion_timestamp.is_some() => {
                    Some(format!("node {n} is being deleted"))
                }
                Some(node) => match view.claim_of_node(node) {
                    None => Some(format!("node {n} is not a NodeClaim of this actuator")),
                    Some(c) if c.state != ClaimState::Initialized => Some(format!(
                        "node {n}: claim {} is {}, not initialized",
                        c.name, c.state
                    )),
                    Some(c)
                        if view
                            .nodeclaims
                            .get(&c.name)
                            .is_none_or(|nc| nc.metadata.deletion_timestamp.is_some()) =>
                    {
                        Some(format!(
                            "node {n}: NodeClaim {} is gone or being deleted",
                            c.name
                        ))
                    }
                    Some(c) => {
                        candidates.push(c.clone());
                        None
                    }
                },
            };
            if let Some(why) = why {
                return self.finish(d, reject(why)).await;
            }
        }
        for l in d.launches() {
            if let Some(c) = view.claim(&l.spec.name)
                && c.idempotency_key != l.idempotency_key
            {
                return self
                    .finish(
                        d,
                        reject(format!(
                            "replacement name {} is already a claim of another command",
                            l.spec.name
                        )),
                    )
                    .await;
            }
        }
        if let Some(why) = self.over_budget(d, &candidates, view).await? {
            return self.finish(d, reject(why)).await;
        }
        let names: Vec<String> = candidates.iter().map(|c| c.name.clone()).collect();
        let mut s = Self::step_of(
            d,
            DisruptionState::Replacing,
            format!(
                "{}: candidates {} (nodes {}); replacements {}",
                d.reason,
                names.join(", "),
                d.nodes.join(", "),
                if d.replacements.is_empty() {
                    "none".to_string()
                } else {
                    d.launches()
                        .iter()
                        .map(|l| l.spec.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        );
        s.candidates = Some(names);
        self.finish(d, s).await
    }

    async fn finish(
        &self,
        d: &DisruptionRecord,
        step: DisruptionStep,
    ) -> lifecycle::Result<Option<DisruptionState>> {
        let to = step.to;
        Ok(self.advance(d, step).await?.then_some(to))
    }

    /// Why the budgets of the candidates' NodePools forbid this disruption now, if they do.
    async fn over_budget(
        &self,
        d: &DisruptionRecord,
        candidates: &[ClaimRecord],
        view: &View,
    ) -> lifecycle::Result<Option<String>> {
        let mut per_pool: BTreeMap<&str, usize> = BTreeMap::new();
        for c in candidates {
            *per_pool.entry(c.node_pool.as_str()).or_default() += 1;
        }
        // Claims other executing disruptions hold (their taints may not be on yet).
        let mut held: BTreeSet<String> = BTreeSet::new();
        for other in self.ctl.ledger.disruptions(true).await? {
            if other.key != d.key && other.state != DisruptionState::Confirmed {
                held.extend(other.candidates);
            }
        }
        let pools: Api<NodePool> = Api::all(self.ctl.client.clone());
        let now_s = self.ctl.clock.now_ms().div_euclid(1000);
        for (pool_name, want) in per_pool {
            let Some(pool) = pools
                .get_opt(pool_name)
                .await
                .map_err(kube_err(format!("reading NodePool {pool_name}")))?
            else {
                return Ok(Some(format!("NodePool {pool_name} not found")));
            };
            let in_pool = |n: &&Node| {
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(lifecycle::nodeclaim::NODEPOOL_LABEL))
                    .is_some_and(|p| p == pool_name)
            };
            let nodes: Vec<&Node> = view.nodes.iter().filter(in_pool).collect();
            let total = nodes.len();
            let mut disrupting: BTreeSet<String> = BTreeSet::new();
            for n in &nodes {
                let claim = view.claim_of_node(n);
                let going = n.metadata.deletion_timestamp.is_some()
                    || drain::is_tainted(n)
                    || claim.is_some_and(|c| {
                        c.state == ClaimState::Terminating || held.contains(&c.name)
                    });
                if going {
                    disrupting.insert(n.metadata.name.clone().unwrap_or_default());
                }
            }
            match budget::allowed(&pool, &d.reason, total, disrupting.len(), now_s) {
                Err(e) => return Ok(Some(e)),
                Ok(Some(allowed)) if allowed < want => {
                    return Ok(Some(format!(
                        "budget: NodePool {pool_name} allows {allowed} more {} disruption(s) now ({} of {total} nodes disrupting); the decision needs {want}",
                        d.reason,
                        disrupting.len()
                    )));
                }
                Ok(_) => {}
            }
        }
        Ok(None)
    }

    async fn patch_node(
        &self,
        node: &Node,
        patch: serde_json::Value,
        what: &str,
    ) -> lifecycle::Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        Api::<Node>::all(self.ctl.client.clone())
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(kube_err(format!("{what} Node {name}")))?;
        Ok(())
    }

    /// Marks a candidate as Karpenter's queue does when it starts a command: the NodeClaim's
    /// `DisruptionReason` condition (True, reason and message the disruption reason), and
    /// `karpenter_nodeclaims_disrupted_total`. Called once, when its Node is newly tainted.
    async fn mark_disrupted(&self, d: &DisruptionRecord, claim: &str, view: &View) {
        let Some(nc) = view.nodeclaims.get(claim) else {
            return;
        };
        let label = |k: &str| crate::lifecycle::nodeclaim::label(nc, k);
        let pool = label(common::labels::NODEPOOL);
        let consolidation = matches!(d.reason.as_str(), "Empty" | "Underutilized");
        let policy = if consolidation {
            match Api::<NodePool>::all(self.ctl.client.clone())
                .get_opt(&pool)
                .await
            {
                Ok(Some(p)) => {
                    let policy = p
                        .spec
                        .disruption
                        .as_ref()
                        .map(|d| d.consolidation_policy())
                        .unwrap_or(crds::nodepool::ConsolidationPolicy::WhenEmptyOrUnderutilized);
                    crate::metrics::snake_case(&format!("{policy:?}"))
                }
                _ => String::new(),
            }
        } else {
            String::new()
        };
        let mode = match nc.spec.termination_grace_period.as_deref() {
            None => "graceful",
            Some(t) if service_shell::duration::parse(t).is_ok_and(|d| d.is_zero()) => "forceful",
            Some(_) => "eventual",
        };
        self.ctl.metrics.nodeclaim_disrupted(
            &crate::metrics::snake_case(&d.reason),
            &pool,
            &label("karpenter.sh/capacity-type"),
            &policy,
            mode,
        );
        let mut status = nc.status.clone().unwrap_or_default();
        let now = lifecycle::nodeclaim::rfc3339(self.ctl.clock.now_ms());
        if lifecycle::nodeclaim::set_condition(
            status.conditions.get_or_insert_with(Vec::new),
            "DisruptionReason",
            crds::common::ConditionStatus::True,
            &d.reason,
            &d.reason,
            &now,
        ) {
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": nc.metadata.resource_version},
                "status": {"conditions": status.conditions},
            });
            if let Err(e) = Api::<NodeClaim>::all(self.ctl.client.clone())
                .patch_status(claim, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                // Status is for people: the disruption goes on.
                tracing::warn!(nodeclaim = %claim, error = %e, "Cannot write the DisruptionReason condition");
            }
        }
    }

    /// Removes the `DisruptionReason` condition of an aborted disruption's candidate.
    async fn unmark_disrupted(&self, claim: &str) {
        let api = Api::<NodeClaim>::all(self.ctl.client.clone());
        let Ok(Some(nc)) = api.get_opt(claim).await else {
            return;
        };
        let Some(mut conditions) = nc.status.as_ref().and_then(|s| s.conditions.clone()) else {
            return;
        };
        let before = conditions.len();
        conditions.retain(|c| c.type_ != "DisruptionReason");
        if conditions.len() == before {
            return;
        }
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": nc.metadata.resource_version},
            "status": {"conditions": conditions},
        });
        if let Err(e) = api
            .patch_status(claim, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            tracing::warn!(nodeclaim = %claim, error = %e, "Cannot remove the DisruptionReason condition");
        }
    }

    /// `karpenter_voluntary_disruption_decisions_total` for a disruption that starts.
    fn count_decision(&self, d: &DisruptionRecord, view: &View) {
        let Some(consolidation_type) = consolidation_type(d) else {
            return;
        };
        let decision = if d.launches().is_empty() {
            "delete"
        } else {
            "replace"
        };
        let mut pools: Vec<&str> = d
            .candidates
            .iter()
            .filter_map(|c| view.claim(c).map(|c| c.node_pool.as_str()))
            .collect();
        pools.sort_unstable();
        pools.dedup();
        self.ctl.metrics.disruption_decision(
            &pools,
            decision,
            &d.reason.to_lowercase(),
            consolidation_type,
        );
    }

    /// `replacing`: taint, record the replacements, wait for them.
    async fn replace(
        &self,
        d: &DisruptionRecord,
        view: &View,
    ) -> lifecycle::Result<Option<DisruptionState>> {
        let mut newly = 0;
        for name in &d.candidates {
            let node = view.claim(name).and_then(|c| view.node_of(c));
            match node {
                Some(node) => {
                    if let Some(p) = drain::taint_patch(node) {
                        self.patch_node(node, p, "tainting").await?;
                        self.mark_disrupted(d, name, view).await;
                        newly += 1;
                    }
                }
                None => {
                    let mut s = Self::step_of(
                        d,
                        DisruptionState::Aborting,
                        format!("candidate {name} has no Node any more"),
                    );
                    s.failure_reason = Some(s.detail.clone());
                    return self.finish(d, s).await;
                }
            }
        }
        if newly == d.candidates.len() && newly > 0 {
            // Every candidate was marked now: the command starts.
            self.count_decision(d, view);
        }
        let launches = d.launches();
        if launches.is_empty() {
            return self
                .finish(
                    d,
                    Self::step_of(
                        d,
                        DisruptionState::Deleting,
                        format!(
                            "tainted {}; no replacements to wait for",
                            d.candidates.join(", ")
                        ),
                    ),
                )
                .await;
        }
        let missing: Vec<_> = launches
            .iter()
            .filter(|l| view.claim(&l.spec.name).is_none())
            .cloned()
            .collect();
        if !missing.is_empty() {
            let mut s = Self::step_of(
                d,
                DisruptionState::Replacing,
                format!(
                    "tainted {}; replacements recorded: {}",
                    d.candidates.join(", "),
                    missing
                        .iter()
                        .map(|l| l.spec.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            s.launches = missing;
            if self.advance(d, s).await?
                && let Some(w) = &self.wake
            {
                w.notify_one();
            }
            return Ok(None);
        }
        let mut ready = 0;
        for l in &launches {
            let Some(c) = view.claim(&l.spec.name) else {
                continue;
            };
            match c.state {
                ClaimState::Initialized => ready += 1,
                ClaimState::Failed | ClaimState::Terminating | ClaimState::Terminated => {
                    let why = format!(
                        "replacement {} {}: {}",
                        c.name,
                        c.state,
                        c.failure_reason.as_deref().unwrap_or("no reason recorded")
                    );
                    let mut s = Self::step_of(d, DisruptionState::Aborting, why.clone());
                    s.failure_reason = Some(why);
                    return self.finish(d, s).await;
                }
                _ => {}
            }
        }
        if ready == launches.len() {
            return self
                .finish(
                    d,
                    Self::step_of(
                        d,
                        DisruptionState::Deleting,
                        format!(
                            "replacements initialized: {}",
                            launches
                                .iter()
                                .map(|l| l.spec.name.clone())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ),
                )
                .await;
        }
        Ok(None)
    }

    /// `deleting`: candidates written `terminating`, their NodeClaims deleted; done once all
    /// are terminal.
    async fn delete(
        &self,
        d: &DisruptionRecord,
        view: &View,
    ) -> lifecycle::Result<Option<DisruptionState>> {
        let mut finished = 0;
        for name in &d.candidates {
            let Some(c) = view.claim(name) else {
                finished += 1;
                continue;
            };
            if c.state.is_terminal() {
                finished += 1;
                continue;
            }
            if matches!(
                c.state,
                ClaimState::Launched | ClaimState::Registered | ClaimState::Initialized
            ) {
                let detail = Cause::Disrupted.detail(&format!(
                    "{} by disruption {} (attempt {})",
                    d.reason, d.key, d.attempt
                ));
                if !self
                    .ctl
                    .write(c, ClaimState::Terminating, detail, None, false)
                    .await?
                {
                    continue;
                }
            }
            if view
                .nodeclaims
                .get(name)
                .is_some_and(|nc| nc.metadata.deletion_timestamp.is_none())
            {
                match Api::<NodeClaim>::all(self.ctl.client.clone())
                    .delete(name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {
                        tracing::info!(disruption = %d.key, nodeclaim = %name, "Deleted the NodeClaim")
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(kube_err(format!("deleting NodeClaim {name}"))(e)),
                }
            }
        }
        if finished == d.candidates.len() {
            return self
                .finish(
                    d,
                    Self::step_of(
                        d,
                        DisruptionState::Done,
                        format!("candidates terminated: {}", d.candidates.join(", ")),
                    ),
                )
                .await;
        }
        Ok(None)
    }

    /// `aborting`: the taints come off the candidates that are not terminating.
    async fn abort(
        &self,
        d: &DisruptionRecord,
        view: &View,
    ) -> lifecycle::Result<Option<DisruptionState>> {
        let mut untainted = Vec::new();
        for name in &d.candidates {
            let Some(c) = view.claim(name) else {
                continue;
            };
            if c.state == ClaimState::Terminating || c.state.is_terminal() {
                continue;
            }
            if let Some(node) = view.node_of(c)
                && let Some(p) = drain::untaint_patch(node)
            {
                self.patch_node(node, p, "untainting").await?;
                untainted.push(node.metadata.name.clone().unwrap_or_default());
            }
            self.unmark_disrupted(name).await;
        }
        self.finish(
            d,
            Self::step_of(
                d,
                DisruptionState::Aborted,
                format!(
                    "taint removed from {}",
                    if untainted.is_empty() {
                        "no node".to_string()
                    } else {
                        untainted.join(", ")
                    }
                ),
            ),
        )
        .await
    }
}

/// Karpenter's `consolidation_type` of a disruption (`empty`, `multi`, `single`, empty for drift);
/// `None` for expiry and static scale-down, which are not voluntary disruption methods there.
fn consolidation_type(d: &DisruptionRecord) -> Option<&'static str> {
    match d.reason.as_str() {
        "Empty" => Some("empty"),
        "Underutilized" if d.candidates.len() > 1 => Some("multi"),
        "Underutilized" => Some("single"),
        "Drifted" => Some(""),
        _ => None,
    }
}
