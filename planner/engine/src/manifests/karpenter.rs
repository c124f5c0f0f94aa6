//! Karpenter objects: NodePool and NodeClaim (`karpenter.sh/v1`), EC2NodeClass
//! (`karpenter.k8s.aws/v1`), with the defaults of their v1 CRDs.

use serde_json::Value;

use super::cluster::resources;
use super::hash::{ami_family_from_alias, ec2nodeclass_spec_hash, nodepool_template_hash};
use super::pods::{requirements, taints};
use super::raw;
use super::{FieldError, de, require_name};
use crate::model::{
    Budget, BudgetNodes, ConsolidationPolicy, Disruption, IntOrPercent, KubeletConfig, NodeClaim,
    NodeClass, NodePool, Resources, names,
};

/// Karpenter's default `expireAfter`: 720h.
pub(super) const DEFAULT_EXPIRE_AFTER: i64 = 720 * 3600;

/// `expireAfter`: absent is the 720h default, `Never` is `None`.
fn expire_after(v: Option<raw::NillableDuration>) -> Option<i64> {
    match v {
        None => Some(DEFAULT_EXPIRE_AFTER),
        Some(d) => d.0,
    }
}

fn budget(b: &raw::Budget, at: &str) -> Result<Budget, FieldError> {
    let nodes = match b.nodes.map(|n| n.0) {
        None => BudgetNodes::Percent(10),
        Some(IntOrPercent::Int(n)) => BudgetNodes::Count(u32::try_from(n).map_err(|_| {
            FieldError::new(
                format!("{at}.nodes"),
                format!("must not be negative, got {n}"),
            )
        })?),
        Some(IntOrPercent::Percent(p)) if (0..=100).contains(&p) => {
            BudgetNodes::Percent(p.unsigned_abs())
        }
        Some(IntOrPercent::Percent(p)) => {
            return Err(FieldError::new(
                format!("{at}.nodes"),
                format!("a percentage must be between 0% and 100%, got {p}%"),
            ));
        }
    };
    if b.schedule.is_some() != b.duration.is_some() {
        return Err(FieldError::new(
            if b.schedule.is_some() {
                format!("{at}.duration")
            } else {
                format!("{at}.schedule")
            },
            "'schedule' must be set with 'duration'",
        ));
    }
    Ok(Budget {
        nodes,
        reasons: b.reasons.iter().map(|r| format!("{r:?}")).collect(),
        schedule: b.schedule.clone(),
        duration: b.duration.map(|d| d.0),
    })
}

/// A duration in seconds as a NodePool would write it (`Never` for `None`).
fn show_duration(d: Option<i64>) -> String {
    match d {
        None => "Never".to_string(),
        Some(s) if s % 3600 == 0 => format!("{}h", s / 3600),
        Some(s) => format!("{s}s"),
    }
}

/// A field's value as the manifest wrote it.
fn show_value(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// Warnings for fields of older Karpenter APIs (v1beta1, v1alpha5) found in a v1 NodePool:
/// each names the field, says that v1 does not read it, and what v1 uses instead.
fn legacy_node_pool_fields(value: &Value, pool: &NodePool) -> Vec<String> {
    let spec = value.get("spec");
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(spec?, |v, k| v.get(k))
            .filter(|v| !v.is_null())
    };
    let ignored = |path: &str, v: &Value, instead: String| {
        format!(
            "NodePool {}: {path} ({}) is not read by karpenter.sh/v1 and is ignored; {instead}",
            pool.name,
            show_value(v)
        )
    };
    let expiry = format!(
        "v1 uses spec.template.spec.expireAfter (in force: {})",
        show_duration(pool.expire_after)
    );
    let mut out = Vec::new();
    if let Some(v) = field(&["disruption", "expireAfter"]) {
        out.push(ignored("spec.disruption.expireAfter", v, expiry.clone()));
    }
    if let Some(v) = field(&["ttlSecondsUntilExpired"]) {
        out.push(ignored("spec.ttlSecondsUntilExpired", v, expiry));
    }
    if let Some(v) = field(&["ttlSecondsAfterEmpty"]) {
        out.push(ignored(
            "spec.ttlSecondsAfterEmpty",
            v,
            "v1 uses spec.disruption.consolidationPolicy: WhenEmpty with spec.disruption.consolidateAfter".into(),
        ));
    }
    if let Some(v) = field(&["consolidation", "enabled"]) {
        out.push(ignored(
            "spec.consolidation.enabled",
            v,
            "v1 uses spec.disruption.consolidationPolicy: WhenEmptyOrUnderutilized (or WhenEmpty)"
                .into(),
        ));
    }
    if field(&["disruption", "consolidationPolicy"]).and_then(Value::as_str)
        == Some("WhenUnderutilized")
    {
        out.push(format!(
            "NodePool {}: spec.disruption.consolidationPolicy WhenUnderutilized is karpenter.sh/v1beta1; read as v1's WhenEmptyOrUnderutilized, which v1 uses instead",
            pool.name
        ));
    }
    out
}

