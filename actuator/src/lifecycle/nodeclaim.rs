//! The `karpenter.sh/v1` NodeClaim object of a ledger claim: built from the NodePool's template
//! and the planner's launch spec, created idempotently BEFORE the launch (the worker's
//! [`crate::worker::Lifecycle::before_launch`] hook, implemented by [`NodeClaims`]), and its
//! status conditions (`Launched`, `Registered`, `Initialized`, `Ready`) as Karpenter writes them.

use std::collections::BTreeMap;

use async_trait::async_trait;
use crds::nodepool::NodeClaimTemplate;
use crds::{
    Condition, ConditionStatus, EC2NodeClass, NodeClaim, NodeClaimSpec, NodeClaimStatus,
    NodeClassReference, NodePool, NodeSelectorRequirementWithMinValues, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{Result, kube_err};
use crate::launch::{self, LaunchSpec};
use crate::ledger::{ClaimRecord, ClaimState};
use crate::worker::{Lifecycle, LifecycleError};
use service_shell::clock::{Clock, Millis};

/// The finalizer that keeps a NodeClaim until its instance is terminated.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
/// Label naming the NodePool of a NodeClaim and its Node.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
/// Label set on a Node once it is registered (synced with its NodeClaim).
pub const REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// Label set on a Node once it is initialized.
pub const INITIALIZED_LABEL: &str = "karpenter.sh/initialized";
/// The taint a Node registers with until the actuator has synced it (`NoExecute`).
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
/// Instance type label.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
/// Zone label.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Capacity type label.
pub const CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";

/// Condition types of a NodeClaim, in the order Karpenter lists them.
pub const LAUNCHED: &str = "Launched";
/// See [`LAUNCHED`].
pub const REGISTERED: &str = "Registered";
/// See [`LAUNCHED`].
pub const INITIALIZED: &str = "Initialized";
/// The root condition: True once the three above are.
pub const READY: &str = "Ready";
/// Set while the instance is being terminated.
pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";

/// The drift-hash annotations a NodeClaim launched from `node_pool` and `node_class` carries:
/// `karpenter.sh/nodepool-hash` of the NodePool's `spec.template` and
/// `karpenter.k8s.aws/ec2nodeclass-hash` of the EC2NodeClass's `spec` (when it exists), each
/// with its `-version` annotation, computed by the same functions as the planner's drift check
/// (`common::hash`).
pub fn hash_annotations(
    node_pool: &NodePool,
    node_class: Option<&EC2NodeClass>,
) -> BTreeMap<String, String> {
    use common::hash;
    let mut a = BTreeMap::new();
    let template = serde_json::to_value(&node_pool.spec.template).unwrap_or_default();
    a.insert(
        common::labels::NODEPOOL_HASH.to_string(),
        hash::nodepool_template_hash(&template),
    );
    a.insert(
        hash::NODEPOOL_HASH_VERSION_ANNOTATION.to_string(),
        hash::HASH_VERSION.to_string(),
    );
    if let Some(class) = node_class {
        let spec = serde_json::to_value(&class.spec).unwrap_or_default();
        a.insert(
            common::labels::NODECLASS_HASH.to_string(),
            hash::ec2nodeclass_spec_hash(&spec),
        );
        a.insert(
            hash::NODECLASS_HASH_VERSION_ANNOTATION.to_string(),
            hash::HASH_VERSION.to_string(),
        );
    }
    a
}

/// The annotations that tell the planner where a claim's instance sits on the network, for
/// SubnetDrift and SecurityGroupDrift (`common::labels::INSTANCE_SUBNET`,
/// `INSTANCE_SECURITY_GROUPS`: sorted, comma-separated). Only what the provider reported: an
/// instance that says nothing yields nothing (the planner then decides nothing).
pub fn instance_annotations(instance: &cloud::Instance) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    if let Some(subnet) = instance.subnet_id.as_deref().filter(|s| !s.is_empty()) {
        a.insert(
            common::labels::INSTANCE_SUBNET.to_string(),
            subnet.to_string(),
        );
    }
    let mut groups = instance.security_group_ids.clone();
    groups.retain(|g| !g.is_empty());
    groups.sort();
    groups.dedup();
    if !groups.is_empty() {
        a.insert(
            common::labels::INSTANCE_SECURITY_GROUPS.to_string(),
            groups.join(","),
        );
    }
    a
}

