//! One requirement on one label key, as a set of allowed values.

use std::cmp::Ordering;
use std::fmt;

use crate::model::{Operator, Requirement as InputRequirement};

/// The set of values a label key may take.
///
/// Modelled as Karpenter models it: either a finite set of allowed values (`complement == false`)
/// or the complement of a finite set of excluded values (`complement == true`), further bounded
/// by optional integer limits `greater_than` and `less_than` (both exclusive). `In` is a finite
/// set, `NotIn` a complement, `Exists` the complement of nothing, `DoesNotExist` the empty finite
/// set, and `Gt`/`Lt`/`Gte`/`Lte` complements with bounds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    complement: bool,
    /// Sorted, deduplicated.
    values: Vec<String>,
    greater_than: Option<i64>,
    less_than: Option<i64>,
    min_values: Option<u32>,
}

// === impl Requirement ===

impl Requirement {
    /// `key In values`. A deprecated key (`failure-domain.beta.kubernetes.io/zone`, ...) is read
    /// as its stable key, as Karpenter does.
    pub fn is_in<I, S>(key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut values: Vec<String> = values.into_iter().map(Into::into).collect();
        values.sort_unstable();
        values.dedup();
        Self {
            key: super::well_known::normalize_key(key.into()),
            complement: false,
            values,
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    /// `key NotIn values`.
    pub fn not_in<I, S>(key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut r = Self::is_in(key, values);
        r.complement = true;
        r
    }

    /// `key Exists`.
    pub fn exists(key: impl Into<String>) -> Self {
        Self::not_in(key, Vec::<String>::new())
    }

    /// `key DoesNotExist`.
    pub fn does_not_exist(key: impl Into<String>) -> Self {
        Self::is_in(key, Vec::<String>::new())
    }

    /// `key Gt n` (strictly greater).
    pub fn greater_than(key: impl Into<String>, n: i64) -> Self {
        let mut r = Self::exists(key);
        r.greater_than = Some(n);
        r
    }

    /// `key Lt n` (strictly less).
    pub fn less_than(key: impl Into<String>, n: i64) -> Self {
        let mut r = Self::exists(key);
        r.less_than = Some(n);
        r
    }

    /// Builds the set from an input requirement.
    ///
    /// # Errors
    /// When a numeric operator does not have exactly one integer value.
    pub fn from_input(input: &InputRequirement) -> Result<Self, super::Error> {
        let numeric = || -> Result<i64, super::Error> {
            match input.values.as_slice() {
                [v] => v
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| super::Error::NotAnInteger {
                        key: input.key.clone(),
                        operator: input.operator,
                        value: v.clone(),
                    }),
                _ => Err(super::Error::WrongValueCount {
                    key: input.key.clone(),
                    operator: input.operator,
                    count: input.values.len(),
                }),
            }
        };
        let mut r = match input.operator {
            Operator::In => Self::is_in(&input.key, input.values.iter().cloned()),
            Operator::NotIn => Self::not_in(&input.key, input.values.iter().cloned()),
            Operator::Exists => Self::exists(&input.key),
            Operator::DoesNotExist => Self::does_not_exist(&input.key),
            Operator::Gt => Self::greater_than(&input.key, numeric()?),
            Operator::Lt => Self::less_than(&input.key, numeric()?),
            Operator::Gte => Self::greater_than(&input.key, numeric()?.saturating_sub(1)),
            Operator::Lte => Self::less_than(&input.key, numeric()?.saturating_add(1)),
        };
        r.min_values = input.min_values;
        r.normalize();
        Ok(r)
    }

    /// Sets `minValues`.
    pub fn with_min_values(mut self, min_values: Option<u32>) -> Self {
        self.min_values = min_values;
        self
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// `minValues`, if any.
    pub fn min_values(&self) -> Option<u32> {
        self.min_values
    }

    /// True for a complement set (`NotIn`, `Exists`, `Gt`, `Lt`).
    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The listed values: allowed ones for a finite set, excluded ones for a complement.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Lower exclusive bound, if any.
    pub fn lower_bound(&self) -> Option<i64> {
        self.greater_than
    }

    /// Upper exclusive bound, if any.
    pub fn upper_bound(&self) -> Option<i64> {
        self.less_than
    }

    /// The Kubernetes operator this set reads as (`In`, `NotIn`, `Exists` or `DoesNotExist`).
    pub fn operator(&self) -> Operator {
        if self.complement {
            if self.values.is_empty() && self.greater_than.is_none() && self.less_than.is_none() {
                Operator::Exists
            } else {
                Operator::NotIn
            }
        } else if self.values.is_empty() {
            Operator::DoesNotExist
        } else {
            Operator::In
        }
    }

    /// True when `value` is allowed.
    pub fn has(&self, value: &str) -> bool {
        if !self.within_bounds(value) {
            return false;
        }
        let listed = self
            .values
            .binary_search_by(|v| v.as_str().cmp(value))
            .is_ok();
        listed != self.complement
    }

    /// True when the set allows the label to be absent (`NotIn`, `DoesNotExist`).
    pub fn allows_absent(&self) -> bool {
        matches!(self.operator(), Operator::NotIn | Operator::DoesNotExist)
    }

    /// Number of allowed values, saturating at `usize::MAX` for complements.
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX - self.values.len()
        } else {
            self.values.len()
        }
    }

