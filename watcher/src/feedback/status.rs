//! NodePool status: resources in use and node count (summed over the Nodes labelled
//! `karpenter.sh/nodepool=<pool>`), and the conditions ValidationSucceeded (the pool converts and
//! the planner did not leave it out of the latest plan), NodeClassReady (its EC2NodeClass exists
//! and was not left out) and Ready (both); NodeRegistrationHealthy starts Unknown here and is
//! the actuator's from then on (conditions written by others are kept). Written with a merge patch on the status subresource
//! only when it changed; transition times are kept while a condition holds.
//!
//! As Karpenter's: `ValidationSucceeded=False` with reason `NodePoolValidationFailed`
//! (`pkg/controllers/nodepool/validation/controller.go`), `NodeClassReady=False` with the node
//! class's reason (`pkg/controllers/nodepool/readiness/controller.go`), and a pool that is not
//! Ready gets no capacity (`NewScheduler` in `pkg/controllers/provisioning/provisioner.go`
//! skips it; here the planner leaves it out).

use std::collections::{BTreeMap, HashMap};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use proto::v1::upsert::Object;
use serde_json::{Value, json};

use super::{Error, Result};
use crate::informers::{Invalid, karpenter_resource};
use crate::mirror::{Kind, Mirror};
use k8s_reader::quantity;

/// One condition, without its transition time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `Ready`, `ValidationSucceeded` or `NodeClassReady`.
    pub type_: &'static str,
    /// `True` or `False`.
    pub status: &'static str,
    /// A CamelCase reason.
    pub reason: String,
    /// Details for people.
    pub message: String,
}

/// The status the watcher wants a NodePool to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// Summed capacity of the pool's nodes, plus `nodes`.
    pub resources: BTreeMap<String, String>,
    /// Nodes of the pool.
    pub nodes: u64,
    /// The conditions.
    pub conditions: Vec<Condition>,
}

fn cond(type_: &'static str, ok: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_,
        status: if ok { "True" } else { "False" },
        reason: reason.into(),
        message,
    }
}

/// Why the planner left a NodePool out of its latest plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    /// The plan's reason (`Invalid`, `Unsupported`, `Duplicate`, `NodeClassExcluded`).
    pub reason: String,
    /// Its message.
    pub message: String,
}

/// The status of every NodePool: those in the mirror, and those that failed validation
/// (`invalid`: name → why); `excluded` are the pools the latest plan left out.
pub fn desired_status(
    mirror: &Mirror,
    invalid: &HashMap<String, String>,
    excluded: &HashMap<String, Excluded>,
) -> BTreeMap<String, Desired> {
    let s = mirror.lock();
    let classes: Vec<&str> = s
        .iter(Kind::NodeClass)
        .filter_map(|o| match o {
            Object::NodeClass(c) => Some(c.name.as_str()),
            _ => None,
        })
        .collect();
    let mut usage: HashMap<&str, (BTreeMap<String, i128>, u64)> = HashMap::new();
    for o in s.iter(Kind::Node) {
        let Object::Node(n) = o else { continue };
        let Some(pool) = n.labels.get(common::labels::NODEPOOL) else {
            continue;
        };
        let (sum, count) = usage.entry(pool.as_str()).or_default();
        *count += 1;
        for (k, m) in &n.capacity_milli {
            *sum.entry(k.clone()).or_default() += i128::from(*m);
        }
    }
    let mut out = BTreeMap::new();
    for o in s.iter(Kind::NodePool) {
        let Object::NodePool(p) = o else { continue };
        let (sum, nodes) = usage.remove(p.name.as_str()).unwrap_or_default();
        let mut resources: BTreeMap<String, String> = sum
            .into_iter()
            .map(|(k, v)| (k, quantity::format_milli(v)))
            .collect();
        resources.insert("nodes".into(), nodes.to_string());
        let class = p.node_class.as_deref().unwrap_or_default();
        let left_out = excluded.get(&p.name);
        let class_excluded = left_out.filter(|e| e.reason == "NodeClassExcluded");
        let invalid_pool = left_out.filter(|e| e.reason != "NodeClassExcluded");
        let class_ok = classes.contains(&class) && class_excluded.is_none();
        let class_cond = match class_excluded {
            Some(e) => cond(
                "NodeClassReady",
                false,
                "NodeClassExcluded",
                e.message.clone(),
            ),
            None if class_ok => cond("NodeClassReady", true, "NodeClassReady", String::new()),
            None => cond(
                "NodeClassReady",
                false,
                "NodeClassNotFound",
                format!("EC2NodeClass {class:?} not found"),
            ),
        };
        let validation = match invalid_pool {
            Some(e) => cond(
                "ValidationSucceeded",
                false,
                "NodePoolValidationFailed",
                format!("{} ({})", e.message, e.reason),
            ),
            None => cond(
                "ValidationSucceeded",
                true,
                "ValidationSucceeded",
                String::new(),
            ),
        };
        let ready = if invalid_pool.is_some() {
            cond(
                "Ready",
                false,
                "ValidationFailed",
                "ValidationSucceeded=False".into(),
            )
        } else if class_ok {
            cond("Ready", true, "Ready", String::new())
        } else {
            cond(
                "Ready",
                false,
                "NodeClassNotReady",
                "NodeClassReady=False".into(),
            )
        };
        out.insert(
            p.name.clone(),
            Desired {
                resources,
                nodes,
                conditions: vec![validation, class_cond, ready],
            },
        );
    }
    for (name, why) in invalid {
        if out.contains_key(name) {
            continue;
        }
        out.insert(
            name.clone(),
            Desired {
                resources: BTreeMap::from([("nodes".to_string(), "0".to_string())]),
                nodes: 0,
                conditions: vec![
                    cond(
                        "ValidationSucceeded",
                        false,
                        "NodePoolValidationFailed",
                        why.clone(),
                    ),
                    cond(
                        "Ready",
                        false,
                        "ValidationFailed",
                        "ValidationSucceeded=False".into(),
                    ),
                ],
            },
        );
    }
    out
}

