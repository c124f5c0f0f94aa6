//! Submitting a session plan's commands to the actuator (`dovetail.v1.Actuator`).
//!
//! Each new NodeClaim becomes a launch command and each disruption a disrupt command. Their
//! idempotency keys are content hashes, so the same decision planned again (the next batch, or
//! another replica after a reconnect) carries the same key and the actuator executes it once.
//! The basis lists the in-flight claims the plan saw, so the actuator can refuse stale plans.

use prost::Message;
use proto::v1 as pb;
use sha2::{Digest, Sha256};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::convert::to_wire::{decision_out, planned_claim_out};
use crate::metrics::Metrics;
use planner::model::ClusterSnapshot;
use planner::plan::Plan;
use service_shell::auth::AddBearer;

/// Names of the NodeClaims that have no Node yet: no Node has the claim's `status.nodeName` or
/// its provider id.
pub fn in_flight_claims(snapshot: &ClusterSnapshot) -> Vec<String> {
    let names: std::collections::BTreeSet<&str> =
        snapshot.nodes.iter().map(|n| n.name.as_str()).collect();
    let providers: std::collections::BTreeSet<&str> = snapshot
        .nodes
        .iter()
        .filter_map(|n| n.provider_id.as_deref())
        .collect();
    let mut out: Vec<String> = snapshot
        .node_claims
        .iter()
        .filter(|c| {
            let by_name = c.node_name.as_deref().is_some_and(|n| names.contains(n));
            let by_provider = c
                .provider_id
                .as_deref()
                .is_some_and(|p| providers.contains(p));
            !by_name && !by_provider
        })
        .map(|c| c.name.clone())
        .collect();
    out.sort();
    out
}

fn hash_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The submission for one session plan. Pure: the same plan and basis give the same request.
pub fn submission(
    session_id: &str,
    sequence: u64,
    snapshot: &ClusterSnapshot,
    now: i64,
    plan: &Plan,
) -> pb::SubmitRequest {
    use pb::command::Command as C;
    let mut commands = Vec::new();
    for claim in &plan.node_claims {
        let node_claim = planned_claim_out(claim);
        let key = format!("launch-{}", hash_hex(&node_claim.encode_to_vec()));
        commands.push(pb::Command {
            command: Some(C::Launch(pb::LaunchCommand {
                idempotency_key: key,
                node_claim: Some(node_claim),
                // The NodePool's template fields (node class, startup taints, expiry) are not
                // sent yet; the actuator launches without them until the planner fills this.
                template: None,
            })),
        });
    }
    for d in &plan.disruptions {
        let decision = decision_out(d);
        let key = format!("disrupt-{}", hash_hex(&decision.encode_to_vec()));
        commands.push(pb::Command {
            command: Some(C::Disrupt(pb::DisruptCommand {
                idempotency_key: key,
                decision: Some(decision),
            })),
        });
    }
    let basis = pb::PlanBasis {
        in_flight_claims: in_flight_claims(snapshot),
        now,
        sequence,
    };
    let mut content = basis.encode_to_vec();
    for c in &commands {
        content.extend(c.encode_to_vec());
    }
    pb::SubmitRequest {
        plan_id: hash_hex(&content),
        session_id: session_id.to_string(),
        basis: Some(basis),
        commands,
    }
}

/// A client of the actuator that sessions submit through. Cheap to clone.
#[derive(Clone)]
pub struct Forwarder {
    client: pb::actuator_client::ActuatorClient<InterceptedService<Channel, AddBearer>>,
    metrics: Metrics,
}

// === impl Forwarder ===

impl Forwarder {
    /// Submits over `channel`, authenticating with `auth`.
    pub fn new(channel: Channel, auth: AddBearer, metrics: Metrics) -> Self {
        Self {
            client: pb::actuator_client::ActuatorClient::with_interceptor(channel, auth),
            metrics,
        }
    }

    /// Submits a plan's commands (plans without commands are not sent). Failures are logged and
    /// counted, never fatal: the next batch submits again under the same keys.
    /// Returns the new claims the actuator recorded under another name than the planned one,
    /// as `(planned name, NodeClaim name)` (see [`renamed`]).
    pub async fn submit(
        &self,
        session_id: &str,
        sequence: u64,
        snapshot: &ClusterSnapshot,
        now: i64,
        plan: &Plan,
    ) -> Vec<(String, String)> {
        let req = submission(session_id, sequence, snapshot, now, plan);
        if req.commands.is_empty() {
            return Vec::new();
        }
        let n = req.commands.len();
        let plan_id = req.plan_id.clone();
        let planned: Vec<(String, String)> = req
            .commands
            .iter()
            .filter_map(|c| match &c.command {
                Some(pb::command::Command::Launch(l)) => Some((
                    l.idempotency_key.clone(),
                    l.node_claim.as_ref()?.name.clone(),
                )),
                _ => None,
            })
            .collect();
        match self.client.clone().submit(req).await {
            Ok(resp) => {
                let renames = renamed(&planned, &resp.get_ref().results);
                let rejected = resp
                    .get_ref()
                    .results
                    .iter()
                    .filter(|r| r.status == "Rejected")
                    .count();
                tracing::info!(%plan_id, commands = n, rejected, "Submitted plan to actuator");
                self.metrics.actuator_submitted(n, true);
                renames
            }
            Err(status) => {
                tracing::warn!(%plan_id, code = ?status.code(), message = status.message(), "Actuator submission failed");
                self.metrics.actuator_submitted(n, false);
                Vec::new()
            }
        }
    }
}

/// The launches (`(idempotency key, planned name)`) the actuator recorded under another
/// NodeClaim name: it never reuses the name of a claim that is gone (Karpenter gives each
/// NodeClaim a fresh name), so a claim planned again for pods whose claim was deleted runs
/// under a new name, and the pods' Events must name that one.
pub fn renamed(
    planned: &[(String, String)],
    results: &[pb::CommandResult],
) -> Vec<(String, String)> {
    planned
        .iter()
        .filter_map(|(key, name)| {
            let r = results.iter().find(|r| &r.idempotency_key == key)?;
            (!r.claim.is_empty() && &r.claim != name).then(|| (name.clone(), r.claim.clone()))
        })
        .collect()
}

/// Renames the plan's new claims as the actuator recorded them (see [`renamed`]).
pub fn apply_renames(plan: &mut Plan, renames: &[(String, String)]) {
    for c in &mut plan.node_claims {
        if let Some((_, to)) = renames.iter().find(|(from, _)| *from == c.name) {
            c.name = to.clone();
        }
    }
}
