//! The NodePool condition `NodeRegistrationHealthy`, as Karpenter v1.14 keeps it
//! (kubernetes-sigs/karpenter `pkg/state/nodepoolhealth/tracker.go`,
//! `pkg/controllers/nodeclaim/lifecycle/{registration,liveness}.go`,
//! `pkg/controllers/nodepool/registrationhealth/controller.go`): the last 4 registration
//! outcomes of each NodePool's claims; half or more of them failures → `False` (reason
//! `RegistrationFailed`, message `Failed to register node`), else a success makes it `True`.
//! The buffer starts from the condition already written when that was written for the pool's
//! current generation (a restart keeps the verdict), and is reset when the NodePool's generation
//! changes (its spec changed, as Karpenter resets it on a NodePool update; the watcher writes
//! the first `Unknown`).
//!
//! The watcher writes the other NodePool conditions; both keep the conditions they do not own
//! and write with the pool's `resourceVersion`.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crds::NodePool;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// Outcomes remembered per NodePool.
pub const BUFFER_SIZE: usize = 4;
/// Share of failures (of [`BUFFER_SIZE`]) that makes a pool unhealthy.
pub const THRESHOLD_FALSE: f64 = 0.5;
/// The condition type.
pub const CONDITION: &str = "NodeRegistrationHealthy";

/// What the buffer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// No outcome recorded.
    Unknown,
    /// Fewer failures than the threshold.
    Healthy,
    /// The threshold reached.
    Unhealthy,
}

/// The health of a buffer of outcomes (true: registered).
pub fn health(buffer: &VecDeque<bool>) -> Health {
    if buffer.is_empty() {
        return Health::Unknown;
    }
    let failures = buffer.iter().filter(|ok| !**ok).count();
    if failures as f64 / BUFFER_SIZE as f64 >= THRESHOLD_FALSE {
        Health::Unhealthy
    } else {
        Health::Healthy
    }
}

fn push(buffer: &mut VecDeque<bool>, ok: bool) {
    if buffer.len() == BUFFER_SIZE {
        buffer.pop_front();
    }
    buffer.push_back(ok);
}

/// The generation of a NodePool its outcomes are of, and the outcomes.
type Outcomes = (Option<i64>, VecDeque<bool>);

/// Per-NodePool registration outcomes.
#[derive(Debug, Default)]
pub struct RegistrationHealth {
    buffers: Mutex<HashMap<String, Outcomes>>,
}

// === impl RegistrationHealth ===

impl RegistrationHealth {
    /// Records one registration outcome of a claim of `pool` and writes the condition when it
    /// changes. Errors are logged: status is for people, registration goes on.
    pub async fn record(&self, client: &kube::Client, pool: &str, registered: bool, now: &str) {
        if pool.is_empty() {
            return;
        }
        let api: Api<NodePool> = Api::all(client.clone());
        let np = match api.get_opt(pool).await {
            Ok(Some(np)) => np,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(nodepool = %pool, error = %e, "Cannot read the NodePool for its registration health");
                return;
            }
        };
        let generation = np.metadata.generation;
        let value = serde_json::to_value(&np.status).unwrap_or(Value::Null);
        let conditions: Vec<Value> = value["conditions"].as_array().cloned().unwrap_or_default();
        let current = conditions.iter().find(|c| c["type"] == CONDITION);
        let verdict = {
            let mut buffers = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
            let (of, buffer) = buffers
                .entry(pool.to_string())
                .or_insert_with(|| (generation, VecDeque::new()));
            if *of != generation {
                *of = generation;
                buffer.clear();
            } else if buffer.is_empty()
                && current.is_some_and(|c| c["observedGeneration"].as_i64() == generation)
            {
                // After a restart: start from the verdict written for this generation.
                match current.and_then(|c| c["status"].as_str()) {
                    Some("True") => push(buffer, true),
                    Some("False") => {
                        for _ in 0..(BUFFER_SIZE as f64 * THRESHOLD_FALSE) as usize {
                            push(buffer, false);
                        }
                    }
                    _ => {}
                }
            }
            push(buffer, registered);
            health(buffer)
        };
        let (status, reason, message) = match verdict {
            Health::Healthy if registered => ("True", CONDITION, ""),
            Health::Unhealthy if !registered => {
                ("False", "RegistrationFailed", "Failed to register node")
            }
            // Karpenter moves the condition only on the outcome that tips it.
            _ => return,
        };
        let mut np = np;
        for attempt in 0..3 {
            match write(&api, pool, &np, (status, reason, message), now).await {
                Ok(()) => return,
                // Someone else wrote the pool's status meanwhile (the watcher): read it again.
                Err(kube::Error::Api(e)) if e.code == 409 && attempt < 2 => {
                    match api.get_opt(pool).await {
                        Ok(Some(fresh)) => np = fresh,
                        _ => return,
                    }
                }
                Err(e) => {
                    tracing::warn!(nodepool = %pool, error = %e, "Cannot write NodeRegistrationHealthy");
                    return;
                }
            }
        }
    }
}

/// Writes the condition on `np` (kept as it is when it already says so), with its
/// `resourceVersion`, keeping the other conditions.
async fn write(
    api: &Api<NodePool>,
    pool: &str,
    np: &NodePool,
    (status, reason, message): (&str, &str, &str),
    now: &str,
) -> Result<(), kube::Error> {
    let generation = np.metadata.generation;
    let value = serde_json::to_value(&np.status).unwrap_or(Value::Null);
    let conditions: Vec<Value> = value["conditions"].as_array().cloned().unwrap_or_default();
    let current = conditions.iter().find(|c| c["type"] == CONDITION);
    if current
        .is_some_and(|c| c["status"] == status && c["observedGeneration"].as_i64() == generation)
    {
        return Ok(());
    }
    let since = current
        .filter(|c| c["status"] == status)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now));
    let mut out: Vec<Value> = conditions
        .iter()
        .filter(|c| c["type"] != CONDITION)
        .cloned()
        .collect();
    out.push(json!({
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }));
    let patch = json!({
        "metadata": {"resourceVersion": np.metadata.resource_version},
        "status": {"conditions": out},
    });
    api.patch_status(pool, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    tracing::info!(nodepool = %pool, status, reason, "NodeRegistrationHealthy written");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_of_four_failures_is_unhealthy() {
        let mut b = VecDeque::new();
        assert_eq!(health(&b), Health::Unknown);
        push(&mut b, false);
        // One failure of four slots: 25%.
        assert_eq!(health(&b), Health::Healthy);
        push(&mut b, false);
        assert_eq!(health(&b), Health::Unhealthy);
        for _ in 0..3 {
            push(&mut b, true);
        }
        assert_eq!(b.len(), BUFFER_SIZE);
        assert_eq!(health(&b), Health::Healthy);
    }
}
