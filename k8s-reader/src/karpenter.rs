//! Karpenter objects, read as JSON (`kube::core::DynamicObject`): NodePool and NodeClaim
//! (`karpenter.sh/v1`), EC2NodeClass (`karpenter.k8s.aws/v1`), with their CRD defaults
//! (`expireAfter: 720h`, `consolidateAfter: 0s`, budgets `nodes: 10%`).

use std::collections::BTreeMap;

use proto::v1 as pb;
use serde_json::Value;

use super::{IntOrPercent, OPERATORS, Result, field_err, int_or_percent, one_of, taint};
use common::hash::{
    ami_family_from_alias, ec2nodeclass_spec_hash, nodepool_template_hash, resolved_ami_family,
};

/// Karpenter's default `expireAfter` in seconds: 720h.
pub const DEFAULT_EXPIRE_AFTER: i64 = 720 * 3600;

/// Parses a Go duration (`720h`, `1h30m`, `10s`, `300ms`) into whole seconds; `Never` is
/// `None`.
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_duration(s: &str) -> std::result::Result<Option<i64>, String> {
    if s == "Never" {
        return Ok(None);
    }
    common::duration::parse_go_duration(s)
        .map(Some)
        .map_err(|e| e.to_string())
}

pub(crate) fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn time(v: &Value, field: &str) -> Option<i64> {
    str_at(v, &["metadata", field])
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp())
}

fn duration_field(v: Option<&Value>, field: &str, default: Option<i64>) -> Result<Option<i64>> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(s)) => parse_duration(s).map_err(|e| field_err(field, e)),
        Some(other) => Err(field_err(
            field,
            format!("expected a duration string, got {other}"),
        )),
    }
}

fn taints(v: Option<&Value>, base: &str) -> Result<Vec<pb::Taint>> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            taint(
                str_at(t, &["key"]).unwrap_or_default(),
                str_at(t, &["value"]).unwrap_or_default(),
                str_at(t, &["effect"]).unwrap_or_default(),
                &format!("{base}[{i}]"),
            )
        })
        .collect()
}

/// A budget's `nodes`: a count or a percentage up to 100%, absent 10%.
fn budget_nodes(b: &Value, base: &str) -> Result<String> {
    let at = || format!("{base}.nodes");
    let text = match b.get("nodes") {
        None | Some(Value::Null) => return Ok("10%".into()),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(field_err(
                at(),
                format!("expected an integer or a percentage like \"50%\", got {other}"),
            ));
        }
    };
    match int_or_percent(&text, &at())? {
        IntOrPercent::Percent(p) if !(0..=100).contains(&p) => Err(field_err(
            at(),
            format!("a percentage must be between 0% and 100%, got {p}%"),
        )),
        IntOrPercent::Int(n) if n < 0 => {
            Err(field_err(at(), format!("must not be negative, got {n}")))
        }
        _ => Ok(text),
    }
}

/// A budget's `reasons`, each one of Karpenter's disruption reasons.
fn budget_reasons(b: &Value, base: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (i, r) in b
        .get("reasons")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = || format!("{base}.reasons[{i}]");
        let r = r
            .as_str()
            .ok_or_else(|| field_err(at(), format!("expected a string, got {r}")))?;
        one_of(r, &["Underutilized", "Empty", "Drifted"], at)?;
        out.push(r.to_string());
    }
    Ok(out)
}

pub(crate) fn requirements(v: Option<&Value>, base: &str) -> Result<Vec<pb::Requirement>> {
    let mut out = Vec::new();
    for (i, r) in v
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let operator = str_at(r, &["operator"]).unwrap_or_default();
        if !OPERATORS.contains(&operator) {
            return Err(field_err(
                format!("{base}[{i}].operator"),
                format!("unknown operator {operator:?}"),
            ));
        }
        let min_values =
            match r.get("minValues") {
                None | Some(Value::Null) => None,
                Some(m) => Some(m.as_u64().and_then(|m| u32::try_from(m).ok()).ok_or_else(
                    || {
                        field_err(
                            format!("{base}[{i}].minValues"),
                            format!("expected a count, got {m}"),
                        )
                    },
                )?),
            };
        out.push(pb::Requirement {
            key: str_at(r, &["key"]).unwrap_or_default().into(),
            operator: operator.into(),
            values: r
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(String::from))
                .collect(),
            min_values,
        });
    }
    Ok(out)
}

