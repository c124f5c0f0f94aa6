//! kube-scheduler's PodTopologySpread filter and the required-affinity half of InterPodAffinity,
//! written from the Kubernetes documentation ("Pod Topology Spread Constraints", "Assigning
//! Pods to Nodes § Inter-pod affinity and anti-affinity"), never from dovetail's planner: the
//! simulated cluster is an independent witness of what the planner promises.
//!
//! - **PodTopologySpread** (hard constraints only, `whenUnsatisfiable: DoNotSchedule`): a node
//!   without the constraint's `topologyKey` is refused; otherwise, counting the pods of the
//!   pod's namespace that the `labelSelector` (plus `matchLabelKeys`) selects and that are not
//!   terminating, on the eligible nodes (those the pod's node selector and required node
//!   affinity accept, unless `nodeAffinityPolicy: Ignore`; those whose taints it tolerates when
//!   `nodeTaintsPolicy: Honor`), the node's domain count plus one (when the pod matches its own
//!   selector) minus the smallest domain count must not exceed `maxSkew`. With fewer eligible
//!   domains than `minDomains`, the smallest count is 0.
//! - **Required pod affinity**: for each term, some pod the term selects must run in the node's
//!   domain of the term's `topologyKey` (a node without the key is in no domain). The first
//!   pod of a group is the exception: when no pod anywhere matches the terms and the pod
//!   matches all of its own terms, it may go anywhere that has the keys.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::filters::{Namespaces, NodeInfo, node_affinity, taint_toleration};
use super::selectors::{label_selector_matches, labels_of};
use crate::controllers::namespace_of;

fn terminating(pod: &Value) -> bool {
    !pod["metadata"]["deletionTimestamp"].is_null()
}

