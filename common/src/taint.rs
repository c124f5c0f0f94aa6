//! Node taints: the one [`Taint`] of the planner's model and of the launches' node specs, and
//! the [`TaintEffect`] the CRDs' API type (`crds::Taint`) shares.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The effect of a taint on pods that do not tolerate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub enum TaintEffect {
    /// New pods are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node when it can.
    PreferNoSchedule,
    /// Running pods are evicted too.
    NoExecute,
}

// === impl TaintEffect ===

impl TaintEffect {
    /// Every effect, in Kubernetes' order.
    pub const ALL: [TaintEffect; 3] = [
        TaintEffect::NoSchedule,
        TaintEffect::PreferNoSchedule,
        TaintEffect::NoExecute,
    ];

    /// The name Kubernetes writes (`NoSchedule`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }

    /// The effect named `s` exactly, as Kubernetes spells it.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

impl fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node taint. `value` may be empty; Kubernetes' `timeAdded` is not carried (the API type
/// `crds::Taint` has it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    #[serde(default)]
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_are_named_as_kubernetes_writes_them() {
        for e in TaintEffect::ALL {
            assert_eq!(TaintEffect::parse(e.as_str()), Some(e));
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
        }
        assert_eq!(TaintEffect::parse("noschedule"), None);
        let t: Taint =
            serde_json::from_value(serde_json::json!({"key": "k", "effect": "NoExecute"})).unwrap();
        assert_eq!(t.value, "");
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            serde_json::json!({"key": "k", "value": "", "effect": "NoExecute"})
        );
    }
}
