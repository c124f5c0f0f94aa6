//! The EventBridge envelope and the dispatch to one parser per kind.
//!
//! Every EventBridge event has the same envelope (`version`, `id`, `detail-type`, `source`,
//! `account`, `time`, `region`, `resources`, `detail`); the kind is named by `source` and
//! `detail-type`, and `detail` differs per kind. What is handled, as Karpenter's
//! `pkg/controllers/interruption/messages` does:
//!
//! | source / detail-type | parser | becomes |
//! |---|---|---|
//! | `aws.ec2` / `EC2 Spot Instance Interruption Warning` | [`spot_interruption`] | `SpotInterruptionWarning` |
//! | `aws.ec2` / `EC2 Instance Rebalance Recommendation` | [`rebalance_recommendation`] | `RebalanceRecommendation` |
//! | `aws.health` / `AWS Health Event` (service `EC2`, category `scheduledChange`) | [`scheduled_change`] | `ScheduledChange` |
//! | `aws.ec2` / `EC2 Instance State-change Notification` (stopping, stopped, shutting-down, terminated) | [`state_change`] | `Stopped` / `StateChange` |
//!
//! Anything else is [`Unreadable::Unknown`] (a Health event of another service or category and
//! a state change to `pending` or `running` included: nothing to do); a body that is not JSON or
//! lacks a field is [`Unreadable::Garbled`], naming the field.

pub mod rebalance_recommendation;
pub mod scheduled_change;
pub mod spot_interruption;
pub mod state_change;

use cloud::{Notice, Timestamp, Unreadable};
use serde_json::Value;

/// `source` of EC2's events.
pub const SOURCE_EC2: &str = "aws.ec2";
/// `source` of AWS Health's events.
pub const SOURCE_HEALTH: &str = "aws.health";

/// The common part of an EventBridge event.
#[derive(Clone, Debug)]
pub struct Envelope {
    /// `source`, e.g. `aws.ec2`.
    pub source: String,
    /// `detail-type`, e.g. `EC2 Spot Instance Interruption Warning`.
    pub detail_type: String,
    /// `time`, seconds since the epoch.
    pub time: Timestamp,
    /// `detail`, the kind's own fields.
    pub detail: Value,
}

// === impl Envelope ===

impl Envelope {
    /// Reads the envelope of `body`.
    ///
    /// # Errors
    /// [`Unreadable::Garbled`] when the body is not a JSON object or lacks `source`,
    /// `detail-type`, `time` (RFC 3339) or an object `detail`.
    pub fn parse(body: &str) -> Result<Self, Unreadable> {
        let v: Value = serde_json::from_str(body)
            .map_err(|e| garbled(format!("the body is not JSON: {e}")))?;
        if !v.is_object() {
            return Err(garbled("the body is not a JSON object".to_string()));
        }
        let source = string(&v, "source")?.to_string();
        let detail_type = string(&v, "detail-type")?.to_string();
        let time = time(string(&v, "time")?, "time")?;
        let detail = match v.get("detail") {
            Some(d @ Value::Object(_)) => d.clone(),
            Some(_) => return Err(garbled("detail: not an object".to_string())),
            None => return Err(garbled("detail: missing".to_string())),
        };
        Ok(Self {
            source,
            detail_type,
            time,
            detail,
        })
    }

    /// `source/detail-type`, how an unknown kind is named.
    pub fn kind(&self) -> String {
        format!("{}/{}", self.source, self.detail_type)
    }

    /// The string `detail.<field>`.
    ///
    /// # Errors
    /// [`Unreadable::Garbled`] naming `detail.<field>` when it is missing or not a string.
    pub fn detail_str(&self, field: &str) -> Result<&str, Unreadable> {
        match self.detail.get(field) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s),
            Some(Value::String(_)) => Err(garbled(format!("detail.{field}: empty"))),
            Some(_) => Err(garbled(format!("detail.{field}: not a string"))),
            None => Err(garbled(format!("detail.{field}: missing"))),
        }
    }

    /// `detail.instance-id`, checked to look like an instance ID.
    ///
    /// # Errors
    /// [`Unreadable::Garbled`] naming `detail.instance-id`.
    pub fn instance_id(&self) -> Result<String, Unreadable> {
        let id = self.detail_str("instance-id")?;
        instance_id(id, "detail.instance-id")
    }
}

