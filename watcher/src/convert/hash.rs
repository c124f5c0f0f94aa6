//! Drift hashes of live Karpenter objects, by dovetail's definition (`designs/drift-hash.md`,
//! version `dovetail-v1`): the first 16 hex digits of SHA-256 over a canonical JSON text of
//! a NodePool's `spec.template` or an EC2NodeClass's `spec`, with the fields Karpenter leaves
//! out removed. The planner's manifests loader computes the same values for files; the design
//! note is the contract both follow (the planner engine is not a dependency of the watcher).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::karpenter::parse_duration;

/// Hash of a NodePool's `spec.template` (requirements left out, `expireAfter` defaulted to
/// 720h, durations as whole seconds).
pub(super) fn nodepool_template_hash(template: &Value) -> String {
    let mut t = match template {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let spec = t.entry("spec").or_insert_with(|| Value::Object(Map::new()));
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("requirements");
        let expire = spec
            .entry("expireAfter")
            .or_insert_with(|| Value::String("720h".into()));
        normalize_duration(expire);
        if let Some(tgp) = spec.get_mut("terminationGracePeriod") {
            normalize_duration(tgp);
        }
    }
    digest(&Value::Object(t))
}

/// Hash of an EC2NodeClass's `spec` (selector terms and `ipPrefixCount` left out, the AMI
/// family as resolved, `metadataOptions` with its defaults).
pub(super) fn ec2nodeclass_spec_hash(spec: &Value) -> String {
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
        s.insert("amiFamily".into(), Value::String(f));
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

/// `amiFamily`, else the family of the first alias (`al2023@latest` → `AL2023`).
pub(super) fn resolved_ami_family(spec: &Map<String, Value>) -> Option<String> {
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

/// The family of an AMI alias, or `None` for an unknown family.
pub(super) fn ami_family_from_alias(alias: &str) -> Option<String> {
    let family = alias.split('@').next().unwrap_or_default();
    let name = match family.to_ascii_lowercase().as_str() {
        "al2" => "AL2",
        "al2023" => "AL2023",
        "bottlerocket" => "Bottlerocket",
        "windows2019" => "Windows2019",
        "windows2022" => "Windows2022",
        _ => return None,
    };
    Some(name.into())
}

fn normalize_duration(v: &mut Value) {
    if let Some(Ok(Some(secs))) = v.as_str().map(parse_duration) {
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

/// Zero values dropped, arrays sorted as sets; `None` for a zero value.
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
