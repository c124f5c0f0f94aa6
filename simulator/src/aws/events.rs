//! The simulated cloud's events as EventBridge delivers them to an SQS queue (the message body
//! is the event JSON), in the four shapes Karpenter's interruption controller reads:
//! - `aws.ec2` / `EC2 Spot Instance Interruption Warning` (`detail.instance-id`,
//!   `detail.instance-action: terminate`);
//! - `aws.ec2` / `EC2 Instance Rebalance Recommendation` (`detail.instance-id`);
//! - `aws.health` / `AWS Health Event` (`detail.service: EC2`, `eventTypeCategory:
//!   scheduledChange`, `affectedEntities[].entityValue`);
//! - `aws.ec2` / `EC2 Instance State-change Notification` (`detail.instance-id`,
//!   `detail.state`).

use cloud::{InstanceState, InterruptionEvent, InterruptionKind};
use serde_json::{Value, json};

use super::ACCOUNT_ID;
use crate::clock::rfc3339;

/// The EventBridge event for `event`, as JSON text.
pub fn eventbridge_body(event: &InterruptionEvent, region: &str) -> String {
    eventbridge_event(event, region).to_string()
}

/// The EventBridge event for `event`.
pub fn eventbridge_event(event: &InterruptionEvent, region: &str) -> Value {
    let id = event.provider_id.instance_id();
    let arn = format!("arn:aws:ec2:{region}:{ACCOUNT_ID}:instance/{id}");
    let time = rfc3339(event.time);
    let (source, detail_type, detail) = match &event.kind {
        InterruptionKind::SpotInterruptionWarning => (
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": id, "instance-action": "terminate"}),
        ),
        InterruptionKind::RebalanceRecommendation => (
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            json!({"instance-id": id}),
        ),
        InterruptionKind::ScheduledChange => (
            "aws.health",
            "AWS Health Event",
            json!({
                "eventArn": format!("arn:aws:health:{region}::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/{}", event.id),
                "service": "EC2",
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "eventTypeCategory": "scheduledChange",
                "startTime": time,
                "eventDescription": [{"language": "en_US", "latestDescription": "EC2 has detected degradation of the underlying hardware hosting your instance (simulated)."}],
                "affectedEntities": [{"entityValue": id}],
            }),
        ),
        InterruptionKind::StateChange(state) => (
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": id, "state": state_name(*state)}),
        ),
        InterruptionKind::Stopped { done } => (
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": id, "state": if *done { "stopped" } else { "stopping" }}),
        ),
    };
    json!({
        "version": "0",
        "id": event.id,
        "detail-type": detail_type,
        "source": source,
        "account": ACCOUNT_ID,
        "time": time,
        "region": region,
        "resources": [arn],
        "detail": detail,
    })
}

fn state_name(s: InstanceState) -> &'static str {
    super::ec2::state(s).1
}

#[cfg(test)]
mod tests {
    use cloud::ProviderId;

    use super::*;

    #[test]
    fn shapes_karpenter_reads() {
        let event = |kind| InterruptionEvent {
            id: "evt-1".into(),
            receipt_handle: "rh".into(),
            provider_id: ProviderId::new("us-east-1a", "i-0123456789abcdef0"),
            kind,
            time: 1_800_000_000,
        };
        let v = eventbridge_event(
            &event(InterruptionKind::SpotInterruptionWarning),
            "us-east-1",
        );
        assert_eq!(v["source"], "aws.ec2");
        assert_eq!(v["detail-type"], "EC2 Spot Instance Interruption Warning");
        assert_eq!(v["detail"]["instance-id"], "i-0123456789abcdef0");
        assert_eq!(v["time"], "2027-01-15T08:00:00Z");
        let v = eventbridge_event(&event(InterruptionKind::ScheduledChange), "us-east-1");
        assert_eq!(v["source"], "aws.health");
        assert_eq!(
            v["detail"]["affectedEntities"][0]["entityValue"],
            "i-0123456789abcdef0"
        );
        let v = eventbridge_event(
            &event(InterruptionKind::StateChange(InstanceState::ShuttingDown)),
            "us-east-1",
        );
        assert_eq!(v["detail"]["state"], "shutting-down");
    }
}
