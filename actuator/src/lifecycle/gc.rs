//! Garbage collection, both ways between the cloud and the ledger:
//!
//! - **Leaked instances**: an instance tagged for this cluster (`kubernetes.io/cluster/<name>`
//!   = `owned`), older than [`Options::grace`], that no live claim of the ledger owns is
//!   terminated, whatever its other tags: as Karpenter's garbage collection
//!   (`pkg/controllers/nodeclaim/garbagecollection/controller.go` of
//!   aws/karpenter-provider-aws) deletes any instance of the cluster whose provider ID no
//!   NodeClaim has. An instance is owned by the live claim that recorded it; one tagged
//!   `karpenter.sh/nodeclaim` is also owned by that claim while it is still in
//!   `requested`/`launching` (its worker adopts the instance by the tag). An instance a crashed
//!   launch left with only the cluster, NodePool or EC2NodeClass tags has no claim to adopt it.
//!   The instances are listed BEFORE the ledger is read, and the ledger records a claim before
//!   its launch, so an instance being launched right now always finds its claim.
//! - **Vanished instances**: a `launched`, `registered` or `initialized` claim whose instance
//!   the cloud no longer lists, confirmed by a direct look-up (terminated or not found), goes to
//!   `terminating` (cause `instance_vanished`) and ends `failed`, its Node and NodeClaim removed
//!   (the lifecycle's termination steps).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cloud::{InstanceState, ListFilter, ProviderId, Tags};

use super::termination::Cause;
use super::{Controller, Result, cloud_err};
use crate::ledger::ClaimState;

/// How garbage collection runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Cluster name of the `kubernetes.io/cluster/<name>` tag.
    pub cluster_name: String,
    /// An unowned instance younger than this is left alone.
    pub grace: Duration,
    /// Time between collections.
    pub interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            cluster_name: "dovetail".into(),
            grace: Duration::from_secs(5 * 60),
            interval: Duration::from_secs(2 * 60),
        }
    }
}

/// What one collection did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Leaked instances terminated (instance IDs).
    pub terminated: Vec<String>,
    /// Claims whose instance vanished, now terminating or failed.
    pub vanished: Vec<String>,
}

/// One collection (see the module docs).
///
/// # Errors
/// When the cloud cannot list instances or the ledger cannot be read; a failing termination is
/// logged and retried next time.
pub async fn collect(c: &Controller) -> Result<Report> {
    let cluster_tag = format!("{}{}", cloud::TAG_CLUSTER_PREFIX, c.options.gc.cluster_name);
    let filter = ListFilter {
        tags: Tags::from([(cluster_tag, "owned".to_string())]),
        include_terminated: false,
    };
    // Cloud first, ledger second (see the module docs).
    let instances = c
        .cloud
        .list(&filter)
        .await
        .map_err(cloud_err("listing the cluster's instances".into()))?;
    let claims = c.ledger.claims().await?;
    let by_name: BTreeMap<&str, _> = claims.iter().map(|c| (c.name.as_str(), c)).collect();
    let recorded: BTreeSet<&str> = claims
        .iter()
        .filter(|c| !c.state.is_terminal())
        .filter_map(|c| c.instance.as_ref().map(|r| r.instance_id.as_str()))
        .collect();
    let now_s = c.clock.now_ms() / 1000;
    let grace = i64::try_from(c.options.gc.grace.as_secs()).unwrap_or(i64::MAX);
    let mut report = Report::default();

    for i in &instances {
        if i.state == InstanceState::ShuttingDown {
            continue;
        }
        let claim_name = i.tags.get(cloud::TAG_NODECLAIM).map(String::as_str);
        let adoptable = claim_name
            .and_then(|n| by_name.get(n))
            .is_some_and(|claim| {
                matches!(claim.state, ClaimState::Requested | ClaimState::Launching)
            });
        let owned = adoptable || recorded.contains(i.id.as_str());
        if owned || now_s.saturating_sub(i.launch_time) < grace {
            continue;
        }
        tracing::warn!(instance = %i.id, claim = claim_name.unwrap_or("none"), "Terminating a leaked instance");
        match c.cloud.delete(&i.provider_id).await {
            Ok(()) | Err(cloud::Error::NotFound { .. }) => {
                c.metrics.failure("leaked_instance");
                report.terminated.push(i.id.clone());
            }
            Err(e) => {
                tracing::warn!(instance = %i.id, error = %e, "Cannot terminate a leaked instance")
            }
        }
    }

    let listed: BTreeSet<&str> = instances.iter().map(|i| i.id.as_str()).collect();
    for claim in &claims {
        if !matches!(
            claim.state,
            ClaimState::Launched | ClaimState::Registered | ClaimState::Initialized
        ) {
            continue;
        }
        let Some(rec) = &claim.instance else {
            continue;
        };
        if listed.contains(rec.instance_id.as_str()) {
            continue;
        }
        let Ok(pid) = rec.provider_id.parse::<ProviderId>() else {
            continue;
        };
        // Lists can lag: only a direct look-up saying so makes the instance gone.
        let gone = match c.cloud.get(&pid).await {
            Ok(i) => matches!(
                i.state,
                InstanceState::Terminated | InstanceState::ShuttingDown
            ),
            Err(cloud::Error::NotFound { .. }) => true,
            Err(e) => {
                tracing::warn!(claim = %claim.name, error = %e, "Cannot look up the instance");
                false
            }
        };
        if !gone {
            continue;
        }
        let msg = format!("instance {} is gone from the cloud", rec.instance_id);
        match c
            .begin_termination(claim, Cause::InstanceVanished, &msg)
            .await
        {
            Ok(Some(_)) => report.vanished.push(claim.name.clone()),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(claim = %claim.name, error = %super::nodeclaim::error_chain(&e), "Cannot fail a claim whose instance vanished")
            }
        }
    }
    if report != Report::default() {
        tracing::info!(terminated = ?report.terminated, vanished = ?report.vanished, "Garbage collected");
    }
    Ok(report)
}