/// RFC 3339 (seconds) of a ledger time, as Kubernetes writes `metav1.Time`.
pub fn rfc3339(ms: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A duration in seconds as Karpenter writes it (`720h`, `90m`, `45s`).
pub fn go_duration(seconds: i64) -> String {
    if seconds != 0 && seconds % 3600 == 0 {
        format!("{}h", seconds / 3600)
    } else if seconds != 0 && seconds % 60 == 0 {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

fn taint(t: &launch::Taint) -> Option<Taint> {
    Some(Taint {
        key: t.key.clone(),
        value: (!t.value.is_empty()).then(|| t.value.clone()),
        effect: t.effect,
        time_added: None,
    })
}

fn requirement(r: &launch::Requirement) -> Option<NodeSelectorRequirementWithMinValues> {
    Some(NodeSelectorRequirementWithMinValues {
        key: r.key.clone(),
        operator: serde_json::from_value(json!(r.operator)).ok()?,
        values: (!r.values.is_empty()).then(|| r.values.clone()),
        min_values: r.min_values.and_then(|v| i32::try_from(v).ok()),
    })
}

fn pick_taints(spec: &[launch::Taint], template: Option<&Vec<Taint>>) -> Option<Vec<Taint>> {
    let ts: Vec<Taint> = if spec.is_empty() {
        template.cloned().unwrap_or_default()
    } else {
        spec.iter().filter_map(taint).collect()
    };
    (!ts.is_empty()).then_some(ts)
}

/// The NodeClaim of `claim`: the NodePool template's labels, annotations, taints, startup
/// taints, requirements, expireAfter, terminationGracePeriod and nodeClassRef, overridden by
/// what the planner decided for this claim (its launch spec), plus the `karpenter.sh/nodepool`
/// label and requirement, the offering requirements (instance types, zones, capacity types),
/// the hash annotations, an owner reference to the NodePool and the termination finalizer.
pub fn build(
    claim: &ClaimRecord,
    node_pool: Option<&NodePool>,
    node_class: Option<&EC2NodeClass>,
) -> NodeClaim {
    let spec: &LaunchSpec = &claim.spec;
    let template: Option<&NodeClaimTemplate> = node_pool.map(|p| &p.spec.template);
    let tmeta = template.and_then(|t| t.metadata.as_ref());

    let mut labels: BTreeMap<String, String> =
        tmeta.and_then(|m| m.labels.clone()).unwrap_or_default();
    labels.extend(spec.labels.clone());
    labels.insert(NODEPOOL_LABEL.to_string(), spec.node_pool.clone());

    let mut annotations: BTreeMap<String, String> = tmeta
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.extend(spec.annotations.clone());
    // The hashes of the objects as they are now win over the planner's copies.
    if let Some(p) = node_pool {
        annotations.extend(hash_annotations(p, node_class));
    }

    let mut requirements: Vec<NodeSelectorRequirementWithMinValues> =
        if spec.requirements.is_empty() {
            template
                .map(|t| t.spec.requirements.clone())
                .unwrap_or_default()
        } else {
            spec.requirements.iter().filter_map(requirement).collect()
        };
    // The claim's offerings narrow the template's requirement of the same key, as Karpenter's
    // scheduler narrows a NodeClaim's requirements to what its pods need
    // (`pkg/controllers/provisioning/scheduling/nodeclaim.go`): a claim the planner put in one
    // zone (a zonal spread) says so, even when the NodePool allows three, so that the next plan
    // sees where this capacity in flight will be and places the claim's pods on it instead of
    // planning another claim for them.
    let mut pin = |key: &str, values: Vec<String>| {
        if values.is_empty() {
            return;
        }
        let has_key = requirements.iter().any(|r| r.key == key);
        match requirements
            .iter_mut()
            .find(|r| r.key == key && r.operator == crds::Operator::In)
        {
            Some(r) => {
                let allowed = r.values.clone().unwrap_or_default();
                let narrowed: Vec<String> = values
                    .iter()
                    .filter(|v| allowed.contains(v))
                    .cloned()
                    .collect();
                if !narrowed.is_empty() {
                    r.values = Some(narrowed);
                }
            }
            None if has_key => {}
            None => requirements.push(NodeSelectorRequirementWithMinValues {
                key: key.to_string(),
                operator: crds::Operator::In,
                values: Some(values),
                min_values: None,
            }),
        }
    };
    pin(NODEPOOL_LABEL, vec![spec.node_pool.clone()]);
    pin(INSTANCE_TYPE_LABEL, spec.instance_types.clone());
    pin(ZONE_LABEL, spec.zones.clone());
    pin(
        CAPACITY_TYPE_LABEL,
        spec.capacity_types
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
    );

    let node_class_ref = template
        .map(|t| t.spec.node_class_ref.clone())
        .unwrap_or_else(|| NodeClassReference {
            group: "karpenter.k8s.aws".into(),
            kind: "EC2NodeClass".into(),
            name: spec.node_class.clone().unwrap_or_else(|| "default".into()),
        });
    let expire_after = match spec.expire_after {
        Some(s) => Some(go_duration(s)),
        None => template.map(|t| t.spec.expire_after().to_string()),
    };
    let termination_grace_period = match spec.termination_grace_period {
        Some(s) => Some(go_duration(s)),
        None => template.and_then(|t| t.spec.termination_grace_period.clone()),
    };

    let owner_references = node_pool.and_then(|p| {
        Some(vec![OwnerReference {
            api_version: "karpenter.sh/v1".into(),
            kind: "NodePool".into(),
            name: p.metadata.name.clone()?,
            uid: p.metadata.uid.clone()?,
            block_owner_deletion: Some(true),
            controller: None,
        }])
    });

    let mut nc = NodeClaim::new(
        &claim.name,
        NodeClaimSpec {
            taints: pick_taints(&spec.taints, template.and_then(|t| t.spec.taints.as_ref())),
            startup_taints: pick_taints(
                &spec.startup_taints,
                template.and_then(|t| t.spec.startup_taints.as_ref()),
            ),
            requirements,
            resources: None,
            node_class_ref,
            termination_grace_period,
            expire_after,
        },
    );
    nc.metadata = ObjectMeta {
        name: Some(claim.name.clone()),
        labels: Some(labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        finalizers: Some(vec![TERMINATION_FINALIZER.to_string()]),
        owner_references,
        ..ObjectMeta::default()
    };
    nc
}

/// Sets condition `type_` in `conditions`, keeping its transition time when the status does not
/// change. Returns true when anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    now: &str,
) -> bool {
    let reason = Some(reason.to_string());
    let message = (!message.is_empty()).then(|| message.to_string());
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => false,
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.to_string();
            }
            c.status = status;
            c.reason = reason;
            c.message = message;
            true
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status,
                last_transition_time: now.to_string(),
                reason,
                message,
                observed_generation: None,
            });
            true
        }
    }
}

