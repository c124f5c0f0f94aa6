//! The shared ledger suite: every test runs against Postgres (a fresh database on
//! 127.0.0.1:5432) and SQLite (a temporary file).

mod support;

use actuator::ledger::{ClaimState, InstanceRecord, Ledger, Outcome, Transition};
use support::{TestDb, plan};

/// Runs `$test(&dyn Ledger)` once per backend, each on a fresh database.
macro_rules! both_backends {
    ($($test:ident),* $(,)?) => {
        $(mod $test {
            #[tokio::test]
            async fn postgres() {
                let db = super::TestDb::postgres().await;
                super::$test(&*db.ledger().await).await;
                db.drop().await;
            }
            #[tokio::test]
            async fn sqlite() {
                let db = super::TestDb::sqlite();
                super::$test(&*db.ledger().await).await;
                db.drop().await;
            }
        })*
    };
}

both_backends!(
    submit_accepts_once_then_reports_duplicates,
    stale_plans_are_rejected_with_a_reason,
    claim_names_are_unique_across_keys,
    a_command_whose_claim_is_gone_launches_again_under_a_new_name,
    leases_are_exclusive_and_expire,
    transitions_record_instances_and_history,
    retries_release_the_lease_until_their_time,
    migrations_are_idempotent,
    one_claim_is_leased_by_name_whatever_its_state,
);

fn accepted(outcomes: &[(String, Outcome)]) -> usize {
    outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Accepted { .. }))
        .count()
}

async fn submit_accepts_once_then_reports_duplicates(l: &dyn Ledger) {
    let p = plan("plan-1", &[], &["a", "b"]);
    let first = l.submit(&p, 10).await.expect("submit");
    assert_eq!(accepted(&first), 2, "{first:?}");
    // The same plan again (a retried RPC): nothing new, and not stale either.
    let again = l.submit(&p, 20).await.expect("resubmit");
    assert_eq!(
        again,
        vec![
            (
                "key-a".to_string(),
                Outcome::Duplicate { claim: "a".into() }
            ),
            (
                "key-b".to_string(),
                Outcome::Duplicate { claim: "b".into() }
            ),
        ]
    );
    // The same key twice in one plan is one claim.
    let mut twice = plan("plan-2", &["a", "b"], &["c", "c"]);
    twice.launches[1].spec.name = "c2".into();
    let o = l.submit(&twice, 30).await.expect("submit twice");
    assert_eq!(accepted(&o), 1);
    assert_eq!(o[1].1, Outcome::Duplicate { claim: "c".into() });

    let claims = l.claims().await.expect("claims");
    assert_eq!(claims.len(), 3);
    let a = l.claim("a").await.expect("read").expect("a exists");
    assert_eq!(a.state, ClaimState::Requested);
    assert_eq!(a.plan_id, "plan-1");
    assert_eq!(a.client_token, actuator::launch::client_token("a", "key-a"));
    assert_eq!(a.spec, support::spec("a"));
    let events = l.events("a").await.expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].from, None);
    assert_eq!(events[0].to, ClaimState::Requested);
    assert!(events[0].detail.contains("plan-1"), "{:?}", events[0]);
    assert_eq!(l.counts().await.expect("counts")[&ClaimState::Requested], 3);
}