/// A resource list in milli-units, each quantity (a string or a JSON number) parsed once.
pub(crate) fn resource_map(v: Option<&Value>, base: &str) -> Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for (k, q) in v.and_then(Value::as_object).into_iter().flatten() {
        let text = match q {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(field_err(
                    format!("{base}.{k}"),
                    format!("expected a quantity, got {other}"),
                ));
            }
        };
        let m = crate::quantity::parse_milli(&text)
            .map_err(|e| field_err(format!("{base}.{k}"), e.to_string()))?;
        out.insert(k.clone(), m);
    }
    Ok(out)
}

/// `spec.disruption.consolidationPolicy`, absent `WhenEmptyOrUnderutilized`; v1beta1's
/// `WhenUnderutilized` is read as v1's `WhenEmptyOrUnderutilized`, which replaced it.
fn consolidation_policy(v: Option<&Value>) -> Result<&'static str> {
    const FIELD: &str = "spec.disruption.consolidationPolicy";
    match v {
        None | Some(Value::Null) => Ok("WhenEmptyOrUnderutilized"),
        Some(Value::String(s)) => match s.as_str() {
            "WhenEmpty" => Ok("WhenEmpty"),
            "Balanced" => Ok("Balanced"),
            "WhenEmptyOrUnderutilized" | "WhenUnderutilized" => Ok("WhenEmptyOrUnderutilized"),
            other => Err(field_err(
                FIELD,
                format!(
                    "unknown variant `{other}`, expected one of `WhenEmpty`, `WhenEmptyOrUnderutilized`, `Balanced`, `WhenUnderutilized`"
                ),
            )),
        },
        Some(other) => Err(field_err(FIELD, format!("expected a string, got {other}"))),
    }
}