/// The value of the NodeClaim's label `key`, empty when it has none (as Karpenter's metric
/// labels take it).
pub fn label(nc: &NodeClaim, key: &str) -> String {
    nc.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default()
}

/// True when condition `type_` is True.
pub fn is_true(status: Option<&NodeClaimStatus>, type_: &str) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| crds::common::find_condition(cs, type_))
        .is_some_and(|c| c.status == ConditionStatus::True)
}

/// Sets the root `Ready` condition from `Launched`, `Registered` and `Initialized`, as
/// Karpenter's status library does: True when all three are, else Unknown naming the others.
pub fn set_ready(conditions: &mut Vec<Condition>, now: &str) -> bool {
    let pending: Vec<String> = [LAUNCHED, REGISTERED, INITIALIZED]
        .into_iter()
        .filter(|t| {
            !conditions
                .iter()
                .any(|c| c.type_ == *t && c.status == ConditionStatus::True)
        })
        .map(|t| format!("{t}!=True"))
        .collect();
    if pending.is_empty() {
        set_condition(conditions, READY, ConditionStatus::True, READY, "", now)
    } else {
        set_condition(
            conditions,
            READY,
            ConditionStatus::Unknown,
            "UnhealthyDependents",
            &pending.join(", "),
            now,
        )
    }
}

