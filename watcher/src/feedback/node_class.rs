//! EC2NodeClasses the plan left out: condition `PlannerValidationSucceeded=False`
//! with the plan's reason (`Invalid`, `Unsupported`, `Duplicate`) and message, and `Ready=False`,
//! so that `kubectl get ec2nodeclass` shows the class is not used and why.
//!
//! The actuator owns the rest of the class's status (its resolution: `AMIsReady`,
//! `SubnetsReady`, …, and `Ready` over all of them); it keeps this condition, which it does not
//! write, and counts it in `Ready` (`actuator::node_class_status`). So the watcher writes `Ready`
//! only when it would otherwise say True (it never rewrites the actuator's `False` message), and
//! removes its condition when the class is planned again, setting `Ready=True` only if it was
//! the one that made it False and nothing else is False. Writes carry the class's
//! `resourceVersion`; a conflict is retried on the next reconcile.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::conditions::{condition, conditions_of, patch_conditions};
use crate::informers::karpenter_resource;

/// The condition type the watcher writes.
pub(super) const CONDITION: &str = "PlannerValidationSucceeded";

/// The message of `Ready=False` the watcher writes.
pub(super) fn ready_message() -> String {
    format!("{CONDITION} not ready")
}

/// The class's conditions with the watcher's verdict applied: `excluded` (reason, message) puts
/// `PlannerValidationSucceeded=False` and, when `Ready` is not already False, `Ready=False`;
/// `None` removes the condition (and the `Ready=False` it wrote, when nothing else is False).
/// Returns `None` when nothing changes.
pub(super) fn merged_conditions(
    current: &[Value],
    excluded: Option<(&str, &str)>,
    generation: Option<i64>,
    now: &str,
) -> Option<Vec<Value>> {
    let mut out: Vec<Value> = current
        .iter()
        .filter(|c| c["type"] != CONDITION)
        .cloned()
        .collect();
    let set = |type_: &str, status: &str, reason: &str, message: &str| {
        condition(current, type_, status, reason, message, generation, now)
    };
    let ready_at = out.iter().position(|c| c["type"] == "Ready");
    match excluded {
        Some((reason, message)) => {
            out.push(set(CONDITION, "False", reason, message));
            let ready = set("Ready", "False", "NotReady", &ready_message());
            match ready_at {
                Some(i) if out[i]["status"] == "False" => {}
                Some(i) => out[i] = ready,
                None => out.push(ready),
            }
        }
        None => {
            if let Some(i) = ready_at
                && out[i]["status"] == "False"
                && out[i]["message"] == ready_message().as_str()
                && !out
                    .iter()
                    .any(|c| c["type"] != "Ready" && c["status"] == "False")
            {
                out[i] = set("Ready", "True", "Ready", "");
            }
        }
    }
    (out != current).then_some(out)
}

/// Writes the verdict on EC2NodeClasses.
pub struct NodeClassStatus {
    api: Api<DynamicObject>,
    excluded: BTreeMap<String, (String, String)>,
    /// Classes that carry (or may carry) the condition.
    marked: BTreeSet<String>,
    listed: bool,
}

// === impl NodeClassStatus ===

impl NodeClassStatus {
    /// A writer over the cluster's EC2NodeClasses.
    pub fn new(client: kube::Client) -> Self {
        let ar = karpenter_resource("karpenter.k8s.aws", "EC2NodeClass");
        Self {
            api: Api::all_with(client, &ar),
            excluded: BTreeMap::new(),
            marked: BTreeSet::new(),
            listed: false,
        }
    }

    /// Records the classes a plan left out (replacing those of the previous plan).
    pub fn note_plan(&mut self, plan: &proto::v1::PlanResponse) {
        self.excluded = plan
            .excluded
            .iter()
            // A class left out because the actuator's status says it cannot launch already
            // says so in its own conditions; the watcher adds nothing (and reads nothing of its
            // own back, so the class is planned again once the actuator finds it ready).
            .filter(|e| e.kind == "EC2NodeClass" && e.reason != "NodeClassNotReady")
            .map(|e| {
                let message = if e.field.is_empty() {
                    e.message.clone()
                } else {
                    format!("{} (field {})", e.message, e.field)
                };
                (e.name.clone(), (e.reason.clone(), message))
            })
            .collect();
    }

    /// Writes the condition on the excluded classes and removes it from the others.
    pub async fn reconcile(&mut self) {
        if !self.listed {
            // After a restart: find the classes an earlier run marked.
            match self.api.list(&ListParams::default()).await {
                Ok(list) => {
                    self.listed = true;
                    for o in &list.items {
                        if conditions_of(o).iter().any(|c| c["type"] == CONDITION)
                            && let Some(n) = &o.metadata.name
                        {
                            self.marked.insert(n.clone());
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Cannot list EC2NodeClasses");
                    return;
                }
            }
        }
        let names: BTreeSet<String> = self
            .excluded
            .keys()
            .chain(self.marked.iter())
            .cloned()
            .collect();
        for name in names {
            let verdict = self
                .excluded
                .get(&name)
                .map(|(r, m)| (r.as_str(), m.as_str()));
            match self.write(&name, verdict).await {
                Ok(()) => {
                    if verdict.is_some() {
                        self.marked.insert(name);
                    } else {
                        self.marked.remove(&name);
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    self.marked.remove(&name);
                }
                Err(e) => {
                    tracing::warn!(class = %name, error = %e, "Cannot write EC2NodeClass status")
                }
            }
        }
    }

    async fn write(&self, name: &str, verdict: Option<(&str, &str)>) -> Result<(), kube::Error> {
        let written = patch_conditions(&self.api, name, |current, generation, now| {
            merged_conditions(current, verdict, generation, now)
        })
        .await?;
        if written {
            tracing::info!(class = %name, excluded = verdict.is_some(), "EC2NodeClass planner verdict written");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(t: &str, status: &str, message: &str) -> Value {
        json!({"type": t, "status": status, "reason": t, "message": message, "lastTransitionTime": "t0"})
    }

    #[test]
    fn excluded_class_is_not_ready_and_comes_back() {
        let ready = vec![c("SubnetsReady", "True", ""), c("Ready", "True", "")];
        let out = merged_conditions(&ready, Some(("Unsupported", "newer field")), None, "t1")
            .expect("changed");
        assert_eq!(out[1]["type"], "Ready");
        assert_eq!(out[1]["status"], "False");
        assert_eq!(out[1]["message"], ready_message().as_str());
        assert_eq!(out[2]["type"], CONDITION);
        assert_eq!(out[2]["reason"], "Unsupported");
        // Written once: nothing more to do.
        assert!(
            merged_conditions(&out, Some(("Unsupported", "newer field")), None, "t2").is_none()
        );
        // Planned again: condition gone, Ready back to True.
        let back = merged_conditions(&out, None, None, "t3").expect("changed");
        assert_eq!(back.len(), 2);
        assert_eq!(back[1]["status"], "True");
        assert!(merged_conditions(&back, None, None, "t4").is_none());
    }

    #[test]
    fn the_actuators_ready_false_is_left_alone() {
        let failing = vec![
            c("SubnetsReady", "False", "no subnet"),
            c("Ready", "False", "SubnetsReady not ready"),
        ];
        let out =
            merged_conditions(&failing, Some(("Invalid", "bad")), None, "t1").expect("changed");
        assert_eq!(out[1]["message"], "SubnetsReady not ready");
        let back = merged_conditions(&out, None, None, "t2").expect("changed");
        assert_eq!(back, failing);
    }
}