/// Writes NodePool status when it changes.
pub struct NodePoolStatus {
    api: Api<DynamicObject>,
    written: HashMap<String, Desired>,
    invalid: HashMap<String, String>,
    excluded: HashMap<String, Excluded>,
}

// === impl NodePoolStatus ===

impl NodePoolStatus {
    /// A writer over the cluster's NodePools.
    pub fn new(client: kube::Client) -> Self {
        let ar = karpenter_resource("karpenter.sh", "NodePool");
        Self {
            api: Api::all_with(client, &ar),
            written: HashMap::new(),
            invalid: HashMap::new(),
            excluded: HashMap::new(),
        }
    }

    /// Records the NodePools a plan left out (replacing those of the previous plan).
    pub fn note_plan(&mut self, plan: &proto::v1::PlanResponse) {
        self.excluded = plan
            .excluded
            .iter()
            .filter(|e| e.kind == "NodePool")
            .map(|e| {
                (
                    e.name.clone(),
                    Excluded {
                        reason: e.reason.clone(),
                        message: e.message.clone(),
                    },
                )
            })
            .collect();
    }

    /// Records a NodePool that failed validation.
    pub fn note_invalid(&mut self, bad: &Invalid) {
        if bad.kind == Kind::NodePool {
            self.invalid.insert(bad.name.clone(), bad.reason.clone());
        }
    }

    /// Writes every status that differs from what was last written.
    pub async fn reconcile(&mut self, mirror: &Mirror) {
        let desired = desired_status(mirror, &self.invalid, &self.excluded);
        // A pool that converts now is valid again.
        self.invalid.retain(|name, _| {
            !mirror
                .lock()
                .iter(Kind::NodePool)
                .any(|o| matches!(o, Object::NodePool(p) if &p.name == name))
        });
        self.written.retain(|name, _| desired.contains_key(name));
        for (name, want) in desired {
            if self.written.get(&name) == Some(&want) {
                continue;
            }
            match self.write(&name, &want).await {
                Ok(()) => {
                    self.written.insert(name, want);
                }
                Err(e) => {
                    tracing::warn!(nodepool = %name, error = %e, "Cannot write NodePool status");
                    if matches!(&e, Error::Kube { source: kube::Error::Api(s), .. } if s.code == 404)
                    {
                        self.invalid.remove(&name);
                    }
                }
            }
        }
    }

    async fn write(&self, name: &str, want: &Desired) -> Result<()> {
        let err = |source| Error::Kube {
            what: format!("status of NodePool {name}"),
            source,
        };
        let current = self.api.get(name).await.map_err(err)?;
        let generation = current.metadata.generation;
        let old: Vec<Value> = current
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let now = jiff_now();
        // Conditions others write on the pool (the actuator's NodeRegistrationHealthy) are kept;
        // the write carries the resourceVersion read, so a concurrent write is not lost (a
        // conflict is retried on the next reconcile).
        let mut conditions: Vec<Value> = old
            .iter()
            .filter(|o| !want.conditions.iter().any(|c| o["type"] == c.type_))
            .cloned()
            .collect();
        conditions.extend(want.conditions.iter().map(|c| {
            let since = old
                .iter()
                .find(|o| o["type"] == c.type_ && o["status"] == c.status)
                .and_then(|o| o.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| Value::String(now.clone()));
            json!({
                "type": c.type_,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": since,
                "observedGeneration": generation,
            })
        }));
        if !old.iter().any(|o| o["type"] == "NodeRegistrationHealthy") {
            // Karpenter's registration health starts Unknown
            // (`pkg/controllers/nodepool/registrationhealth/controller.go`); the actuator
            // moves it with the registrations it sees.
            conditions.push(json!({
                "type": "NodeRegistrationHealthy",
                "status": "Unknown",
                "reason": "AwaitingReconciliation",
                "message": "object is awaiting reconciliation",
                "lastTransitionTime": now,
                "observedGeneration": generation,
            }));
        }
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "status": {
            "resources": want.resources,
            "nodes": want.nodes,
            "conditions": conditions,
        }});
        self.api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(err)?;
        Ok(())
    }
}

/// RFC 3339 time of now, for condition transition times (status is for people; the planner
/// never reads it).
pub(super) fn jiff_now() -> String {
    let secs = service_shell::clock::Clock::new().now_secs();
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}
