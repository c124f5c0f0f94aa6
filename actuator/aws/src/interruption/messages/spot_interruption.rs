//! `EC2 Spot Instance Interruption Warning`: EC2 reclaims the spot instance in about two
//! minutes (`detail.instance-action` is `terminate`, `stop` or `hibernate`; all three take the
//! node away, so all are handled alike, as Karpenter does).

use cloud::{InterruptionKind, Notice, Unreadable};

use super::Envelope;

/// The `detail-type`.
pub const DETAIL_TYPE: &str = "EC2 Spot Instance Interruption Warning";

/// Reads `detail.instance-id`.
///
/// # Errors
/// [`Unreadable::Garbled`] when it is missing or not an instance ID.
pub fn parse(e: &Envelope) -> Result<Notice, Unreadable> {
    Ok(Notice {
        kind: InterruptionKind::SpotInterruptionWarning,
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
    fn the_documented_example_is_a_warning_for_its_instance() {
        let n = parse_body(&fixtures::body("spot_interruption.json")).expect("parses");
        assert_eq!(n.kind, InterruptionKind::SpotInterruptionWarning);
        assert_eq!(n.instance_ids, ["i-1234567890abcdef0"]);
        assert_eq!(n.time, 1_614_353_432); // 2021-02-26T15:30:32Z
    }

    #[test]
    fn a_missing_or_bad_instance_id_is_garbled() {
        let body = fixtures::body("spot_interruption.json");
        let missing = body.replace("\"instance-id\"", "\"instance\"");
        assert_eq!(
            parse_body(&missing),
            Err(Unreadable::Garbled {
                reason: "detail.instance-id: missing".into()
            })
        );
        let bad = body.replace("\"i-1234567890abcdef0\",", "\"vol-1\",");
        assert_eq!(
            parse_body(&bad),
            Err(Unreadable::Garbled {
                reason: "detail.instance-id: \"vol-1\" is not an instance ID".into()
            })
        );
    }
}
