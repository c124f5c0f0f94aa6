//! Label requirements, selectors, taints and tolerations as they appear in the input.
//!
//! These are plain data. The algebra over them (intersection, compatibility, matching) lives in
//! `crate::requirements`.

use serde::{Deserialize, Serialize};

pub use common::Labels;

/// An operator of a node selector requirement (Kubernetes plus Karpenter's `Gte`/`Lte`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is not one of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's value, as an integer, is greater than the single value.
    Gt,
    /// The label's value, as an integer, is less than the single value.
    Lt,
    /// The label's value, as an integer, is greater than or equal to the single value.
    Gte,
    /// The label's value, as an integer, is less than or equal to the single value.
    Lte,
}

/// One requirement on a node label, e.g. from a NodePool's `spec.template.spec.requirements` or a
/// pod's node affinity.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: Operator,
    /// Values (one integer for Gt/Lt/Gte/Lte, none for Exists/DoesNotExist).
    pub values: Vec<String>,
    /// Karpenter's `minValues`: the least number of distinct values a launch must keep open.
    pub min_values: Option<u32>,
}

/// A node selector term: requirements that must all hold (AND).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeSelectorTerm {
    /// `matchExpressions` and `matchFields` (metadata.name is mapped to `kubernetes.io/hostname`).
    pub requirements: Vec<Requirement>,
}

/// A preferred scheduling term with its weight (1-100).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PreferredTerm {
    /// Weight.
    pub weight: i32,
    /// The term.
    pub term: NodeSelectorTerm,
}

/// Operator of a label selector expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// Value in set.
    In,
    /// Value not in set (or absent).
    NotIn,
    /// Key present.
    Exists,
    /// Key absent.
    DoesNotExist,
}

/// One expression of a label selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SelectorExpression {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: SelectorOperator,
    /// Values.
    pub values: Vec<String>,
}

/// A Kubernetes label selector (`matchLabels` + `matchExpressions`). An empty selector matches
/// everything; an absent selector (`Option::None` where it is used) matches nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub match_labels: Labels,
    /// `matchExpressions`.
    pub match_expressions: Vec<SelectorExpression>,
}

// === impl LabelSelector ===

impl LabelSelector {
    /// True when `labels` satisfy the selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let got = labels.get(&e.key);
                match e.operator {
                    SelectorOperator::In => got.is_some_and(|v| e.values.contains(v)),
                    SelectorOperator::NotIn => got.is_none_or(|v| !e.values.contains(v)),
                    SelectorOperator::Exists => got.is_some(),
                    SelectorOperator::DoesNotExist => got.is_none(),
                }
            })
    }

    /// True when the selector has no terms (matches every object).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// The one taint type and its effect (`common::taint`).
pub use common::taint::{Taint, TaintEffect};

/// Operator of a toleration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// Key and value must be equal.
    Equal,
    /// Key must match (or be empty, matching every key); the value is ignored.
    Exists,
}

/// A pod's toleration.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Toleration {
    /// Key; empty with `Exists` tolerates every taint.
    pub key: String,
    /// Operator.
    pub operator: TolerationOperator,
    /// Value (for `Equal`).
    pub value: String,
    /// Effect; `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

// === impl Toleration ===

impl Toleration {
    /// True when this toleration tolerates `taint`, by Kubernetes' rules.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.operator == TolerationOperator::Exists;
        }
        if self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}