/// The status a NodeClaim starts with: every condition Unknown, awaiting reconciliation.
pub fn initial_conditions(now: &str) -> Vec<Condition> {
    let mut cs = Vec::new();
    for t in [LAUNCHED, REGISTERED, INITIALIZED, READY] {
        set_condition(
            &mut cs,
            t,
            ConditionStatus::Unknown,
            "AwaitingReconciliation",
            "object is awaiting reconciliation",
            now,
        );
    }
    cs
}

/// Writes `status` (whole, conditions included) to the NodeClaim's status subresource and
/// returns the NodeClaim as stored.
///
/// # Errors
/// [`super::Error::Kube`].
pub async fn patch_status(
    api: &Api<NodeClaim>,
    name: &str,
    status: &NodeClaimStatus,
) -> Result<NodeClaim> {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .map_err(kube_err(format!("patching the status of NodeClaim {name}")))
}

// === NodeClaims ===

/// Creates the NodeClaim objects of claims before their launch: the worker's
/// [`Lifecycle::before_launch`] hook. It drives no states itself (the
/// [`super::Controller`] does, one claim at a time).
#[derive(Clone)]
pub struct NodeClaims {
    client: kube::Client,
    clock: Clock,
    metrics: Option<crate::metrics::Metrics>,
}

// === impl NodeClaims ===

impl NodeClaims {
    /// Creates NodeClaims through `client`.
    pub fn new(client: kube::Client, clock: Clock) -> Self {
        Self {
            client,
            clock,
            metrics: None,
        }
    }

    /// Counts the NodeClaims it creates in `metrics` (`karpenter_nodeclaims_created_total`).
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Creates the NodeClaim of `claim`, or adopts the one that exists (created before a crash,
    /// or by another replica): never a second object for one claim.
    ///
    /// # Errors
    /// [`super::Error::Kube`] when the API cannot be reached or refuses the object.
    pub async fn ensure(&self, claim: &ClaimRecord) -> Result<NodeClaim> {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        if let Some(existing) = api
            .get_opt(&claim.name)
            .await
            .map_err(kube_err(format!("reading NodeClaim {}", claim.name)))?
        {
            tracing::debug!(claim = %claim.name, "Adopted the existing NodeClaim");
            return Ok(existing);
        }
        let pools: Api<NodePool> = Api::all(self.client.clone());
        let pool = pools
            .get_opt(&claim.spec.node_pool)
            .await
            .map_err(kube_err(format!(
                "reading NodePool {}",
                claim.spec.node_pool
            )))?;
        if pool.is_none() {
            tracing::warn!(claim = %claim.name, node_pool = %claim.spec.node_pool, "NodePool not found; the NodeClaim gets no owner reference");
        }
        let class_name = pool
            .as_ref()
            .map(|p| p.spec.template.spec.node_class_ref.name.clone())
            .or_else(|| claim.spec.node_class.clone());
        let class = match class_name {
            Some(n) => Api::<EC2NodeClass>::all(self.client.clone())
                .get_opt(&n)
                .await
                .map_err(kube_err(format!("reading EC2NodeClass {n}")))?,
            None => None,
        };
        let nc = build(claim, pool.as_ref(), class.as_ref());
        let created = match api.create(&PostParams::default(), &nc).await {
            Ok(c) => {
                if let Some(m) = &self.metrics {
                    // Karpenter's reason for a claim its provisioner creates.
                    m.nodeclaim_created("provisioned", &claim.spec.node_pool, false);
                }
                c
            }
            Err(kube::Error::Api(s)) if s.code == 409 => api
                .get(&claim.name)
                .await
                .map_err(kube_err(format!("reading NodeClaim {}", claim.name)))?,
            Err(e) => return Err(kube_err(format!("creating NodeClaim {}", claim.name))(e)),
        };
        let now = rfc3339(self.clock.now_ms());
        let status = NodeClaimStatus {
            conditions: Some(initial_conditions(&now)),
            ..NodeClaimStatus::default()
        };
        patch_status(&api, &claim.name, &status).await?;
        tracing::info!(claim = %claim.name, "Created the NodeClaim");
        Ok(created)
    }
}

#[async_trait]
impl Lifecycle for NodeClaims {
    fn states(&self) -> Vec<ClaimState> {
        Vec::new()
    }

