use super::*;
use crate::model::{Taint, TaintEffect, Toleration, TolerationOperator};

fn input(key: &str, operator: Operator, values: &[&str]) -> InputRequirement {
    InputRequirement {
        key: key.into(),
        operator,
        values: values.iter().map(|s| s.to_string()).collect(),
        min_values: None,
    }
}

fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement::from_input(&input(key, operator, values)).unwrap()
}

fn reqs(items: &[(&str, Operator, &[&str])]) -> Requirements {
    items.iter().map(|(k, o, v)| req(k, *o, v)).collect()
}

const ZONE: &str = "topology.kubernetes.io/zone";

#[test]
fn in_and_not_in_intersect() {
    let a = req(ZONE, Operator::In, &["a", "b", "c"]);
    let b = req(ZONE, Operator::NotIn, &["b"]);
    let i = a.intersect(&b);
    assert_eq!(i.operator(), Operator::In);
    assert_eq!(i.values(), ["a", "c"]);
    assert!(i.has("a") && !i.has("b"));
    // Symmetric.
    assert_eq!(b.intersect(&a), i);
}

#[test]
fn not_in_with_not_in_unions_exclusions() {
    let a = req(ZONE, Operator::NotIn, &["a"]);
    let b = req(ZONE, Operator::NotIn, &["b"]);
    let i = a.intersect(&b);
    assert_eq!(i.operator(), Operator::NotIn);
    assert!(!i.has("a") && !i.has("b") && i.has("c"));
}

#[test]
fn exists_and_does_not_exist() {
    let e = req("k", Operator::Exists, &[]);
    let d = req("k", Operator::DoesNotExist, &[]);
    assert!(e.has("anything"));
    assert!(!d.has("anything"));
    assert!(d.is_empty());
    assert!(e.intersect(&d).is_empty());
    assert_eq!(e.operator(), Operator::Exists);
}

#[test]
fn numeric_bounds() {
    let gt = req("cpu", Operator::Gt, &["4"]);
    let lt = req("cpu", Operator::Lt, &["9"]);
    let both = gt.intersect(&lt);
    assert!(!both.has("4") && both.has("5") && both.has("8") && !both.has("9"));
    assert!(
        !both.has("abc"),
        "non-integers never satisfy numeric bounds"
    );
    let gte = req("cpu", Operator::Gte, &["4"]);
    let lte = req("cpu", Operator::Lte, &["4"]);
    let exactly = gte.intersect(&lte);
    assert!(exactly.has("4") && !exactly.has("3") && !exactly.has("5"));
    // An In set is filtered by the bounds.
    let within = req("cpu", Operator::In, &["2", "8", "x"]).intersect(&gt);
    assert_eq!(within.values(), ["8"]);
    // Disjoint bounds are empty.
    let none = req("cpu", Operator::Gt, &["8"]).intersect(&req("cpu", Operator::Lt, &["9"]));
    assert!(none.is_empty());
}

#[test]
fn numeric_operators_reject_bad_values() {
    let e = Requirement::from_input(&input("cpu", Operator::Gt, &["four"])).unwrap_err();
    assert!(e.to_string().contains("\"four\" is not an integer"), "{e}");
    let e = Requirement::from_input(&input("cpu", Operator::Lt, &["1", "2"])).unwrap_err();
    assert!(e.to_string().contains("exactly one value, got 2"), "{e}");
}

#[test]
fn min_values_take_the_larger() {
    let a = req("t", Operator::In, &["a", "b"]).with_min_values(Some(2));
    let b = req("t", Operator::Exists, &[]).with_min_values(Some(3));
    assert_eq!(a.intersect(&b).min_values(), Some(3));
}

#[test]
fn compatible_allows_undefined_well_known_only() {
    let pool = reqs(&[("team", Operator::In, &["web"])]);
    let pod = reqs(&[(ZONE, Operator::In, &["us-east-1a"])]);
    assert!(pool.compatible(&pod, Undefined::AllowWellKnown).is_ok());
    let custom = reqs(&[("gpu-kind", Operator::In, &["a100"])]);
    let err = pool
        .compatible(&custom, Undefined::AllowWellKnown)
        .unwrap_err();
    assert_eq!(err.key(), "gpu-kind");
    assert!(
        err.to_string().contains("does not have known values"),
        "{err}"
    );
    // NotIn / DoesNotExist on an undefined custom label are fine.
    let absent = reqs(&[("gpu-kind", Operator::DoesNotExist, &[])]);
    assert!(pool.compatible(&absent, Undefined::AllowWellKnown).is_ok());
    let not_in = reqs(&[("gpu-kind", Operator::NotIn, &["a100"])]);
    assert!(pool.compatible(&not_in, Undefined::Deny).is_ok());
}

#[test]
fn compatible_rejects_disjoint_values() {
    let pool = reqs(&[("karpenter.sh/capacity-type", Operator::In, &["on-demand"])]);
    let pod = reqs(&[("karpenter.sh/capacity-type", Operator::In, &["spot"])]);
    let err = pool.compatible(&pod, Undefined::AllowAll).unwrap_err();
    assert!(matches!(err, Incompatibility::Disjoint { .. }));
    assert!(err.to_string().contains("spot"), "{err}");
}

