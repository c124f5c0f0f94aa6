//! Drift hashes: dovetail's `karpenter.sh/nodepool-hash` of a NodePool's `spec.template` and
//! `karpenter.k8s.aws/ec2nodeclass-hash` of an EC2NodeClass's `spec`.
//!
//! Both are the first 16 hex digits of SHA-256 over a canonical JSON text of the object, with
//! the fields that Karpenter excludes from its own hashes removed (they drift by other means).
//! The definition, and how the version annotation keeps nodes launched by Karpenter from being
//! called drifted, is in `designs/drift-hash.md`. Callers: the manifests loader (to fill
//! `NodePool::template_hash` / `NodeClass::spec_hash`), the watcher and the actuator (which
//! writes these values on the NodeClaims it creates).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::duration::parse_go_duration;

/// The value dovetail writes as `karpenter.sh/nodepool-hash-version` and
/// `karpenter.k8s.aws/ec2nodeclass-hash-version` next to its hashes. Hashes are comparable only
/// between objects that carry the same version.
pub const HASH_VERSION: &str = "dovetail-v1";

/// Annotation key carrying the NodePool hash version on NodePools, NodeClaims and Nodes.
pub const NODEPOOL_HASH_VERSION_ANNOTATION: &str = "karpenter.sh/nodepool-hash-version";

/// Annotation key carrying the EC2NodeClass hash version on NodeClaims and Nodes.
pub const NODECLASS_HASH_VERSION_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";

/// The default of `spec.template.spec.expireAfter`.
const DEFAULT_EXPIRE_AFTER: &str = "720h";

/// Hash of a NodePool's `spec.template` (pass the JSON of `spec.template`; `Value::Null` when
/// absent). Requirements are left out: Karpenter checks them against the node's labels instead.
/// Labels, annotations, taints, startup taints, `nodeClassRef`, `expireAfter` (defaulted to
/// 720h) and `terminationGracePeriod` are in, as is any field a later API version adds.
pub fn nodepool_template_hash(template: &Value) -> String {
    let mut t = template.clone();
    if !t.is_object() {
        t = Value::Object(Map::new());
    }
    if let Some(obj) = t.as_object_mut() {
        let spec = obj
            .entry("spec")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("requirements");
            let expire = spec
                .entry("expireAfter")
                .or_insert_with(|| Value::String(DEFAULT_EXPIRE_AFTER.to_string()));
            normalize_duration(expire);
            if let Some(tgp) = spec.get_mut("terminationGracePeriod") {
                normalize_duration(tgp);
            }
        }
    }
    digest(&t)
}

