//! The planner's decode cost of a 10,000-pod snapshot: bytes → `PlanRequest` (prost) → model
//! (`to_model::plan_request`), with the resource amounts as Kubernetes quantities (text, what a
//! foreign client sends and the planner parses) and as milli-units (what k8s-reader sends,
//! parsed once in the watcher or `dovetail plan`). Prints figures; asserts nothing.
//!
//! Run: `cargo bench --workspace --bench decode`

// A bench measures wall time; the clock ban is for the services and the planner core.
#![allow(clippy::disallowed_methods, missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use planner::model::PlanOptions;
use planner_wire::{CatalogChoice, fixtures, to_model, to_wire};
use prost::Message;
use proto::v1 as pb;

const PODS: usize = 10_000;
const RUNS: u32 = 30;

fn time<T>(mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let mut best = Duration::MAX;
    let mut total = Duration::ZERO;
    for _ in 0..RUNS {
        let start = Instant::now();
        black_box(f());
        let d = start.elapsed();
        best = best.min(d);
        total += d;
    }
    (best, total / RUNS)
}

fn to_milli(text: &mut BTreeMap<String, String>, milli: &mut BTreeMap<String, i64>) {
    for (k, v) in std::mem::take(text) {
        milli.insert(k, common::quantity::parse_milli(&v).expect("a quantity"));
    }
}

/// The request as k8s-reader shapes it: every resource map in milli-units.
fn milli_form(mut req: pb::PlanRequest) -> pb::PlanRequest {
    let s = req.snapshot.as_mut().expect("snapshot");
    for p in &mut s.pods {
        to_milli(&mut p.requests, &mut p.requests_milli);
    }
    for n in &mut s.nodes {
        to_milli(&mut n.allocatable, &mut n.allocatable_milli);
        to_milli(&mut n.capacity, &mut n.capacity_milli);
    }
    for c in &mut s.node_claims {
        to_milli(&mut c.requests, &mut c.requests_milli);
        to_milli(&mut c.capacity, &mut c.capacity_milli);
        to_milli(&mut c.allocatable, &mut c.allocatable_milli);
    }
    req
}

fn main() {
    let text = to_wire::plan_request(
        &fixtures::snapshot(PODS),
        &CatalogChoice::Inline(fixtures::catalog()),
        &PlanOptions::default(),
    );
    let milli = milli_form(text.clone());
    for (name, req) in [("quantities (text)", text), ("milli-units", milli)] {
        let bytes = req.encode_to_vec();
        let (best_wire, mean_wire) =
            time(|| pb::PlanRequest::decode(bytes.as_slice()).expect("decodes"));
        let (best_model, mean_model) = time(|| to_model::plan_request(req.clone()).expect("valid"));
        let (best_clone, _) = time(|| req.clone());
        println!(
            "{PODS} pods, {name}: {} bytes; prost decode best {:.2} ms, mean {:.2} ms; \
             to_model best {:.2} ms, mean {:.2} ms (of which cloning the request {:.2} ms)",
            bytes.len(),
            ms(best_wire),
            ms(mean_wire),
            ms(best_model),
            ms(mean_model),
            ms(best_clone),
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
