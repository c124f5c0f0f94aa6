//! `EC2 Instance Rebalance Recommendation`: the spot instance's risk of interruption went up.
//! Karpenter's default only records it (an Event on the Node); so does the actuator.

use cloud::{InterruptionKind, Notice, Unreadable};

use super::Envelope;

/// The `detail-type`.
pub const DETAIL_TYPE: &str = "EC2 Instance Rebalance Recommendation";

/// Reads `detail.instance-id`.
///
/// # Errors
/// [`Unreadable::Garbled`] when it is missing or not an instance ID.
pub fn parse(e: &Envelope) -> Result<Notice, Unreadable> {
    Ok(Notice {
        kind: InterruptionKind::RebalanceRecommendation,
        instance_ids: vec![e.instance_id()?],
        time: e.time,
    })
}

#[cfg(test)]
mod tests {
    use super::super::parse as parse_body;
    use super::*;
    use crate::interruption::fixtures;

    #[test]
    fn the_documented_example_is_a_recommendation_for_its_instance() {
        let n = parse_body(&fixtures::body("rebalance_recommendation.json")).expect("parses");
        assert_eq!(n.kind, InterruptionKind::RebalanceRecommendation);
        assert_eq!(n.instance_ids, ["i-1234567890abcdef0"]);
        assert_eq!(n.time, 1_614_353_280); // 2021-02-26T15:28:00Z
    }

    #[test]
    fn an_instance_id_of_the_wrong_type_is_garbled() {
        let body = fixtures::body("rebalance_recommendation.json").replace(
            "\"instance-id\": \"i-1234567890abcdef0\"",
            "\"instance-id\": 42",
        );
        assert_eq!(
            parse_body(&body),
            Err(Unreadable::Garbled {
                reason: "detail.instance-id: not a string".into()
            })
        );
    }
}
