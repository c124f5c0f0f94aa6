//! Three `dovetail-planner` processes on loopback behind one client: one is SIGKILLed and
//! another SIGTERMed while a stream of Plan calls runs. Every call succeeds, and health reports
//! SERVING for live replicas, NOT_SERVING for the one draining, and nothing for the dead one.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use integration_tests::binary;
use integration_tests::planner_process::PlannerProcess;
use planner::model::PlanOptions;
use planner_client::{ClientConfig, PlannerClient};
use planner_wire::CatalogChoice;
use planner_wire::fixtures;
use planner_wire::remote::RemotePlan;
use tonic_health::pb::health_check_response::ServingStatus;

const CALLERS: usize = 3;
/// Plans every phase must complete: progress, not throughput, is what this test is about.
const PER_PHASE: usize = 10;
/// How long a phase may take: generous, because CI machines may be loaded (2 cores, many tests).
const PROGRESS: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_calls_survive_a_killed_and_a_drained_replica() -> anyhow::Result<()> {
    let bin = binary("planner-service", "dovetail-planner")?;
    let args = ["--insecure-no-auth", "--drain-delay", "1500ms"];
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(PlannerProcess::start(&bin, &args).await?);
    }
    for r in &replicas {
        assert_eq!(r.health("").await?, ServingStatus::Serving);
        assert_eq!(
            r.health("dovetail.v1.Planner").await?,
            ServingStatus::Serving
        );
    }

    let client = PlannerClient::connect(ClientConfig::new(
        replicas.iter().map(PlannerProcess::endpoint).collect(),
    ))
    .await?;
    let snapshot = Arc::new(fixtures::snapshot(40));
    let expected = planner::plan(
        &snapshot,
        &planner::catalog::aws::builtin("us-east-1")?,
        &PlanOptions::default(),
    );

    // Callers plan in a loop until told to stop; every answer must be the in-process plan.
    // The number of answered calls; waiters wake on changes (no polling).
    let done = Arc::new(tokio::sync::watch::Sender::new(0usize));
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut callers = Vec::new();
    for _ in 0..CALLERS {
        let (client, snapshot, expected, done, stopping) = (
            client.clone(),
            snapshot.clone(),
            expected.clone(),
            done.clone(),
            stopping.clone(),
        );
        callers.push(tokio::spawn(async move {
            while !stopping.load(Ordering::SeqCst) {
                let plan = client
                    .plan(&snapshot, &CatalogChoice::Default, &PlanOptions::default())
                    .await?;
                anyhow::ensure!(plan == expected, "a replica answered a different plan");
                done.send_modify(|n| *n += 1);
            }
            anyhow::Ok(())
        }));
    }

    let wait_for = |n: usize| {
        let mut seen = done.subscribe();
        async move { seen.wait_for(|d| *d >= n).await.map(|_| ()) }
    };
    tokio::time::timeout(PROGRESS, wait_for(PER_PHASE)).await??;

    // SIGKILL replica 0 mid-run.
    replicas[0].child.start_kill()?;
    replicas[0].child.wait().await?;
    assert!(
        replicas[0].health("").await.is_err(),
        "a killed replica answers nothing"
    );
    let before = *done.borrow();
    tokio::time::timeout(PROGRESS, wait_for(before + PER_PHASE)).await??;
    for r in &replicas[1..] {
        assert_eq!(r.health("").await?, ServingStatus::Serving);
    }

    // SIGTERM replica 1: NOT_SERVING while it drains, then it exits cleanly. The health Watch
    // stream, opened before the signal, reports the change.
    let mut watch = replicas[1].health_watch("").await?;
    let first = watch.message().await?.map(|m| m.status());
    assert_eq!(first, Some(ServingStatus::Serving));
    replicas[1].terminate()?;
    let mut saw_not_serving = false;
    while let Some(m) = tokio::time::timeout(Duration::from_secs(30), watch.message()).await?? {
        if m.status() == ServingStatus::NotServing {
            saw_not_serving = true;
            break;
        }
    }
    assert!(saw_not_serving, "replica 1 never reported NOT_SERVING");
    // An open Watch stream would hold the graceful shutdown open.
    drop(watch);
    assert_eq!(replicas[2].health("").await?, ServingStatus::Serving);
    let status = tokio::time::timeout(Duration::from_secs(30), replicas[1].child.wait()).await??;
    assert!(status.success(), "a drained replica exits 0, got {status}");
    let before = *done.borrow();
    tokio::time::timeout(PROGRESS, wait_for(before + PER_PHASE)).await??;
    assert_eq!(replicas[2].health("").await?, ServingStatus::Serving);

    stopping.store(true, Ordering::SeqCst);
    for c in callers {
        c.await??;
    }
    assert!(*done.borrow() >= 3 * PER_PHASE);
    Ok(())
}
