//! `--output table`: the plan for a person.

use std::fmt::Write;

use planner::plan::{Plan, PlannedNodeClaim};

/// Renders a plan: new node claims, placements on existing nodes, unschedulable pods,
/// disruptions, the summary, then notes (the plan's and the catalog's).
pub(super) fn render(plan: &Plan, catalog_notes: &[String]) -> String {
    let mut out = String::new();
    // `write!` to a String cannot fail; the results are ignored on purpose.
    if plan.node_claims.is_empty() {
        out.push_str("No new nodes.\n");
    } else {
        let _ = writeln!(out, "New nodes ({}):", plan.node_claims.len());
        out.push_str(&claims_table(&plan.node_claims));
    }
    if !plan.existing_nodes.is_empty() {
        let _ = writeln!(out, "\nOn existing nodes ({}):", plan.existing_nodes.len());
        let rows: Vec<Vec<String>> = plan
            .existing_nodes
            .iter()
            .map(|n| vec![n.name.clone(), n.pods.len().to_string()])
            .collect();
        out.push_str(&grid(&["NODE", "PODS"], &rows));
    }
    if !plan.unschedulable.is_empty() {
        let _ = writeln!(out, "\nUnschedulable pods ({}):", plan.unschedulable.len());
        let rows: Vec<Vec<String>> = plan
            .unschedulable
            .iter()
            .map(|u| vec![u.pod.clone(), u.reason.clone()])
            .collect();
        out.push_str(&grid(&["POD", "REASON"], &rows));
    }
    if !plan.disruptions.is_empty() {
        let _ = writeln!(out, "\nDisruptions ({}):", plan.disruptions.len());
        let rows: Vec<Vec<String>> = plan
            .disruptions
            .iter()
            .map(|d| {
                let replacements = if d.replacements.is_empty() {
                    "-".to_string()
                } else {
                    d.replacements
                        .iter()
                        .map(cheapest_type)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                vec![
                    d.reason.clone(),
                    d.nodes.join(", "),
                    replacements,
                    format!("${:.4}", d.savings_per_hour),
                ]
            })
            .collect();
        out.push_str(&grid(
            &["REASON", "NODES", "REPLACEMENTS", "SAVES/H"],
            &rows,
        ));
    }
    let s = &plan.summary;
    let _ = writeln!(
        out,
        "\nSummary: {} pending pods, {} scheduled, {} unschedulable; {} new node {}, ${:.4}/h",
        s.pending_pods,
        s.scheduled_pods,
        plan.unschedulable.len(),
        s.new_node_claims,
        if s.new_node_claims == 1 {
            "claim"
        } else {
            "claims"
        },
        s.cost_per_hour
    );
    if s.cost_per_hour > 0.0 && s.lower_bound_cost_per_hour > 0.0 {
        let _ = writeln!(
            out,
            "         lower bound ${:.4}/h (cost is {:.1}% above it)",
            s.lower_bound_cost_per_hour,
            (s.cost_per_hour / s.lower_bound_cost_per_hour - 1.0) * 100.0
        );
    }
    let mut notes: Vec<&String> = plan.notes.iter().collect();
    for n in catalog_notes {
        if !notes.contains(&n) {
            notes.push(n);
        }
    }
    if !notes.is_empty() {
        out.push_str("\nNotes:\n");
        for n in notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    out
}

fn cheapest_type(c: &PlannedNodeClaim) -> String {
    match c.instance_types.split_first() {
        None => "-".to_string(),
        Some((first, [])) => first.clone(),
        Some((first, rest)) => format!("{first} (+{} more)", rest.len()),
    }
}

/// Zones compactly: `us-east-1{a,b,c}` when they differ only in their last letter.
fn zones(zones: &[String]) -> String {
    let split: Option<Vec<(&str, &str)>> = zones
        .iter()
        .map(|z| {
            let at = z.char_indices().last()?.0;
            let (prefix, suffix) = z.split_at(at);
            (!prefix.is_empty() && suffix.chars().all(|c| c.is_ascii_alphabetic()))
                .then_some((prefix, suffix))
        })
        .collect();
    match split {
        Some(parts) if parts.len() > 1 && parts.iter().all(|(p, _)| *p == parts[0].0) => {
            let letters: Vec<&str> = parts.iter().map(|(_, s)| *s).collect();
            format!("{}{{{}}}", parts[0].0, letters.join(","))
        }
        _ => zones.join(","),
    }
}

fn claims_table(claims: &[PlannedNodeClaim]) -> String {
    let rows: Vec<Vec<String>> = claims
        .iter()
        .map(|c| {
            vec![
                c.node_pool.clone(),
                cheapest_type(c),
                zones(&c.zones),
                c.capacity_types.join(","),
                format!("${:.4}", c.price),
                c.pods.len().to_string(),
            ]
        })
        .collect();
    grid(
        &[
            "NODEPOOL",
            "INSTANCE TYPE",
            "ZONES",
            "CAPACITY",
            "PRICE/H",
            "PODS",
        ],
        &rows,
    )
}

/// Left-aligned columns separated by two spaces; the last column is not padded.
fn grid(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut s = String::from("  ");
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                s.push_str(cell);
            } else {
                let _ = write!(s, "{cell:<w$}  ");
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use planner::plan::{Summary, Unschedulable};

    #[test]
    fn renders_claims_unschedulable_and_summary() {
        let plan = Plan {
            node_claims: vec![PlannedNodeClaim {
                name: "default-x".into(),
                node_pool: "default".into(),
                instance_types: vec!["m5.large".into(), "m5a.large".into()],
                zones: vec!["us-east-1a".into()],
                capacity_types: vec!["spot".into(), "on-demand".into()],
                price: 0.035,
                pods: vec!["default/a".into(), "default/b".into()],
                ..Default::default()
            }],
            unschedulable: vec![Unschedulable {
                pod: "default/big-0".into(),
                reason: "too big".into(),
            }],
            summary: Summary {
                pending_pods: 3,
                scheduled_pods: 2,
                new_node_claims: 1,
                cost_per_hour: 0.035,
                lower_bound_cost_per_hour: 0.031,
            },
            ..Default::default()
        };
        let text = render(&plan, &["spot prices are estimates".to_string()]);
        assert!(text.contains("NODEPOOL  INSTANCE TYPE"), "{text}");
        assert!(
            text.contains("default   m5.large (+1 more)  us-east-1a  spot,on-demand  $0.0350  2"),
            "{text}"
        );
        assert!(text.contains("default/big-0  too big"), "{text}");
        assert!(
            text.contains("3 pending pods, 2 scheduled, 1 unschedulable"),
            "{text}"
        );
        assert!(text.contains("  - spot prices are estimates"), "{text}");
    }

    #[test]
    fn zones_are_compacted_when_they_share_a_region() {
        let z = |v: &[&str]| zones(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(z(&["us-east-1a", "us-east-1c"]), "us-east-1{a,c}");
        assert_eq!(z(&["us-east-1a"]), "us-east-1a");
        assert_eq!(z(&["us-east-1a", "eu-west-1a"]), "us-east-1a,eu-west-1a");
        assert_eq!(z(&[]), "");
    }
}
