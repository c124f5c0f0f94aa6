//! NodeClaims a user creates (`kubectl apply` of a `karpenter.sh/v1` NodeClaim) are launched
//! like the planner's, as Karpenter's lifecycle controller launches any NodeClaim
//! (`pkg/controllers/nodeclaim/lifecycle/launch.go` of kubernetes-sigs/karpenter, the cloud
//! provider resolving its requirements to instance types: `pkg/cloudprovider/cloudprovider.go`
//! `Create` of aws/karpenter-provider-aws): a NodeClaim of an EC2NodeClass that no claim of the
//! ledger has is recorded as a claim (idempotency key `nodeclaim-<uid>`, its own name) whose
//! offerings are the catalog's that its requirements allow, in the zone and capacity type of
//! the cheapest, cheapest first; it gets the termination finalizer and Unknown conditions, and
//! the launch worker and the lifecycle take it from there (the planner then sees it as
//! capacity in flight, then as a node). A NodeClaim no offering satisfies gets
//! `Launched=False` saying why.

use std::collections::{BTreeMap, BTreeSet};

use cloud::{CapacityType, Catalog};
use crds::{ConditionStatus, NodeClaim, Operator};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::nodeclaim::{
    self, CAPACITY_TYPE_LABEL as CAPACITY_TYPE, LAUNCHED, TERMINATION_FINALIZER,
    ZONE_LABEL as ZONE, set_condition,
};
use super::{Controller, Result, kube_err, rfc3339};
use crate::launch::{LaunchSpec, MAX_OFFERINGS, Requirement, Taint};
use crate::ledger::{Basis, ClaimRecord, NewLaunch, Outcome, Submission};

fn satisfies(op: Operator, values: &[String], value: Option<&str>) -> bool {
    let num = |v: &str| v.parse::<i64>().ok();
    let bound = values.first().and_then(|v| num(v));
    let cmp = |f: fn(i64, i64) -> bool| match (value.and_then(num), bound) {
        (Some(v), Some(b)) => f(v, b),
        _ => false,
    };
    match op {
        Operator::In => value.is_some_and(|v| values.iter().any(|x| x == v)),
        Operator::NotIn => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        Operator::Exists => value.is_some(),
        Operator::DoesNotExist => value.is_none(),
        Operator::Gt => cmp(|v, b| v > b),
        Operator::Lt => cmp(|v, b| v < b),
        Operator::Gte => cmp(|v, b| v >= b),
        Operator::Lte => cmp(|v, b| v <= b),
    }
}

