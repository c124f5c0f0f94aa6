//! The EC2NodeClass status, as Karpenter writes it: every pass resolves each EC2NodeClass of
//! the cluster against the cloud ([`cloud::CloudProvider::resolve_node_class`]: subnets,
//! security groups, AMIs through SSM aliases or DescribeImages, instance profile) and writes the
//! result to its `status` subresource:
//!
//! - `amis`: `{id, name, requirements: [{key: kubernetes.io/arch, operator: In, values}, …]}`,
//!   an alias's image once per variant it serves with Karpenter's requirements of the variant
//!   (standard: no GPU or accelerator count; nvidia: a GPU count; neuron: an accelerator count);
//! - `subnets`: `{id, zone, zoneID}`; `securityGroups`: `{id, name}`; `instanceProfile`;
//! - `conditions`: `AMIsReady`, `SubnetsReady`, `SecurityGroupsReady`, `InstanceProfileReady`,
//!   `ValidationSucceeded` (`False`, reason `UnsupportedField`, naming every field that is set
//!   but that dovetail does not honour: `crate::node_class::unhonoured_fields`) and `Ready` (all
//!   of them), each `True` with its type as reason, or `False` with Karpenter's
//!   reason (`AMINotFound`, `SubnetsNotFound`, `SecurityGroupsNotFound`,
//!   `InstanceProfileNotFound`, `NotReady`) and the resolver's message naming the field.
//!   `lastTransitionTime` changes only when the status does; `observedGeneration` is the
//!   class's generation.
//!
//! A part that fails keeps nothing stale: its list is written empty. A cloud that cannot be
//! asked (throttled, unavailable) writes nothing, so a transient outage never makes a node
//! class look empty.
//!
//! After the classes, the pass asks the cloud to delete what it made for classes that are gone
//! ([`cloud::CloudProvider::collect_node_classes`]: the managed instance profiles no class
//! derives and no live instance uses), as Karpenter's garbage collection does.
//!
//! The same pass keeps the instance's side current (when [`Options::cluster_name`] is set): one
//! paged DescribeInstances of the cluster's instances (tag `kubernetes.io/cluster/<name>:
//! owned`), and on each NodeClaim whose instance it lists, the subnet and security groups EC2
//! reports now as annotations ([`crate::lifecycle::nodeclaim::instance_annotations`]; security
//! groups can change on a running instance). The planner decides drift (AMIDrift, SubnetDrift,
//! SecurityGroupDrift) from the status and these; this module only supplies them.

use std::time::Duration;

use std::collections::HashMap;

use cloud::{CloudProvider, ListFilter, NodeClassResolution, ProviderId, Tags};
use crds::{EC2NodeClass, NodeClaim};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::watch;

use crate::lifecycle::nodeclaim::{error_chain, instance_annotations, rfc3339};
use crate::lifecycle::{Result, kube_err};
use service_shell::clock::Clock;

/// How the status pass runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Pause between passes.
    pub interval: Duration,
    /// The cluster whose instances' subnets and security groups are copied to their NodeClaims;
    /// `None`: NodeClaims are left alone.
    pub cluster_name: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            cluster_name: None,
        }
    }
}

/// What one pass did per class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Classes whose status was written (changed).
    pub written: Vec<String>,
    /// Classes whose status was already current.
    pub unchanged: Vec<String>,
    /// NodeClaims whose instance annotations were written (changed).
    pub annotated: Vec<String>,
    /// What the cloud deleted for classes that are gone (instance profiles).
    pub collected: Vec<String>,
    /// Classes (by name) or NodeClaims (`NodeClaim <name>`) that could not be resolved or
    /// written, with why.
    pub errors: Vec<(String, String)>,
}

/// Writes EC2NodeClass statuses.
#[derive(Clone)]
pub struct StatusWriter {
    client: kube::Client,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    options: Options,
}

/// Karpenter's architecture label value for an EC2 architecture name.
fn arch_label(ec2: &str) -> &str {
    match ec2 {
        "x86_64" => "amd64",
        other => other,
    }
}

