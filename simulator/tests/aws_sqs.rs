//! The simulator's SQS face through the real aws-sdk-sqs: the simulated cloud's interruption
//! events arrive on the interruption queue as EventBridge-shaped bodies (what the actuator's
//! interruption loop reads on AWS), with SQS's long polling, visibility timeout, redelivery and
//! deletion.

mod support;

use std::time::Duration;

use anyhow::{Context, Result};
use cloud::{CapacityType, CloudProvider, LaunchRequest, OfferingKey, Tags};
use serde_json::Value;
use simulator::Simulation;
use simulator::aws::DEFAULT_INTERRUPTION_QUEUE;

async fn sqs(sim: &Simulation) -> aws_sdk_sqs::Client {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(sim.aws_endpoint())
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "simulated",
            "simulated",
            None,
            None,
            "test",
        ))
        .load()
        .await;
    aws_sdk_sqs::Client::new(&sdk)
}

async fn receive(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    visibility: i32,
) -> Result<Vec<aws_sdk_sqs::types::Message>> {
    Ok(sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(20)
        .visibility_timeout(visibility)
        .send()
        .await?
        .messages()
        .to_vec())
}

fn body(m: &aws_sdk_sqs::types::Message) -> Result<Value> {
    Ok(serde_json::from_str(m.body().context("body")?)?)
}

#[tokio::test]
async fn interruptions_arrive_as_eventbridge_messages() -> Result<()> {
    let sim = support::start().await;
    let sqs = sqs(&sim).await;
    let url = sqs
        .get_queue_url()
        .queue_name(DEFAULT_INTERRUPTION_QUEUE)
        .send()
        .await?
        .queue_url()
        .context("queue url")?
        .to_string();
    let instance = sim
        .cloud()
        .create(&LaunchRequest {
            client_token: "t1".into(),
            offerings: vec![OfferingKey {
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: CapacityType::Spot,
            }],
            tags: Tags::new(),
            node_class: None,
            image_id: None,
            node: None,
        })
        .await?;
    sim.cloud().interrupt(&instance.provider_id)?;

    // The warning, as EventBridge delivers it; not deleted, it is delivered again after its
    // visibility timeout (at least once). Two minutes later (300 ms here) the reclaim follows:
    // state changes to shutting-down, then terminated.
    let mut warnings = Vec::new();
    let mut states = Vec::new();
    while warnings.len() < 2 || states.len() < 2 {
        for m in receive(&sqs, &url, 1).await? {
            let b = body(&m)?;
            assert_eq!(b["source"], "aws.ec2");
            assert_eq!(b["region"], "us-east-1");
            assert_eq!(b["detail"]["instance-id"], instance.id.as_str());
            let delete = match b["detail-type"].as_str() {
                Some("EC2 Spot Instance Interruption Warning") => {
                    assert_eq!(b["detail"]["instance-action"], "terminate");
                    warnings.push(m.message_id().context("id")?.to_string());
                    warnings.len() == 2
                }
                Some("EC2 Instance State-change Notification") => {
                    states.push(
                        b["detail"]["state"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    );
                    true
                }
                other => panic!("unexpected {other:?}: {b}"),
            };
            if delete {
                sqs.delete_message()
                    .queue_url(&url)
                    .receipt_handle(m.receipt_handle().context("handle")?)
                    .send()
                    .await?;
            }
        }
    }
    assert_eq!(
        warnings[0], warnings[1],
        "the same message, delivered twice"
    );
    assert_eq!(states, ["shutting-down", "terminated"]);
    assert_eq!(
        sim.aws().queues().message_count(DEFAULT_INTERRUPTION_QUEUE),
        Some(0)
    );
    sim.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn long_poll_returns_a_message_sent_while_waiting() -> Result<()> {
    let sim = support::start().await;
    let sqs = sqs(&sim).await;
    let url = sqs
        .create_queue()
        .queue_name("work")
        .send()
        .await?
        .queue_url()
        .context("queue url")?
        .to_string();
    let waiting = {
        let (sqs, url) = (sqs.clone(), url.clone());
        tokio::spawn(async move { receive(&sqs, &url, 30).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    sqs.send_message()
        .queue_url(&url)
        .message_body("{\"hello\":1}")
        .send()
        .await?;
    let got = waiting.await??;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body(), Some("{\"hello\":1}"));
    // MD5 of the body, as SQS computes it (checked against Python's hashlib).
    assert_eq!(
        got[0].md5_of_body(),
        Some("8590c3ebd8fec6dda546aef5de1d99e8")
    );

    let e = sqs
        .get_queue_url()
        .queue_name("nope")
        .send()
        .await
        .expect_err("no such queue");
    assert!(
        e.as_service_error()
            .is_some_and(|s| s.is_queue_does_not_exist()),
        "{e:?}"
    );
    let e = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(11)
        .send()
        .await
        .expect_err("too many");
    assert!(format!("{e:?}").contains("MaxNumberOfMessages"), "{e:?}");
    sim.shutdown().await;
    Ok(())
}