/// The launch spec of a user's NodeClaim: the catalog offerings its requirements allow (keys no
/// instance type defines are the node's own labels and constrain nothing here), or why none.
pub fn launch_spec(nc: &NodeClaim, catalog: &Catalog) -> Result<LaunchSpec, String> {
    let defined: BTreeSet<&str> = catalog
        .instance_types
        .iter()
        .flat_map(|t| t.labels.keys().map(String::as_str))
        .chain([ZONE, CAPACITY_TYPE])
        .collect();
    let reqs: Vec<_> = nc
        .spec
        .requirements
        .iter()
        .filter(|r| defined.contains(r.key.as_str()))
        .collect();
    let mut offered: Vec<(f64, &str, &str, &str)> = Vec::new();
    for t in &catalog.instance_types {
        for o in t.offerings.iter().filter(|o| o.available) {
            let ok = reqs.iter().all(|r| {
                let value = match r.key.as_str() {
                    ZONE => Some(o.zone.as_str()),
                    CAPACITY_TYPE => Some(o.capacity_type.as_str()),
                    k => t.labels.get(k).map(String::as_str),
                };
                satisfies(r.operator, r.values.as_deref().unwrap_or_default(), value)
            });
            if ok {
                offered.push((o.price, &t.name, &o.zone, &o.capacity_type));
            }
        }
    }
    offered.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    if offered.is_empty() {
        return Err("no instance type offering satisfies the NodeClaim's requirements".into());
    }
    // One zone and capacity type per launch, the cheapest whose types (cheapest first, as many
    // as one CreateFleet takes) keep every `minValues` (Karpenter's `Truncate` and
    // `SatisfiesMinValues`, `pkg/cloudprovider/types.go`; the provider refuses the launch when
    // they cannot: `filterInstanceTypes`, aws/karpenter-provider-aws
    // `pkg/providers/instance/instance.go`).
    let min_values: Vec<(&str, usize)> = reqs
        .iter()
        .filter_map(|r| Some((r.key.as_str(), usize::try_from(r.min_values?).ok()?)))
        .collect();
    let by_name: BTreeMap<&str, &cloud::InstanceType> = catalog
        .instance_types
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for (_, _, z, c) in &offered {
        if !groups.contains(&(*z, *c)) {
            groups.push((*z, *c));
        }
    }
    let mut shortfall: Option<String> = None;
    let mut chosen: Option<(&str, &str, Vec<String>, f64)> = None;
    for (zone, capacity_type) in groups {
        let mut types: Vec<String> = Vec::new();
        let mut price = None;
        for (p, t, z, c) in &offered {
            if *z == zone && *c == capacity_type && !types.iter().any(|x| x == t) {
                price.get_or_insert(*p);
                types.push((*t).to_string());
            }
        }
        types.truncate(MAX_OFFERINGS);
        match unmet_min_values(&types, &by_name, &min_values, zone, capacity_type) {
            None => {
                chosen = Some((zone, capacity_type, types, price.unwrap_or_default()));
                break;
            }
            Some(why) => {
                shortfall.get_or_insert(why);
            }
        }
    }
    let Some((zone, capacity_type, types, price)) = chosen else {
        return Err(format!(
            "minValues requirement is not met: {}",
            shortfall.unwrap_or_default()
        ));
    };
    let capacity = CapacityType::parse(capacity_type).map_err(|e| e.to_string())?;
    let labels = nc.metadata.labels.clone().unwrap_or_default();
    let taint = |t: &crds::Taint| Taint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect,
    };
    Ok(LaunchSpec {
        name: nc.metadata.name.clone().unwrap_or_default(),
        node_pool: labels
            .get(nodeclaim::NODEPOOL_LABEL)
            .cloned()
            .unwrap_or_default(),
        instance_types: types,
        zones: vec![zone.to_string()],
        capacity_types: vec![capacity],
        price,
        labels: labels.into_iter().collect::<BTreeMap<_, _>>(),
        taints: nc.spec.taints.iter().flatten().map(taint).collect(),
        node_class: Some(nc.spec.node_class_ref.name.clone()),
        startup_taints: nc.spec.startup_taints.iter().flatten().map(taint).collect(),
        expire_after: None,
        requirements: nc
            .spec
            .requirements
            .iter()
            .map(|r| Requirement {
                key: r.key.clone(),
                operator: serde_json::to_value(r.operator)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                values: r.values.clone().unwrap_or_default(),
                min_values: r.min_values.and_then(|m| u32::try_from(m).ok()),
            })
            .collect(),
        annotations: nc.metadata.annotations.clone().unwrap_or_default(),
        termination_grace_period: None,
    })
}

/// Which `minValues` the launch's `types` (in `zone` as `capacity_type`) leave unmet, as
/// `key: n of m` for each; `None` when all are met.
fn unmet_min_values(
    types: &[String],
    by_name: &BTreeMap<&str, &cloud::InstanceType>,
    min_values: &[(&str, usize)],
    zone: &str,
    capacity_type: &str,
) -> Option<String> {
    let unmet: Vec<String> = min_values
        .iter()
        .filter_map(|&(key, min)| {
            let values: BTreeSet<&str> = types
                .iter()
                .filter_map(|t| match key {
                    ZONE => Some(zone),
                    CAPACITY_TYPE => Some(capacity_type),
                    k => by_name.get(t.as_str())?.labels.get(k).map(String::as_str),
                })
                .collect();
            (values.len() < min).then(|| {
                format!(
                    "{key} has {} value(s) among the {} instance type(s) offered in {zone} as {capacity_type}, minValues {min}",
                    values.len(),
                    types.len()
                )
            })
        })
        .collect();
    (!unmet.is_empty()).then(|| unmet.join("; "))
}

