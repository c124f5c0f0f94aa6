//! AL2023: nodeadm reads `NodeConfig` documents from MIME parts and merges them in order, so
//! Karpenter's generated one comes first and the node class's own parts can override it.

use serde_json::{Map, Value, json};

use super::mime::{self, CONTENT_TYPE_NODE_CONFIG, CONTENT_TYPE_SHELL, Part};
use super::{Bootstrap, Error, Result, max_pods, node_labels_arg};

/// The MIME archive: the generated `NodeConfig`, then the node class's parts.
pub(super) fn render(b: &Bootstrap<'_>) -> Result<String> {
    let mut parts = vec![Part {
        content_type: CONTENT_TYPE_NODE_CONFIG.to_string(),
        body: node_config(b)?,
    }];
    parts.extend(custom_parts(b.custom)?);
    Ok(mime::serialize(&parts))
}

/// The generated `NodeConfig` YAML (keys sorted, as Karpenter's Go YAML writes them).
fn node_config(b: &Bootstrap<'_>) -> Result<String> {
    let mut cluster = Map::new();
    cluster.insert("name".into(), json!(b.cluster.name));
    cluster.insert("apiServerEndpoint".into(), json!(b.cluster.endpoint));
    if let Some(ca) = &b.cluster.ca_bundle {
        cluster.insert("certificateAuthority".into(), json!(ca));
    }
    if let Some(cidr) = &b.cluster.service_cidr {
        cluster.insert("cidr".into(), json!(cidr));
    }
    let mut config = Map::new();
    if let Some(n) = max_pods(b) {
        config.insert("maxPods".into(), json!(n));
    }
    if let Some(k) = b.kubelet {
        if let Some(n) = k.pods_per_core {
            config.insert("podsPerCore".into(), json!(n));
        }
        if !k.cluster_dns.is_empty() {
            config.insert("clusterDNS".into(), json!(k.cluster_dns));
        }
        for (key, m) in [
            ("systemReserved", &k.system_reserved),
            ("kubeReserved", &k.kube_reserved),
            ("evictionHard", &k.eviction_hard),
            ("evictionSoft", &k.eviction_soft),
        ] {
            if !m.is_empty() {
                config.insert(key.into(), json!(m));
            }
        }
    }
    if !b.taints.is_empty() {
        config.insert("registerWithTaints".into(), json!(b.taints));
    }
    let mut kubelet = Map::new();
    kubelet.insert("config".into(), Value::Object(config));
    if let Some(arg) = node_labels_arg(b.labels) {
        kubelet.insert("flags".into(), json!([arg]));
    }
    let doc = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": { "cluster": cluster, "kubelet": kubelet },
    });
    let yaml = serde_yaml::to_string(&sorted(doc)).map_err(|e| Error::Serialize {
        what: "NodeConfig",
        message: e.to_string(),
    })?;
    Ok(format!("# Karpenter Generated NodeConfig\n{yaml}"))
}

/// `v` as YAML with every mapping's keys in sorted order, whatever order serde_json keeps (its
/// `preserve_order` feature may be on in a workspace build and off in a single-crate one).
fn sorted(v: Value) -> serde_yaml::Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_yaml::Value::Mapping(
                entries
                    .into_iter()
                    .map(|(k, v)| (serde_yaml::Value::String(k), sorted(v)))
                    .collect(),
            )
        }
        Value::Array(a) => serde_yaml::Value::Sequence(a.into_iter().map(sorted).collect()),
        other => serde_yaml::to_value(other).unwrap_or(serde_yaml::Value::Null),
    }
}

/// The node class's own user data as MIME parts: its parts if it is an archive, else one part,
/// a `NodeConfig` when it reads as a YAML mapping and a shell script otherwise.
fn custom_parts(custom: Option<&str>) -> Result<Vec<Part>> {
    let Some(text) = custom.filter(|t| !t.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    if mime::is_mime(text) {
        return Ok(mime::parse(text)?);
    }
    let content_type = if serde_yaml::from_str::<serde_yaml::Mapping>(text).is_ok() {
        CONTENT_TYPE_NODE_CONFIG
    } else {
        CONTENT_TYPE_SHELL
    };
    Ok(vec![Part {
        content_type: content_type.to_string(),
        body: text.to_string(),
    }])
}