/// Karpenter's requirements of an AMI variant (`pkg/providers/amifamily/types.go`
/// `Variant.Requirements`): standard images serve types without GPUs or accelerators, NVIDIA
/// images types with GPUs, Neuron images types with accelerators.
fn variant_requirements(variant: Option<&str>) -> Vec<Value> {
    let req = |key: &str, op: &str| json!({"key": key, "operator": op});
    match variant {
        Some("standard") => vec![
            req(
                "karpenter.k8s.aws/instance-accelerator-count",
                "DoesNotExist",
            ),
            req("karpenter.k8s.aws/instance-gpu-count", "DoesNotExist"),
        ],
        Some("nvidia") => vec![req("karpenter.k8s.aws/instance-gpu-count", "Exists")],
        Some("neuron") => vec![req(
            "karpenter.k8s.aws/instance-accelerator-count",
            "Exists",
        )],
        _ => Vec::new(),
    }
}

/// One part's condition: its type, its reason when false, and the resolver's error (`None`:
/// ready).
type Part = (&'static str, &'static str, Option<String>);

/// The `status` (without conditions) and the per-part conditions of a resolution.
fn status_parts(r: &NodeClassResolution) -> (Value, Vec<Part>) {
    let amis: Vec<Value> = r
        .amis
        .as_ref()
        .map(|v| {
            v.iter()
                .flat_map(|a| {
                    // One entry per variant an alias image serves, with Karpenter's known
                    // requirements of the variant; images from selector terms: one entry.
                    let variants: Vec<Option<&str>> = if a.variants.is_empty() {
                        vec![None]
                    } else {
                        a.variants.iter().map(|v| Some(v.as_str())).collect()
                    };
                    variants.into_iter().map(move |variant| {
                        let mut requirements = vec![json!({
                            "key": "kubernetes.io/arch",
                            "operator": "In",
                            "values": [arch_label(&a.architecture)],
                        })];
                        requirements.extend(variant_requirements(variant));
                        let mut o = json!({"id": a.id, "requirements": requirements});
                        if let Some(n) = &a.name {
                            o["name"] = json!(n);
                        }
                        o
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let subnets: Vec<Value> = r
        .subnets
        .as_ref()
        .map(|v| {
            v.iter()
                .map(|s| {
                    let mut o = json!({"id": s.id, "zone": s.zone});
                    if let Some(z) = &s.zone_id {
                        o["zoneID"] = json!(z);
                    }
                    o
                })
                .collect()
        })
        .unwrap_or_default();
    let groups: Vec<Value> = r
        .security_groups
        .as_ref()
        .map(|v| {
            v.iter()
                .map(|g| {
                    let mut o = json!({"id": g.id});
                    if let Some(n) = &g.name {
                        o["name"] = json!(n);
                    }
                    o
                })
                .collect()
        })
        .unwrap_or_default();
    let profile = r.instance_profile.as_ref().ok().cloned().flatten();
    let status = json!({
        "amis": amis,
        "subnets": subnets,
        "securityGroups": groups,
        "instanceProfile": profile,
    });
    let err = |r: Result<(), &String>| r.err().cloned();
    let parts = vec![
        ("AMIsReady", "AMINotFound", err(r.amis.as_ref().map(|_| ()))),
        (
            "SubnetsReady",
            "SubnetsNotFound",
            err(r.subnets.as_ref().map(|_| ())),
        ),
        (
            "SecurityGroupsReady",
            "SecurityGroupsNotFound",
            err(r.security_groups.as_ref().map(|_| ())),
        ),
        (
            "InstanceProfileReady",
            "InstanceProfileNotFound",
            err(r.instance_profile.as_ref().map(|_| ())),
        ),
    ];
    (status, parts)
}

/// The conditions for `parts`, keeping each one's `lastTransitionTime` from `previous` when its
/// status did not change.
///
/// Conditions of `previous` that this module does not write (the watcher's
/// `PlannerValidationSucceeded`, for a class the plan left out) are kept as they are, and a
/// False one makes `Ready` False like the others.
fn conditions(
    parts: &[Part],
    previous: &[Value],
    generation: Option<i64>,
    now: &str,
) -> Vec<Value> {
    let ours = |t: &Value| t == "Ready" || parts.iter().any(|(p, _, _)| t == *p);
    let foreign: Vec<Value> = previous
        .iter()
        .filter(|c| !ours(&c["type"]))
        .cloned()
        .collect();
    let mut out = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut all = parts
        .iter()
        .map(|(t, reason, e)| {
            (
                *t,
                e.as_ref()
                    .map_or((*t, None), |msg| (*reason, Some(msg.clone()))),
            )
        })
        .collect::<Vec<_>>();
    for (t, (_, msg)) in &all {
        if msg.is_some() {
            failed.push(t.to_string());
        }
    }
    for c in &foreign {
        if c["status"] == "False" {
            failed.push(c["type"].as_str().unwrap_or_default().to_string());
        }
    }
    all.push((
        "Ready",
        if failed.is_empty() {
            ("Ready", None)
        } else {
            ("NotReady", Some(format!("{} not ready", failed.join(", "))))
        },
    ));
    for (t, (reason, msg)) in all {
        let status = if msg.is_none() { "True" } else { "False" };
        let since = previous
            .iter()
            .find(|c| c["type"] == t && c["status"] == status)
            .and_then(|c| c["lastTransitionTime"].as_str())
            .unwrap_or(now);
        let mut c = json!({
            "type": t,
            "status": status,
            "reason": reason,
            "message": msg.unwrap_or_default(),
            "lastTransitionTime": since,
        });
        if let Some(g) = generation {
            c["observedGeneration"] = json!(g);
        }
        out.push(c);
    }
    out.extend(foreign);
    out
}

// === impl StatusWriter ===

impl StatusWriter {
    /// A writer for the cluster behind `client`, resolving through `cloud`.
    pub fn new(
        client: kube::Client,
        cloud: Arc<dyn CloudProvider>,
        clock: Clock,
        options: Options,
    ) -> Self {
        Self {
            client,
            cloud,
            clock,
            options,
        }
    }

    /// Resolves every EC2NodeClass and writes the statuses that changed.
    ///
    /// # Errors
    /// When the EC2NodeClasses cannot be listed; per-class failures are in [`Pass::errors`].
    pub async fn pass(&self) -> Result<Pass> {
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        let classes = api
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing EC2NodeClasses".into()))?;
        let mut pass = Pass::default();
        for class in &classes.items {
            let name = class.metadata.name.clone().unwrap_or_default();
            match self.write(&api, class).await {
                Ok(true) => pass.written.push(name),
                Ok(false) => pass.unchanged.push(name),
                Err(e) => pass.errors.push((name, e)),
            }
        }
        // What the cloud made for classes no longer listed goes (Karpenter's instance profile
        // garbage collection). A class whose spec does not convert keeps its profile: it is
        // kept by name with a placeholder role.
        let specs: Vec<cloud::NodeClassSpec> = classes
            .items
            .iter()
            .map(|c| {
                crate::node_class::node_class_spec(c).unwrap_or_else(|_| cloud::NodeClassSpec {
                    name: c.metadata.name.clone().unwrap_or_default(),
                    role: Some(String::new()),
                    ..cloud::NodeClassSpec::default()
                })
            })
            .collect();
        match self.cloud.collect_node_classes(&specs).await {
            Ok(deleted) => pass.collected = deleted,
            Err(e) => pass
                .errors
                .push(("instance profiles".into(), format!("collecting: {e}"))),
        }
        if let Some(cluster) = &self.options.cluster_name {
            self.annotate_claims(cluster, &mut pass).await?;
        }
        Ok(pass)
    }

    /// Copies each cluster instance's subnet and security groups onto its NodeClaim where they
    /// differ. A cloud that cannot list writes nothing (a pass error), never removes anything.
    async fn annotate_claims(&self, cluster: &str, pass: &mut Pass) -> Result<()> {
        let filter = ListFilter {
            tags: Tags::from([(
                format!("{}{cluster}", cloud::TAG_CLUSTER_PREFIX),
                "owned".to_string(),
            )]),
            include_terminated: false,
        };
        let instances = match self.cloud.list(&filter).await {
            Ok(i) => i,
            Err(e) => {
                pass.errors.push((
                    "instances".into(),
                    format!("listing the cluster's instances: {e}"),
                ));
                return Ok(());
            }
        };
        let by_id: HashMap<&str, &cloud::Instance> =
            instances.iter().map(|i| (i.id.as_str(), i)).collect();
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let claims = api
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing NodeClaims".into()))?;
        for nc in claims.items {
            let name = nc.metadata.name.clone().unwrap_or_default();
            let instance = nc
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(|p| p.parse::<ProviderId>().ok())
                .and_then(|p| by_id.get(p.instance_id()).copied());
            let Some(instance) = instance else { continue };
            if nc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let present = nc.metadata.annotations.clone().unwrap_or_default();
            let mut want = instance_annotations(instance);
            want.retain(|k, v| present.get(k) != Some(v));
            if want.is_empty() {
                continue;
            }
            match api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"annotations": want}})),
                )
                .await
            {
                Ok(_) => {
                    tracing::info!(nodeclaim = %name, annotations = ?want, "NodeClaim instance annotations written");
                    pass.annotated.push(name);
                }
                // Gone since the list: nothing to keep current.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => pass.errors.push((
                    format!("NodeClaim {name}"),
                    error_chain(&kube_err(format!("annotating NodeClaim {name}"))(e)),
                )),
            }
        }
        Ok(())
    }

    /// Resolves one class and patches its status when it differs; `Ok(false)` when current.
    async fn write(&self, api: &Api<EC2NodeClass>, class: &EC2NodeClass) -> Result<bool, String> {
        let name = class.metadata.name.clone().unwrap_or_default();
        if class.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let spec = crate::node_class::node_class_spec(class).map_err(|e| e.to_string())?;
        let resolution = self
            .cloud
            .resolve_node_class(&spec)
            .await
            .map_err(|e| format!("resolving EC2NodeClass {name}: {e}"))?;
        let current = serde_json::to_value(&class.status).unwrap_or(Value::Null);
        let previous = current["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let (mut status, mut parts) = status_parts(&resolution);
        // A field that is set but not honoured is never dropped silently.
        let unhonoured = crate::node_class::unhonoured_fields(class);
        parts.push((
            "ValidationSucceeded",
            "UnsupportedField",
            (!unhonoured.is_empty()).then(|| {
                format!(
                    "EC2NodeClass {name}: not supported by dovetail: {}",
                    unhonoured.join(", ")
                )
            }),
        ));
        let now = rfc3339(self.clock.now_ms());
        status["conditions"] = json!(conditions(
            &parts,
            &previous,
            class.metadata.generation,
            &now
        ));
        if same_status(&current, &status) {
            return Ok(false);
        }
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map_err(|e| error_chain(&kube_err(format!("writing EC2NodeClass {name} status"))(e)))?;
        for (t, _, e) in &parts {
            if let Some(e) = e {
                tracing::warn!(class = %name, condition = t, error = %e, "EC2NodeClass not ready");
            }
        }
        tracing::info!(class = %name, "EC2NodeClass status written");
        Ok(true)
    }

    /// Runs passes every [`Options::interval`] until `shutdown` turns true.
    pub async fn run(&self, mut shutdown: watch::Receiver<bool>) {
        loop {
            if *shutdown.borrow() {
                break;
            }
            match self.pass().await {
                Ok(p) => {
                    for (class, e) in &p.errors {
                        tracing::warn!(%class, error = %e, "EC2NodeClass status not written; retrying next pass");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %error_chain(&e), "EC2NodeClass status pass failed")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.options.interval) => {}
                r = shutdown.changed() => if r.is_err() { break },
            }
        }
    }
}

