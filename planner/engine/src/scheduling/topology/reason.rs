//! Why a pod cannot use a node because of a topology constraint, in words a person can act on,
//! and the kinds of constraint ([`Kind`]).

use std::fmt;
use std::sync::Arc;

use crate::labels;

/// What a group enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// A topology spread constraint.
    Spread,
    /// A pod affinity term: land where matching pods are.
    Affinity,
    /// A pod anti-affinity term: land where matching pods are not.
    AntiAffinity,
}

/// Why a pod cannot use a node because of a topology constraint; formats as a reason a person can
/// act on. Cheap to build: the scheduler gets many of these while it looks for a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unsatisfiable {
    pub(super) kind: Kind,
    /// A required anti-affinity term of *other* pods that selects this pod.
    pub(super) inverse: bool,
    pub(super) key: Arc<str>,
    pub(super) selector: Arc<str>,
    pub(super) max_skew: i32,
    pub(super) min_domains: Option<i32>,
    pub(super) global_min: i32,
    /// Domains the pod may use (spread).
    pub(super) eligible: u32,
    pub(super) node_domain: Option<Arc<str>>,
    pub(super) node_count: Option<i32>,
    /// Counts of the domains the pod may use, by name (not for hostname keys).
    pub(super) counts: Vec<(Arc<str>, i32)>,
    pub(super) occupied_hosts: u32,
}

// === impl Unsatisfiable ===

impl Unsatisfiable {
    /// True when the rejection can only get worse as more pods are placed in this solve, so the
    /// scheduler need not offer this node to pods with the same constraints again:
    /// anti-affinity (counts only grow, a node's domains only narrow) and hostname spread
    /// (a node's count only grows and the global minimum of a hostname spread is always 0).
    /// Spread on other keys (the minimum may rise) and affinity (a matching pod may arrive) are
    /// not permanent.
    pub(crate) fn is_permanent(&self) -> bool {
        match self.kind {
            Kind::AntiAffinity => true,
            Kind::Spread => &*self.key == labels::HOSTNAME && self.node_domain.is_some(),
            Kind::Affinity => false,
        }
    }
}

impl std::error::Error for Unsatisfiable {}

impl fmt::Display for Unsatisfiable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &*self.key;
        let noun = domain_noun(key);
        let list = || {
            self.counts
                .iter()
                .map(|(d, c)| format!("{d}={c}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match self.kind {
            Kind::Spread => {
                if let (Some(m), false) = (self.min_domains, key == labels::HOSTNAME)
                    && i64::from(self.eligible) < i64::from(m)
                {
                    return write!(
                        f,
                        "topology spread on {key} needs a {} {noun}: minDomains is {m} but the \
                             NodePools and existing nodes allow {} ({}); maxSkew {} over pods \
                             matching {}",
                        ordinal(self.eligible + 1),
                        self.eligible,
                        list(),
                        self.max_skew,
                        self.selector
                    );
                }
                if let (Some(d), Some(c)) = (&self.node_domain, self.node_count) {
                    return write!(
                        f,
                        "topology spread on {key} (maxSkew {}, pods matching {}): {noun} {d} \
                         already holds {c} and the emptiest holds {}{}",
                        self.max_skew,
                        self.selector,
                        self.global_min.min(c),
                        if self.counts.is_empty() {
                            String::new()
                        } else {
                            format!(" (counts {})", list())
                        }
                    );
                }
                if self.eligible == 0 {
                    return write!(
                        f,
                        "topology spread on {key}: no {noun} is allowed for this pod (pods \
                         matching {})",
                        self.selector
                    );
                }
                write!(
                    f,
                    "topology spread on {key} (maxSkew {}, pods matching {}): every {noun} this \
                     node allows would exceed the skew (counts {})",
                    self.max_skew,
                    self.selector,
                    list()
                )
            }
            Kind::Affinity => {
                let occupied: Vec<String> = self
                    .counts
                    .iter()
                    .filter(|(_, c)| *c > 0)
                    .map(|(d, _)| d.to_string())
                    .collect();
                if occupied.is_empty() && self.occupied_hosts == 0 {
                    write!(
                        f,
                        "pod affinity on {key}: no {noun} holds a pod matching {}",
                        self.selector
                    )
                } else if occupied.is_empty() {
                    write!(
                        f,
                        "pod affinity on {key}: pods matching {} are on {} other {noun}(s), not on \
                         {}",
                        self.selector,
                        self.occupied_hosts,
                        self.node_domain.as_deref().unwrap_or("this node")
                    )
                } else {
                    write!(
                        f,
                        "pod affinity on {key}: pods matching {} are only in {}, which this node \
                         cannot join",
                        self.selector,
                        occupied.join(" ")
                    )
                }
            }
            Kind::AntiAffinity => {
                let who = if self.inverse {
                    format!(
                        "pods with required anti-affinity to {} (which selects this pod)",
                        self.selector
                    )
                } else {
                    format!("a pod matching {}", self.selector)
                };
                let occupied = self.counts.iter().filter(|(_, c)| *c > 0).count();
                if let (Some(d), Some(c)) = (&self.node_domain, self.node_count)
                    && c > 0
                {
                    return write!(
                        f,
                        "pod anti-affinity on {key}: {noun} {d} already holds {who}"
                    );
                }
                if !self.counts.is_empty() && occupied == self.counts.len() {
                    let holds = "hold";
                    let subject = if self.inverse {
                        who.clone()
                    } else {
                        format!("a pod matching {}", self.selector)
                    };
                    return write!(
                        f,
                        "pod anti-affinity on {key}: all {} {noun}s already {holds} {subject} ({})",
                        self.counts.len(),
                        self.counts
                            .iter()
                            .map(|(d, _)| d.to_string())
                            .collect::<Vec<_>>()
                            .join(" ")
                    );
                }
                write!(
                    f,
                    "pod anti-affinity on {key}: every {noun} this node allows already holds {who}"
                )
            }
        }
    }
}

pub(super) fn domain_noun(key: &str) -> &'static str {
    match key {
        labels::ZONE => "zone",
        labels::HOSTNAME => "node",
        labels::CAPACITY_TYPE => "capacity type",
        _ => "domain",
    }
}

pub(super) fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, r) if r != 11 => "st",
        (2, r) if r != 12 => "nd",
        (3, r) if r != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}
