//! What topology reads off a pod: the groups it owns, the label keys its terms look at, and
//! how far it has been relaxed.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

use crate::model::{NodeInclusionPolicy, Pod, PodAffinityTerm};
use crate::requirements::Requirements;

use super::group::{GroupKey, Namespaces, NodeFilter, merged_selector};
use super::reason::Kind;

/// How far a pod has been relaxed: relaxation only removes terms (or adds one toleration), so
/// these lengths identify the state of a pod with a given UID.
pub(super) type Fingerprint = [usize; 6];

pub(super) fn fingerprint(p: &Pod) -> Fingerprint {
    [
        p.required_node_affinity.len(),
        p.preferred_pod_affinity.len(),
        p.preferred_pod_anti_affinity.len(),
        p.preferred_node_affinity.len(),
        p.topology_spread.len(),
        p.tolerations.len(),
    ]
}

/// The groups a pod owns: one per spread and per (required or preferred) affinity and
/// anti-affinity term, as the pod currently stands.
pub(super) fn group_keys(pod: &Pod) -> Vec<GroupKey> {
    let mut out = Vec::new();
    for c in &pod.topology_spread {
        let honor_affinity = c.node_affinity_policy == NodeInclusionPolicy::Honor;
        let honor_taints = c.node_taints_policy == NodeInclusionPolicy::Honor;
        out.push(GroupKey {
            kind: Kind::Spread,
            key: c.topology_key.clone(),
            namespaces: Namespaces {
                names: BTreeSet::from([pod.namespace.clone()]),
                selector: None,
            },
            selector: merged_selector(&c.label_selector, &pod.labels, &c.match_label_keys, &[]),
            max_skew: c.max_skew,
            min_domains: c.min_domains,
            filter: Some(NodeFilter {
                terms: if honor_affinity {
                    filter_terms(pod)
                } else {
                    Vec::new()
                },
                affinity: c.node_affinity_policy,
                taints: c.node_taints_policy,
                tolerations: if honor_taints {
                    pod.tolerations.clone()
                } else {
                    Vec::new()
                },
            }),
        });
    }
    for t in pod
        .pod_affinity
        .iter()
        .chain(pod.preferred_pod_affinity.iter().map(|w| &w.term))
    {
        out.push(affinity_key(Kind::Affinity, pod, t));
    }
    for t in pod
        .pod_anti_affinity
        .iter()
        .chain(pod.preferred_pod_anti_affinity.iter().map(|w| &w.term))
    {
        out.push(affinity_key(Kind::AntiAffinity, pod, t));
    }
    out
}

pub(super) fn affinity_key(kind: Kind, pod: &Pod, t: &PodAffinityTerm) -> GroupKey {
    let namespaces = if t.namespaces.is_empty() && t.namespace_selector.is_none() {
        Namespaces {
            names: BTreeSet::from([pod.namespace.clone()]),
            selector: None,
        }
    } else {
        Namespaces {
            names: t.namespaces.iter().cloned().collect(),
            selector: t.namespace_selector.clone(),
        }
    };
    GroupKey {
        kind,
        key: t.topology_key.clone(),
        namespaces,
        selector: merged_selector(
            &t.label_selector,
            &pod.labels,
            &t.match_label_keys,
            &t.mismatch_label_keys,
        ),
        max_skew: i32::MAX,
        min_domains: None,
        filter: None,
    }
}

/// nodeSelector ∧ each required node-affinity term (ORed); empty when the pod selects no nodes.
pub(super) fn filter_terms(pod: &Pod) -> Vec<Requirements> {
    let selector = Requirements::from_labels(&pod.node_selector);
    if pod.required_node_affinity.is_empty() {
        return if selector.is_empty() {
            Vec::new()
        } else {
            vec![selector]
        };
    }
    pod.required_node_affinity
        .iter()
        .filter_map(|term| {
            // A malformed term is reported by the scheduler; it selects no node here.
            let mut r = Requirements::from_term(term).ok()?;
            r.add_all(&selector);
            Some(r)
        })
        .collect()
}

pub(super) fn insert_key(set: &mut BTreeSet<String>, key: &str) {
    if !set.contains(key) {
        set.insert(key.to_string());
    }
}

