//! Postgres restarted under a running actuator: submissions during the outage fail with
//! UNAVAILABLE (nothing half-recorded), the worker waits, and after the restart everything
//! resumes and nothing is lost or launched twice.
//!
//! The test runs its own Postgres (`initdb` + `pg_ctl` from /usr/lib/postgresql/*/bin, as the
//! `postgres` user when run as root) on a free loopback port, so that other tests using the
//! shared server on 127.0.0.1:5432 are never disturbed.

mod support;

use std::path::Path;
use std::time::Duration;

use actuator::ledger::ClaimState;
use support::TestDb;
use support::process::{Process, cloud_file, instances, request, statuses, wait_all};
use test_support::postgres::PrivateServer;

fn remove(p: &Path) {
    let _ = std::fs::remove_dir_all(p.parent().expect("dir"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_run_loses_nothing() {
    let pg = PrivateServer::start().expect("a private Postgres server");
    let db = TestDb::postgres_at(&pg.admin_url()).await;
    let cloud = cloud_file(&db, "pg-restart");
    let p = Process::start(db.url(), &cloud, None).await;
    let mut c = p.client().await;

    let first = ["one-1", "one-2", "one-3"];
    let r = c
        .submit(request("plan-1", &[], &first))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted"; 3]);
    {
        let ledger = db.ledger().await;
        wait_all(&*ledger, 3, ClaimState::Launched).await;
        ledger.close().await;
    }

    pg.down().expect("pg_ctl stop");
    // While the ledger is down nothing is recorded, and the caller is told to retry.
    let second = ["two-1", "two-2"];
    let e = c
        .submit(request("plan-2", &first, &second))
        .await
        .expect_err("ledger down");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    pg.up().expect("pg_ctl start");

    // The same plan, retried, is recorded once the database is back.
    let mut accepted = None;
    for _ in 0..100 {
        match c.submit(request("plan-2", &first, &second)).await {
            Ok(r) => {
                accepted = Some(r.into_inner());
                break;
            }
            Err(e) => {
                assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let r = accepted.expect("accepted after the restart");
    assert_eq!(statuses(&r), ["Accepted"; 2]);
    let ledger = db.ledger().await;
    wait_all(&*ledger, 5, ClaimState::Launched).await;
    let (per_claim, total) = instances(&cloud);
    assert_eq!(total, 5, "{per_claim:?}");
    assert!(per_claim.values().all(|n| *n == 1), "{per_claim:?}");
    for name in first {
        assert_eq!(
            ledger.events(name).await.expect("events").len(),
            3,
            "{name}"
        );
    }
    assert_eq!(p.sigterm().await.code(), Some(0));
    ledger.close().await;
    remove(&cloud);
    db.drop().await;
}