/// Converts a NodePool.
///
/// # Errors
/// A field the planner cannot use, named by its path.
pub fn node_pool(v: &Value) -> Result<pb::NodePool> {
    let tspec = at(v, &["spec", "template", "spec"]);
    let weight = match at(v, &["spec", "weight"]) {
        None | Some(Value::Null) => None,
        Some(w) => Some(
            w.as_i64()
                .and_then(|w| i32::try_from(w).ok())
                .filter(|w| (1..=100).contains(w))
                .ok_or_else(|| {
                    field_err("spec.weight", format!("must be between 1 and 100, got {w}"))
                })?,
        ),
    };
    let replicas = match at(v, &["spec", "replicas"]) {
        None | Some(Value::Null) => None,
        Some(r) => Some(r.as_i64().filter(|r| *r >= 0).ok_or_else(|| {
            field_err(
                "spec.replicas",
                format!("must be a non-negative integer, got {r}"),
            )
        })?),
    };
    let disruption = at(v, &["spec", "disruption"]);
    let mut budgets = Vec::new();
    match disruption
        .and_then(|d| d.get("budgets"))
        .and_then(Value::as_array)
    {
        None => budgets.push(pb::Budget {
            nodes: "10%".into(),
            ..Default::default()
        }),
        Some(list) => {
            for (i, b) in list.iter().enumerate() {
                let base = format!("spec.disruption.budgets[{i}]");
                let schedule = str_at(b, &["schedule"]).map(String::from);
                let duration =
                    duration_field(b.get("duration"), &format!("{base}.duration"), None)?;
                if schedule.is_some() != duration.is_some() {
                    return Err(field_err(
                        format!(
                            "{base}.{}",
                            if schedule.is_some() {
                                "duration"
                            } else {
                                "schedule"
                            }
                        ),
                        "'schedule' must be set with 'duration'",
                    ));
                }
                budgets.push(pb::Budget {
                    nodes: budget_nodes(b, &base)?,
                    reasons: budget_reasons(b, &base)?,
                    schedule,
                    duration,
                });
            }
        }
    }
    let limits = at(v, &["spec", "limits"]);
    Ok(pb::NodePool {
        name: str_at(v, &["metadata", "name"]).unwrap_or_default().into(),
        weight,
        labels: string_map(at(v, &["spec", "template", "metadata", "labels"])),
        annotations: string_map(at(v, &["spec", "template", "metadata", "annotations"])),
        taints: taints(
            tspec.and_then(|s| s.get("taints")),
            "spec.template.spec.taints",
        )?,
        startup_taints: taints(
            tspec.and_then(|s| s.get("startupTaints")),
            "spec.template.spec.startupTaints",
        )?,
        requirements: requirements(
            tspec.and_then(|s| s.get("requirements")),
            "spec.template.spec.requirements",
        )?,
        node_class: tspec
            .and_then(|s| str_at(s, &["nodeClassRef", "name"]))
            .filter(|n| !n.is_empty())
            .map(String::from),
        expire_after: duration_field(
            tspec.and_then(|s| s.get("expireAfter")),
            "spec.template.spec.expireAfter",
            Some(DEFAULT_EXPIRE_AFTER),
        )?,
        limits: match limits {
            Some(l) if l.is_object() => Some(pb::ResourceList {
                milli: resource_map(Some(l), "spec.limits")?,
                ..pb::ResourceList::default()
            }),
            _ => None,
        },
        limited_resources: limits
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default(),
        disruption: Some(pb::Disruption {
            consolidation_policy: consolidation_policy(
                disruption.and_then(|d| d.get("consolidationPolicy")),
            )?
            .into(),
            consolidate_after: duration_field(
                disruption.and_then(|d| d.get("consolidateAfter")),
                "spec.disruption.consolidateAfter",
                Some(0),
            )?,
            budgets,
        }),
        template_hash: nodepool_template_hash(at(v, &["spec", "template"]).unwrap_or(&Value::Null)),
        uid: str_at(v, &["metadata", "uid"]).unwrap_or_default().into(),
        metadata_annotations: string_map(at(v, &["metadata", "annotations"])),
        deletion_time: time(v, "deletionTimestamp"),
        replicas,
    })
}

/// Converts a NodeOverlay (karpenter.sh/v1alpha1). The CRD's rules that its schema states
/// (patterns of `price` and `priceAdjustment`, not both, weight 1–10000, no standard resource in
/// `capacity`) are left to the planner, which names the field; quantities are checked here.
///
/// # Errors
/// A field the planner cannot use, named by its path.
pub fn node_overlay(v: &Value) -> Result<pb::NodeOverlay> {
    let spec = at(v, &["spec"]);
    let text = |field: &str| -> Result<Option<String>> {
        match spec.and_then(|s| s.get(field)) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(field_err(
                format!("spec.{field}"),
                format!("expected a string, got {other}"),
            )),
        }
    };
    let weight = match spec.and_then(|s| s.get("weight")) {
        None | Some(Value::Null) => None,
        Some(w) => Some(
            w.as_i64()
                .and_then(|w| i32::try_from(w).ok())
                .ok_or_else(|| field_err("spec.weight", format!("expected an integer, got {w}")))?,
        ),
    };
    Ok(pb::NodeOverlay {
        name: str_at(v, &["metadata", "name"]).unwrap_or_default().into(),
        requirements: requirements(
            spec.and_then(|s| s.get("requirements")),
            "spec.requirements",
        )?,
        price: text("price")?,
        price_adjustment: text("priceAdjustment")?,
        capacity_milli: resource_map(spec.and_then(|s| s.get("capacity")), "spec.capacity")?,
        capacity: BTreeMap::new(),
        weight,
        uid: str_at(v, &["metadata", "uid"]).unwrap_or_default().into(),
    })
}

