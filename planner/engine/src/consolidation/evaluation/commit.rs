//! Committing a decision: the working cluster state, budgets and PDB allowances after it.

use std::collections::{BTreeMap, BTreeSet};

use super::{Command, Evaluation};
use crate::consolidation::Reason;
use crate::consolidation::candidate;
use crate::labels;
use crate::model::{Node, Taint, TaintEffect};
use crate::plan::{DisruptionDecision, ExistingNodePlacement, PlannedNodeClaim};

// === impl Evaluation ===

impl<'a> Evaluation<'a> {
    /// Applies a command: the nodes go, their pods move where the command says, replacements
    /// appear as nodes, budgets and PDB allowances are consumed, and the decision is recorded.
    pub fn commit(&mut self, mut cmd: Command) {
        self.note_move(&cmd);
        // Replacement names must not collide with nodes of the working state.
        let mut names: BTreeSet<String> =
            self.working.nodes.iter().map(|n| n.name.clone()).collect();
        for claim in &mut cmd.replacements {
            if names.contains(&claim.name) {
                let base = claim.name.clone();
                let mut i = 2;
                while names.contains(&format!("{base}-{i}")) {
                    i += 1;
                }
                let new = format!("{base}-{i}");
                for target in cmd.placements.values_mut() {
                    if *target == base {
                        *target = new.clone();
                    }
                }
                claim.name = new;
            }
            names.insert(claim.name.clone());
        }
        let removed: BTreeSet<&str> = cmd
            .nodes
            .iter()
            .map(|&c| self.candidates[c].name.as_str())
            .collect();
        let mut per_pool: BTreeMap<String, u32> = BTreeMap::new();
        for &c in &cmd.nodes {
            self.used[c] = true;
            *per_pool
                .entry(self.candidates[c].node_pool.clone())
                .or_default() += 1;
        }
        for (pool, n) in per_pool {
            self.budgets.consume(&pool, n);
        }
        for key in cmd.placements.keys() {
            if let Some(v) = self.pod_pdbs.get(key) {
                for &i in v {
                    self.pdb_remaining[i] -= 1;
                }
            }
        }
        // Working state.
        self.working
            .nodes
            .retain(|n| !removed.contains(n.name.as_str()));
        let claims: BTreeSet<&str> = cmd
            .nodes
            .iter()
            .filter_map(|&c| self.candidates[c].claim.as_deref())
            .collect();
        self.working
            .node_claims
            .retain(|c| !claims.contains(c.name.as_str()));
        let placements = &cmd.placements;
        self.working.pods.retain_mut(|p| {
            let Some(n) = p.node_name.as_deref() else {
                return true;
            };
            if !removed.contains(n) {
                return true;
            }
            match placements.get(&p.key()) {
                Some(target) => {
                    p.node_name = Some(target.clone());
                    true
                }
                // DaemonSet, mirror and terminal pods go with the node; unschedulable pods of
                // a forced expiry become pending.
                None if candidate::is_reschedulable(p) => {
                    p.node_name = None;
                    p.phase = crate::model::PodPhase::Pending;
                    true
                }
                None => false,
            }
        });
        for claim in &cmd.replacements {
            if let Some(node) = self.replacement_node(claim) {
                self.working.nodes.push(node);
            }
        }
        self.pods_on = candidate::pods_by_node(&self.working);
        // Decision.
        let mut nodes: Vec<String> = removed.iter().map(|s| s.to_string()).collect();
        nodes.sort();
        if cmd.replacements.len() >= 2 && cmd.reason == Reason::Underutilized {
            // The nodes and where their pods go are in the decision itself.
            self.notes.push(format!(
                "Underutilized: decision {} repacks {} nodes onto {} cheaper new nodes, saving {:.4}/h (a many→k repack; Karpenter's search stops at many→1)",
                self.decisions.len(),
                nodes.len(),
                cmd.replacements.len(),
                cmd.savings_per_hour
            ));
        }
        if cmd.reason == Reason::Drifted {
            // What drifted, per node: the plan's only reason is `Drifted`.
            let mut drifted: Vec<(&str, &str)> = cmd
                .nodes
                .iter()
                .filter_map(|&c| {
                    let c = &self.candidates[c];
                    Some((c.name.as_str(), c.drift.as_deref()?))
                })
                .collect();
            drifted.sort_unstable();
            for (node, why) in drifted {
                self.notes.push(format!(
                    "Drifted: decision {} replaces node {node}: {why}",
                    self.decisions.len()
                ));
            }
        }
        for (pod, why) in &cmd.unschedulable {
            self.notes.push(format!(
                "{}: pod {pod} has no place after expiry: {why}",
                cmd.reason.as_str()
            ));
        }
        let mut destinations: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (pod, target) in &cmd.placements {
            destinations
                .entry(target.as_str())
                .or_default()
                .push(pod.clone());
        }
        let destinations: Vec<ExistingNodePlacement> = destinations
            .into_iter()
            .map(|(name, pods)| ExistingNodePlacement {
                name: name.to_string(),
                pods,
            })
            .collect();
        let mut replacements = cmd.replacements;
        replacements.sort_by(|a, b| a.name.cmp(&b.name));
        for r in &mut replacements {
            r.pods.sort();
        }
        self.decisions.push(DisruptionDecision {
            reason: cmd.reason.as_str().to_string(),
            nodes,
            replacements,
            // `+ 0.0` turns an empty sum's -0.0 into 0.0.
            savings_per_hour: cmd.savings_per_hour + 0.0,
            destinations,
        });
    }

    /// A node standing for a replacement claim in the working state: its cheapest type's
    /// allocatable, the claim's labels and taints, and the cheapest allowed offering's zone and
    /// capacity type.
    fn replacement_node(&self, claim: &PlannedNodeClaim) -> Option<Node> {
        let it = claim
            .instance_types
            .first()
            .and_then(|n| self.types.get(n.as_str()).copied())?;
        let offering = it
            .offerings
            .iter()
            .filter(|o| o.available)
            .filter(|o| claim.zones.is_empty() || claim.zones.contains(&o.zone))
            .filter(|o| {
                claim.capacity_types.is_empty() || claim.capacity_types.contains(&o.capacity_type)
            })
            .min_by(|a, b| a.price.total_cmp(&b.price).then(a.zone.cmp(&b.zone)))?;
        let mut node_labels = it.labels.clone();
        node_labels.extend(claim.labels.clone());
        node_labels.insert(labels::INSTANCE_TYPE.into(), it.name.clone());
        node_labels.insert(labels::ZONE.into(), offering.zone.clone());
        node_labels.insert(labels::CAPACITY_TYPE.into(), offering.capacity_type.clone());
        node_labels.insert(labels::NODEPOOL.into(), claim.node_pool.clone());
        node_labels.insert(labels::HOSTNAME.into(), claim.name.clone());
        node_labels
            .entry(labels::OS.into())
            .or_insert_with(|| "linux".into());
        node_labels.insert(labels::INITIALIZED.into(), "true".into());
        let taints = claim
            .taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: match t.effect.as_str() {
                    "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
                    "NoExecute" => TaintEffect::NoExecute,
                    _ => TaintEffect::NoSchedule,
                },
            })
            .collect();
        Some(Node {
            name: claim.name.clone(),
            labels: node_labels,
            annotations: Default::default(),
            taints,
            allocatable: it.allocatable(),
            capacity: it.capacity.clone(),
            unschedulable: false,
            provider_id: None,
            ready: true,
            creation_time: Some(self.options.now),
            deletion_time: None,
        })
    }
}
