//! Timing of the disruption methods with no clock in the engine: the caller passes a
//! [`Stopwatch`] that runs each method's evaluation and measures it. The planner service's
//! reads its clock and exports Karpenter's
//! `karpenter_voluntary_disruption_decision_evaluation_duration_seconds` {reason,
//! consolidation_type} (kubernetes-sigs/karpenter v1.14 `pkg/controllers/disruption/
//! controller.go` `disrupt`, labels from each method's `Reason()` and `ConsolidationType()`).

/// A disruption method, labelled as Karpenter labels its evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Method {
    /// The disruption reason in lower case: `empty`, `drifted`, `underutilized`.
    pub reason: &'static str,
    /// `empty`, `multi`, `single`, or empty for drift.
    pub consolidation_type: &'static str,
}

/// Empty nodes (Karpenter's `Emptiness`).
pub const EMPTY: Method = Method {
    reason: "empty",
    consolidation_type: "empty",
};

/// Drifted nodes (Karpenter's `Drift`).
pub const DRIFT: Method = Method {
    reason: "drifted",
    consolidation_type: "",
};

/// The bulk search over underutilized nodes (several nodes per decision, as Karpenter's
/// `MultiNodeConsolidation`).
pub const MULTI: Method = Method {
    reason: "underutilized",
    consolidation_type: "multi",
};

/// Karpenter's own sequence over underutilized nodes, one command per pass (a multi-node try,
/// then single nodes, as its `SingleNodeConsolidation` follows `MultiNodeConsolidation`); it
/// runs beside [`MULTI`] and is timed as `single`.
pub const SINGLE: Method = Method {
    reason: "underutilized",
    consolidation_type: "single",
};

/// Runs and measures the evaluation of one method. Shared by the two search threads.
pub trait Stopwatch: Sync {
    /// Runs `evaluate`, the evaluation of `method`.
    fn time(&self, method: Method, evaluate: &mut dyn FnMut());
}

/// A [`Stopwatch`] that measures nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Untimed;

impl Stopwatch for Untimed {
    fn time(&self, _: Method, evaluate: &mut dyn FnMut()) {
        evaluate();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::model::ClusterSnapshot;
    use crate::test_util::{node_pool, small_catalog};

    #[derive(Default)]
    struct Recorder(Mutex<Vec<Method>>);

    impl Stopwatch for Recorder {
        fn time(&self, method: Method, evaluate: &mut dyn FnMut()) {
            evaluate();
            self.0.lock().unwrap().push(method);
        }
    }

    #[test]
    fn a_plan_runs_each_disruption_method_through_the_stopwatch() {
        let snapshot = ClusterSnapshot {
            node_pools: vec![node_pool("default")],
            ..Default::default()
        };
        let watch = Recorder::default();
        let plan = crate::plan_timed(
            &snapshot,
            &small_catalog(),
            &Default::default(),
            &Default::default(),
            &watch,
        )
        .unwrap();
        assert!(plan.disruptions.is_empty());
        let mut seen = watch.0.into_inner().unwrap();
        // The two underutilized searches run on two threads: their order is not fixed.
        seen[2..].sort_by_key(|m| m.consolidation_type);
        assert_eq!(seen, [EMPTY, DRIFT, MULTI, SINGLE]);
    }
}
