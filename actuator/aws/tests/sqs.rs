//! The interruption queue through the real AWS SDK against moto_server's SQS on a loopback
//! port: the documented EventBridge bodies (tests/fixtures/interruption/) sent to a real queue
//! are received, parsed and deleted; garbled and unknown bodies arrive as `Unreadable` values
//! (to be counted and deleted, never a panic); a message not deleted comes back after its
//! visibility timeout; the queue is found by name or URL.
//!
//! What moto cannot show: nothing feeds the queue (EventBridge rules are not evaluated), so the
//! tests send the bodies; SQS's at-least-once duplicates without a visibility timeout passing
//! and the 20 s long poll (tests wait 1 s) are not exercised.

use std::collections::BTreeMap;
use std::time::Duration;

use cloud::{Error, InstanceState, InterruptionKind, InterruptionQueue, Message, Unreadable};
use cloud_aws::SqsQueue;
use cloud_aws::interruption::fixtures;
use cloud_aws::testing::{self, MotoServer};

/// Receives until `n` messages came (or 10 tries of a one-second long poll), by message ID.
async fn receive_n(queue: &SqsQueue, n: usize) -> BTreeMap<String, Message> {
    let mut out = BTreeMap::new();
    for _ in 0..10 {
        for m in queue.receive_messages(10).await.expect("ReceiveMessage") {
            out.insert(m.id.clone(), m);
        }
        if out.len() >= n {
            break;
        }
    }
    out
}

#[tokio::test]
async fn documented_bodies_are_received_parsed_and_deleted() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let queue = testing::create_queue(&moto.config(), "dovetail-interruptions", 2).await;
    assert!(
        queue.url().ends_with("/dovetail-interruptions"),
        "{}",
        queue.url()
    );

    let mut sent = BTreeMap::new();
    for (name, _) in fixtures::ALL {
        let id = testing::send(&queue, &fixtures::body(name)).await;
        sent.insert(id, *name);
    }
    let garbled = testing::send(&queue, "{\"source\": \"aws.ec2\", \"detail-type\": ").await;
    let got = receive_n(&queue, sent.len() + 1).await;
    assert_eq!(got.len(), sent.len() + 1, "every message arrives once");

    let kinds: BTreeMap<&str, std::result::Result<(InterruptionKind, Vec<String>), Unreadable>> =
        sent.iter()
            .map(|(id, name)| {
                let m = &got[id];
                (*name, m.content.clone().map(|n| (n.kind, n.instance_ids)))
            })
            .collect();
    assert_eq!(
        kinds["spot_interruption.json"],
        Ok((
            InterruptionKind::SpotInterruptionWarning,
            vec!["i-1234567890abcdef0".to_string()]
        ))
    );
    assert_eq!(
        kinds["rebalance_recommendation.json"],
        Ok((
            InterruptionKind::RebalanceRecommendation,
            vec!["i-1234567890abcdef0".to_string()]
        ))
    );
    assert_eq!(
        kinds["scheduled_change.json"],
        Ok((
            InterruptionKind::ScheduledChange,
            vec![
                "i-1234567890abcdef0".to_string(),
                "i-0fedcba0987654321".to_string()
            ]
        ))
    );
    assert_eq!(
        kinds["state_change_stopping.json"],
        Ok((
            InterruptionKind::Stopped { done: false },
            vec!["i-abcd1111".to_string()]
        ))
    );
    assert_eq!(
        kinds["state_change_terminated.json"],
        Ok((
            InterruptionKind::StateChange(InstanceState::Terminated),
            vec!["i-abcd1111".to_string()]
        ))
    );
    assert!(matches!(
        kinds["state_change_running.json"],
        Err(Unreadable::Unknown { .. })
    ));
    assert!(matches!(
        kinds["health_issue_rds.json"],
        Err(Unreadable::Unknown { .. })
    ));
    assert!(
        matches!(&got[&garbled].content, Err(Unreadable::Garbled { reason }) if reason.contains("not JSON")),
        "{:?}",
        got[&garbled].content
    );

    for m in got.values() {
        queue
            .delete(&m.receipt_handle)
            .await
            .expect("DeleteMessage");
    }
    // Deleting twice succeeds (a redelivered message may be deleted by an earlier handle).
    let first = got.values().next().expect("one");
    queue
        .delete(&first.receipt_handle)
        .await
        .expect("a second DeleteMessage");
    // Past the visibility timeout nothing comes back: the messages are gone, not hidden.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        queue
            .receive_messages(10)
            .await
            .expect("receive")
            .is_empty()
    );
}

#[tokio::test]
async fn a_message_not_deleted_comes_back_after_its_visibility_timeout() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let queue = testing::create_queue(&moto.config(), "redelivery", 1).await;
    let id = testing::send(&queue, &fixtures::body("spot_interruption.json")).await;
    let first = receive_n(&queue, 1).await;
    assert_eq!(first.keys().collect::<Vec<_>>(), [&id]);
    // Hidden while in flight.
    assert!(
        queue
            .receive_messages(10)
            .await
            .expect("receive")
            .is_empty()
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let again = receive_n(&queue, 1).await;
    let m = again.get(&id).expect("redelivered");
    assert_eq!(m.content, first[&id].content);
    queue.delete(&m.receipt_handle).await.expect("delete");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        queue
            .receive_messages(10)
            .await
            .expect("receive")
            .is_empty()
    );
}

#[tokio::test]
async fn the_queue_is_found_by_name_or_url_and_a_missing_name_is_not_found() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let config = moto.config();
    let queue = testing::create_queue(&config, "by-url", 5).await;
    let by_url = SqsQueue::new(&config, queue.url())
        .await
        .expect("by URL")
        .with_wait(Duration::from_secs(1));
    assert_eq!(by_url.url(), queue.url());
    let id = testing::send(&queue, &fixtures::body("rebalance_recommendation.json")).await;
    let got = receive_n(&by_url, 1).await;
    assert!(got.contains_key(&id));

    match SqsQueue::new(&config, "no-such-queue").await {
        Err(Error::NotFound { provider_id }) => assert!(provider_id.contains("no-such-queue")),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert!(matches!(
        SqsQueue::new(&config, " ").await,
        Err(Error::InvalidRequest { .. })
    ));
    // SQS messages carry no zone: the event API that needs one is refused, naming the queue.
    match queue.receive(10).await {
        Err(Error::InvalidRequest { reason }) => assert!(reason.contains("receive_messages")),
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}
