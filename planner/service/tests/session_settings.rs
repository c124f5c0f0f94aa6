//! `Planner.Session` carries the snapshot's zonal shift and Karpenter's settings into every
//! plan of the session, and the real planner's answer says which options it used.

mod support;

use std::sync::Arc;
use std::time::Duration;

use planner::model::ClusterSnapshot;
use planner_service::metrics::Metrics;
use planner_wire::fixtures;
use proto::v1 as pb;
use support::*;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

fn snapshot_update(sequence: u64, shifted: &[&str]) -> pb::ClusterUpdate {
    let mut s = planner_wire::to_wire::snapshot(&fixtures::snapshot(2));
    s.shifted_zones = shifted.iter().map(|z| z.to_string()).collect();
    pb::ClusterUpdate {
        sequence,
        update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
            snapshot: Some(s),
            catalog_source: None,
            options: Some(pb::PlanOptions {
                reserved_enis: 1,
                vm_memory_overhead_percent: Some(0.1),
                ..pb::PlanOptions::default()
            }),
        })),
    }
}

fn close(sequence: u64) -> pb::ClusterUpdate {
    pb::ClusterUpdate {
        sequence,
        update: Some(pb::cluster_update::Update::CloseBatch(pb::CloseBatch {
            now: 1_700_000_000,
        })),
    }
}

async fn first_plan(server: &Server, updates: Vec<pb::ClusterUpdate>) -> pb::PlanResponse {
    let (tx, rx) = mpsc::channel(16);
    let mut client = pb::planner_client::PlannerClient::new(channel(server).await);
    let mut stream = client
        .session(ReceiverStream::new(rx))
        .await
        .expect("session opens")
        .into_inner();
    for u in updates {
        tx.send(u).await.expect("send");
    }
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an answer in time")
        .expect("the stream is open")
        .expect("a plan")
}

#[tokio::test]
async fn the_sessions_zonal_shift_and_settings_reach_every_plan() {
    // A plan function that reports what the planner was given.
    let seen: planner_service::api::PlanFn = Arc::new(|s: &ClusterSnapshot, _, o| {
        let mut p = fixtures::plan();
        p.notes = vec![
            format!("shifted={}", s.shifted_zones.join(",")),
            format!("reservedENIs={}", o.reserved_enis),
            format!("vm={}", o.vm_memory_overhead_percent.0),
        ];
        p
    });
    let metrics = Metrics::new();
    let server = start(
        config(service_shell::auth::Auth::Disabled),
        service(&metrics, Some(seen)),
        metrics,
    )
    .await;
    let p = first_plan(&server, vec![snapshot_update(1, &["us-east-1a"]), close(2)]).await;
    assert_eq!(p.notes, ["shifted=us-east-1a", "reservedENIs=1", "vm=0.1"]);

    // The real planner: the plan says which options it used.
    let metrics = Metrics::new();
    let server = start(
        config(service_shell::auth::Auth::Disabled),
        service(&metrics, None),
        metrics,
    )
    .await;
    let p = first_plan(&server, vec![snapshot_update(1, &[]), close(2)]).await;
    let used = p.options.expect("options used");
    assert_eq!(used.reserved_enis, 1);
    assert_eq!(used.vm_memory_overhead_percent, Some(0.1));
    assert_eq!(used.preference_policy, "Respect");
}
