//! kube-scheduler's filter plugins, as the simulator runs them: each says whether a pod may go
//! on a node and, if not, why, in kube-scheduler's words (the reasons end up in the
//! `FailedScheduling` message "0/3 nodes are available: 1 Insufficient cpu, 2 ...").
//!
//! Written from the Kubernetes docs ("Scheduling Framework" plugin list, "Resource Management
//! for Pods and Containers", "Assigning Pods to Nodes", "Taints and Tolerations"), in
//! kube-scheduler's plugin order: NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
//! NodeResourcesFit, PodTopologySpread and InterPodAffinity (required affinity and the spread's
//! hard constraints in [`super::topology`]). Not simulated: volume binding and limits, DRA.

use std::collections::HashMap;

use serde_json::Value;

use super::selectors::{Labels, label_selector_matches, labels_of, node_term_matches};
use crate::controllers::{name_of, namespace_of};
use crate::resources::{Resources, pod_requests};

/// The taint kube's node lifecycle puts on cordoned nodes, which pods may tolerate.
pub(crate) const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A node as the scheduler sees it: the Node object and the pods bound to it.
#[derive(Clone, Debug)]
pub(crate) struct NodeInfo {
    /// `metadata.name`.
    pub(crate) name: String,
    /// The Node object.
    pub(crate) node: Value,
    /// `metadata.labels`.
    pub(crate) labels: Labels,
    /// `status.allocatable`.
    pub(crate) allocatable: Resources,
    /// Sum of the effective requests of the pods on the node (including one pod slot each).
    pub(crate) requested: Resources,
    /// The same with scoring's defaults for containers without CPU or memory requests.
    pub(crate) requested_non_zero: Resources,
    /// The pods bound to the node (not terminal).
    pub(crate) pods: Vec<Value>,
}

// === impl NodeInfo ===

impl NodeInfo {
    /// A node with no pods yet.
    pub(crate) fn new(node: Value) -> Self {
        Self {
            name: name_of(&node).to_string(),
            labels: labels_of(&node),
            allocatable: Resources::from_list(&node["status"]["allocatable"]),
            requested: Resources::default(),
            requested_non_zero: Resources::default(),
            pods: Vec::new(),
            node,
        }
    }

    /// Accounts for a pod bound to the node.
    pub(crate) fn add_pod(&mut self, pod: Value) {
        self.requested.add(&pod_requests(&pod, false));
        self.requested_non_zero.add(&pod_requests(&pod, true));
        self.pods.push(pod);
    }
}

/// Labels of every namespace by name, for `namespaceSelector`s.
pub(crate) type Namespaces = HashMap<String, Labels>;

/// NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods that tolerate
/// `node.kubernetes.io/unschedulable:NoSchedule`.
pub(crate) fn node_unschedulable(pod: &Value, node: &NodeInfo) -> Option<String> {
    let taint = serde_json::json!({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"});
    (node.node["spec"]["unschedulable"] == true && !tolerated(pod, &taint))
        .then(|| "node(s) were unschedulable".into())
}

/// Whether one of the pod's tolerations tolerates `taint` ("Taints and Tolerations": an empty
/// key with `Exists` matches every key; an empty effect matches every effect; `Equal`, the
/// default operator, also compares values).
pub(crate) fn tolerated(pod: &Value, taint: &Value) -> bool {
    pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| {
            let key = t["key"].as_str().unwrap_or("");
            let exists = t["operator"] == "Exists";
            let effect = t["effect"].as_str().unwrap_or("");
            (effect.is_empty() || effect == taint["effect"].as_str().unwrap_or(""))
                && (key == taint["key"].as_str().unwrap_or("") || (key.is_empty() && exists))
                && (exists
                    || t["value"].as_str().unwrap_or("") == taint["value"].as_str().unwrap_or(""))
        })
}

/// TaintToleration: every `NoSchedule` and `NoExecute` taint must be tolerated
/// (`PreferNoSchedule` only affects scoring).
pub(crate) fn taint_toleration(pod: &Value, node: &NodeInfo) -> Option<String> {
    let taint = node.node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
        .find(|t| !tolerated(pod, t))?;
    Some(format!(
        "node(s) had untolerated taint {{{}: {}}}",
        taint["key"].as_str().unwrap_or(""),
        taint["value"].as_str().unwrap_or("")
    ))
}

/// NodeAffinity: every `nodeSelector` label matches, and one of the required node affinity
/// terms (`requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`) matches.
pub(crate) fn node_affinity(pod: &Value, node: &NodeInfo) -> Option<String> {
    let reason = || Some("node(s) didn't match Pod's node affinity/selector".to_string());
    for (k, v) in pod["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if node.labels.get(k).map(String::as_str) != v.as_str() {
            return reason();
        }
    }
    let required =
        &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    if required.is_null() {
        return None;
    }
    let terms = required["nodeSelectorTerms"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if terms
        .iter()
        .any(|t| node_term_matches(t, &node.name, &node.labels))
    {
        None
    } else {
        reason()
    }
}

/// `(protocol, hostIP, hostPort)` of every container port with a host port.
fn host_ports(pod: &Value) -> Vec<(String, String, i64)> {
    let mut out = Vec::new();
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        for p in c["ports"].as_array().into_iter().flatten() {
            let Some(port) = p["hostPort"].as_i64().filter(|p| *p > 0) else {
                continue;
            };
            let ip = p["hostIP"]
                .as_str()
                .filter(|s| !s.is_empty())
                .unwrap_or("0.0.0.0");
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            out.push((protocol.to_string(), ip.to_string(), port));
        }
    }
    out
}

