//! Bench: submit → create sent, for 1,000 claims, on SQLite and Postgres.
//!
//! Ten plans of 100 launches each are submitted over the ledger API (each plan's basis lists
//! the claims of the plans before it, as a planner that saw them in flight would), then one
//! worker drives every claim to `launched` against the in-memory cloud stand-in. Printed per
//! backend: time per claim for the submissions, for the worker, and end to end (submit start →
//! last create sent), and ledger writes (statements) per claim.
//!
//! `cargo bench -p actuator --bench launch` (Postgres on 127.0.0.1:5432 or
//! `DOVETAIL_TEST_POSTGRES`; `-- --sqlite-only` skips it).

#![allow(clippy::disallowed_methods)] // A bench measures wall time.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use actuator::ledger::{ClaimState, Ledger};
use actuator::metrics::Metrics;
use actuator::standin::StandIn;
use actuator::worker::{Options, Worker};
use service_shell::clock::Clock;
use support::{TestDb, plan};

const CLAIMS: usize = 1_000;
const PER_PLAN: usize = 100;

struct Figures {
    submit: Duration,
    work: Duration,
    writes_submit: u64,
    writes_total: u64,
}

async fn run(db: &TestDb) -> Figures {
    let l: Arc<dyn Ledger> = db.ledger().await;
    let names: Vec<String> = (0..CLAIMS).map(|i| format!("bench-{i:04}")).collect();
    let cloud = Arc::new(StandIn::in_memory());
    let w0 = l.writes();
    let start = Instant::now();
    for (p, chunk) in names.chunks(PER_PLAN).enumerate() {
        let seen: Vec<&str> = names[..p * PER_PLAN].iter().map(String::as_str).collect();
        let new: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let outcomes = l
            .submit(&plan(&format!("plan-{p}"), &seen, &new), 1)
            .await
            .expect("submit");
        assert_eq!(outcomes.len(), PER_PLAN);
    }
    let submit = start.elapsed();
    let writes_submit = l.writes() - w0;
    let worker = Worker::new(
        l.clone(),
        cloud.clone(),
        Clock::new(),
        Metrics::new(),
        Options {
            owner: "bench".into(),
            ..Options::default()
        },
    );
    let work_start = Instant::now();
    while worker.round().await.expect("round") > 0 {}
    let work = work_start.elapsed();
    assert_eq!(cloud.create_calls() as usize, CLAIMS);
    let launched = l.counts().await.expect("counts")[&ClaimState::Launched];
    assert_eq!(launched as usize, CLAIMS);
    let writes_total = l.writes() - w0;
    l.close().await;
    Figures {
        submit,
        work,
        writes_submit,
        writes_total,
    }
}

fn print(backend: &str, f: &Figures) {
    let per = |d: Duration| d.as_secs_f64() * 1e6 / CLAIMS as f64;
    println!(
        "{backend:>8}: submit {:>7.0} µs/claim | worker {:>7.0} µs/claim | submit→create sent {:>7.0} µs/claim ({:.2} s for {CLAIMS}) | ledger writes/claim: {:.2} submit + {:.2} worker = {:.2}",
        per(f.submit),
        per(f.work),
        per(f.submit + f.work),
        (f.submit + f.work).as_secs_f64(),
        f.writes_submit as f64 / CLAIMS as f64,
        (f.writes_total - f.writes_submit) as f64 / CLAIMS as f64,
        f.writes_total as f64 / CLAIMS as f64,
    );
}

#[tokio::main]
async fn main() {
    let sqlite_only = std::env::args().any(|a| a == "--sqlite-only");
    println!(
        "submit → create sent for {CLAIMS} claims ({} plans of {PER_PLAN}), one worker, in-memory cloud",
        CLAIMS / PER_PLAN
    );
    let db = TestDb::sqlite();
    print("sqlite", &run(&db).await);
    db.drop().await;
    if !sqlite_only {
        let db = TestDb::postgres().await;
        print("postgres", &run(&db).await);
        db.drop().await;
    }
}