/// Hash of an EC2NodeClass's `spec` (pass the JSON of `spec`). Selector terms (subnets,
/// security groups, capacity reservations, AMIs) and `ipPrefixCount` are left out, as Karpenter
/// leaves them out (it checks resolved subnets, security groups and AMIs separately); the AMI
/// family is hashed as resolved from `amiFamily` or the alias, and `metadataOptions` with its
/// defaults filled in.
pub fn ec2nodeclass_spec_hash(spec: &Value) -> String {
    let mut s = match spec {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let family = resolved_ami_family(&s);
    for key in [
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "capacityReservationSelectorTerms",
        "ipPrefixCount",
        "amiSelectorTerms",
        "amiFamily",
    ] {
        s.remove(key);
    }
    if let Some(f) = family {
        s.insert("amiFamily".to_string(), Value::String(f));
    }
    let metadata = s
        .entry("metadataOptions")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = metadata.as_object_mut() {
        for (k, v) in [
            ("httpEndpoint", Value::from("enabled")),
            ("httpProtocolIPv6", Value::from("disabled")),
            ("httpPutResponseHopLimit", Value::from(1)),
            ("httpTokens", Value::from("required")),
        ] {
            m.entry(k).or_insert(v);
        }
    }
    digest(&Value::Object(s))
}

/// The AMI family of an EC2NodeClass spec: `amiFamily`, else the family of the first
/// `amiSelectorTerms[].alias` (`al2023@latest` → `AL2023`).
pub fn resolved_ami_family(spec: &Map<String, Value>) -> Option<String> {
    if let Some(f) = spec.get("amiFamily").and_then(Value::as_str) {
        return Some(f.to_string());
    }
    spec.get("amiSelectorTerms")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(|t| t.get("alias").and_then(Value::as_str))
        .find(|a| !a.is_empty())
        .and_then(ami_family_from_alias)
}

/// The family of an AMI alias (`al2023@v20240625` → `AL2023`), or `None` for an unknown family.
pub fn ami_family_from_alias(alias: &str) -> Option<String> {
    let family = alias.split('@').next().unwrap_or_default();
    let name = match family.to_ascii_lowercase().as_str() {
        "al2" => "AL2",
        "al2023" => "AL2023",
        "bottlerocket" => "Bottlerocket",
        "windows2019" => "Windows2019",
        "windows2022" => "Windows2022",
        _ => return None,
    };
    Some(name.to_string())
}

/// Rewrites a Go duration as whole seconds (`720h` and `720h0m0s` hash alike); leaves `Never`
/// and unparsable text as they are.
fn normalize_duration(v: &mut Value) {
    if let Some(Ok(secs)) = v.as_str().map(parse_go_duration) {
        *v = Value::String(format!("{secs}s"));
    }
}

fn digest(v: &Value) -> String {
    let mut text = String::new();
    if let Some(c) = canonical(v) {
        write_canonical(&c, &mut text);
    }
    let sum = Sha256::digest(text.as_bytes());
    sum.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Canonical form: object members whose value is a zero value (null, false, 0, "", [], {})
/// are dropped, as Karpenter's `IgnoreZeroValue`; arrays are sets (sorted by canonical text,
/// as `SlicesAsSets`). Returns `None` for a zero value.
fn canonical(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Bool(b) => b.then_some(Value::Bool(true)),
        Value::Number(n) => (n.as_f64() != Some(0.0)).then(|| Value::Number(n.clone())),
        Value::String(s) => (!s.is_empty()).then(|| Value::String(s.clone())),
        Value::Array(items) => {
            let mut texts: Vec<(String, Value)> = items
                .iter()
                .map(|i| {
                    let c = canonical(i).unwrap_or(Value::Null);
                    let mut t = String::new();
                    write_canonical(&c, &mut t);
                    (t, c)
                })
                .collect();
            texts.sort_by(|a, b| a.0.cmp(&b.0));
            (!texts.is_empty()).then(|| Value::Array(texts.into_iter().map(|(_, c)| c).collect()))
        }
        Value::Object(m) => {
            let out: Map<String, Value> = m
                .iter()
                .filter_map(|(k, v)| canonical(v).map(|c| (k.clone(), c)))
                .collect();
            (!out.is_empty()).then_some(Value::Object(out))
        }
    }
}

/// Writes compact JSON with object keys in byte order, whatever map order serde_json was built
/// with.
fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nodepool_hash_ignores_requirements_order_defaults_and_zero_values() {
        let a = json!({
            "metadata": {"labels": {"team": "web"}},
            "spec": {
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
            }
        });
        let b = json!({
            "metadata": {"labels": {"team": "web"}, "annotations": {}},
            "spec": {
                "requirements": [],
                "expireAfter": "720h0m0s",
                "startupTaints": [],
                "nodeClassRef": {"name": "default", "kind": "EC2NodeClass", "group": "karpenter.k8s.aws"},
                "taints": [{"key": "b", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule", "value": ""}]
            }
        });
        let h = nodepool_template_hash(&a);
        assert_eq!(h.len(), 16);
        assert!(h.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(h, nodepool_template_hash(&b));
    }

    #[test]
    fn nodepool_hash_changes_with_drifting_fields() {
        let base = json!({"spec": {"nodeClassRef": {"name": "default"}}});
        let h = nodepool_template_hash(&base);
        for changed in [
            json!({"spec": {"nodeClassRef": {"name": "other"}}}),
            json!({"metadata": {"labels": {"x": "y"}}, "spec": {"nodeClassRef": {"name": "default"}}}),
            json!({"spec": {"nodeClassRef": {"name": "default"}, "expireAfter": "24h"}}),
            json!({"spec": {"nodeClassRef": {"name": "default"}, "expireAfter": "Never"}}),
            json!({"spec": {"nodeClassRef": {"name": "default"}, "taints": [{"key": "k", "effect": "NoSchedule"}]}}),
        ] {
            assert_ne!(h, nodepool_template_hash(&changed), "{changed}");
        }
    }

    #[test]
    fn nodeclass_hash_ignores_selectors_and_resolves_family() {
        let a = json!({
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "role": "KarpenterNodeRole"
        });
        let b = json!({
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"alias": "al2023@v20240625"}],
            "subnetSelectorTerms": [{"id": "subnet-123"}],
            "role": "KarpenterNodeRole",
            "metadataOptions": {"httpTokens": "required"}
        });
        assert_eq!(ec2nodeclass_spec_hash(&a), ec2nodeclass_spec_hash(&b));
        let c = json!({
            "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
            "role": "KarpenterNodeRole"
        });
        assert_ne!(ec2nodeclass_spec_hash(&a), ec2nodeclass_spec_hash(&c));
        let d = json!({
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "KarpenterNodeRole",
            "kubelet": {"maxPods": 20}
        });
        assert_ne!(ec2nodeclass_spec_hash(&a), ec2nodeclass_spec_hash(&d));
    }
}
