//! `EC2 Instance State-change Notification`: the instance is `stopping`, `stopped`,
//! `shutting-down` or `terminated` (from outside dovetail, or as the end of an interruption).
//! The other states (`pending`, `running`) need nothing and are not handled
//! ([`Unreadable::Unknown`]), as Karpenter ignores them.

use cloud::{InstanceState, InterruptionKind, Notice, Unreadable};

use super::Envelope;

/// The `detail-type`.
pub const DETAIL_TYPE: &str = "EC2 Instance State-change Notification";

/// Reads `detail.instance-id` and `detail.state`.
///
/// # Errors
/// [`Unreadable::Unknown`] for a state that needs nothing; [`Unreadable::Garbled`] when a field
/// is missing or the instance ID is not one.
pub fn parse(e: &Envelope) -> Result<Notice, Unreadable> {
    let id = e.instance_id()?;
    let state = e.detail_str("state")?;
    let kind = match state.to_ascii_lowercase().as_str() {
        "stopping" => InterruptionKind::Stopped { done: false },
        "stopped" => InterruptionKind::Stopped { done: true },
        "shutting-down" => InterruptionKind::StateChange(InstanceState::ShuttingDown),
        "terminated" => InterruptionKind::StateChange(InstanceState::Terminated),
        _ => {
            return Err(Unreadable::Unknown {
                kind: format!("{} (state {state})", e.kind()),
            });
        }
    };
    Ok(Notice {
        kind,
        instance_ids: vec![id],
        time: e.time,
    })
}

#[cfg(test)]
mod tests {
    use super::super::parse as parse_body;
    use super::*;
    use crate::interruption::fixtures;

    #[test]
    fn stopping_and_terminated_are_handled() {
        let n = parse_body(&fixtures::body("state_change_stopping.json")).expect("parses");
        assert_eq!(n.kind, InterruptionKind::Stopped { done: false });
        assert_eq!(n.instance_ids, ["i-abcd1111"]);
        assert_eq!(n.time, 1_636_666_194); // 2021-11-11T21:29:54Z
        let n = parse_body(&fixtures::body("state_change_terminated.json")).expect("parses");
        assert_eq!(
            n.kind,
            InterruptionKind::StateChange(InstanceState::Terminated)
        );
        let base = fixtures::body("state_change_terminated.json");
        let stopped = base.replace("\"terminated\"", "\"stopped\"");
        assert_eq!(
            parse_body(&stopped).map(|n| n.kind),
            Ok(InterruptionKind::Stopped { done: true })
        );
        let shutting = base.replace("\"terminated\"", "\"shutting-down\"");
        assert_eq!(
            parse_body(&shutting).map(|n| n.kind),
            Ok(InterruptionKind::StateChange(InstanceState::ShuttingDown))
        );
    }

    #[test]
    fn running_is_unknown_and_a_missing_state_is_garbled() {
        assert_eq!(
            parse_body(&fixtures::body("state_change_running.json")),
            Err(Unreadable::Unknown {
                kind: "aws.ec2/EC2 Instance State-change Notification (state running)".into()
            })
        );
        let missing =
            fixtures::body("state_change_running.json").replace("\"state\"", "\"status\"");
        assert_eq!(
            parse_body(&missing),
            Err(Unreadable::Garbled {
                reason: "detail.state: missing".into()
            })
        );
    }
}
