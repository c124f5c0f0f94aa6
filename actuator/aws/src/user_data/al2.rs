//! AL2: `/etc/eks/bootstrap.sh` called from a shell part placed after the node class's own
//! parts, so its scripts run before the node joins.

use super::mime::{self, CONTENT_TYPE_SHELL, Part};
use super::{Bootstrap, Result, map_arg, max_pods, node_labels_arg, taints_arg};

/// The MIME archive: the node class's parts, then the bootstrap script.
pub(super) fn render(b: &Bootstrap<'_>) -> Result<String> {
    let mut parts = Vec::new();
    if let Some(text) = b.custom.filter(|t| !t.trim().is_empty()) {
        if mime::is_mime(text) {
            parts.extend(mime::parse(text)?);
        } else {
            parts.push(Part {
                content_type: CONTENT_TYPE_SHELL.to_string(),
                body: text.to_string(),
            });
        }
    }
    parts.push(Part {
        content_type: CONTENT_TYPE_SHELL.to_string(),
        body: script(b),
    });
    Ok(mime::serialize(&parts))
}

fn script(b: &Bootstrap<'_>) -> String {
    let mut s = String::from("#!/bin/bash -xe\n");
    s.push_str("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n");
    // bootstrap.sh wants its parameters without an equals sign.
    s.push_str(&format!(
        "/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}'",
        b.cluster.name, b.cluster.endpoint
    ));
    if let Some(ca) = &b.cluster.ca_bundle {
        s.push_str(&format!(" --b64-cluster-ca '{ca}'"));
    }
    let kubelet = b.kubelet;
    if let Some(dns) = kubelet.and_then(|k| k.cluster_dns.first()) {
        s.push_str(&format!(" \\\n--dns-cluster-ip '{dns}'"));
    }
    // Karpenter turns ENI-limited pod density off and passes --max-pods itself.
    s.push_str(" \\\n--use-max-pods false");
    let mut args: Vec<String> = Vec::new();
    args.extend(node_labels_arg(b.labels));
    args.extend(taints_arg(b.taints));
    // The ENI-limited count of this template's types (Karpenter resolves one launch template
    // per max-pods value); 110, the kubelet's default, when their ENIs are not known.
    args.push(format!("--max-pods={}", max_pods(b).unwrap_or(110)));
    if let Some(k) = kubelet {
        if let Some(n) = k.pods_per_core {
            args.push(format!("--pods-per-core={n}"));
        }
        args.extend(map_arg("--system-reserved", &k.system_reserved, "="));
        args.extend(map_arg("--kube-reserved", &k.kube_reserved, "="));
        args.extend(map_arg("--eviction-hard", &k.eviction_hard, "<"));
        args.extend(map_arg("--eviction-soft", &k.eviction_soft, "<"));
    }
    s.push_str(&format!(" \\\n--kubelet-extra-args '{}'", args.join(" ")));
    s
}