/// Converts a NodeClaim.
///
/// # Errors
/// A field the planner cannot use, named by its path.
pub fn node_claim(v: &Value) -> Result<pb::NodeClaim> {
    let spec = at(v, &["spec"]);
    let status = at(v, &["status"]);
    Ok(pb::NodeClaim {
        name: str_at(v, &["metadata", "name"]).unwrap_or_default().into(),
        labels: string_map(at(v, &["metadata", "labels"])),
        annotations: string_map(at(v, &["metadata", "annotations"])),
        requirements: requirements(
            spec.and_then(|s| s.get("requirements")),
            "spec.requirements",
        )?,
        taints: taints(spec.and_then(|s| s.get("taints")), "spec.taints")?,
        startup_taints: taints(
            spec.and_then(|s| s.get("startupTaints")),
            "spec.startupTaints",
        )?,
        requests_milli: resource_map(
            at(v, &["spec", "resources", "requests"]),
            "spec.resources.requests",
        )?,
        node_class: spec
            .and_then(|s| str_at(s, &["nodeClassRef", "name"]))
            .filter(|n| !n.is_empty())
            .map(String::from),
        expire_after: duration_field(
            spec.and_then(|s| s.get("expireAfter")),
            "spec.expireAfter",
            Some(DEFAULT_EXPIRE_AFTER),
        )?,
        node_name: status
            .and_then(|s| str_at(s, &["nodeName"]))
            .filter(|n| !n.is_empty())
            .map(String::from),
        provider_id: status
            .and_then(|s| str_at(s, &["providerID"]))
            .filter(|n| !n.is_empty())
            .map(String::from),
        capacity_milli: resource_map(status.and_then(|s| s.get("capacity")), "status.capacity")?,
        allocatable_milli: resource_map(
            status.and_then(|s| s.get("allocatable")),
            "status.allocatable",
        )?,
        last_pod_event_time: status
            .and_then(|s| str_at(s, &["lastPodEventTime"]))
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp()),
        creation_time: time(v, "creationTimestamp"),
        deletion_time: time(v, "deletionTimestamp"),
        uid: str_at(v, &["metadata", "uid"]).unwrap_or_default().into(),
        image_id: status
            .and_then(|s| str_at(s, &["imageID"]))
            .filter(|i| !i.is_empty())
            .map(String::from),
        // Sent in milli-units only (`*_milli`).
        requests: BTreeMap::new(),
        capacity: BTreeMap::new(),
        allocatable: BTreeMap::new(),
    })
}

/// The non-empty `id`s of the status list `field` (`amis`, `subnets`, `securityGroups`).
fn status_ids(v: &Value, field: &str) -> Vec<String> {
    at(v, &["status", field])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| str_at(a, &["id"]))
        .filter(|id| !id.is_empty())
        .map(String::from)
        .collect()
}