#[test]
fn both_absent_sides_are_compatible() {
    let a = reqs(&[("k", Operator::DoesNotExist, &[])]);
    let b = reqs(&[("k", Operator::NotIn, &["x"])]);
    assert!(a.compatible(&b, Undefined::Deny).is_ok());
    assert!(a.intersects(&b).is_ok());
}

#[test]
fn matches_labels_of_concrete_nodes() {
    let r = reqs(&[
        (ZONE, Operator::In, &["a", "b"]),
        ("gpu", Operator::DoesNotExist, &[]),
        ("tier", Operator::NotIn, &["batch"]),
    ]);
    let mut labels = Labels::new();
    labels.insert(ZONE.into(), "a".into());
    assert!(r.matches_labels(&labels));
    labels.insert("tier".into(), "batch".into());
    assert_eq!(r.first_unmatched(&labels).unwrap().key(), "tier");
    labels.remove("tier");
    labels.insert("gpu".into(), "yes".into());
    assert!(!r.matches_labels(&labels));
    labels.clear();
    assert!(!r.matches_labels(&labels), "In needs the label present");
}

#[test]
fn labels_are_single_valued_non_restricted() {
    let r = reqs(&[
        (ZONE, Operator::In, &["a"]),
        ("kubernetes.io/hostname", Operator::In, &["n1"]),
        ("team", Operator::In, &["x", "y"]),
        ("env", Operator::Exists, &[]),
    ]);
    let l = r.labels();
    assert_eq!(l.len(), 1);
    assert_eq!(l.get(ZONE).map(String::as_str), Some("a"));
}

#[test]
fn add_intersects_same_key() {
    let mut r = reqs(&[(ZONE, Operator::In, &["a", "b"])]);
    r.add(req(ZONE, Operator::In, &["b", "c"]));
    assert_eq!(r.len(), 1);
    assert_eq!(r.get(ZONE).unwrap().values(), ["b"]);
    r.add(req(ZONE, Operator::In, &["c"]));
    assert_eq!(r.first_empty().map(|x| x.key()), Some(ZONE));
}

#[test]
fn taints_need_tolerations() {
    let taints = vec![
        Taint {
            key: "gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        },
        Taint {
            key: "soft".into(),
            value: String::new(),
            effect: TaintEffect::PreferNoSchedule,
        },
    ];
    let gpu = Toleration {
        key: "gpu".into(),
        operator: TolerationOperator::Equal,
        value: "true".into(),
        effect: Some(TaintEffect::NoSchedule),
    };
    assert_eq!(
        taints::first_untolerated(&taints, &[]).map(|t| t.key.as_str()),
        Some("gpu")
    );
    assert_eq!(
        taints::first_untolerated(&taints, std::slice::from_ref(&gpu)).map(|t| t.key.as_str()),
        Some("soft"),
        "PreferNoSchedule must be tolerated too until relaxed"
    );
    assert!(taints::tolerates_all(
        &taints,
        &[gpu.clone(), taints::prefer_no_schedule_toleration()]
    ));
    let wrong_value = Toleration {
        value: "false".into(),
        ..gpu
    };
    assert!(!wrong_value.tolerates(&taints[0]));
    let everything = Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
    };
    assert!(taints::tolerates_all(&taints, &[everything]));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn arb_req() -> impl Strategy<Value = Requirement> {
        let vals = prop::collection::vec(prop::sample::select(vec!["1", "2", "3", "a", "b"]), 0..4);
        (0usize..6, vals, -1i64..5).prop_map(|(op, vals, n)| match op {
            0 => Requirement::is_in("k", vals),
            1 => Requirement::not_in("k", vals),
            2 => Requirement::exists("k"),
            3 => Requirement::does_not_exist("k"),
            4 => Requirement::greater_than("k", n),
            _ => Requirement::less_than("k", n),
        })
    }

    proptest! {
        #[test]
        fn intersection_is_exactly_both(a in arb_req(), b in arb_req(), v in prop::sample::select(vec!["0", "1", "2", "3", "4", "5", "a", "b", "c"])) {
            let i = a.intersect(&b);
            prop_assert_eq!(i.has(v), a.has(v) && b.has(v));
            prop_assert_eq!(i.clone(), b.intersect(&a));
        }
    }
}

#[test]
fn deprecated_keys_are_read_as_stable_keys() {
    let r = req(
        "failure-domain.beta.kubernetes.io/zone",
        Operator::In,
        &["b"],
    );
    assert_eq!(r.key(), ZONE);
    let labels: Labels = [("beta.kubernetes.io/arch".to_string(), "arm64".to_string())]
        .into_iter()
        .collect();
    let from_selector = Requirements::from_labels(&labels);
    assert!(from_selector.get("kubernetes.io/arch").is_some());
    assert!(from_selector.get("beta.kubernetes.io/arch").is_none());
    assert_eq!(
        req("example.com/team", Operator::In, &["a"]).key(),
        "example.com/team"
    );
}
