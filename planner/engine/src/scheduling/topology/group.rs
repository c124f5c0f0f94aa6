//! One topology group: the pods a spread or (anti-)affinity term counts, per domain of its key
//! (Karpenter's `TopologyGroup`), and the choice of domains for a pod.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::labels;
use crate::model::{
    LabelSelector, Labels, NodeInclusionPolicy, SelectorOperator, Taint, Toleration,
};
use crate::requirements::taints::tolerates_all;
use crate::requirements::{Requirement, Requirements, Undefined};

use super::domains::KeyDomains;
use super::reason::{Kind, Unsatisfiable};

/// The namespaces a term looks in: listed names, plus those whose labels match a selector (an
/// empty selector matches every namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Namespaces {
    pub(super) names: BTreeSet<String>,
    pub(super) selector: Option<LabelSelector>,
}

impl Namespaces {
    pub(super) fn contains(&self, ns: &str, ns_labels: &HashMap<String, Labels>) -> bool {
        if self.names.contains(ns) {
            return true;
        }
        match &self.selector {
            None => false,
            Some(s) if s.is_empty() => true,
            Some(s) => match ns_labels.get(ns) {
                Some(l) => s.matches(l),
                None => {
                    // A namespace that is not in the input still carries the label Kubernetes sets on
                    // every namespace.
                    let mut l = Labels::new();
                    l.insert("kubernetes.io/metadata.name".to_string(), ns.to_string());
                    s.matches(&l)
                }
            },
        }
    }
}

/// Which nodes count for a spread (`nodeAffinityPolicy` / `nodeTaintsPolicy`); affinity terms
/// have none and count every node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct NodeFilter {
    /// nodeSelector combined with each required node-affinity term (ORed); empty matches all.
    pub(super) terms: Vec<Requirements>,
    pub(super) affinity: NodeInclusionPolicy,
    pub(super) taints: NodeInclusionPolicy,
    /// Only kept with `taints == Honor`.
    pub(super) tolerations: Vec<Toleration>,
}

impl NodeFilter {
    pub(super) fn matches(&self, taints: &[Taint], node: &Requirements) -> bool {
        let affinity = self.affinity == NodeInclusionPolicy::Ignore
            || self.terms.is_empty()
            || self
                .terms
                .iter()
                .any(|t| t.is_empty() || node.compatible(t, Undefined::AllowWellKnown).is_ok());
        affinity
            && (self.taints == NodeInclusionPolicy::Ignore
                || tolerates_all(taints, &self.tolerations))
    }
}

/// Identity of a group: pods whose constraints have equal keys share one group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct GroupKey {
    pub(super) kind: Kind,
    pub(super) key: String,
    pub(super) namespaces: Namespaces,
    pub(super) selector: Option<LabelSelector>,
    pub(super) max_skew: i32,
    pub(super) min_domains: Option<i32>,
    pub(super) filter: Option<NodeFilter>,
}

const ABSENT: i32 = -1;

/// Counts of matching pods per domain of one key.
#[derive(Clone, Debug)]
pub(super) struct Group {
    pub(super) spec: GroupKey,
    pub(super) key: u32,
    pub(super) is_hostname: bool,
    /// By domain index of the key; [`ABSENT`] when the domain is not in this group's universe.
    counts: Vec<i32>,
    present: u32,
    nonzero: u32,
    pub(super) describe: Arc<str>,
}

/// The domains a pod may use for one group, or nothing.
pub(super) enum Choice {
    /// Any of these domain indexes (sorted by name when several).
    In(Vec<u32>),
    /// The node's single domain, which may not be interned yet (a new claim's hostname).
    Host,
}

// === impl Group ===

impl Group {
    pub(super) fn new(spec: GroupKey, key: u32) -> Self {
        let describe = describe_selector(&spec);
        Self {
            is_hostname: spec.key == labels::HOSTNAME,
            spec,
            key,
            counts: Vec::new(),
            present: 0,
            nonzero: 0,
            describe: describe.into(),
        }
    }