/// Whether `path` is a NodePool field of an older Karpenter API that
/// [`legacy_node_pool_fields`] warns about (so it needs no unknown-field warning too).
pub(super) fn is_legacy_node_pool_field(path: &str) -> bool {
    path == "spec.disruption.expireAfter"
        || path == "spec.ttlSecondsUntilExpired"
        || path == "spec.ttlSecondsAfterEmpty"
        || path == "spec.consolidation"
        || path.starts_with("spec.consolidation.")
}

/// The warning for a Karpenter object of an apiVersion older than v1, which is not read; `None`
/// for any other object.
pub(super) fn legacy_kind(api_version: &str, kind: &str) -> Option<String> {
    let instead = match (api_version, kind) {
        ("karpenter.sh/v1beta1", "NodePool") => {
            "v1 uses apiVersion karpenter.sh/v1 (spec.disruption.expireAfter moves to spec.template.spec.expireAfter; consolidationPolicy WhenUnderutilized is WhenEmptyOrUnderutilized)"
        }
        ("karpenter.sh/v1alpha5", "Provisioner") => {
            "v1 uses a karpenter.sh/v1 NodePool (ttlSecondsUntilExpired is spec.template.spec.expireAfter; ttlSecondsAfterEmpty is spec.disruption.consolidationPolicy: WhenEmpty with consolidateAfter; consolidation.enabled is consolidationPolicy: WhenEmptyOrUnderutilized)"
        }
        ("karpenter.sh/v1beta1", "NodeClaim") | ("karpenter.sh/v1alpha5", "Machine") => {
            "v1 uses a karpenter.sh/v1 NodeClaim"
        }
        ("karpenter.k8s.aws/v1beta1", "EC2NodeClass")
        | ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate") => {
            "v1 uses a karpenter.k8s.aws/v1 EC2NodeClass"
        }
        _ => return None,
    };
    Some(format!(
        "{api_version} {kind} (unsupported apiVersion) is not read; {instead}"
    ))
}