// === adoption by the Controller ===

impl Controller {
    /// Records the user's NodeClaims among `ncs` that no claim of `claims` has (see the module
    /// docs); returns their names.
    pub(crate) async fn adopt(
        &self,
        ncs: &BTreeMap<String, NodeClaim>,
        claims: &[ClaimRecord],
    ) -> Result<Vec<String>> {
        let known: BTreeSet<&str> = claims.iter().map(|c| c.name.as_str()).collect();
        let fresh: Vec<&NodeClaim> = ncs
            .iter()
            .filter(|(name, nc)| {
                !known.contains(name.as_str())
                    && nc.metadata.deletion_timestamp.is_none()
                    // The planner's carry the finalizer from their creation on.
                    && !nc
                        .metadata
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f == TERMINATION_FINALIZER)
                    && nc.spec.node_class_ref.kind == "EC2NodeClass"
                    && nc.status.as_ref().is_none_or(|s| s.provider_id.is_none())
            })
            .map(|(_, nc)| nc)
            .collect();
        if fresh.is_empty() {
            return Ok(Vec::new());
        }
        let catalog = self.catalog().await?;
        let in_flight: Vec<String> = claims
            .iter()
            .filter(|c| c.state.is_in_flight())
            .map(|c| c.name.clone())
            .collect();
        let api = self.nodeclaims();
        let mut adopted = Vec::new();
        for nc in fresh {
            let name = nc.metadata.name.clone().unwrap_or_default();
            let now = rfc3339(self.clock.now_ms());
            let spec = match launch_spec(nc, &catalog) {
                Ok(s) => s,
                Err(why) => {
                    let mut status = nc.status.clone().unwrap_or_default();
                    let cs = status.conditions.get_or_insert_with(Vec::new);
                    if set_condition(
                        cs,
                        LAUNCHED,
                        ConditionStatus::False,
                        "LaunchFailed",
                        &why,
                        &now,
                    ) {
                        nodeclaim::patch_status(&api, &name, &status).await?;
                    }
                    continue;
                }
            };
            let key = format!(
                "nodeclaim-{}",
                nc.metadata.uid.as_deref().unwrap_or(name.as_str())
            );
            let submission = Submission {
                plan_id: key.clone(),
                session_id: "user-nodeclaims".into(),
                basis: Basis {
                    in_flight: in_flight.clone(),
                    now: self.clock.now_ms() / 1000,
                    sequence: 0,
                },
                launches: vec![NewLaunch {
                    idempotency_key: key,
                    payload: Vec::new(),
                    spec,
                }],
            };
            let outcome = self.ledger.submit(&submission, self.clock.now_ms()).await?;
            if !matches!(outcome.first(), Some((_, Outcome::Accepted { claim })) if *claim == name)
            {
                tracing::warn!(nodeclaim = %name, ?outcome, "A user's NodeClaim was not recorded");
                continue;
            }
            let mut finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
                finalizers.push(TERMINATION_FINALIZER.to_string());
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
                )
                .await
                .map_err(kube_err(format!(
                    "adding the finalizer to NodeClaim {name}"
                )))?;
            }
            let mut status = nc.status.clone().unwrap_or_default();
            if status.conditions.as_ref().is_none_or(Vec::is_empty) {
                status.conditions = Some(nodeclaim::initial_conditions(&now));
                nodeclaim::patch_status(&api, &name, &status).await?;
            }
            tracing::info!(nodeclaim = %name, "Recorded a user's NodeClaim for launch");
            adopted.push(name);
        }
        Ok(adopted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_pick_the_cheapest_zone_and_the_types_offered_there() {
        let catalog = cloud::Catalog {
            instance_types: ["m5.large", "m5.xlarge", "c5.large"]
                .iter()
                .enumerate()
                .map(|(i, name)| cloud::InstanceType {
                    name: name.to_string(),
                    capacity: Default::default(),
                    overhead: Default::default(),
                    labels: [
                        (
                            "node.kubernetes.io/instance-type".to_string(),
                            name.to_string(),
                        ),
                        (
                            "karpenter.k8s.aws/instance-family".to_string(),
                            name[..2].to_string(),
                        ),
                    ]
                    .into_iter()
                    .collect(),
                    os: vec!["linux".into()],
                    offerings: ["us-east-1a", "us-east-1b"]
                        .iter()
                        .enumerate()
                        .map(|(j, z)| cloud::Offering {
                            zone: z.to_string(),
                            capacity_type: "on-demand".into(),
                            price: 0.1 + i as f64 * 0.1 + j as f64 * 0.01,
                            available: true,
                            unpriced: false,
                        })
                        .collect(),
                })
                .collect(),
            notes: vec![],
        };
        let nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "mine", "labels": {"karpenter.sh/nodepool": "default", "team": "x"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]},
                    {"key": "team", "operator": "In", "values": ["x"]}
                ]
            }
        }))
        .expect("nodeclaim");
        let s = launch_spec(&nc, &catalog).expect("a spec");
        assert_eq!(s.name, "mine");
        assert_eq!(s.node_pool, "default");
        assert_eq!(s.instance_types, ["m5.large", "m5.xlarge"]);
        assert_eq!(s.zones, ["us-east-1a"]);
        assert_eq!(s.capacity_types, [CapacityType::OnDemand]);
        let mut none = nc.clone();
        none.spec.requirements[0].values = Some(vec!["r6".into()]);
        assert!(launch_spec(&none, &catalog).is_err());
    }

    /// Karpenter's `minValues` on a user's NodeClaim (`pkg/cloudprovider/types.go`
    /// `SatisfiesMinValues` / `Truncate`): the launch keeps enough distinct values among the
    /// types it offers EC2, moving to a dearer zone when the cheapest cannot, and is refused
    /// naming the label when no zone can.
    #[test]
    fn min_values_pick_a_zone_whose_types_keep_them_or_refuse_naming_the_label() {
        let it = |name: &str, zones: &[&str], price: f64| cloud::InstanceType {
            name: name.to_string(),
            capacity: Default::default(),
            overhead: Default::default(),
            labels: [
                (
                    "node.kubernetes.io/instance-type".to_string(),
                    name.to_string(),
                ),
                (
                    "karpenter.k8s.aws/instance-family".to_string(),
                    name.split('.').next().unwrap_or_default().to_string(),
                ),
            ]
            .into_iter()
            .collect(),
            os: vec!["linux".into()],
            offerings: zones
                .iter()
                .enumerate()
                .map(|(j, z)| cloud::Offering {
                    zone: z.to_string(),
                    capacity_type: "on-demand".into(),
                    price: price + j as f64 * 0.01,
                    unpriced: false,
                    available: true,
                })
                .collect(),
        };
        let catalog = cloud::Catalog {
            instance_types: vec![
                it("m5.large", &["us-east-1a", "us-east-1b"], 0.1),
                it("m5.xlarge", &["us-east-1a", "us-east-1b"], 0.2),
                it("c5.large", &["us-east-1b"], 0.15),
            ],
            notes: vec![],
        };
        let nc = |families: &[&str], min: i32| -> NodeClaim {
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "mine", "labels": {"karpenter.sh/nodepool": "default"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                         "values": families, "minValues": min},
                    ]
                }
            }))
            .expect("nodeclaim")
        };
        // Without minValues the cheapest offering's zone would do; us-east-1a has only m5.
        let s = launch_spec(&nc(&["m5", "c5"], 2), &catalog).expect("a spec");
        assert_eq!(s.zones, ["us-east-1b"]);
        assert_eq!(s.instance_types, ["m5.large", "c5.large", "m5.xlarge"]);
        assert_eq!(s.requirements[0].min_values, Some(2));
        let s = launch_spec(&nc(&["m5", "c5"], 1), &catalog).expect("a spec");
        assert_eq!(s.zones, ["us-east-1a"]);
        let why = launch_spec(&nc(&["m5"], 2), &catalog).expect_err("refused");
        assert!(
            why.contains("minValues")
                && why.contains("karpenter.k8s.aws/instance-family has 1 value"),
            "{why}"
        );
    }
}