/// Converts an EC2NodeClass.
///
/// # Errors
/// A field the planner cannot use (an unknown AMI alias, a bad kubelet quantity), named by
/// its path.
pub fn node_class(v: &Value) -> Result<pb::NodeClass> {
    let spec = at(v, &["spec"]).cloned().unwrap_or(Value::Null);
    for (i, term) in spec
        .get("amiSelectorTerms")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(alias) = str_at(term, &["alias"]).filter(|a| !a.is_empty())
            && (ami_family_from_alias(alias).is_none() || !alias.contains('@'))
        {
            return Err(field_err(
                format!("spec.amiSelectorTerms[{i}].alias"),
                format!(
                    "invalid alias {alias:?}: expected family@version with family one of al2, al2023, bottlerocket, windows2019, windows2022"
                ),
            ));
        }
    }
    let family = spec.as_object().and_then(resolved_ami_family);
    let root_device = if family.as_deref() == Some("Bottlerocket") {
        "/dev/xvdb"
    } else {
        "/dev/xvda"
    };
    let mappings: Vec<&Value> = spec
        .get("blockDeviceMappings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let root_volume_size = mappings
        .iter()
        .find(|m| m.get("rootVolume").and_then(Value::as_bool) == Some(true))
        .or_else(|| {
            mappings
                .iter()
                .find(|m| str_at(m, &["deviceName"]) == Some(root_device))
        })
        .and_then(|m| str_at(m, &["ebs", "volumeSize"]))
        .map(String::from);
    let kubelet = match spec.get("kubelet") {
        Some(k) if k.is_object() => {
            let mut eviction_hard = BTreeMap::new();
            let mut eviction_hard_percent = BTreeMap::new();
            for (signal, threshold) in k
                .get("evictionHard")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let resource = match signal.as_str() {
                    "memory.available" => "memory",
                    "nodefs.available" => "ephemeral-storage",
                    _ => continue,
                };
                let text = threshold.as_str().unwrap_or_default();
                match text.strip_suffix('%') {
                    Some(p) => {
                        // In thousandths of a percent (`5%` is 5000).
                        let m = crate::quantity::parse_milli(p.trim())
                            .ok()
                            .filter(|m| (0..=100_000).contains(m))
                            .ok_or_else(|| {
                                field_err(
                                    format!("spec.kubelet.evictionHard.{signal}"),
                                    format!("{text:?} is not a percentage between 0% and 100%"),
                                )
                            })?;
                        eviction_hard_percent.insert(resource.to_string(), m);
                    }
                    None => {
                        let m = crate::quantity::parse_milli(text).map_err(|e| {
                            field_err(format!("spec.kubelet.evictionHard.{signal}"), e.to_string())
                        })?;
                        eviction_hard.insert(resource.to_string(), m);
                    }
                }
            }
            let reserved = |key: &str| -> Result<Option<pb::ResourceList>> {
                match k.get(key) {
                    Some(l) if l.is_object() => {
                        let mut q = resource_map(Some(l), &format!("spec.kubelet.{key}"))?;
                        // `pid` reserves process IDs, not anything a pod requests.
                        q.remove("pid");
                        Ok(Some(pb::ResourceList {
                            milli: q,
                            ..pb::ResourceList::default()
                        }))
                    }
                    _ => Ok(None),
                }
            };
            Some(pb::KubeletConfig {
                max_pods: k.get("maxPods").and_then(Value::as_i64),
                pods_per_core: k.get("podsPerCore").and_then(Value::as_i64),
                kube_reserved: reserved("kubeReserved")?,
                system_reserved: reserved("systemReserved")?,
                eviction_hard: (!eviction_hard.is_empty()).then_some(pb::ResourceList {
                    milli: eviction_hard,
                    ..pb::ResourceList::default()
                }),
                eviction_hard_percent_milli: eviction_hard_percent,
                ..pb::KubeletConfig::default()
            })
        }
        _ => None,
    };
    Ok(pb::NodeClass {
        name: str_at(v, &["metadata", "name"]).unwrap_or_default().into(),
        ami_family: family,
        kubelet,
        spec_hash: ec2nodeclass_spec_hash(&spec),
        uid: str_at(v, &["metadata", "uid"]).unwrap_or_default().into(),
        root_volume_size,
        metadata_annotations: string_map(at(v, &["metadata", "annotations"])),
        resolved_amis: status_ids(v, "amis"),
        resolved_subnets: status_ids(v, "subnets"),
        resolved_security_groups: status_ids(v, "securityGroups"),
        not_ready: class_not_ready(v),
    })
}

/// The EC2NodeClass conditions the actuator writes from its resolution (Karpenter's
/// `ec2nodeclass` status controller's), each of which keeps the class from launching when False.
const NODE_CLASS_RESOLUTION_CONDITIONS: [&str; 5] = [
    "ValidationSucceeded",
    "SubnetsReady",
    "SecurityGroupsReady",
    "AMIsReady",
    "InstanceProfileReady",
];