    pub(super) fn count(&self, id: u32) -> i32 {
        self.counts.get(id as usize).copied().unwrap_or(ABSENT)
    }

    /// Adds a domain with no pods, if not yet known.
    pub(super) fn register(&mut self, id: u32) {
        let i = id as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, ABSENT);
        }
        if self.counts[i] == ABSENT {
            self.counts[i] = 0;
            self.present += 1;
        }
    }

    /// Adds `delta` pods to a domain (registering it), never going below zero.
    pub(super) fn add(&mut self, id: u32, delta: i32) {
        self.register(id);
        let c = &mut self.counts[id as usize];
        let before = *c;
        *c = (before + delta).max(0);
        match (before > 0, *c > 0) {
            (false, true) => self.nonzero += 1,
            (true, false) => self.nonzero -= 1,
            _ => {}
        }
    }

    /// True when some domain holds no matching pod.
    pub(super) fn has_empty(&self) -> bool {
        self.present > self.nonzero
    }

    /// Present domains with their counts.
    pub(super) fn domains(&self) -> impl Iterator<Item = (u32, i32)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != ABSENT)
            .map(|(i, c)| (i as u32, *c))
    }

    /// True when the pod (namespace and labels) is one this group counts.
    pub(super) fn selects(
        &self,
        ns: &str,
        labels: &Labels,
        ns_labels: &HashMap<String, Labels>,
    ) -> bool {
        self.spec
            .selector
            .as_ref()
            .is_some_and(|s| s.matches(labels))
            && self.spec.namespaces.contains(ns, ns_labels)
    }

    /// True when a pod placed on a node with these taints and requirements counts here.
    pub(super) fn node_counts(&self, taints: &[Taint], node: &Requirements) -> bool {
        self.spec
            .filter
            .as_ref()
            .is_none_or(|f| f.matches(taints, node))
    }

    /// The domains a pod may use. `pod` is its requirement on the key (`None`: any), `node` the
    /// node's (`None`: any), `host` the node's single value when the key is the hostname.
    /// Without `detail`, a rejection leaves out the per-domain counts its text lists.
    pub(super) fn choose(
        &self,
        kd: &KeyDomains,
        self_selecting: bool,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
        host: Option<&str>,
        detail: bool,
    ) -> Result<Choice, Unsatisfiable> {
        let chosen = match self.spec.kind {
            Kind::Spread => self.choose_spread(kd, self_selecting, pod, node, host),
            Kind::Affinity => self.choose_affinity(kd, self_selecting, pod, node, host),
            Kind::AntiAffinity => self.choose_anti_affinity(kd, pod, node, host),
        };
        chosen.map_err(|(min, eligible)| self.fail(kd, pod, node, host, min, eligible, detail))
    }

    fn host_count(&self, kd: &KeyDomains, host: &str) -> i32 {
        kd.id(host).map_or(0, |id| self.count(id).max(0))
    }

    fn choose_spread(
        &self,
        kd: &KeyDomains,
        self_selecting: bool,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
        host: Option<&str>,
    ) -> Result<Choice, (i32, u32)> {
        let me = i32::from(self_selecting);
        let skew = self.spec.max_skew;
        if let (true, Some(h)) = (self.is_hostname, host) {
            // A new node can always be launched, so the global minimum of a hostname spread is 0.
            let count = self.host_count(kd, h) + me;
            if count <= skew && allows(pod, h) {
                return Ok(Choice::Host);
            }
            return Err((0, 0));
        }
        // With `nodeAffinityPolicy: Ignore` every domain counts for the global minimum, also those
        // the pod's own node affinity excludes (as kube-scheduler computes it); with Honor only
        // those the pod may use.
        let ignore_affinity = self
            .spec
            .filter
            .as_ref()
            .is_some_and(|f| f.affinity == NodeInclusionPolicy::Ignore);
        let (min, eligible) = self.min_count(kd, if ignore_affinity { None } else { pod });
        let mut best: Option<(i32, u32)> = None;
        for (id, c) in self.domains() {
            let name = kd.name(id);
            if !allows(node, name) || !allows(pod, name) {
                continue;
            }
            let count = c + me;
            if count.saturating_sub(min) > skew {
                continue;
            }
            let better = match best {
                None => true,
                Some((bc, bid)) => count < bc || count == bc && name < kd.name(bid),
            };
            if better {
                best = Some((count, id));
            }
        }
        match best {
            Some((_, id)) => Ok(Choice::In(vec![id])),
            None => Err((min, eligible)),
        }
    }

    /// Global minimum over the domains the pod may use (0 with fewer than `minDomains` of them,
    /// and for hostname) and how many such domains there are.
    pub(super) fn min_count(&self, kd: &KeyDomains, pod: Option<&Requirement>) -> (i32, u32) {
        if self.is_hostname {
            return (0, self.present);
        }
        let mut min = i32::MAX;
        let mut eligible = 0u32;
        for (id, c) in self.domains() {
            if allows(pod, kd.name(id)) {
                eligible += 1;
                min = min.min(c);
            }
        }
        if self
            .spec
            .min_domains
            .is_some_and(|m| i64::from(eligible) < i64::from(m))
        {
            min = 0;
        }
        (min, eligible)
    }

    fn choose_affinity(
        &self,
        kd: &KeyDomains,
        self_selecting: bool,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
        host: Option<&str>,
    ) -> Result<Choice, (i32, u32)> {
        let bootstrap = |g: &Self| self_selecting && (g.nonzero == 0 || !g.any_occupied(kd, pod));
        if let (true, Some(h)) = (self.is_hostname, host) {
            if allows(pod, h) && (self.host_count(kd, h) > 0 || bootstrap(self)) {
                return Ok(Choice::Host);
            }
            return Err((0, 0));
        }
        let options: Vec<u32> = self
            .domains()
            .filter(|&(id, c)| c > 0 && allows(pod, kd.name(id)) && allows(node, kd.name(id)))
            .map(|(id, _)| id)
            .collect();
        if !options.is_empty() {
            return Ok(Choice::In(sorted(kd, options)));
        }
        if bootstrap(self) {
            // The first pod of a self-affine group picks a domain for the others to follow.
            let first = self
                .domains()
                .map(|(id, _)| id)
                .filter(|&id| allows(pod, kd.name(id)) && allows(node, kd.name(id)))
                .min_by(|a, b| kd.name(*a).cmp(kd.name(*b)));
            if let Some(id) = first {
                return Ok(Choice::In(vec![id]));
            }
        }
        Err((0, 0))
    }

    fn any_occupied(&self, kd: &KeyDomains, pod: Option<&Requirement>) -> bool {
        match pod {
            None => self.nonzero > 0,
            Some(p) => self.domains().any(|(id, c)| c > 0 && p.has(kd.name(id))),
        }
    }

    fn choose_anti_affinity(
        &self,
        kd: &KeyDomains,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
        host: Option<&str>,
    ) -> Result<Choice, (i32, u32)> {
        if let (true, Some(h)) = (self.is_hostname, host) {
            if self.host_count(kd, h) == 0 && allows(pod, h) {
                return Ok(Choice::Host);
            }
            return Err((0, 0));
        }
        if self.has_empty() {
            let options: Vec<u32> = self
                .domains()
                .filter(|&(id, c)| c == 0 && allows(pod, kd.name(id)) && allows(node, kd.name(id)))
                .map(|(id, _)| id)
                .collect();
            if !options.is_empty() {
                return Ok(Choice::In(sorted(kd, options)));
            }
        }
        Err((0, 0))
    }

    /// The rejection of a `choose_*` (which gave the global minimum and the eligible domains
    /// of a spread, else zeros); the per-domain counts only with `detail`.
    #[allow(clippy::too_many_arguments)] // What the reason shows, kept off the heap.
    fn fail(
        &self,
        kd: &KeyDomains,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
        host: Option<&str>,
        min: i32,
        eligible: u32,
        detail: bool,
    ) -> Unsatisfiable {
        let node_domain: Option<Arc<str>> = host
            .map(Arc::from)
            .or_else(|| node.and_then(|r| r.single_value()).map(Arc::from));
        let node_count = node_domain
            .as_deref()
            .map(|d| kd.id(d).map_or(0, |id| self.count(id).max(0)));
        let mut counts = Vec::new();
        if detail && !self.is_hostname {
            for (id, c) in self.domains() {
                if allows(pod, kd.name(id)) {
                    counts.push((kd.name(id).clone(), c));
                }
            }
            counts.sort();
        }
        Unsatisfiable {
            kind: self.spec.kind,
            inverse: false,
            key: Arc::from(self.spec.key.as_str()),
            selector: self.describe.clone(),
            max_skew: self.spec.max_skew,
            min_domains: self.spec.min_domains,
            global_min: min,
            eligible,
            node_domain,
            node_count,
            counts,
            occupied_hosts: if self.is_hostname { self.nonzero } else { 0 },
        }
    }
}

