//! Fuzzing the wire door with proptest-driven structured inputs: a valid `PlanRequest` with
//! hostile values dropped into the fields the validation guards. No input may panic or hang
//! the conversion or the plan, and every refusal names a field. Bounded: 96 cases (set
//! `PROPTEST_CASES` for longer runs).

use planner::model::PlanOptions;
use planner_wire::fixtures;
use planner_wire::{CatalogChoice, to_model, to_wire};
use proptest::prelude::*;

/// One hostile change to a request.
#[derive(Clone, Debug)]
enum Change {
    Quantity(usize, String),
    Weight(i32),
    ExpireAfter(i64),
    ConsolidateAfter(i64),
    MinValues(u32),
    RequirementKey(String),
    BudgetNodes(String),
    BudgetSchedule(String, i64),
    DuplicatePod(usize),
    Price(f64),
    Now(i64),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (
            0usize..8,
            prop_oneof![
                "-?[0-9]{1,25}(m|k|Ki|Mi|Gi|Ti|Pi|Ei|e9|E)?",
                Just(".inf".to_string()),
                Just("NaN".to_string()),
                ".{0,12}",
            ]
        )
            .prop_map(|(i, q)| Change::Quantity(i, q)),
        any::<i32>().prop_map(Change::Weight),
        any::<i64>().prop_map(Change::ExpireAfter),
        any::<i64>().prop_map(Change::ConsolidateAfter),
        any::<u32>().prop_map(Change::MinValues),
        prop_oneof![
            Just("karpenter.sh/nodepool".to_string()),
            Just("kubernetes.io/hostname".to_string()),
            Just("karpenter.sh/anything".to_string()),
            "[a-z./-]{0,20}",
        ]
        .prop_map(Change::RequirementKey),
        "-?[0-9]{0,12}%?".prop_map(Change::BudgetNodes),
        ("[0-9*/,-]{1,4}( [0-9*/,-]{1,4}){0,5}", any::<i64>())
            .prop_map(|(s, d)| Change::BudgetSchedule(s, d)),
        (0usize..8).prop_map(Change::DuplicatePod),
        any::<f64>().prop_map(Change::Price),
        any::<i64>().prop_map(Change::Now),
    ]
}

fn apply(req: &mut proto::v1::PlanRequest, c: &Change) {
    let s = req.snapshot.as_mut().expect("snapshot");
    let pool = s.node_pools.first_mut();
    match c {
        Change::Quantity(i, q) => {
            let n = s.pods.len();
            s.pods[i % n].requests.insert("cpu".into(), q.clone());
        }
        Change::Weight(w) => {
            if let Some(p) = pool {
                p.weight = Some(*w);
            }
        }
        Change::ExpireAfter(v) => {
            if let Some(p) = pool {
                p.expire_after = Some(*v);
            }
        }
        Change::ConsolidateAfter(v) => {
            if let Some(d) = pool.and_then(|p| p.disruption.as_mut()) {
                d.consolidate_after = Some(*v);
            }
        }
        Change::MinValues(m) => {
            if let Some(r) = pool.and_then(|p| p.requirements.first_mut()) {
                r.min_values = Some(*m);
            }
        }
        Change::RequirementKey(k) => {
            if let Some(r) = pool.and_then(|p| p.requirements.first_mut()) {
                r.key = k.clone();
            }
        }
        Change::BudgetNodes(n) => {
            if let Some(b) = pool
                .and_then(|p| p.disruption.as_mut())
                .and_then(|d| d.budgets.first_mut())
            {
                b.nodes = n.clone();
            }
        }
        Change::BudgetSchedule(sched, d) => {
            if let Some(b) = pool
                .and_then(|p| p.disruption.as_mut())
                .and_then(|d| d.budgets.first_mut())
            {
                b.schedule = Some(sched.clone());
                b.duration = Some(*d);
            }
        }
        Change::DuplicatePod(i) => {
            let n = s.pods.len();
            let p = s.pods[i % n].clone();
            s.pods.push(p);
        }
        Change::Price(p) => {
            if let Some(proto::v1::plan_request::CatalogSource::Catalog(c)) =
                req.catalog_source.as_mut()
                && let Some(o) = c
                    .instance_types
                    .first_mut()
                    .and_then(|t| t.offerings.first_mut())
            {
                o.price = *p;
            }
        }
        Change::Now(now) => req.now = *now,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn hostile_requests_are_planned_or_refused_naming_a_field(
        changes in proptest::collection::vec(change(), 1..4)
    ) {
        let mut req = to_wire::plan_request(
            &fixtures::snapshot(8),
            &CatalogChoice::Inline(fixtures::catalog()),
            &PlanOptions::default(),
        );
        for c in &changes {
            apply(&mut req, c);
        }
        match to_model::plan_request(req) {
            Err(e) => {
                prop_assert!(!e.field().is_empty(), "no field in {e}");
                prop_assert!(!e.reason().is_empty(), "no reason in {e}");
            }
            Ok(input) => {
                let catalog = match input.catalog {
                    CatalogChoice::Inline(c) => c,
                    _ => fixtures::catalog(),
                };
                // Planning a valid snapshot must not panic, whatever the values.
                let plan = planner::plan(&input.snapshot, &catalog, &input.options);
                prop_assert!(plan.summary.pending_pods <= 16);
            }
        }
    }
}