/// Adds the label keys the pod's terms select on (including `matchLabelKeys` and
/// `mismatchLabelKeys`).
pub(super) fn add_selector_keys(set: &mut BTreeSet<String>, p: &Pod) {
    let add_selector = |s: &Option<crate::model::LabelSelector>, set: &mut BTreeSet<String>| {
        if let Some(s) = s {
            for k in s.match_labels.keys() {
                insert_key(set, k);
            }
            for e in &s.match_expressions {
                insert_key(set, &e.key);
            }
        }
    };
    for c in &p.topology_spread {
        add_selector(&c.label_selector, set);
        for k in &c.match_label_keys {
            insert_key(set, k);
        }
    }
    for t in p
        .pod_affinity
        .iter()
        .chain(&p.pod_anti_affinity)
        .chain(p.preferred_pod_affinity.iter().map(|w| &w.term))
        .chain(p.preferred_pod_anti_affinity.iter().map(|w| &w.term))
    {
        add_selector(&t.label_selector, set);
        for k in t.match_label_keys.iter().chain(&t.mismatch_label_keys) {
            insert_key(set, k);
        }
    }
}

/// Adds the keys a pod's topology may look at: its topology keys and its node-selector keys.
pub(super) fn add_constraint_keys(set: &mut BTreeSet<String>, p: &Pod) {
    for c in &p.topology_spread {
        insert_key(set, &c.topology_key);
    }
    for t in p
        .pod_affinity
        .iter()
        .chain(&p.pod_anti_affinity)
        .chain(p.preferred_pod_affinity.iter().map(|w| &w.term))
        .chain(p.preferred_pod_anti_affinity.iter().map(|w| &w.term))
    {
        insert_key(set, &t.topology_key);
    }
    for k in p.node_selector.keys() {
        insert_key(set, k);
    }
    for t in &p.required_node_affinity {
        for r in &t.requirements {
            insert_key(set, &r.key);
        }
    }
}

/// Labels a selector may look at, in key order.
pub(super) fn relevant_labels<'a>(
    p: &'a Pod,
    keys: &'a BTreeSet<String>,
) -> impl Iterator<Item = (&'a String, &'a String)> + 'a {
    p.labels.iter().filter(|(k, _)| keys.contains(*k))
}

pub(super) fn hash_constraints(p: &Pod, keys: &BTreeSet<String>, h: &mut impl Hasher) {
    p.namespace.hash(h);
    for l in relevant_labels(p, keys) {
        l.hash(h);
    }
    p.node_selector.hash(h);
    p.required_node_affinity.hash(h);
    p.preferred_node_affinity.hash(h);
    p.tolerations.hash(h);
    p.topology_spread.hash(h);
    p.pod_affinity.hash(h);
    p.preferred_pod_affinity.hash(h);
    p.pod_anti_affinity.hash(h);
    p.preferred_pod_anti_affinity.hash(h);
}

pub(super) fn same_constraints(a: &Pod, b: &Pod, keys: &BTreeSet<String>) -> bool {
    a.namespace == b.namespace
        && relevant_labels(a, keys).eq(relevant_labels(b, keys))
        && a.node_selector == b.node_selector
        && a.required_node_affinity == b.required_node_affinity
        && a.preferred_node_affinity == b.preferred_node_affinity
        && a.tolerations == b.tolerations
        && a.topology_spread == b.topology_spread
        && a.pod_affinity == b.pod_affinity
        && a.preferred_pod_affinity == b.preferred_pod_affinity
        && a.pod_anti_affinity == b.pod_anti_affinity
        && a.preferred_pod_anti_affinity == b.preferred_pod_anti_affinity
}

/// The parts of a pod that topology depends on.
pub(super) fn constraint_copy(p: &Pod) -> Pod {
    Pod {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
        labels: p.labels.clone(),
        node_selector: p.node_selector.clone(),
        required_node_affinity: p.required_node_affinity.clone(),
        preferred_node_affinity: p.preferred_node_affinity.clone(),
        tolerations: p.tolerations.clone(),
        topology_spread: p.topology_spread.clone(),
        pod_affinity: p.pod_affinity.clone(),
        preferred_pod_affinity: p.preferred_pod_affinity.clone(),
        pod_anti_affinity: p.pod_anti_affinity.clone(),
        preferred_pod_anti_affinity: p.preferred_pod_anti_affinity.clone(),
        ..Pod::default()
    }
}
