//! Three `dovetail-planner` processes on loopback behind one client: one is SIGKILLed and
//! another SIGTERMed while a stream of Plan calls runs. Every call succeeds, and health reports
//! SERVING for live replicas, NOT_SERVING for the one draining, and nothing for the dead one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    let done = Arc::new(AtomicUsize::new(0));
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
                done.fetch_add(1, Ordering::SeqCst);
            }
            anyhow::Ok(())
        }));
    }

    let wait_for = |n: usize| {
        let done = done.clone();
        async move {
            while done.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait_for(20)).await?;

    // SIGKILL replica 0 mid-run.
    replicas[0].child.start_kill()?;
    replicas[0].child.wait().await?;
    assert!(
        replicas[0].health("").await.is_err(),
        "a killed replica answers nothing"
    );
    let before = done.load(Ordering::SeqCst);
    tokio::time::timeout(Duration::from_secs(60), wait_for(before + 20)).await?;
    for r in &replicas[1..] {
        assert_eq!(r.health("").await?, ServingStatus::Serving);
    }

    // SIGTERM replica 1: NOT_SERVING while it drains, then it exits cleanly.
    replicas[1].terminate()?;
    let mut saw_not_serving = false;
    for _ in 0..100 {
        match replicas[1].health("").await {
            Ok(ServingStatus::NotServing) => {
                saw_not_serving = true;
                break;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => anyhow::bail!("replica 1 stopped answering before NOT_SERVING: {e}"),
        }
    }
    assert!(saw_not_serving, "replica 1 never reported NOT_SERVING");
    assert_eq!(replicas[2].health("").await?, ServingStatus::Serving);
    let status = tokio::time::timeout(Duration::from_secs(30), replicas[1].child.wait()).await??;
    assert!(status.success(), "a drained replica exits 0, got {status}");
    let before = done.load(Ordering::SeqCst);
    tokio::time::timeout(Duration::from_secs(60), wait_for(before + 20)).await?;
    assert_eq!(replicas[2].health("").await?, ServingStatus::Serving);

    stopping.store(true, Ordering::SeqCst);
    for c in callers {
        c.await??;
    }
    assert!(done.load(Ordering::SeqCst) >= 60);
    Ok(())
}