    async fn advance(
        &self,
        _claim: &ClaimRecord,
    ) -> Result<Option<(ClaimState, String)>, LifecycleError> {
        Ok(None)
    }

    async fn before_launch(&self, claim: &ClaimRecord) -> Result<(), LifecycleError> {
        self.ensure(claim)
            .await
            .map(|_| ())
            .map_err(|e| LifecycleError::Retry {
                reason: error_chain(&e),
            })
    }

    async fn node_spec(
        &self,
        claim: &ClaimRecord,
    ) -> Result<Option<cloud::NodeSpec>, LifecycleError> {
        let retry = |reason: String| LifecycleError::Retry { reason };
        let class_name = match Api::<NodeClaim>::all(self.client.clone())
            .get_opt(&claim.name)
            .await
            .map_err(|e| retry(format!("reading NodeClaim {}: {e}", claim.name)))?
        {
            Some(nc) => Some(nc.spec.node_class_ref.name.clone()),
            None => claim.spec.node_class.clone(),
        };
        let Some(name) = class_name else {
            return Ok(None);
        };
        let Some(class) = Api::<EC2NodeClass>::all(self.client.clone())
            .get_opt(&name)
            .await
            .map_err(|e| retry(format!("reading EC2NodeClass {name}: {e}")))?
        else {
            // The stand-in needs no class; EC2 refuses a request without one, naming it.
            tracing::warn!(claim = %claim.name, node_class = %name, "EC2NodeClass not found; launching without it");
            return Ok(None);
        };
        let spec = crate::node_class::node_class_spec(&class).map_err(|e| retry(e.to_string()))?;
        Ok(Some(crate::node_class::node_spec(&claim.spec, spec)))
    }
}

/// An error with its sources, `: `-separated.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::Requirement;
    use cloud::CapacityType;

