//! Bottlerocket: one TOML document. The node class's settings are kept; the keys the cluster
//! and the NodePool decide (`settings.kubernetes.cluster-name`, `api-server`,
//! `cluster-certificate`, node labels and taints, kubelet settings) are written over them.

use toml::{Table, Value};

use super::{Bootstrap, Error, Result, max_pods};

/// The TOML settings.
pub(super) fn render(b: &Bootstrap<'_>) -> Result<String> {
    let mut doc: Table = match b.custom.filter(|t| !t.trim().is_empty()) {
        Some(text) => text
            .parse::<Table>()
            .map_err(|e| Error::Toml(e.to_string()))?,
        None => Table::new(),
    };
    let settings = table(&mut doc, "settings")?;
    // Karpenter nodes join no Auto Scaling group: should-wait would block the kubelet.
    if let Some(Value::Table(a)) = settings.get_mut("autoscaling")
        && a.contains_key("should-wait")
    {
        a.insert("should-wait".into(), Value::Boolean(false));
    }
    let k8s = table(settings, "kubernetes")?;
    k8s.insert("cluster-name".into(), b.cluster.name.clone().into());
    k8s.insert("api-server".into(), b.cluster.endpoint.clone().into());
    if let Some(ca) = &b.cluster.ca_bundle {
        k8s.insert("cluster-certificate".into(), ca.clone().into());
    }
    let labels = table(k8s, "node-labels")?;
    for (k, v) in b.labels {
        labels.insert(k.clone(), v.clone().into());
    }
    if !b.taints.is_empty() {
        let mut taints = Table::new();
        for t in b.taints {
            let entry = taints
                .entry(t.key.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(a) = entry {
                a.push(format!("{}:{}", t.value, t.effect).into());
            }
        }
        k8s.insert("node-taints".into(), Value::Table(taints));
    }
    if let Some(n) = max_pods(b) {
        k8s.insert("max-pods".into(), n.into());
    }
    if let Some(k) = b.kubelet {
        if let Some(dns) = k.cluster_dns.first() {
            k8s.insert("cluster-dns-ip".into(), dns.clone().into());
        }
        for (key, m) in [
            ("system-reserved", &k.system_reserved),
            ("kube-reserved", &k.kube_reserved),
            ("eviction-hard", &k.eviction_hard),
            ("eviction-soft", &k.eviction_soft),
        ] {
            if !m.is_empty() {
                let t: Table = m
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into()))
                    .collect();
                k8s.insert(key.into(), Value::Table(t));
            }
        }
    }
    toml::to_string(&doc).map_err(|e| Error::Serialize {
        what: "Bottlerocket settings",
        message: e.to_string(),
    })
}

/// The sub-table `key` of `t`, created when missing.
fn table<'t>(t: &'t mut Table, key: &str) -> Result<&'t mut Table> {
    match t
        .entry(key.to_string())
        .or_insert_with(|| Value::Table(Table::new()))
    {
        Value::Table(inner) => Ok(inner),
        _ => Err(Error::Toml(format!("{key} is not a table"))),
    }
}