/// Parses one message body (see the module docs for what each kind becomes).
///
/// # Errors
/// [`Unreadable::Garbled`] for a body that cannot be read, [`Unreadable::Unknown`] for a kind
/// that is not handled.
pub fn parse(body: &str) -> Result<Notice, Unreadable> {
    let e = Envelope::parse(body)?;
    match (e.source.as_str(), e.detail_type.as_str()) {
        (SOURCE_EC2, spot_interruption::DETAIL_TYPE) => spot_interruption::parse(&e),
        (SOURCE_EC2, rebalance_recommendation::DETAIL_TYPE) => rebalance_recommendation::parse(&e),
        (SOURCE_HEALTH, scheduled_change::DETAIL_TYPE) => scheduled_change::parse(&e),
        (SOURCE_EC2, state_change::DETAIL_TYPE) => state_change::parse(&e),
        _ => Err(Unreadable::Unknown { kind: e.kind() }),
    }
}

pub(crate) fn garbled(reason: String) -> Unreadable {
    Unreadable::Garbled { reason }
}

fn string<'a>(v: &'a Value, field: &str) -> Result<&'a str, Unreadable> {
    match v.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(garbled(format!("{field}: not a string"))),
        None => Err(garbled(format!("{field}: missing"))),
    }
}

fn time(s: &str, field: &str) -> Result<Timestamp, Unreadable> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp())
        .map_err(|e| garbled(format!("{field}: {s:?} is not an RFC 3339 time ({e})")))
}

/// Checks that `id` looks like an EC2 instance ID (`i-` and hex digits).
pub(crate) fn instance_id(id: &str, field: &str) -> Result<String, Unreadable> {
    let ok = id
        .strip_prefix("i-")
        .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric()));
    if ok {
        Ok(id.to_string())
    } else {
        Err(garbled(format!("{field}: {id:?} is not an instance ID")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(body: &str) -> String {
        match parse(body) {
            Err(Unreadable::Unknown { kind }) => kind,
            other => panic!("expected Unknown, got {other:?}"),
        }
    }

    fn garbled_reason(body: &str) -> String {
        match parse(body) {
            Err(Unreadable::Garbled { reason }) => reason,
            other => panic!("expected Garbled, got {other:?}"),
        }
    }

    #[test]
    fn garbled_bodies_say_what_is_wrong() {
        assert!(garbled_reason("").contains("not JSON"));
        assert!(garbled_reason("{not json").contains("not JSON"));
        assert!(garbled_reason("[1, 2]").contains("not a JSON object"));
        assert_eq!(
            garbled_reason(r#"{"detail-type": "x", "time": "2021-02-26T15:30:32Z", "detail": {}}"#),
            "source: missing"
        );
        assert_eq!(
            garbled_reason(
                r#"{"source": 7, "detail-type": "x", "time": "2021-02-26T15:30:32Z", "detail": {}}"#
            ),
            "source: not a string"
        );
        assert!(
            garbled_reason(
                r#"{"source": "aws.ec2", "detail-type": "x", "time": "yesterday", "detail": {}}"#
            )
            .starts_with("time: \"yesterday\" is not an RFC 3339 time")
        );
        assert_eq!(
            garbled_reason(
                r#"{"source": "aws.ec2", "detail-type": "x", "time": "2021-02-26T15:30:32Z"}"#
            ),
            "detail: missing"
        );
        assert_eq!(
            garbled_reason(
                r#"{"source": "aws.ec2", "detail-type": "x", "time": "2021-02-26T15:30:32Z", "detail": "s"}"#
            ),
            "detail: not an object"
        );
        // Invalid UTF-8 cannot reach here (SQS bodies are strings), but control characters and
        // deep nesting must not panic either.
        assert!(garbled_reason("\u{0}\u{1}").contains("not JSON"));
        let deep = "[".repeat(100_000);
        assert!(garbled_reason(&deep).contains("not JSON"));
    }

    #[test]
    fn unknown_kinds_are_named_by_source_and_detail_type() {
        assert_eq!(
            unknown(
                r#"{"source": "aws.ec2", "detail-type": "EC2 Instance Launch Successful", "time": "2021-02-26T15:30:32Z", "detail": {}}"#
            ),
            "aws.ec2/EC2 Instance Launch Successful"
        );
        assert_eq!(
            unknown(
                r#"{"source": "aws.autoscaling", "detail-type": "EC2 Spot Instance Interruption Warning", "time": "2021-02-26T15:30:32Z", "detail": {}}"#
            ),
            "aws.autoscaling/EC2 Spot Instance Interruption Warning"
        );
    }

    #[test]
    fn instance_ids_are_checked() {
        assert_eq!(
            instance_id("i-0abc12", "f").ok().as_deref(),
            Some("i-0abc12")
        );
        for bad in [
            "",
            "i-",
            "vol-123",
            "i-12/3",
            "arn:aws:ec2:us-east-1:1:instance/i-1",
        ] {
            assert!(instance_id(bad, "f").is_err(), "{bad}");
        }
    }
}