/// True when `r` (`None`: anything) allows `value`.
pub(super) fn allows(r: Option<&Requirement>, value: &str) -> bool {
    r.is_none_or(|r| r.has(value))
}

fn sorted(kd: &KeyDomains, mut ids: Vec<u32>) -> Vec<u32> {
    if ids.len() > 1 {
        ids.sort_by(|a, b| kd.name(*a).cmp(kd.name(*b)));
    }
    ids
}

/// `app=web`, `tier in (a,b)`, with the namespaces when they are not only the pod's own.
fn describe_selector(spec: &GroupKey) -> String {
    let Some(sel) = &spec.selector else {
        return "no pods (no labelSelector)".to_string();
    };
    let mut parts: Vec<String> = sel
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in &sel.match_expressions {
        parts.push(match e.operator {
            SelectorOperator::In => format!("{} in ({})", e.key, e.values.join(",")),
            SelectorOperator::NotIn => format!("{} notin ({})", e.key, e.values.join(",")),
            SelectorOperator::Exists => e.key.clone(),
            SelectorOperator::DoesNotExist => format!("!{}", e.key),
        });
    }
    let mut out = if parts.is_empty() {
        "all pods".to_string()
    } else {
        parts.join(",")
    };
    let ns = &spec.namespaces;
    match &ns.selector {
        Some(s) if s.is_empty() => out.push_str(" in all namespaces"),
        Some(_) => out.push_str(" in namespaces selected by namespaceSelector"),
        None => {
            let names: Vec<&str> = ns.names.iter().map(String::as_str).collect();
            out.push_str(&format!(" in namespace {}", names.join(",")));
        }
    }
    out
}

/// Label selector of a term with `matchLabelKeys` (`In`) and `mismatchLabelKeys` (`NotIn`)
/// merged in from the incoming pod's labels, as the API server does.
pub(super) fn merged_selector(
    selector: &Option<LabelSelector>,
    pod_labels: &Labels,
    match_keys: &[String],
    mismatch_keys: &[String],
) -> Option<LabelSelector> {
    let mut sel = selector.clone()?;
    for (keys, op) in [
        (match_keys, SelectorOperator::In),
        (mismatch_keys, SelectorOperator::NotIn),
    ] {
        for k in keys {
            if let Some(v) = pod_labels.get(k) {
                let expr = crate::model::SelectorExpression {
                    key: k.clone(),
                    operator: op,
                    values: vec![v.clone()],
                };
                if !sel.match_expressions.contains(&expr) {
                    sel.match_expressions.push(expr);
                }
            }
        }
    }
    Some(sel)
}

/// Requirement `key In [names of ids]`.
pub(super) fn requirement_in(key: &str, kd: &KeyDomains, ids: &[u32]) -> Requirement {
    Requirement::is_in(key, ids.iter().map(|id| kd.name(*id).to_string()))
}