    fn record() -> ClaimRecord {
        ClaimRecord {
            name: "default-abc12".into(),
            idempotency_key: "k".into(),
            plan_id: "p".into(),
            node_pool: "default".into(),
            state: ClaimState::Launching,
            spec: LaunchSpec {
                name: "default-abc12".into(),
                node_pool: "default".into(),
                instance_types: vec!["m5.large".into()],
                zones: vec!["us-east-1a".into()],
                capacity_types: vec![CapacityType::OnDemand],
                labels: BTreeMap::from([("team".into(), "web".into())]),
                requirements: vec![Requirement {
                    key: "kubernetes.io/arch".into(),
                    operator: "In".into(),
                    values: vec!["amd64".into()],
                    min_values: None,
                }],
                annotations: BTreeMap::from([("karpenter.sh/nodepool-hash".into(), "123".into())]),
                expire_after: Some(720 * 3600),
                ..LaunchSpec::default()
            },
            client_token: "t".into(),
            instance: None,
            failure_reason: None,
            attempts: 0,
            retry_at: 0,
            lease_owner: None,
            lease_expires_at: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn pool() -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default", "uid": "uid-pool"},
            "spec": {"template": {
                "metadata": {"labels": {"env": "prod"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                    "requirements": [],
                    "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                    "startupTaints": [{"key": "example.com/agent", "effect": "NoExecute"}],
                    "terminationGracePeriod": "48h"
                }
            }}
        }))
        .expect("pool")
    }

    #[test]
    fn the_nodeclaim_carries_template_spec_finalizer_and_owner() {
        let nc = build(&record(), Some(&pool()), None);
        let m = &nc.metadata;
        let labels = m.labels.clone().unwrap_or_default();
        assert_eq!(labels["env"], "prod");
        assert_eq!(labels["team"], "web");
        assert_eq!(labels[NODEPOOL_LABEL], "default");
        let annotations = m.annotations.clone().unwrap_or_default();
        let template = serde_json::to_value(&pool().spec.template).expect("json");
        assert_eq!(
            annotations["karpenter.sh/nodepool-hash"],
            common::hash::nodepool_template_hash(&template),
            "the NodePool's hash as it is now, over the planner's copy"
        );
        assert_eq!(
            annotations["karpenter.sh/nodepool-hash-version"],
            common::hash::HASH_VERSION
        );
        assert!(!annotations.contains_key("karpenter.k8s.aws/ec2nodeclass-hash"));
        assert_eq!(m.finalizers, Some(vec![TERMINATION_FINALIZER.to_string()]));
        let owner = &m.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("NodePool", "uid-pool")
        );
        assert_eq!(nc.spec.node_class_ref.name, "gpu");
        assert_eq!(nc.spec.expire_after.as_deref(), Some("720h"));
        assert_eq!(nc.spec.termination_grace_period.as_deref(), Some("48h"));
        assert_eq!(nc.spec.taints.as_ref().map(Vec::len), Some(1));
        assert_eq!(
            nc.spec.startup_taints.as_ref().map(|t| t[0].key.as_str()),
            Some("example.com/agent")
        );
        let keys: Vec<&str> = nc
            .spec
            .requirements
            .iter()
            .map(|r| r.key.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "kubernetes.io/arch",
                NODEPOOL_LABEL,
                INSTANCE_TYPE_LABEL,
                ZONE_LABEL,
                CAPACITY_TYPE_LABEL
            ]
        );
    }

    /// A claim the planner placed in one zone of a pool allowing three (a zonal spread) is a
    /// NodeClaim of that zone, and its types narrow the pool's: the next plan sees the capacity
    /// in flight where it will be and places the claim's pods on it (before, the pool's three
    /// zones were kept and the demo's scale-in launched claims for pods already provided for).
    #[test]
    fn the_claims_offerings_narrow_the_templates_requirements() {
        let mut p = pool();
        p.spec.template.spec.requirements = serde_json::from_value(json!([
            {"key": ZONE_LABEL, "operator": "In", "values": ["us-east-1a", "us-east-1b", "us-east-1c"]},
            {"key": INSTANCE_TYPE_LABEL, "operator": "NotIn", "values": ["m5.24xlarge"]},
        ]))
        .expect("requirements");
        let mut claim = record();
        claim.spec.requirements.clear();
        claim.spec.zones = vec!["us-east-1b".into()];
        let nc = build(&claim, Some(&p), None);
        let get = |key: &str, op: crds::Operator| {
            nc.spec
                .requirements
                .iter()
                .find(|r| r.key == key && r.operator == op)
                .and_then(|r| r.values.clone())
        };
        assert_eq!(
            get(ZONE_LABEL, crds::Operator::In),
            Some(vec!["us-east-1b".to_string()])
        );
        // A requirement of another operator is kept as it is, not narrowed into an `In`.
        assert_eq!(
            get(INSTANCE_TYPE_LABEL, crds::Operator::NotIn),
            Some(vec!["m5.24xlarge".to_string()])
        );
        assert_eq!(get(INSTANCE_TYPE_LABEL, crds::Operator::In), None);
    }

    #[test]
    fn conditions_keep_transition_times_and_ready_follows_the_three() {
        let mut cs = initial_conditions("t0");
        assert!(!set_condition(
            &mut cs,
            LAUNCHED,
            ConditionStatus::Unknown,
            "AwaitingReconciliation",
            "object is awaiting reconciliation",
            "t1"
        ));
        for t in [LAUNCHED, REGISTERED] {
            assert!(set_condition(
                &mut cs,
                t,
                ConditionStatus::True,
                t,
                "",
                "t2"
            ));
        }
        set_ready(&mut cs, "t2");
        let ready = cs.iter().find(|c| c.type_ == READY).expect("ready");
        assert_eq!(ready.status, ConditionStatus::Unknown);
        assert_eq!(ready.message.as_deref(), Some("Initialized!=True"));
        set_condition(
            &mut cs,
            INITIALIZED,
            ConditionStatus::True,
            INITIALIZED,
            "",
            "t3",
        );
        assert!(set_ready(&mut cs, "t3"));
        let ready = cs.iter().find(|c| c.type_ == READY).expect("ready");
        assert_eq!(
            (ready.status, ready.last_transition_time.as_str()),
            (ConditionStatus::True, "t3")
        );
        assert_eq!(go_duration(90), "90s");
        assert_eq!(go_duration(5400), "90m");
    }
}