/// The constraint's selector with `matchLabelKeys` folded in (the pod's values of those keys
/// become `In` requirements).
fn selector_of(constraint: &Value, pod: &Value) -> Value {
    let mut selector = constraint["labelSelector"].clone();
    let labels = labels_of(pod);
    let keys: Vec<&str> = constraint["matchLabelKeys"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if keys.is_empty() || selector.is_null() {
        return selector;
    }
    let mut exprs = selector["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for k in keys {
        if let Some(v) = labels.get(k) {
            exprs.push(json!({"key": k, "operator": "In", "values": [v]}));
        }
    }
    selector["matchExpressions"] = json!(exprs);
    selector
}

/// PodTopologySpread, hard constraints (see the module docs).
pub(crate) fn pod_topology_spread(
    pod: &Value,
    node: &NodeInfo,
    all: &[NodeInfo],
) -> Option<String> {
    let constraints = pod["spec"]["topologySpreadConstraints"].as_array()?;
    let ns = namespace_of(pod);
    for c in constraints {
        if c["whenUnsatisfiable"].as_str().unwrap_or("DoNotSchedule") != "DoNotSchedule" {
            continue;
        }
        let key = c["topologyKey"].as_str().unwrap_or("");
        let Some(domain) = node.labels.get(key) else {
            return Some(
                "node(s) didn't match pod topology spread constraints (missing required label)"
                    .into(),
            );
        };
        let selector = selector_of(c, pod);
        let honor_affinity = c["nodeAffinityPolicy"].as_str() != Some("Ignore");
        let honor_taints = c["nodeTaintsPolicy"].as_str() == Some("Honor");
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for n in all {
            let Some(d) = n.labels.get(key) else { continue };
            if honor_affinity && node_affinity(pod, n).is_some() {
                continue;
            }
            if honor_taints && taint_toleration(pod, n).is_some() {
                continue;
            }
            let matching = n
                .pods
                .iter()
                .filter(|p| {
                    !terminating(p)
                        && namespace_of(p) == ns
                        && label_selector_matches(&selector, &labels_of(p))
                })
                .count() as i64;
            *counts.entry(d.as_str()).or_default() += matching;
        }
        let min_domains = c["minDomains"].as_i64().unwrap_or(1);
        let min = if (counts.len() as i64) < min_domains {
            0
        } else {
            counts.values().copied().min().unwrap_or(0)
        };
        let self_match = i64::from(label_selector_matches(&selector, &labels_of(pod)));
        let here = counts.get(domain.as_str()).copied().unwrap_or(0);
        let max_skew = c["maxSkew"].as_i64().unwrap_or(1);
        if here + self_match - min > max_skew {
            return Some("node(s) didn't match pod topology spread constraints".into());
        }
    }
    None
}

fn affinity_terms(pod: &Value) -> &[Value] {
    pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// Whether `term`, owned by `owner`, selects `pod` (namespaces and labels).
fn selects(term: &Value, owner: &Value, pod: &Value, namespaces: &Namespaces) -> bool {
    let listed: Vec<&str> = term["namespaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let ns = namespace_of(pod);
    let ns_ok = if listed.is_empty() && term["namespaceSelector"].is_null() {
        ns == namespace_of(owner)
    } else {
        listed.contains(&ns)
            || (!term["namespaceSelector"].is_null()
                && label_selector_matches(
                    &term["namespaceSelector"],
                    &namespaces.get(ns).cloned().unwrap_or_default(),
                ))
    };
    ns_ok && label_selector_matches(&term["labelSelector"], &labels_of(pod))
}

/// InterPodAffinity, required affinity (see the module docs).
pub(crate) fn inter_pod_affinity(
    pod: &Value,
    node: &NodeInfo,
    all: &[NodeInfo],
    namespaces: &Namespaces,
) -> Option<String> {
    let terms = affinity_terms(pod);
    if terms.is_empty() {
        return None;
    }
    let refused = || Some("node(s) didn't match pod affinity rules".to_string());
    if terms.iter().any(|t| {
        !node
            .labels
            .contains_key(t["topologyKey"].as_str().unwrap_or(""))
    }) {
        return refused();
    }
    let satisfied = |term: &Value| {
        let key = term["topologyKey"].as_str().unwrap_or("");
        let domain = node.labels.get(key);
        all.iter()
            .filter(|o| o.labels.get(key) == domain)
            .any(|o| o.pods.iter().any(|p| selects(term, pod, p, namespaces)))
    };
    if terms.iter().all(satisfied) {
        return None;
    }
    let any_match = terms.iter().any(|t| {
        all.iter()
            .any(|o| o.pods.iter().any(|p| selects(t, pod, p, namespaces)))
    });
    let first_of_group = !any_match && terms.iter().all(|t| selects(t, pod, pod, namespaces));
    if first_of_group { None } else { refused() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, zone: &str) -> NodeInfo {
        NodeInfo::new(json!({
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
            }},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
    }

    fn pod(name: &str, app: &str, spec: Value) -> Value {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"containers": [{"name": "c"}]}
        });
        if let (Some(s), Some(extra)) = (p["spec"].as_object_mut(), spec.as_object()) {
            s.extend(extra.clone());
        }
        p
    }

    fn spread(skew: i64, min_domains: Option<i64>) -> Value {
        let mut c = json!({
            "maxSkew": skew, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}
        });
        if let Some(m) = min_domains {
            c["minDomains"] = json!(m);
        }
        json!({"topologySpreadConstraints": [c]})
    }

    /// The docs' example: zones A and B, two matching pods in A and none in B; with maxSkew 1
    /// the new pod may only go to B.
    #[test]
    fn a_hard_spread_refuses_the_fuller_zone() {
        let mut a = node("a1", "zone-a");
        let b = node("b1", "zone-b");
        a.add_pod(pod("w1", "web", json!({})));
        a.add_pod(pod("w2", "web", json!({})));
        let all = vec![a.clone(), b.clone()];
        let p = pod("w3", "web", spread(1, None));
        assert!(pod_topology_spread(&p, &a, &all).is_some());
        assert_eq!(pod_topology_spread(&p, &b, &all), None);
        // ScheduleAnyway is not a filter.
        let mut soft = p.clone();
        soft["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] = json!("ScheduleAnyway");
        assert_eq!(pod_topology_spread(&soft, &a, &all), None);
        // Pods of another app do not count; a node without the key is refused.
        let other = pod("o", "api", spread(1, None));
        assert!(
            pod_topology_spread(&other, &a, &all).is_some(),
            "selector is web"
        );
        let mut bare = node("x", "zone-x");
        bare.labels.remove("topology.kubernetes.io/zone");
        assert!(
            pod_topology_spread(&p, &bare, &all)
                .is_some_and(|r| r.contains("missing required label"))
        );
    }

    /// minDomains: with fewer domains than asked, the minimum is 0, so a domain can hold at
    /// most maxSkew matching pods.
    #[test]
    fn min_domains_caps_each_domain_at_max_skew() {
        let mut a = node("a1", "zone-a");
        a.add_pod(pod("w1", "web", json!({})));
        let all = vec![a.clone()];
        assert_eq!(
            pod_topology_spread(&pod("w2", "web", spread(2, None)), &a, &all),
            None
        );
        assert!(pod_topology_spread(&pod("w2", "web", spread(1, Some(3))), &a, &all).is_some());
    }

    /// Required pod affinity: the pod goes where a selected pod runs (per topology domain); the
    /// first pod of a group that matches its own term may go anywhere.
    #[test]
    fn required_affinity_needs_a_selected_pod_in_the_domain() {
        let affinity = json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "cache"}}}
        ]}}});
        let mut a = node("a1", "zone-a");
        let a2 = node("a2", "zone-a");
        let b = node("b1", "zone-b");
        let web = pod("web", "web", affinity.clone());
        let ns = Namespaces::new();
        // No cache pod anywhere and web does not match its own term: refused everywhere.
        let all = vec![a.clone(), a2.clone(), b.clone()];
        assert!(inter_pod_affinity(&web, &a, &all, &ns).is_some());
        // The first cache pod with affinity to its own kind goes anywhere.
        let first = pod("cache-0", "cache", affinity.clone());
        assert_eq!(inter_pod_affinity(&first, &b, &all, &ns), None);
        // A cache pod in zone A: web may go on either node of zone A, not B.
        a.add_pod(pod("cache-1", "cache", json!({})));
        let all = vec![a.clone(), a2.clone(), b.clone()];
        assert_eq!(inter_pod_affinity(&web, &a, &all, &ns), None);
        assert_eq!(inter_pod_affinity(&web, &a2, &all, &ns), None);
        assert!(inter_pod_affinity(&web, &b, &all, &ns).is_some());
    }
}