/// Whether `current` already says what `new` says (`null` and absent fields alike).
fn same_status(current: &Value, new: &Value) -> bool {
    let Some(fields) = new.as_object() else {
        return false;
    };
    fields.iter().all(|(k, v)| {
        let c = current.get(k).unwrap_or(&Value::Null);
        let empty = |x: &Value| x.is_null() || x.as_array().is_some_and(Vec::is_empty);
        c == v || (empty(c) && empty(v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud::{ResolvedAmi, ResolvedSecurityGroup, ResolvedSubnet};

    fn resolution() -> NodeClassResolution {
        NodeClassResolution {
            subnets: Ok(vec![ResolvedSubnet {
                id: "subnet-1".into(),
                zone: "us-east-1a".into(),
                zone_id: Some("use1-az1".into()),
            }]),
            security_groups: Ok(vec![ResolvedSecurityGroup {
                id: "sg-1".into(),
                name: Some("nodes".into()),
            }]),
            amis: Ok(vec![ResolvedAmi {
                id: "ami-1".into(),
                name: None,
                architecture: "x86_64".into(),
                variants: Vec::new(),
            }]),
            instance_profile: Ok(Some("NodeProfile".into())),
        }
    }

    #[test]
    fn a_resolved_class_is_ready_with_karpenters_fields() {
        let (status, parts) = status_parts(&resolution());
        assert_eq!(
            status,
            json!({
                "amis": [{"id": "ami-1", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}],
                "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
                "securityGroups": [{"id": "sg-1", "name": "nodes"}],
                "instanceProfile": "NodeProfile",
            })
        );
        let c = conditions(&parts, &[], Some(3), "2026-01-01T00:00:00Z");
        assert_eq!(c.len(), 5);
        assert!(c.iter().all(|c| c["status"] == "True"), "{c:?}");
        assert_eq!(c[4]["type"], "Ready");
        assert_eq!(c[4]["reason"], "Ready");
        assert_eq!(c[0]["reason"], "AMIsReady");
        assert_eq!(c[0]["observedGeneration"], 3);
    }

    #[test]
    fn a_part_that_matched_nothing_is_false_with_karpenters_reason_and_ready_follows() {
        let mut r = resolution();
        r.subnets = Err("EC2NodeClass default: spec.subnetSelectorTerms matched no subnet".into());
        let (status, parts) = status_parts(&r);
        assert_eq!(status["subnets"], json!([]));
        let earlier = json!([{"type": "AMIsReady", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                             {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}]);
        let c = conditions(
            &parts,
            earlier.as_array().expect("array"),
            None,
            "2026-01-01T00:00:00Z",
        );
        let by = |t: &str| {
            c.iter()
                .find(|c| c["type"] == t)
                .expect("condition")
                .clone()
        };
        assert_eq!(by("SubnetsReady")["status"], "False");
        assert_eq!(by("SubnetsReady")["reason"], "SubnetsNotFound");
        assert!(
            by("SubnetsReady")["message"]
                .as_str()
                .is_some_and(|m| m.contains("subnetSelectorTerms"))
        );
        assert_eq!(by("Ready")["status"], "False");
        assert_eq!(by("Ready")["reason"], "NotReady");
        // Unchanged conditions keep their transition time; changed ones take now.
        assert_eq!(
            by("AMIsReady")["lastTransitionTime"],
            "2025-01-01T00:00:00Z"
        );
        assert_eq!(by("Ready")["lastTransitionTime"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn the_watchers_condition_is_kept_and_counts_in_ready() {
        let (_, parts) = status_parts(&resolution());
        let watcher = json!({"type": "PlannerValidationSucceeded", "status": "False", "reason": "Unsupported", "message": "newer field", "lastTransitionTime": "t0"});
        let c = conditions(&parts, std::slice::from_ref(&watcher), None, "t1");
        assert_eq!(c.last(), Some(&watcher));
        let ready = c.iter().find(|c| c["type"] == "Ready").expect("Ready");
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["message"], "PlannerValidationSucceeded not ready");
        // Gone: Ready again.
        let c = conditions(&parts, &c, None, "t2");
        assert!(c.iter().any(|c| c["type"] == "PlannerValidationSucceeded"));
        let c: Vec<Value> = c
            .into_iter()
            .filter(|c| c["type"] != "PlannerValidationSucceeded")
            .collect();
        let c = conditions(&parts, &c, None, "t3");
        assert!(c.iter().all(|c| c["status"] == "True"), "{c:?}");
    }

    #[test]
    fn an_equal_status_is_not_written_again() {
        let (mut status, parts) = status_parts(&resolution());
        status["conditions"] = json!(conditions(&parts, &[], None, "t"));
        assert!(same_status(&status.clone(), &status));
        let mut other = status.clone();
        other["amis"][0]["id"] = json!("ami-2");
        assert!(!same_status(&status, &other));
    }
}
