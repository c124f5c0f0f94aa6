//! Karpenter objects as users have them from older APIs: v1beta1 NodePools / NodeClaims /
//! EC2NodeClasses and v1alpha5 Provisioners / Machines / AWSNodeTemplates are not read (one
//! warning each); in a v1 NodePool, `spec.disruption.expireAfter`,
//! `spec.ttlSecondsUntilExpired`, `spec.ttlSecondsAfterEmpty` and `spec.consolidation.enabled`
//! are ignored (as v1 does) with a warning naming what v1 uses instead, and
//! `consolidationPolicy: WhenUnderutilized` is read as `WhenEmptyOrUnderutilized`.

use serde_json::Value;

use k8s_reader::DEFAULT_EXPIRE_AFTER;

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
pub(crate) fn node_pool_fields(value: &Value) -> Vec<String> {
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let expire_after = match value
        .pointer("/spec/template/spec/expireAfter")
        .and_then(Value::as_str)
    {
        Some(e) => k8s_reader::parse_duration(e).unwrap_or(Some(DEFAULT_EXPIRE_AFTER)),
        None => Some(DEFAULT_EXPIRE_AFTER),
    };
    let spec = value.get("spec");
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(spec?, |v, k| v.get(k))
            .filter(|v| !v.is_null())
    };
    let ignored = |path: &str, v: &Value, instead: String| {
        format!(
            "NodePool {}: {path} ({}) is not read by karpenter.sh/v1 and is ignored; {instead}",
            name,
            show_value(v)
        )
    };
    let expiry = format!(
        "v1 uses spec.template.spec.expireAfter (in force: {})",
        show_duration(expire_after)
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
            name
        ));
    }
    out
}

/// Whether `path` is a NodePool field of an older Karpenter API that
/// [`node_pool_fields`] warns about (so it needs no unknown-field warning too).
pub(crate) fn is_legacy_node_pool_field(path: &str) -> bool {
    path == "spec.disruption.expireAfter"
        || path == "spec.ttlSecondsUntilExpired"
        || path == "spec.ttlSecondsAfterEmpty"
        || path == "spec.consolidation"
        || path.starts_with("spec.consolidation.")
}

/// The warning for a Karpenter object of an apiVersion older than v1, which is not read; `None`
/// for any other object.
pub(crate) fn legacy_kind(api_version: &str, kind: &str) -> Option<String> {
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