/// Why the class's status says it cannot launch (see `NodeClass.not_ready`); empty when it can
/// or has no status yet.
fn class_not_ready(v: &Value) -> String {
    at(v, &["status", "conditions"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| {
            str_at(c, &["status"]) == Some("False")
                && str_at(c, &["type"])
                    .is_some_and(|t| NODE_CLASS_RESOLUTION_CONDITIONS.contains(&t))
        })
        .map(|c| {
            let type_ = str_at(c, &["type"]).unwrap_or_default();
            match str_at(c, &["message"]).filter(|m| !m.is_empty()) {
                Some(m) => format!("{type_}: {m}"),
                None => format!("{type_}: {}", str_at(c, &["reason"]).unwrap_or("False")),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("720h"), Ok(Some(720 * 3600)));
        assert_eq!(parse_duration("1h30m"), Ok(Some(5400)));
        assert_eq!(parse_duration("1500ms"), Ok(Some(1)));
        assert_eq!(parse_duration("Never"), Ok(None));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn the_status_amis_and_the_claims_image_are_carried() {
        let class = serde_json::json!({
            "metadata": {"name": "default", "uid": "u"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]},
            "status": {"amis": [
                {"id": "ami-1", "requirements": []},
                {"id": "ami-2", "name": "n", "requirements": []}
            ],
            "subnets": [{"id": "subnet-1", "zone": "us-east-1a"}, {"id": "", "zone": "x"}],
            "securityGroups": [{"id": "sg-1", "name": "nodes"}]}
        });
        let c = node_class(&class).expect("valid");
        assert_eq!(c.resolved_amis, ["ami-1", "ami-2"]);
        assert_eq!(c.resolved_subnets, ["subnet-1"], "empty IDs are dropped");
        assert_eq!(c.resolved_security_groups, ["sg-1"]);
        let mut bare = class.clone();
        bare["status"] = serde_json::json!({});
        let c = node_class(&bare).expect("valid");
        assert!(c.resolved_amis.is_empty());
        assert!(c.resolved_subnets.is_empty() && c.resolved_security_groups.is_empty());
        let claim = serde_json::json!({
            "metadata": {"name": "c", "uid": "u", "annotations": {
                "dovetail.io/subnet-id": "subnet-1",
                "dovetail.io/security-group-ids": "sg-1"
            }},
            "spec": {"requirements": []},
            "status": {"imageID": "ami-1"}
        });
        let c = node_claim(&claim).expect("valid");
        assert_eq!(c.image_id.as_deref(), Some("ami-1"));
        assert_eq!(c.annotations["dovetail.io/subnet-id"], "subnet-1");
        assert_eq!(c.annotations["dovetail.io/security-group-ids"], "sg-1");
    }

    #[test]
    fn a_node_overlay_keeps_its_spec_and_names_a_bad_quantity() {
        let v = serde_json::json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": "preview-price", "uid": "u1"},
            "spec": {
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                  "values": ["p5e.48xlarge"]}],
                "price": "98.32",
                "capacity": {"example.com/widget": 4},
                "weight": 10,
            },
        });
        let o = node_overlay(&v).expect("converts");
        assert_eq!(o.name, "preview-price");
        assert_eq!(o.uid, "u1");
        assert_eq!(o.price.as_deref(), Some("98.32"));
        assert_eq!(o.price_adjustment, None);
        assert_eq!(o.weight, Some(10));
        assert_eq!(o.requirements[0].values, ["p5e.48xlarge"]);
        assert_eq!(o.capacity_milli.get("example.com/widget"), Some(&4000));
        let mut bad = v.clone();
        bad["spec"]["capacity"] = serde_json::json!({"example.com/widget": "lots"});
        let e = node_overlay(&bad).expect_err("bad quantity");
        assert!(
            e.to_string()
                .starts_with("spec.capacity.example.com/widget:"),
            "{e}"
        );
        bad["spec"] = serde_json::json!({"requirements": [], "price": 1.5});
        let e = node_overlay(&bad).expect_err("price must be a string");
        assert!(e.to_string().starts_with("spec.price:"), "{e}");
    }

    #[test]
    fn a_class_whose_resolution_failed_says_why() {
        let mut v = serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "win"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "R"},
            "status": {"conditions": [
                {"type": "AMIsReady", "status": "True", "reason": "AMIsReady"},
                {"type": "ValidationSucceeded", "status": "False", "reason": "Unsupported",
                 "message": "spec.amiSelectorTerms[0].alias windows2022 is not supported"},
                {"type": "SubnetsReady", "status": "False", "reason": "SubnetsNotFound"},
                {"type": "PlannerValidationSucceeded", "status": "False", "message": "x"},
                {"type": "Ready", "status": "False", "message": "y"},
            ]},
        });
        assert_eq!(
            class_not_ready(&v),
            "ValidationSucceeded: spec.amiSelectorTerms[0].alias windows2022 is not supported; \
             SubnetsReady: SubnetsNotFound"
        );
        v["status"]["conditions"] = serde_json::json!([{"type": "Ready", "status": "False"}]);
        assert_eq!(
            class_not_ready(&v),
            "",
            "the watcher's own verdict is not read back"
        );
        v["status"] = serde_json::json!({});
        assert_eq!(class_not_ready(&v), "", "no status yet: planned");
    }

    #[test]
    fn eviction_thresholds_in_percent_and_absolute_are_read_once() {
        let class = |threshold: &str| {
            serde_json::json!({
                "metadata": {"name": "default"},
                "spec": {"kubelet": {"evictionHard": {
                    "memory.available": threshold, "nodefs.available": "1Gi"
                }}}
            })
        };
        let k = node_class(&class("5%"))
            .expect("valid")
            .kubelet
            .expect("kubelet");
        assert_eq!(k.eviction_hard_percent_milli["memory"], 5000);
        assert_eq!(
            k.eviction_hard.expect("absolute").milli["ephemeral-storage"],
            (1_i64 << 30) * 1000
        );
        assert_eq!(
            node_class(&class("150%"))
                .expect_err("over 100%")
                .to_string(),
            "spec.kubelet.evictionHard.memory.available: \"150%\" is not a percentage between 0% and 100%"
        );
    }

    #[test]
    fn node_pool_defaults_and_errors_name_the_field() {
        let np = serde_json::json!({
            "metadata": {"name": "default", "uid": "u"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"], "minValues": 1}]
            }}}
        });
        let p = node_pool(&np).expect("valid");
        assert_eq!(p.expire_after, Some(720 * 3600));
        assert_eq!(p.node_class.as_deref(), Some("default"));
        let d = p.disruption.expect("defaulted");
        assert_eq!(d.consolidate_after, Some(0));
        assert_eq!(d.budgets[0].nodes, "10%");
        assert_eq!(p.template_hash.len(), 16);
        let mut bad = np.clone();
        bad["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Near".into();
        assert_eq!(
            node_pool(&bad).expect_err("bad operator").to_string(),
            "spec.template.spec.requirements[0].operator: unknown operator \"Near\""
        );
        let mut bad = np.clone();
        bad["spec"]["disruption"] = serde_json::json!({"consolidationPolicy": "Cheapest"});
        assert_eq!(
            node_pool(&bad).expect_err("unknown policy").to_string(),
            "spec.disruption.consolidationPolicy: unknown variant `Cheapest`, expected one of `WhenEmpty`, `WhenEmptyOrUnderutilized`, `Balanced`, `WhenUnderutilized`"
        );
        let mut fixed = np.clone();
        fixed["spec"]["replicas"] = 3.into();
        assert_eq!(node_pool(&fixed).expect("static").replicas, Some(3));
        fixed["spec"]["replicas"] = (-1).into();
        assert_eq!(
            node_pool(&fixed).expect_err("negative").to_string(),
            "spec.replicas: must be a non-negative integer, got -1"
        );
        let mut balanced = np.clone();
        balanced["spec"]["disruption"] = serde_json::json!({"consolidationPolicy": "Balanced"});
        let d = node_pool(&balanced)
            .expect("v1.14's Balanced")
            .disruption
            .expect("set");
        assert_eq!(d.consolidation_policy, "Balanced");
        let mut legacy = np.clone();
        legacy["spec"]["disruption"] =
            serde_json::json!({"consolidationPolicy": "WhenUnderutilized"});
        let d = node_pool(&legacy)
            .expect("v1beta1's name")
            .disruption
            .expect("set");
        assert_eq!(d.consolidation_policy, "WhenEmptyOrUnderutilized");
        let mut bad = np;
        bad["spec"]["weight"] = 0.into();
        assert!(
            node_pool(&bad)
                .expect_err("weight 0")
                .to_string()
                .starts_with("spec.weight:")
        );
    }
}