/// Converts a NodePool; the flag is true when it is being deleted (`deletionTimestamp` set).
/// The strings are warnings about fields of older Karpenter APIs that v1 does not read.
pub(super) fn node_pool(value: &Value) -> Result<(NodePool, bool, Vec<String>), FieldError> {
    let raw: raw::NodePool = de(value)?;
    let meta = raw.metadata;
    require_name(&meta.name)?;
    let deleting = meta.deletion_timestamp.is_some();
    let spec = raw.spec;
    let tspec = spec.template.spec;
    let d = spec.disruption;
    let disruption = Disruption {
        consolidation_policy: match d.consolidation_policy {
            Some(raw::ConsolidationPolicy::WhenEmpty) => ConsolidationPolicy::WhenEmpty,
            Some(raw::ConsolidationPolicy::Balanced) => ConsolidationPolicy::Balanced,
            // `WhenUnderutilized` (v1beta1) is v1's WhenEmptyOrUnderutilized (with a warning).
            _ => ConsolidationPolicy::WhenEmptyOrUnderutilized,
        },
        consolidate_after: d.consolidate_after.map_or(Some(0), |c| c.0),
        budgets: match &d.budgets {
            None => Disruption::default().budgets,
            Some(list) => list
                .iter()
                .enumerate()
                .map(|(i, b)| budget(b, &format!("spec.disruption.budgets[{i}]")))
                .collect::<Result<_, _>>()?,
        },
    };
    let (limits, limited_resources) = match &spec.limits {
        Some(l) => (Some(resources(l)), l.0.keys().cloned().collect()),
        None => (None, Vec::new()),
    };
    let template_hash = nodepool_template_hash(
        value
            .get("spec")
            .and_then(|s| s.get("template"))
            .unwrap_or(&Value::Null),
    );
    if let Some(w) = spec.weight
        && !(1..=100).contains(&w)
    {
        // Karpenter's schema: minimum 1, maximum 100 (absent is the model's 0).
        return Err(FieldError::new(
            "spec.weight",
            format!("must be 1-100, got {w}"),
        ));
    }
    let pool = NodePool {
        name: meta.name,
        weight: spec.weight.unwrap_or(0),
        labels: spec.template.metadata.labels,
        annotations: spec.template.metadata.annotations,
        taints: taints(&tspec.taints),
        startup_taints: taints(&tspec.startup_taints),
        requirements: requirements(&tspec.requirements, "spec.template.spec.requirements")?,
        node_class: tspec
            .node_class_ref
            .map(|r| r.name)
            .filter(|n| !n.is_empty()),
        expire_after: expire_after(tspec.expire_after),
        limits,
        limited_resources,
        disruption,
        template_hash,
        metadata_annotations: meta.annotations,
        deletion_time: meta.deletion_timestamp.map(|t| t.0),
        replicas: spec.replicas,
    };
    let warnings = legacy_node_pool_fields(value, &pool);
    Ok((pool, deleting, warnings))
}

/// Converts a NodeClaim; the flag is true when `spec.expireAfter` is absent, so that its
/// NodePool's template value applies (resolved when the snapshot is finished).
pub(super) fn node_claim(value: &Value) -> Result<(NodeClaim, bool), FieldError> {
    node_claim_from(de(value)?)
}

/// [`node_claim`] from an already deserialized object.
pub(super) fn node_claim_from(raw: raw::NodeClaim) -> Result<(NodeClaim, bool), FieldError> {
    let meta = raw.metadata;
    require_name(&meta.name)?;
    let spec = raw.spec;
    let status = raw.status;
    let inherits_expiry = spec.expire_after.is_none();
    let claim = NodeClaim {
        name: meta.name,
        labels: meta.labels,
        annotations: meta.annotations,
        requirements: requirements(&spec.requirements, "spec.requirements")?,
        taints: taints(&spec.taints),
        startup_taints: taints(&spec.startup_taints),
        requests: resources(&spec.resources.requests),
        node_class: spec
            .node_class_ref
            .map(|r| r.name)
            .filter(|n| !n.is_empty()),
        expire_after: expire_after(spec.expire_after),
        node_name: status.node_name.filter(|n| !n.is_empty()),
        provider_id: status.provider_id.filter(|p| !p.is_empty()),
        capacity: resources(&status.capacity),
        allocatable: resources(&status.allocatable),
        last_pod_event_time: status.last_pod_event_time.map(|t| t.0),
        creation_time: meta.creation_timestamp.map(|t| t.0),
        deletion_time: meta.deletion_timestamp.map(|t| t.0),
        image_id: status.image_id.filter(|i| !i.is_empty()),
    };
    Ok((claim, inherits_expiry))
}

/// Parses a percentage like `10` or `7.5` (from `10%`) into milli-percent.
fn milli_percent(p: &str) -> Option<i64> {
    let v: f64 = p.parse().ok()?;
    (v.is_finite() && (0.0..=100.0).contains(&v)).then(|| (v * 1000.0).round() as i64)
}

