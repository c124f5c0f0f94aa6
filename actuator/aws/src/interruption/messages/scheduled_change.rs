//! `AWS Health Event` of service `EC2` and category `scheduledChange` (instance retirement,
//! scheduled maintenance): the instances in `detail.affectedEntities[].entityValue` are going.
//! Health events of other services or categories are not handled ([`Unreadable::Unknown`]),
//! as Karpenter ignores them.

use cloud::{InterruptionKind, Notice, Unreadable};
use serde_json::Value;

use super::{Envelope, garbled, instance_id};

/// The `detail-type`.
pub const DETAIL_TYPE: &str = "AWS Health Event";
/// The one service handled.
pub const SERVICE: &str = "EC2";
/// The one category handled.
pub const CATEGORY: &str = "scheduledChange";

/// Reads `detail.service`, `detail.eventTypeCategory` and the affected instances.
///
/// # Errors
/// [`Unreadable::Unknown`] for another service or category; [`Unreadable::Garbled`] when a field
/// is missing, an entity is not an instance ID, or no instance is named.
pub fn parse(e: &Envelope) -> Result<Notice, Unreadable> {
    let service = e.detail_str("service")?;
    let category = e.detail_str("eventTypeCategory")?;
    if service != SERVICE || category != CATEGORY {
        return Err(Unreadable::Unknown {
            kind: format!("{} (service {service}, category {category})", e.kind()),
        });
    }
    let entities = match e.detail.get("affectedEntities") {
        Some(Value::Array(a)) => a,
        Some(_) => return Err(garbled("detail.affectedEntities: not a list".into())),
        None => return Err(garbled("detail.affectedEntities: missing".into())),
    };
    let mut ids = Vec::with_capacity(entities.len());
    for (i, entity) in entities.iter().enumerate() {
        let field = format!("detail.affectedEntities[{i}].entityValue");
        match entity.get("entityValue") {
            Some(Value::String(v)) => {
                let id = instance_id(v, &field)?;
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            Some(_) => return Err(garbled(format!("{field}: not a string"))),
            None => return Err(garbled(format!("{field}: missing"))),
        }
    }
    if ids.is_empty() {
        return Err(garbled("detail.affectedEntities: names no instance".into()));
    }
    Ok(Notice {
        kind: InterruptionKind::ScheduledChange,
        instance_ids: ids,
        time: e.time,
    })
}

#[cfg(test)]
mod tests {
    use super::super::parse as parse_body;
    use super::*;
    use crate::interruption::fixtures;

    #[test]
    fn an_ec2_scheduled_change_names_every_affected_instance() {
        let n = parse_body(&fixtures::body("scheduled_change.json")).expect("parses");
        assert_eq!(n.kind, InterruptionKind::ScheduledChange);
        assert_eq!(
            n.instance_ids,
            ["i-1234567890abcdef0", "i-0fedcba0987654321"]
        );
        assert_eq!(n.time, 1_674_783_801); // 2023-01-27T01:43:21Z
    }

    #[test]
    fn other_services_and_categories_are_unknown() {
        assert_eq!(
            parse_body(&fixtures::body("health_issue_rds.json")),
            Err(Unreadable::Unknown {
                kind: "aws.health/AWS Health Event (service RDS, category issue)".into()
            })
        );
        let issue =
            fixtures::body("scheduled_change.json").replace("\"scheduledChange\"", "\"issue\"");
        assert!(matches!(
            parse_body(&issue),
            Err(Unreadable::Unknown { .. })
        ));
    }

    #[test]
    fn bad_entities_are_garbled_naming_the_entity() {
        let body = fixtures::body("scheduled_change.json");
        let bad = body.replace(
            "{\"entityValue\": \"i-0fedcba0987654321\"}",
            "{\"entityValue\": 3}",
        );
        assert_eq!(
            parse_body(&bad),
            Err(Unreadable::Garbled {
                reason: "detail.affectedEntities[1].entityValue: not a string".into()
            })
        );
        let none = body.replace(
            "{\"entityValue\": \"i-1234567890abcdef0\"},\n            {\"entityValue\": \"i-0fedcba0987654321\"}",
            "",
        );
        assert_eq!(
            parse_body(&none),
            Err(Unreadable::Garbled {
                reason: "detail.affectedEntities: names no instance".into()
            })
        );
        let missing = body.replace("\"service\": \"EC2\",", "");
        assert_eq!(
            parse_body(&missing),
            Err(Unreadable::Garbled {
                reason: "detail.service: missing".into()
            })
        );
    }
}