    /// True when no value is allowed.
    pub fn is_empty(&self) -> bool {
        !self.complement && self.values.is_empty()
    }

    /// The single allowed value, when exactly one is allowed.
    pub fn single_value(&self) -> Option<&str> {
        match (self.complement, self.values.as_slice()) {
            (false, [v]) => Some(v),
            _ => None,
        }
    }

    /// The intersection of two sets on the same key. `minValues` is the larger of the two.
    pub fn intersect(&self, other: &Requirement) -> Requirement {
        debug_assert_eq!(self.key, other.key);
        let greater_than = max_opt(self.greater_than, other.greater_than);
        let less_than = min_opt(self.less_than, other.less_than);
        let (complement, values) = match (self.complement, other.complement) {
            (true, true) => (true, union_sorted(&self.values, &other.values)),
            (true, false) => (false, difference_sorted(&other.values, &self.values)),
            (false, true) => (false, difference_sorted(&self.values, &other.values)),
            (false, false) => (false, intersect_sorted(&self.values, &other.values)),
        };
        let mut r = Requirement {
            key: self.key.clone(),
            complement,
            values,
            greater_than,
            less_than,
            min_values: max_opt(self.min_values, other.min_values),
        };
        r.normalize();
        r
    }

    /// True when the two sets share at least one value.
    pub fn intersects(&self, other: &Requirement) -> bool {
        !self.intersect(other).is_empty()
    }

    fn within_bounds(&self, value: &str) -> bool {
        if self.greater_than.is_none() && self.less_than.is_none() {
            return true;
        }
        match value.parse::<i64>() {
            Ok(n) => {
                self.greater_than.is_none_or(|g| n > g) && self.less_than.is_none_or(|l| n < l)
            }
            Err(_) => false,
        }
    }

    /// Drops listed values outside the bounds and collapses empty numeric ranges.
    fn normalize(&mut self) {
        if self.greater_than.is_none() && self.less_than.is_none() {
            return;
        }
        if !self.complement {
            let (g, l) = (self.greater_than, self.less_than);
            self.values.retain(|v| {
                v.parse::<i64>()
                    .is_ok_and(|n| g.is_none_or(|g| n > g) && l.is_none_or(|l| n < l))
            });
            return;
        }
        if let (Some(g), Some(l)) = (self.greater_than, self.less_than)
            && g.saturating_add(1) >= l
        {
            // No integer fits between the bounds: the set is empty.
            self.complement = false;
            self.values.clear();
            self.greater_than = None;
            self.less_than = None;
        }
    }
}

impl PartialOrd for Requirement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Requirement {
    fn cmp(&self, other: &Self) -> Ordering {
        (
            &self.key,
            self.complement,
            &self.values,
            self.greater_than,
            self.less_than,
            self.min_values,
        )
            .cmp(&(
                &other.key,
                other.complement,
                &other.values,
                other.greater_than,
                other.less_than,
                other.min_values,
            ))
    }
}

impl fmt::Display for Requirement {
    /// Formats as `key In [a b]`, `key NotIn [a]`, `key Exists`, `key Gt 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operator() {
            Operator::In => write!(f, "{} In [{}]", self.key, self.values.join(" ")),
            Operator::DoesNotExist => write!(f, "{} DoesNotExist", self.key),
            Operator::Exists => write!(f, "{} Exists", self.key),
            _ => {
                write!(f, "{}", self.key)?;
                if !self.values.is_empty() {
                    write!(f, " NotIn [{}]", self.values.join(" "))?;
                }
                if let Some(g) = self.greater_than {
                    write!(f, " Gt {g}")?;
                }
                if let Some(l) = self.less_than {
                    write!(f, " Lt {l}")?;
                }
                Ok(())
            }
        }
    }
}

fn max_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn min_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn union_sorted(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => {
                out.push(a[i].clone());
                i += 1;
            }
            Ordering::Greater => {
                out.push(b[j].clone());
                j += 1;
            }
            Ordering::Equal => {
                out.push(a[i].clone());
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn intersect_sorted(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                out.push(a[i].clone());
                i += 1;
                j += 1;
            }
        }
    }
    out
}

fn difference_sorted(a: &[String], b: &[String]) -> Vec<String> {
    a.iter()
        .filter(|v| b.binary_search(v).is_err())
        .cloned()
        .collect()
}
