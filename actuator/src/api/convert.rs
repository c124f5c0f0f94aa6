//! Wire → ledger: a `SubmitRequest` becomes a [`Submission`] (its launches) and its
//! [`NewDisruption`]s, or an error naming the field at fault
//! (`commands[2].launch.node_claim.instance_types`, `commands[3].disrupt.decision.reason`).

use prost::Message;
use proto::v1 as pb;

use crate::launch::{LaunchSpec, Requirement, Taint, TaintEffect};
use crate::ledger::{Basis, NewDisruption, NewLaunch, Submission};

/// The reasons a disruption decision may carry.
pub(super) const REASONS: [&str; 5] = ["Empty", "Underutilized", "Drifted", "Expired", "ScaleDown"];

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

/// `at` is the list's field path.
fn taints(ts: &[pb::Taint], at: &str) -> Result<Vec<Taint>, Invalid> {
    ts.iter()
        .enumerate()
        .map(|(i, t)| {
            let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
                invalid(
                    format!("{at}[{i}].effect"),
                    format!(
                        "{:?} is not NoSchedule, PreferNoSchedule or NoExecute",
                        t.effect
                    ),
                )
            })?;
            Ok(Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect,
            })
        })
        .collect()
}

/// The submission of `req` (its launches) and its disrupt commands, in order.
///
/// # Errors
/// The first field that cannot be used.
pub fn submission(req: &pb::SubmitRequest) -> Result<(Submission, Vec<NewDisruption>), Invalid> {
    if req.plan_id.is_empty() {
        return Err(invalid("plan_id", "must not be empty"));
    }
    let basis = req.basis.clone().unwrap_or_default();
    let mut launches = Vec::new();
    let mut disruptions = Vec::new();
    for (i, c) in req.commands.iter().enumerate() {
        let at = format!("commands[{i}]");
        match &c.command {
            None => return Err(invalid(at, "no command set")),
            Some(pb::command::Command::Disrupt(d)) => {
                disruptions.push(disrupt(d, &format!("{at}.disrupt"))?);
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
        disruptions,
    ))
}

fn disrupt(d: &pb::DisruptCommand, at: &str) -> Result<NewDisruption, Invalid> {
    if d.idempotency_key.is_empty() {
        return Err(invalid(
            format!("{at}.idempotency_key"),
            "must not be empty",
        ));
    }
    let Some(decision) = &d.decision else {
        return Err(invalid(format!("{at}.decision"), "missing"));
    };
    let at_d = format!("{at}.decision");
    if !REASONS.contains(&decision.reason.as_str()) {
        return Err(invalid(
            format!("{at_d}.reason"),
            format!("{:?} is not one of {}", decision.reason, REASONS.join(", ")),
        ));
    }
    if decision.nodes.is_empty() {
        return Err(invalid(format!("{at_d}.nodes"), "must not be empty"));
    }
    for (j, n) in decision.nodes.iter().enumerate() {
        if !is_name(n) {
            return Err(invalid(
                format!("{at_d}.nodes[{j}]"),
                format!("{n:?} is not a lowercase DNS subdomain name"),
            ));
        }
    }
    let mut replacements = Vec::new();
    for (j, c) in decision.replacements.iter().enumerate() {
        replacements.push(planned(c, &format!("{at_d}.replacements[{j}]"))?);
    }
    Ok(NewDisruption {
        idempotency_key: d.idempotency_key.clone(),
        payload: d.encode_to_vec(),
        reason: decision.reason.clone(),
        nodes: decision.nodes.clone(),
        replacements,
        savings: decision.savings_per_hour,
    })
}

/// A planned NodeClaim as a launch spec without the NodePool template's fields (the NodeClaim
/// takes them from the NodePool).
fn planned(c: &pb::PlannedNodeClaim, at_c: &str) -> Result<LaunchSpec, Invalid> {
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
    Ok(LaunchSpec {
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
        taints: taints(&c.taints, &format!("{at_c}.taints"))?,
        ..LaunchSpec::default()
    })
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
    let base = planned(c, &at_c)?;
    let t = l.template.clone().unwrap_or_default();
    let spec = LaunchSpec {
        node_class: (!t.node_class.is_empty()).then_some(t.node_class),
        startup_taints: taints(&t.startup_taints, &format!("{at}.template.startup_taints"))?,
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
        ..base
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
    fn converts_launches_and_disruptions() {
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
                        decision: Some(pb::DisruptionDecision {
                            reason: "Underutilized".into(),
                            nodes: vec!["ip-10-0-0-1.ec2.internal".into()],
                            replacements: vec![pb::PlannedNodeClaim {
                                name: "default-r1".into(),
                                node_pool: "default".into(),
                                instance_types: vec!["m5.large".into()],
                                zones: vec!["us-east-1a".into()],
                                capacity_types: vec!["on-demand".into()],
                                ..Default::default()
                            }],
                            savings_per_hour: 0.05,
                            ..Default::default()
                        }),
                    })),
                },
            ],
        };
        let (s, disruptions) = submission(&req).expect("valid");
        assert_eq!(s.launches.len(), 1);
        assert_eq!(s.launches[0].spec.node_class.as_deref(), Some("default"));
        assert_eq!(s.launches[0].spec.expire_after, Some(3600));
        assert_eq!(s.basis.in_flight, vec!["x".to_string()]);
        assert_eq!(disruptions.len(), 1);
        let d = &disruptions[0];
        assert_eq!(
            (d.idempotency_key.as_str(), d.reason.as_str()),
            ("disrupt-1", "Underutilized")
        );
        assert_eq!(d.nodes, ["ip-10-0-0-1.ec2.internal"]);
        assert_eq!(d.replacements[0].name, "default-r1");
        assert_eq!(
            d.replacements[0].node_class, None,
            "taken from the NodePool"
        );

        let mut bad = req.clone();
        if let Some(pb::command::Command::Disrupt(d)) = &mut bad.commands[1].command {
            d.decision.as_mut().expect("decision").reason = "Bored".into();
        }
        assert_eq!(
            submission(&bad).expect_err("bad reason").field,
            "commands[1].disrupt.decision.reason"
        );
        let mut bad = req.clone();
        if let Some(pb::command::Command::Disrupt(d)) = &mut bad.commands[1].command {
            d.decision.as_mut().expect("decision").replacements[0]
                .zones
                .clear();
        }
        assert_eq!(
            submission(&bad).expect_err("no zones").field,
            "commands[1].disrupt.decision.replacements[0].zones"
        );
        let mut bad = req;
        if let Some(pb::command::Command::Disrupt(d)) = &mut bad.commands[1].command {
            d.decision = None;
        }
        assert_eq!(
            submission(&bad).expect_err("no decision").field,
            "commands[1].disrupt.decision"
        );
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

    #[test]
    fn taints_are_read_and_an_unknown_effect_is_refused_naming_the_field() {
        let mut req = pb::SubmitRequest {
            plan_id: "p1".into(),
            commands: vec![launch_cmd("ok-1")],
            ..Default::default()
        };
        let taint = |effect: &str| pb::Taint {
            key: "dedicated".into(),
            value: "web".into(),
            effect: effect.into(),
        };
        if let Some(pb::command::Command::Launch(l)) = &mut req.commands[0].command {
            l.node_claim.as_mut().expect("claim").taints = vec![taint("NoSchedule")];
            l.template.as_mut().expect("template").startup_taints =
                vec![taint("NoExecute"), taint("PreferNoSchedule")];
        }
        let (s, _) = submission(&req).expect("valid");
        let spec = &s.launches[0].spec;
        assert_eq!(spec.taints[0].effect, TaintEffect::NoSchedule);
        assert_eq!(spec.taints[0].value, "web");
        assert_eq!(
            spec.startup_taints
                .iter()
                .map(|t| t.effect)
                .collect::<Vec<_>>(),
            [TaintEffect::NoExecute, TaintEffect::PreferNoSchedule]
        );
        if let Some(pb::command::Command::Launch(l)) = &mut req.commands[0].command {
            l.template.as_mut().expect("template").startup_taints[1].effect = "Sometimes".into();
        }
        let e = submission(&req).expect_err("bad effect");
        assert_eq!(
            e.field,
            "commands[0].launch.template.startup_taints[1].effect"
        );
        assert!(e.reason.contains("\"Sometimes\""), "{e}");
    }
}
