//! Events on pods (and, from [`super::claims`], on Nodes and NodeClaims), each sent once per
//! distinct message (a pod nominated to the same claim by ten plans in a row gets one Event). A
//! new message is a new Event: kube's `Recorder` keys its series by object, reason and action
//! only, so a second `Nominated` (the pod's claim deleted and replaced under a new name) would
//! only bump the count of the first and keep its note; each Event is therefore written by a
//! recorder without that memory, this writer's own `sent` map doing the deduplication.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use proto::v1 as pb;

use crate::informers::Invalid;
use crate::mirror::{Kind, Mirror};

/// One Event to write on a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    /// `namespace/name`.
    pub pod: String,
    /// The pod's uid.
    pub uid: String,
    /// `Nominated` or `FailedScheduling`.
    pub reason: &'static str,
    /// The message.
    pub note: String,
}

/// The Events a plan calls for, on pods still pending in the mirror.
pub fn pod_events(plan: &pb::PlanResponse, mirror: &Mirror) -> Vec<PodEvent> {
    let state = mirror.lock();
    let mut out = Vec::new();
    let mut push = |pod: &str, reason: &'static str, note: String| {
        if let Some(uid) = state.pending_uid(pod) {
            out.push(PodEvent {
                pod: pod.to_string(),
                uid: uid.to_string(),
                reason,
                note,
            });
        }
    };
    for c in &plan.node_claims {
        for p in &c.pods {
            push(
                p,
                "Nominated",
                format!("Pod should schedule on: nodeclaim/{}", c.name),
            );
        }
    }
    for n in &plan.existing_nodes {
        for p in &n.pods {
            push(
                p,
                "Nominated",
                format!("Pod should schedule on: node/{}", n.name),
            );
        }
    }
    for u in &plan.unschedulable {
        push(
            &u.pod,
            "FailedScheduling",
            format!("Failed to schedule pod, {}", u.reason),
        );
    }
    for e in plan.excluded.iter().filter(|e| e.kind == "Pod") {
        push(
            &common::key::namespaced(&e.namespace, &e.name),
            "FailedScheduling",
            format!("Ignoring pod, it was left out of the plan: {}", e.message),
        );
    }
    out
}

/// One Event on a Node, a NodeClaim (`DisruptionBlocked`, `Unconsolidatable` or
/// `ConsolidationApproved`) or a NodePool (`DisruptionBlocked` by its budgets,
/// `ConsolidationApproved`).
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionEvent {
    /// The object.
    pub object: ObjectReference,
    /// `DisruptionBlocked`, `Unconsolidatable` or `ConsolidationApproved`.
    pub reason: &'static str,
    /// Karpenter's message.
    pub note: String,
}

/// Writes Events, skipping any the same object already got.
pub struct Events {
    client: kube::Client,
    reporter: Reporter,
    sent: HashMap<String, (String, String)>,
}

// === impl Events ===

impl Events {
    /// A writer reporting as `reporter`.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            sent: HashMap::new(),
        }
    }

    /// Writes each Event not already written.
    pub async fn publish_all(&mut self, events: Vec<PodEvent>) {
        for e in events {
            let (namespace, name) = e.pod.split_once('/').unwrap_or(("default", &e.pod));
            let kind = if e.reason == "Nominated" {
                EventType::Normal
            } else {
                EventType::Warning
            };
            self.publish(namespace, name, &e.uid, kind, e.reason, e.note)
                .await;
        }
        if self.sent.len() > 200_000 {
            // Pods come and go; forget the oldest state wholesale rather than track ages.
            self.sent.clear();
        }
    }

    /// One Event for an object that cannot be planned (pods only; other kinds report in
    /// their status).
    pub async fn invalid(&mut self, bad: &Invalid) {
        if bad.kind != Kind::Pod {
            return;
        }
        let note = format!("Ignoring pod, it cannot be planned: {}", bad.reason);
        self.publish(
            &bad.namespace,
            &bad.name,
            &bad.uid,
            EventType::Warning,
            "FailedScheduling",
            note,
        )
        .await;
    }

    /// Writes each disruption Event (type Normal, as Karpenter's) not already written.
    pub async fn publish_disruption(&mut self, events: Vec<DisruptionEvent>) {
        for e in events {
            let kind = e.object.kind.clone().unwrap_or_default();
            let name = e.object.name.clone().unwrap_or_default();
            let uid = e.object.uid.clone().unwrap_or_default();
            // One slot per object and reason, so that each reason dedupes on its own; a
            // NodePool's budget Events also per message (one per disruption reason, as
            // Karpenter dedupes them by pool and reason).
            let mut key = format!(
                "{kind}/{}/{}",
                common::key::object(&uid, None, &name),
                e.reason
            );
            if kind == "NodePool" {
                key = format!("{key}/{}", e.note);
            }
            self.send(
                key,
                e.object,
                EventType::Normal,
                e.reason,
                e.note,
                "Disrupting",
            )
            .await;
        }
    }

    async fn publish(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        kind: EventType,
        reason: &'static str,
        note: String,
    ) {
        let key = common::key::object(uid, Some(namespace), name);
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: (!uid.is_empty()).then(|| uid.to_string()),
            ..Default::default()
        };
        self.send(key, reference, kind, reason, note, "Scheduling")
            .await;
    }

    async fn send(
        &mut self,
        key: String,
        reference: ObjectReference,
        kind: EventType,
        reason: &'static str,
        note: String,
        action: &str,
    ) {
        let last = (reason.to_string(), note.clone());
        if self.sent.get(&key) == Some(&last) {
            return;
        }
        let ev = Event {
            type_: kind,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        match recorder.publish(&ev, &reference).await {
            Ok(()) => {
                if reason == "FailedScheduling" && last.1.ends_with(common::dra::REFUSED) {
                    // As Karpenter's Results.Record, once per pod (not every plan).
                    tracing::info!(pod = ?reference.name, namespace = ?reference.namespace, "{}", common::dra::REFUSED_LOG);
                }
                self.sent.insert(key, last);
            }
            Err(e) => {
                tracing::warn!(kind = ?reference.kind, namespace = ?reference.namespace, name = ?reference.name, reason, error = %e, "Cannot write an Event")
            }
        }
    }
}