fn kubelet(k: &raw::KubeletConfiguration) -> Result<KubeletConfig, FieldError> {
    let reserved = |l: &Option<raw::ResourceList>| {
        l.as_ref().map(|l| {
            let mut r = resources(l);
            // `pid` reserves process IDs, not anything a pod requests.
            r.extended.remove("pid");
            r
        })
    };
    let mut absolute = Resources::default();
    let mut any_absolute = false;
    let mut percent = std::collections::BTreeMap::new();
    for (signal, threshold) in &k.eviction_hard {
        let resource = match signal.as_str() {
            "memory.available" => names::MEMORY,
            "nodefs.available" => names::EPHEMERAL_STORAGE,
            _ => continue,
        };
        let at = format!("spec.kubelet.evictionHard.{signal}");
        match threshold {
            raw::Threshold::Absolute(q) => {
                let v = super::raw::parse_resource(resource, q)
                    .map_err(|e| FieldError::new(at.clone(), e))?;
                absolute.set(resource, v);
                any_absolute = true;
            }
            raw::Threshold::Percent(p) => {
                let v = milli_percent(p).ok_or_else(|| {
                    FieldError::new(
                        at.clone(),
                        format!("invalid percentage {p:?}%: expected a number from 0 to 100"),
                    )
                })?;
                percent.insert(resource.to_string(), v);
            }
        }
    }
    Ok(KubeletConfig {
        max_pods: k.max_pods,
        pods_per_core: k.pods_per_core,
        kube_reserved: reserved(&k.kube_reserved),
        system_reserved: reserved(&k.system_reserved),
        eviction_hard: any_absolute.then_some(absolute),
        eviction_hard_percent: percent,
    })
}

/// Converts an EC2NodeClass.
pub(super) fn node_class(value: &Value) -> Result<NodeClass, FieldError> {
    let raw: raw::Ec2NodeClass = de(value)?;
    let meta = raw.metadata;
    require_name(&meta.name)?;
    let spec = raw.spec;
    let mut ami_family = spec.ami_family.clone().filter(|f| !f.is_empty());
    for (i, term) in spec.ami_selector_terms.iter().enumerate() {
        let Some(alias) = term.alias.as_deref().filter(|a| !a.is_empty()) else {
            continue;
        };
        let family = ami_family_from_alias(alias).filter(|_| alias.contains('@'));
        let Some(family) = family else {
            return Err(FieldError::new(
                format!("spec.amiSelectorTerms[{i}].alias"),
                format!(
                    "invalid alias {alias:?}: expected family@version with family one of al2, al2023, bottlerocket, windows2019, windows2022"
                ),
            ));
        };
        if ami_family.is_none() {
            ami_family = Some(family);
        }
    }
    let root_device = match ami_family.as_deref() {
        Some("Bottlerocket") => "/dev/xvdb",
        _ => "/dev/xvda",
    };
    let root_volume_size = spec
        .block_device_mappings
        .iter()
        .find(|m| m.root_volume)
        .or_else(|| {
            spec.block_device_mappings
                .iter()
                .find(|m| m.device_name.as_deref() == Some(root_device))
        })
        .and_then(|m| m.ebs.as_ref())
        .and_then(|e| e.volume_size.as_ref())
        .map(|q| q.0);
    Ok(NodeClass {
        name: meta.name,
        ami_family,
        kubelet: match &spec.kubelet {
            Some(k) => kubelet(k)?,
            None => KubeletConfig::default(),
        },
        spec_hash: ec2nodeclass_spec_hash(value.get("spec").unwrap_or(&Value::Null)),
        root_volume_size,
        metadata_annotations: meta.annotations,
        resolved_amis: status_ids(value, "/status/amis"),
        resolved_subnets: status_ids(value, "/status/subnets"),
        resolved_security_groups: status_ids(value, "/status/securityGroups"),
    })
}

/// The IDs of a list in an EC2NodeClass's status (`/status/amis`, `/status/subnets`,
/// `/status/securityGroups`); `None` when there are none.
fn status_ids(value: &Value, pointer: &str) -> Option<Vec<String>> {
    let ids: Vec<String> = value
        .pointer(pointer)?
        .as_array()?
        .iter()
        .filter_map(|a| a.get("id")?.as_str())
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .collect();
    (!ids.is_empty()).then_some(ids)
}
