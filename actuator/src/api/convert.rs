//! Wire → ledger: a `SubmitRequest` becomes a [`Submission`], or an error naming the field at
//! fault (`commands[2].launch.node_claim.instance_types`).

use prost::Message;
use proto::v1 as pb;

use crate::launch::{LaunchSpec, Requirement, Taint};
use crate::ledger::{Basis, NewLaunch, Submission};

/// A request field that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct Invalid {
    /// The field path.
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

fn taints(ts: &[pb::Taint]) -> Vec<Taint> {
    ts.iter()
        .map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
        })
        .collect()
}

/// The submission of `req`, and the results already decided here (disrupt commands, which
/// this actuator does not execute yet, are rejected).
///
/// # Errors
/// The first field that cannot be used.
pub fn submission(
    req: &pb::SubmitRequest,
) -> Result<(Submission, Vec<pb::CommandResult>), Invalid> {
    if req.plan_id.is_empty() {
        return Err(invalid("plan_id", "must not be empty"));
    }
    let basis = req.basis.clone().unwrap_or_default();
    let mut launches = Vec::new();
    let mut results = Vec::new();
    for (i, c) in req.commands.iter().enumerate() {
        let at = format!("commands[{i}]");
        match &c.command {
            None => return Err(invalid(at, "no command set")),
            Some(pb::command::Command::Disrupt(d)) => {
                if d.idempotency_key.is_empty() {
                    return Err(invalid(
                        format!("{at}.disrupt.idempotency_key"),
                        "must not be empty",
                    ));
                }
                results.push(pb::CommandResult {
                    idempotency_key: d.idempotency_key.clone(),
                    status: super::REJECTED.to_string(),
                    message: "disruptions are not executed by this actuator yet".to_string(),
                });
            }
            Some(pb::command::Command::Launch(l)) => {
                launches.push(launch(l, &format!("{at}.launch"))?);
            }
        }
    }
    Ok((
        Submission {
            plan_id: req.plan_id.clone(),
            session_id: req.session_id.clone(),
            basis: Basis {
                in_flight: basis.in_flight_claims,
                now: basis.now,
                sequence: basis.sequence,
            },
            launches,
        },
        results,
    ))
}

fn launch(l: &pb::LaunchCommand, at: &str) -> Result<NewLaunch, Invalid> {
    if l.idempotency_key.is_empty() {
        return Err(invalid(
            format!("{at}.idempotency_key"),
            "must not be empty",
        ));
    }
    let Some(c) = &l.node_claim else {
        return Err(invalid(format!("{at}.node_claim"), "missing"));
    };
    let at_c = format!("{at}.node_claim");
    if !is_name(&c.name) {
        return Err(invalid(
            format!("{at_c}.name"),
            format!("{:?} is not a lowercase DNS subdomain name", c.name),
        ));
    }
    if c.node_pool.is_empty() {
        return Err(invalid(format!("{at_c}.node_pool"), "must not be empty"));
    }
    if c.instance_types.is_empty() {
        return Err(invalid(
            format!("{at_c}.instance_types"),
            "must not be empty",
        ));
    }
    if c.zones.is_empty() {
        return Err(invalid(format!("{at_c}.zones"), "must not be empty"));
    }
    let mut capacity_types = Vec::new();
    for (j, ct) in c.capacity_types.iter().enumerate() {
        capacity_types.push(
            cloud::CapacityType::parse(ct)
                .map_err(|e| invalid(format!("{at_c}.capacity_types[{j}]"), e.to_string()))?,
        );
    }
    if capacity_types.is_empty() {
        return Err(invalid(
            format!("{at_c}.capacity_types"),
            "must not be empty",
        ));
    }
    let t = l.template.clone().unwrap_or_default();
    let spec = LaunchSpec {
        name: c.name.clone(),
        node_pool: c.node_pool.clone(),
        instance_types: c.instance_types.clone(),
        zones: c.zones.clone(),
        capacity_types,
        price: c.price,
        labels: c
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        taints: taints(&c.taints),
        node_class: (!t.node_class.is_empty()).then_some(t.node_class),
        startup_taints: taints(&t.startup_taints),
        expire_after: t.expire_after,
        requirements: t
            .requirements
            .iter()
            .map(|r| Requirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone(),
                min_values: r.min_values,
            })
            .collect(),
        annotations: t.annotations.into_iter().collect(),
        termination_grace_period: t.termination_grace_period,
    };
    Ok(NewLaunch {
        idempotency_key: l.idempotency_key.clone(),
        payload: l.encode_to_vec(),
        spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch_cmd(name: &str) -> pb::Command {
        pb::Command {
            command: Some(pb::command::Command::Launch(pb::LaunchCommand {
                idempotency_key: format!("launch-{name}"),
                node_claim: Some(pb::PlannedNodeClaim {
                    name: name.into(),
                    node_pool: "default".into(),
                    instance_types: vec!["m5.large".into()],
                    zones: vec!["us-east-1a".into()],
                    capacity_types: vec!["on-demand".into()],
                    ..Default::default()
                }),
                template: Some(pb::NodeClaimTemplate {
                    node_class: "default".into(),
                    expire_after: Some(3600),
                    ..Default::default()
                }),
            })),
        }
    }

    #[test]
    fn converts_launches_and_rejects_disruptions() {
        let req = pb::SubmitRequest {
            plan_id: "p1".into(),
            session_id: "s1".into(),
            basis: Some(pb::PlanBasis {
                in_flight_claims: vec!["x".into()],
                now: 5,
                sequence: 2,
            }),
            commands: vec![
                launch_cmd("default-abcde"),
                pb::Command {
                    command: Some(pb::command::Command::Disrupt(pb::DisruptCommand {
                        idempotency_key: "disrupt-1".into(),
                        decision: None,
                    })),
                },
            ],
        };
        let (s, results) = submission(&req).expect("valid");
        assert_eq!(s.launches.len(), 1);
        assert_eq!(s.launches[0].spec.node_class.as_deref(), Some("default"));
        assert_eq!(s.launches[0].spec.expire_after, Some(3600));
        assert_eq!(s.basis.in_flight, vec!["x".to_string()]);
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].status, "Rejected");
    }

    #[test]
    fn errors_name_the_field() {
        let mut req = pb::SubmitRequest {
            plan_id: "p1".into(),
            commands: vec![launch_cmd("ok-1"), launch_cmd("Bad_Name")],
            ..Default::default()
        };
        let e = submission(&req).expect_err("bad name");
        assert_eq!(e.field, "commands[1].launch.node_claim.name");
        if let Some(pb::command::Command::Launch(l)) = &mut req.commands[1].command {
            l.node_claim.as_mut().expect("claim").name = "ok-2".into();
            l.node_claim.as_mut().expect("claim").capacity_types = vec!["reserved".into()];
        }
        let e = submission(&req).expect_err("bad capacity type");
        assert_eq!(e.field, "commands[1].launch.node_claim.capacity_types[0]");
        req.plan_id.clear();
        assert_eq!(submission(&req).expect_err("no plan").field, "plan_id");
    }
}
