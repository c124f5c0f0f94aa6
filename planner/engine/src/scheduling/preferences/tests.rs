use crate::model::{
    NodeSelectorTerm, Operator, PreferredTerm, Requirement, Taint, TopologySpreadConstraint,
};
use crate::scheduling::test_util::{pod, spread, term, weighted};

use super::*;

fn node_term(zone: &str) -> NodeSelectorTerm {
    NodeSelectorTerm {
        requirements: vec![Requirement {
            key: crate::labels::ZONE.into(),
            operator: Operator::In,
            values: vec![zone.into()],
            min_values: None,
        }],
    }
}

fn anyway(key: &str) -> TopologySpreadConstraint {
    let mut c = spread(key, 1, &[("app", "web")]);
    c.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
    c
}

fn loaded_pod() -> Pod {
    let mut p = pod("web", &[("app", "web")]);
    p.required_node_affinity = vec![node_term("a"), node_term("b")];
    p.preferred_pod_affinity = vec![
        weighted(10, term("zone", &[("x", "1")])),
        weighted(90, term("zone", &[("x", "2")])),
    ];
    p.preferred_pod_anti_affinity = vec![weighted(5, term("host", &[("y", "1")]))];
    p.preferred_node_affinity = vec![
        PreferredTerm {
            weight: 1,
            term: node_term("c"),
        },
        PreferredTerm {
            weight: 50,
            term: node_term("d"),
        },
    ];
    p.topology_spread = vec![spread("zone", 1, &[("app", "web")]), anyway("host")];
    p
}

#[test]
fn relaxes_in_karpenters_order() {
    let prefs = Preferences {
        tolerate_prefer_no_schedule: true,
    };
    let mut p = loaded_pod();
    let mut steps = Vec::new();
    while let Some(step) = prefs.relax_step(&mut p) {
        steps.push(step);
    }
    assert_eq!(
        steps,
        vec![
            Relaxation::RequiredNodeAffinityTerm,
            Relaxation::PreferredPodAffinity,
            Relaxation::PreferredPodAffinity,
            Relaxation::PreferredPodAntiAffinity,
            Relaxation::PreferredNodeAffinity,
            Relaxation::PreferredNodeAffinity,
            Relaxation::ScheduleAnywaySpread("host".into()),
            Relaxation::ToleratePreferNoSchedule,
        ]
    );
    // The first required term goes, the last stays (they are ORed; one must remain).
    assert_eq!(p.required_node_affinity, vec![node_term("b")]);
    // The DoNotSchedule spread is never relaxed.
    assert_eq!(p.topology_spread.len(), 1);
    assert!(!prefs.relax(&mut p), "nothing left");
}

#[test]
fn removes_the_heaviest_preferred_term_first() {
    let prefs = Preferences::default();
    let mut p = loaded_pod();
    p.required_node_affinity.truncate(1);
    assert!(prefs.relax(&mut p));
    assert_eq!(p.preferred_pod_affinity.len(), 1);
    assert_eq!(
        p.preferred_pod_affinity[0].weight, 10,
        "weight 90 went first"
    );
    p.preferred_pod_affinity.clear();
    p.preferred_pod_anti_affinity.clear();
    assert!(prefs.relax(&mut p));
    assert_eq!(p.preferred_node_affinity.len(), 1);
    assert_eq!(
        p.preferred_node_affinity[0].weight, 1,
        "weight 50 went first"
    );
}

#[test]
fn prefer_no_schedule_toleration_only_when_some_taint_needs_it() {
    let mut snap = crate::model::ClusterSnapshot::default();
    assert!(!Preferences::new(&snap).tolerate_prefer_no_schedule);
    let mut np = crate::model::NodePool::default();
    np.taints.push(Taint {
        key: "spot".into(),
        value: String::new(),
        effect: TaintEffect::PreferNoSchedule,
    });
    snap.node_pools.push(np);
    let prefs = Preferences::new(&snap);
    assert!(prefs.tolerate_prefer_no_schedule);
    let mut p = pod("p", &[]);
    assert_eq!(
        prefs.relax_step(&mut p),
        Some(Relaxation::ToleratePreferNoSchedule)
    );
    assert_eq!(p.tolerations.len(), 1);
    assert_eq!(prefs.relax_step(&mut p), None, "added once");
}

#[test]
fn ignore_policy_strips_preferences_up_front_and_keeps_requirements() {
    let mut p = loaded_pod();
    strip_preferences(&mut p);
    assert!(p.preferred_pod_affinity.is_empty());
    assert!(p.preferred_pod_anti_affinity.is_empty());
    assert!(p.preferred_node_affinity.is_empty());
    assert_eq!(p.topology_spread.len(), 1);
    assert_eq!(p.required_node_affinity.len(), 2);
    // Only the OR-terms and the toleration are left to relax.
    let prefs = Preferences {
        tolerate_prefer_no_schedule: false,
    };
    assert_eq!(
        prefs.relax_step(&mut p),
        Some(Relaxation::RequiredNodeAffinityTerm)
    );
    assert_eq!(prefs.relax_step(&mut p), None);
}