/// NodePorts: no host port of the pod may be in use on the node with the same protocol and an
/// overlapping host IP (`0.0.0.0` overlaps every address).
pub(crate) fn node_ports(pod: &Value, node: &NodeInfo) -> Option<String> {
    let wanted = host_ports(pod);
    if wanted.is_empty() {
        return None;
    }
    let conflict = node
        .pods
        .iter()
        .flat_map(host_ports)
        .any(|(proto, ip, port)| {
            wanted.iter().any(|(p, i, n)| {
                *p == proto && *n == port && (i == "0.0.0.0" || ip == "0.0.0.0" || *i == ip)
            })
        });
    conflict.then(|| "node(s) didn't have free ports for the requested pod ports".into())
}

/// NodeResourcesFit: the pod's effective requests fit in allocatable minus what the node's pods
/// request; one reason per short resource ("Too many pods", "Insufficient cpu", ...).
pub(crate) fn node_resources_fit(pod: &Value, node: &NodeInfo) -> Vec<String> {
    let mut want = pod_requests(pod, false);
    let mut out = Vec::new();
    if node.requested.pods.saturating_add(want.pods) > node.allocatable.pods {
        out.push("Too many pods".to_string());
    }
    want.pods = 0;
    // Checked arithmetic throughout (requests are summed saturating in `Resources::add`).
    let mut free = node.allocatable.clone();
    free.cpu = free.cpu.saturating_sub(node.requested.cpu);
    free.memory = free.memory.saturating_sub(node.requested.memory);
    free.ephemeral_storage = free
        .ephemeral_storage
        .saturating_sub(node.requested.ephemeral_storage);
    for (k, v) in &node.requested.extended {
        let e = free.extended.entry(k.clone()).or_insert(0);
        *e = e.saturating_sub(*v);
    }
    out.extend(
        want.insufficient(&free)
            .into_iter()
            .map(|r| format!("Insufficient {r}")),
    );
    out
}

/// The namespaces a pod affinity term applies to, relative to the pod that owns it: its
/// `namespaces` plus those its `namespaceSelector` selects; neither means the pod's own.
fn term_selects_namespace(term: &Value, owner: &Value, ns: &str, namespaces: &Namespaces) -> bool {
    let listed: Vec<&str> = term["namespaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let selector = &term["namespaceSelector"];
    if listed.is_empty() && selector.is_null() {
        return ns == namespace_of(owner);
    }
    listed.contains(&ns)
        || (!selector.is_null()
            && label_selector_matches(selector, &namespaces.get(ns).cloned().unwrap_or_default()))
}

fn anti_affinity_terms(pod: &Value) -> &[Value] {
    pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// Whether `term` (owned by `owner`) selects `pod`.
fn term_selects(term: &Value, owner: &Value, pod: &Value, namespaces: &Namespaces) -> bool {
    term_selects_namespace(term, owner, namespace_of(pod), namespaces)
        && label_selector_matches(&term["labelSelector"], &labels_of(pod))
}

/// InterPodAffinity, anti-affinity part ("Assigning Pods to Nodes § Inter-pod affinity and
/// anti-affinity"): the pod may not go into a topology domain (nodes with the same value of the
/// term's `topologyKey`, e.g. one node for `kubernetes.io/hostname`) that holds a pod its
/// required anti-affinity terms select; nor may it go where an existing pod's required
/// anti-affinity selects it. A node without the topology key is outside every domain.
pub(crate) fn inter_pod_anti_affinity(
    pod: &Value,
    node: &NodeInfo,
    all: &[NodeInfo],
    namespaces: &Namespaces,
) -> Option<String> {
    let same_domain = |other: &NodeInfo, key: &str| {
        node.labels
            .get(key)
            .is_some_and(|v| other.labels.get(key) == Some(v))
    };
    for term in anti_affinity_terms(pod) {
        let key = term["topologyKey"].as_str().unwrap_or("");
        let hit = all.iter().filter(|o| same_domain(o, key)).any(|o| {
            o.pods
                .iter()
                .any(|existing| term_selects(term, pod, existing, namespaces))
        });
        if hit {
            return Some("node(s) didn't match pod anti-affinity rules".into());
        }
    }
    for other in all {
        for existing in &other.pods {
            for term in anti_affinity_terms(existing) {
                let key = term["topologyKey"].as_str().unwrap_or("");
                if same_domain(other, key) && term_selects(term, existing, pod, namespaces) {
                    return Some("node(s) didn't satisfy existing pods anti-affinity rules".into());
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