async fn stale_plans_are_rejected_with_a_reason(l: &dyn Ledger) {
    l.submit(&plan("plan-1", &[], &["a", "b"]), 10)
        .await
        .expect("submit");
    // A plan computed before a and b existed must not launch.
    let stale = l
        .submit(&plan("plan-2", &["a"], &["c"]), 20)
        .await
        .expect("submit");
    match &stale[0].1 {
        Outcome::Rejected { reason } => {
            assert!(reason.contains("stale plan"), "{reason}");
            assert!(reason.contains('b') && !reason.contains("a,"), "{reason}");
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(l.claim("c").await.expect("read").is_none());
    // Seeing both, it launches; a rejected key is accepted later from a fresh plan.
    let fresh = l
        .submit(&plan("plan-3", &["a", "b"], &["c"]), 30)
        .await
        .expect("submit");
    assert_eq!(accepted(&fresh), 1);
    // Claims past launched are not in flight and need not be listed.
    let owner = "w1";
    l.acquire(owner, &[ClaimState::Requested], 40, 1_000, 10)
        .await
        .expect("acquire");
    for name in ["a", "b", "c"] {
        l.transition(
            &Transition::new(
                name,
                owner,
                ClaimState::Requested,
                ClaimState::Failed,
                "test",
            ),
            50,
        )
        .await
        .expect("fail");
    }
    let later = l
        .submit(&plan("plan-4", &[], &["d"]), 60)
        .await
        .expect("submit");
    assert_eq!(accepted(&later), 1, "{later:?}");
}

async fn claim_names_are_unique_across_keys(l: &dyn Ledger) {
    l.submit(&plan("plan-1", &[], &["a"]), 10)
        .await
        .expect("submit");
    let mut other = plan("plan-2", &["a"], &["a"]);
    other.launches[0].idempotency_key = "another-key".into();
    let o = l.submit(&other, 20).await.expect("submit");
    assert!(
        matches!(&o[0].1, Outcome::Rejected { reason } if reason.contains("already in the ledger")),
        "{o:?}"
    );
}

async fn leases_are_exclusive_and_expire(l: &dyn Ledger) {
    l.submit(&plan("plan-1", &[], &["a", "b", "c"]), 10)
        .await
        .expect("submit");
    let states = [ClaimState::Requested, ClaimState::Launching];
    let w1 = l.acquire("w1", &states, 100, 1_000, 2).await.expect("w1");
    assert_eq!(
        w1.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(w1.iter().all(|c| c.lease_owner.as_deref() == Some("w1")));
    let w2 = l.acquire("w2", &states, 200, 1_000, 10).await.expect("w2");
    assert_eq!(
        w2.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["c"]
    );
    assert!(
        l.acquire("w3", &states, 300, 1_000, 10)
            .await
            .expect("w3")
            .is_empty()
    );

    // w1 dies; after its lease expires (at 1_100) w3 takes a and b over.
    let w3 = l
        .acquire("w3", &states, 1_101, 1_000, 10)
        .await
        .expect("w3");
    assert_eq!(
        w3.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    // w1 wakes up: every write it tries is refused.
    let e = l
        .transition(
            &Transition::new(
                "a",
                "w1",
                ClaimState::Requested,
                ClaimState::Launching,
                "late",
            ),
            1_102,
        )
        .await
        .expect_err("lease lost");
    assert!(e.to_string().contains("lease lost"), "{e}");
    assert!(l.renew("a", "w1", 1_102, 5_000).await.is_err());
    l.renew("a", "w3", 1_102, 5_000).await.expect("w3 renews");
    // An expired lease cannot be renewed by its old holder either.
    assert!(l.renew("c", "w2", 1_300, 9_000).await.is_err());

    assert_eq!(l.release_all("w3").await.expect("release"), 2);
    let again = l
        .acquire("w4", &states, 1_103, 1_000, 10)
        .await
        .expect("w4");
    assert_eq!(again.len(), 2, "released claims are free at once");
}

async fn transitions_record_instances_and_history(l: &dyn Ledger) {
    l.submit(&plan("plan-1", &[], &["a"]), 10)
        .await
        .expect("submit");
    l.acquire("w", &[ClaimState::Requested], 20, 1_000, 1)
        .await
        .expect("acquire");
    l.transition(
        &Transition::new(
            "a",
            "w",
            ClaimState::Requested,
            ClaimState::Launching,
            "launch started",
        ),
        30,
    )
    .await
    .expect("launching");
    // A write expecting the old state is refused.
    assert!(
        l.transition(
            &Transition::new(
                "a",
                "w",
                ClaimState::Requested,
                ClaimState::Launching,
                "again"
            ),
            31,
        )
        .await
        .is_err()
    );
    let mut t = Transition::new(
        "a",
        "w",
        ClaimState::Launching,
        ClaimState::Launched,
        "created",
    );
    t.instance = Some(InstanceRecord {
        instance_id: "i-1".into(),
        provider_id: "aws:///us-east-1a/i-1".into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: "on-demand".into(),
    });
    t.release = true;
    l.transition(&t, 40).await.expect("launched");
    let a = l.claim("a").await.expect("read").expect("a");
    assert_eq!(a.state, ClaimState::Launched);
    assert_eq!(a.instance, t.instance);
    assert_eq!(a.lease_owner, None);
    assert_eq!(a.updated_at, 40);
    let history: Vec<_> = l
        .events("a")
        .await
        .expect("events")
        .into_iter()
        .map(|e| (e.from, e.to, e.actor, e.at))
        .collect();
    assert_eq!(
        history,
        vec![
            (None, ClaimState::Requested, "submit".into(), 10),
            (
                Some(ClaimState::Requested),
                ClaimState::Launching,
                "w".into(),
                30
            ),
            (
                Some(ClaimState::Launching),
                ClaimState::Launched,
                "w".into(),
                40
            ),
        ]
    );
    assert!(l.writes() >= 6, "writes counted: {}", l.writes());
}

async fn retries_release_the_lease_until_their_time(l: &dyn Ledger) {
    l.submit(&plan("plan-1", &[], &["a"]), 10)
        .await
        .expect("submit");
    let states = [ClaimState::Requested];
    l.acquire("w", &states, 20, 1_000, 1)
        .await
        .expect("acquire");
    let mut t = Transition::new(
        "a",
        "w",
        ClaimState::Requested,
        ClaimState::Requested,
        "retry",
    );
    t.retry_at = Some(500);
    t.failure_reason = Some("unavailable".into());
    l.transition(&t, 30).await.expect("defer");
    let a = l.claim("a").await.expect("read").expect("a");
    assert_eq!(
        (a.attempts, a.retry_at, a.lease_owner.clone()),
        (1, 500, None)
    );
    assert_eq!(a.failure_reason.as_deref(), Some("unavailable"));
    assert!(
        l.acquire("v", &states, 499, 1_000, 1)
            .await
            .expect("early")
            .is_empty()
    );
    assert_eq!(
        l.acquire("v", &states, 500, 1_000, 1)
            .await
            .expect("due")
            .len(),
        1
    );
}

async fn migrations_are_idempotent(l: &dyn Ledger) {
    l.migrate().await.expect("second run is a no-op");
    assert!(l.claims().await.expect("claims").is_empty());
    assert!(matches!(l.backend(), "postgres" | "sqlite"));
}

async fn one_claim_is_leased_by_name_whatever_its_state(l: &dyn Ledger) {
    l.submit(&plan("plan-1", &[], &["x"]), 1)
        .await
        .expect("submit");
    let a = l.acquire_claim("a", "x", 10, 1_000).await.expect("acquire");
    assert_eq!(a.map(|c| c.lease_owner), Some(Some("a".to_string())));
    assert!(
        l.acquire_claim("b", "x", 20, 1_000)
            .await
            .expect("acquire")
            .is_none(),
        "held by a"
    );
    assert!(
        l.acquire("b", &[ClaimState::Requested], 20, 1_000, 10)
            .await
            .expect("acquire")
            .is_empty(),
        "held by a for the batch lease too"
    );
    assert!(
        l.acquire_claim("a", "x", 20, 1_000)
            .await
            .expect("acquire")
            .is_some(),
        "its own"
    );
    let b = l
        .acquire_claim("b", "x", 2_000, 1_000)
        .await
        .expect("acquire");
    assert_eq!(
        b.map(|c| (c.lease_owner, c.lease_expires_at)),
        Some((Some("b".to_string()), Some(3_000))),
        "expired leases are taken over"
    );
    assert!(
        l.acquire_claim("b", "nope", 2_000, 1_000)
            .await
            .expect("acquire")
            .is_none()
    );
}

/// The history cannot be rewritten, even with plain SQL.
async fn history_is_append_only(db: &TestDb) {
    let l = db.ledger().await;
    l.submit(&plan("plan-1", &[], &["a"]), 10)
        .await
        .expect("submit");
    let (update, delete) = match db {
        TestDb::Postgres(pg) => {
            let pool = sqlx::PgPool::connect(&pg.url).await.expect("connect");
            let u = sqlx::query("UPDATE claim_events SET detail = 'forged'")
                .execute(&pool)
                .await;
            let d = sqlx::query("DELETE FROM claim_events").execute(&pool).await;
            (u.map(|_| ()), d.map(|_| ()))
        }
        TestDb::Sqlite { url, .. } => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("connect");
            let u = sqlx::query("UPDATE claim_events SET detail = 'forged'")
                .execute(&pool)
                .await;
            let d = sqlx::query("DELETE FROM claim_events").execute(&pool).await;
            (u.map(|_| ()), d.map(|_| ()))
        }
    };
    for r in [update, delete] {
        let e = r.expect_err("refused");
        assert!(e.to_string().contains("append-only"), "{e}");
    }
    assert_eq!(l.events("a").await.expect("events").len(), 1);
    l.close().await;
}

#[tokio::test]
async fn history_is_append_only_postgres() {
    let db = TestDb::postgres().await;
    history_is_append_only(&db).await;
    db.drop().await;
}

#[tokio::test]
async fn history_is_append_only_sqlite() {
    let db = TestDb::sqlite();
    history_is_append_only(&db).await;
    db.drop().await;
}

/// Ends a claim (`requested` → `failed`), as a NodeClaim deleted before its pods bound does.
async fn end(l: &dyn Ledger, name: &str, at: i64) {
    l.acquire_claim("w1", name, at, 1_000)
        .await
        .expect("lease")
        .expect("leased");
    l.transition(
        &Transition::new(
            name,
            "w1",
            ClaimState::Requested,
            ClaimState::Failed,
            "gone",
        ),
        at,
    )
    .await
    .expect("fail");
}

/// A claim that is gone never blocks a new one for the same pods: the planner proposes the
/// same claim again (same content, same idempotency key, same name) while its pods are still
/// pending, and Karpenter would create a new NodeClaim with a fresh name (`generateName:
/// <nodepool>-`, `pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go` of
/// kubernetes-sigs/karpenter). Each launch of the key gets its own name; a live one still
/// makes the key a duplicate; a name held by a live claim of another key still refuses.
async fn a_command_whose_claim_is_gone_launches_again_under_a_new_name(l: &dyn Ledger) {
    let first = l
        .submit(&plan("plan-1", &[], &["a"]), 10)
        .await
        .expect("submit");
    assert_eq!(accepted(&first), 1, "{first:?}");
    end(l, "a", 20).await;

    let again = l
        .submit(&plan("plan-2", &[], &["a"]), 30)
        .await
        .expect("submit");
    let Outcome::Accepted { claim: second } = &again[0].1 else {
        panic!("accepted again, got {again:?}");
    };
    assert_ne!(second, "a", "a fresh name");
    assert_eq!(again[0].0, first[0].0, "reported under the command's key");
    let c = l.claim(second).await.expect("read").expect("claim");
    assert_eq!(c.state, ClaimState::Requested);
    assert_eq!(c.spec.name, *second);
    assert_ne!(
        c.client_token,
        l.claim("a").await.expect("read").expect("a").client_token
    );
    // While the new claim lives, the key is a duplicate of it.
    let dup = l
        .submit(&plan("plan-3", &[second.as_str()], &["a"]), 40)
        .await
        .expect("submit");
    assert_eq!(
        dup[0].1,
        Outcome::Duplicate {
            claim: second.clone()
        }
    );

    // Gone again: a third name.
    end(l, second, 50).await;
    let third = l
        .submit(&plan("plan-4", &[], &["a"]), 60)
        .await
        .expect("submit");
    let Outcome::Accepted { claim: third } = &third[0].1 else {
        panic!("accepted a third time, got {third:?}");
    };
    assert!(third != "a" && third != second, "{third}");

    // Another key whose planned name is a gone claim's: accepted under a generated name.
    let mut other = plan("plan-5", &[third.as_str()], &["a"]);
    other.launches[0].idempotency_key = "another-key".into();
    let o = l.submit(&other, 70).await.expect("submit");
    let Outcome::Accepted { claim: fourth } = &o[0].1 else {
        panic!("accepted, got {o:?}");
    };
    assert!(
        !["a", second.as_str(), third.as_str()].contains(&fourth.as_str()),
        "{fourth}"
    );
}

/// Ledger throughput: 10,000 claims recorded through [`Ledger::submit`], the code
/// the actuator's `Submit` runs, into a fresh Postgres database (127.0.0.1:5432 or
/// `DOVETAIL_TEST_POSTGRES`), then into SQLite for comparison. Two shapes: one plan of 10,000
/// launches (a 10,000-pod burst planned at once), and 100 plans of 100 whose bases list every
/// claim before them (a planner that saw them in flight), with each plan's retry (all
/// duplicates) measured too. Prints claims per second and statements per claim; asserts only
/// that every claim was recorded. `cargo nextest run --workspace --run-ignored ignored-only -E
/// 'test(ledger_records_10000_claims_figures)' --no-capture`.
#[tokio::test]
#[ignore = "benchmark: prints figures"]
async fn ledger_records_10000_claims_figures() {
    const CLAIMS: usize = 10_000;
    const PER_PLAN: usize = 100;
    let names: Vec<String> = (0..CLAIMS).map(|i| format!("default-{i:05}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    for backend in ["postgres", "sqlite"] {
        // One plan of 10,000.
        let db = if backend == "postgres" {
            TestDb::postgres().await
        } else {
            TestDb::sqlite()
        };
        let l = db.ledger().await;
        let w0 = l.writes();
        let t = tokio::time::Instant::now();
        let out = l
            .submit(&plan("plan-all", &[], &refs), 1)
            .await
            .expect("submit");
        let one = t.elapsed();
        assert_eq!(accepted(&out), CLAIMS);
        let writes_one = l.writes() - w0;
        let t = tokio::time::Instant::now();
        let again = l
            .submit(&plan("plan-all", &[], &refs), 2)
            .await
            .expect("resubmit");
        let dup = t.elapsed();
        assert_eq!(accepted(&again), 0);
        l.close().await;
        db.drop().await;

        // 100 plans of 100, each seeing the claims before it in flight, each sent twice.
        let db = if backend == "postgres" {
            TestDb::postgres().await
        } else {
            TestDb::sqlite()
        };
        let l = db.ledger().await;
        let mut recording = std::time::Duration::ZERO;
        let mut retrying = std::time::Duration::ZERO;
        for (p, chunk) in refs.chunks(PER_PLAN).enumerate() {
            let s = plan(&format!("plan-{p}"), &refs[..p * PER_PLAN], chunk);
            let t = tokio::time::Instant::now();
            let out = l.submit(&s, 1).await.expect("submit");
            recording += t.elapsed();
            assert_eq!(accepted(&out), chunk.len(), "plan {p}: {:?}", out.first());
            let t = tokio::time::Instant::now();
            l.submit(&s, 2).await.expect("resubmit");
            retrying += t.elapsed();
        }
        assert_eq!(l.claims().await.expect("claims").len(), CLAIMS);
        l.close().await;
        db.drop().await;

        let rate = |d: std::time::Duration| CLAIMS as f64 / d.as_secs_f64().max(1e-9);
        println!("== ledger throughput ({backend}), {CLAIMS} claims");
        println!(
            "   1 plan of {CLAIMS}:        {:>8.0} claims/s ({:.2} s; {:.3} statements/claim); its retry: {:.2} s",
            rate(one),
            one.as_secs_f64(),
            writes_one as f64 / CLAIMS as f64,
            dup.as_secs_f64()
        );
        println!(
            "   {} plans of {PER_PLAN}:       {:>8.0} claims/s ({:.2} s); their retries: {:.2} s",
            CLAIMS / PER_PLAN,
            rate(recording),
            recording.as_secs_f64(),
            retrying.as_secs_f64()
        );
    }
}
