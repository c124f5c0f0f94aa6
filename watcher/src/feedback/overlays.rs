//! NodeOverlay status as Karpenter's NodeOverlay controller writes it
//! (kubernetes-sigs/karpenter `pkg/controllers/nodeoverlay/controller.go`
//! `updateOverlayStatuses`): `ValidationSucceeded` True, or False with reason
//! `RuntimeValidation` / `Conflict`, and the root condition `Ready` following it (operatorpkg's
//! `NewReadyConditions`), from each plan's `nodeOverlays`. An overlay the plan left out as
//! invalid (`excluded`, kind NodeOverlay) is `ValidationSucceeded=False` with the plan's reason
//! and message. Writes carry the overlay's `resourceVersion`; a conflict is retried on the
//! next reconcile.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::conditions::patch_conditions;
use crate::informers::karpenter_resource;

/// The condition Karpenter's NodeOverlay controller writes.
pub(super) const VALIDATION: &str = "ValidationSucceeded";

/// One overlay's verdict: `None` valid, else (reason, message).
type Verdict = Option<(String, String)>;

/// `current` with `ValidationSucceeded` and `Ready` set to `verdict`; `None` when nothing
/// changes. A condition keeps its `lastTransitionTime` while its status stays.
pub(super) fn merged_conditions(
    current: &[Value],
    verdict: Option<(&str, &str)>,
    generation: Option<i64>,
    now: &str,
) -> Option<Vec<Value>> {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        super::conditions::condition(current, type_, status, reason, message, generation, now)
    };
    let (validation, ready) = match verdict {
        None => (
            condition(VALIDATION, "True", VALIDATION, ""),
            condition("Ready", "True", "Ready", ""),
        ),
        Some((reason, message)) => (
            condition(VALIDATION, "False", reason, message),
            condition(
                "Ready",
                "False",
                "UnhealthyDependents",
                &format!("{VALIDATION}=False"),
            ),
        ),
    };
    let mut out: Vec<Value> = current
        .iter()
        .filter(|c| c["type"] != VALIDATION && c["type"] != "Ready")
        .cloned()
        .collect();
    out.push(validation);
    out.push(ready);
    out.sort_by(|a, b| a["type"].as_str().cmp(&b["type"].as_str()));
    let mut sorted_current = current.to_vec();
    sorted_current.sort_by(|a, b| a["type"].as_str().cmp(&b["type"].as_str()));
    (out != sorted_current).then_some(out)
}

/// Writes NodeOverlay status.
pub struct OverlayStatus {
    api: Api<DynamicObject>,
    verdicts: BTreeMap<String, Verdict>,
}

// === impl OverlayStatus ===

impl OverlayStatus {
    /// A writer over the cluster's NodeOverlays.
    pub fn new(client: kube::Client) -> Self {
        let ar = karpenter_resource("karpenter.sh", "NodeOverlay");
        Self {
            api: Api::all_with(client, &ar),
            verdicts: BTreeMap::new(),
        }
    }

    /// Records each overlay's verdict from a plan (replacing those of the previous plan). A
    /// plan made with the gate off says nothing about overlays, and nothing is written.
    pub fn note_plan(&mut self, plan: &proto::v1::PlanResponse) {
        let mut verdicts: BTreeMap<String, Verdict> = plan
            .node_overlays
            .iter()
            .map(|o| {
                let verdict =
                    (!o.validation_succeeded).then(|| (o.reason.clone(), o.message.clone()));
                (o.name.clone(), verdict)
            })
            .collect();
        if plan.options.as_ref().is_some_and(|o| o.node_overlay) {
            for e in plan.excluded.iter().filter(|e| e.kind == "NodeOverlay") {
                let message = if e.field.is_empty() {
                    e.message.clone()
                } else {
                    format!("{} (field {})", e.message, e.field)
                };
                verdicts.insert(e.name.clone(), Some((e.reason.clone(), message)));
            }
        }
        self.verdicts = verdicts;
    }

    /// Writes each overlay's conditions where they differ from its verdict.
    pub async fn reconcile(&mut self) {
        for (name, verdict) in &self.verdicts {
            let verdict = verdict.as_ref().map(|(r, m)| (r.as_str(), m.as_str()));
            match self.write(name, verdict).await {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    tracing::warn!(overlay = %name, error = %e, "Cannot write NodeOverlay status")
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
            tracing::info!(overlay = %name, valid = verdict.is_none(), "NodeOverlay status written");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_follow_the_verdict_and_keep_their_transition_times() {
        let valid = merged_conditions(&[], None, Some(1), "t0").expect("written");
        assert_eq!(valid.len(), 2);
        assert!(
            valid
                .iter()
                .all(|c| c["status"] == "True" && c["lastTransitionTime"] == "t0")
        );
        assert!(merged_conditions(&valid, None, Some(1), "t1").is_none());
        let conflict = merged_conditions(
            &valid,
            Some(("Conflict", "conflict with another overlay")),
            Some(1),
            "t2",
        )
        .expect("changed");
        let v = conflict.iter().find(|c| c["type"] == VALIDATION).unwrap();
        assert_eq!(v["status"], "False");
        assert_eq!(v["reason"], "Conflict");
        assert_eq!(v["lastTransitionTime"], "t2");
        let ready = conflict.iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(ready["status"], "False");
    }
}
