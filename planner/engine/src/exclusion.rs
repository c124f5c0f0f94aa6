//! Isolation by object: an object the planner cannot use is left out of the plan with a
//! reason, and the rest of the snapshot is planned.
//!
//! [`partition`] runs the rules of [`crate::validation`] object by object on a snapshot and
//! takes out every object that breaks one (a later object with the name of an earlier one, a
//! NodePool whose EC2NodeClass was taken out). A pod bound to a node stays in the snapshot as
//! a placeholder that asks for nothing but its pod slot and carries `karpenter.sh/do-not-disrupt`,
//! so that its node is never taken for empty. The doors that decode objects (the wire, the
//! manifests) add their own exclusions for objects they cannot decode at all.
//!
//! [`explain`] then writes the exclusions into the plan and, for each pending pod the plan
//! could not place, names every excluded NodePool the pod could have used (it tolerates the
//! pool's taints and its node selector and required node affinity meet the pool's
//! requirements), as Karpenter names a NodePool that is not ready.

use std::collections::HashSet;

use crate::labels;
use crate::model::{ClusterSnapshot, NodePool, Pod, PodPhase, Resources};
use crate::plan::{ExcludedObject, Plan};
use crate::requirements::{Requirements, taints};
use crate::validation;

/// The object breaks a rule of its schema.
pub const INVALID: &str = "Invalid";
/// The object uses a value newer than this planner (e.g. a `consolidationPolicy` newer than Karpenter v1.14).
pub const UNSUPPORTED: &str = "Unsupported";
/// A second object of the same kind with the same name (and namespace).
pub const DUPLICATE: &str = "Duplicate";
/// A NodePool whose EC2NodeClass was left out.
pub const NODE_CLASS_EXCLUDED: &str = "NodeClassExcluded";
/// An EC2NodeClass whose status says it cannot launch (Karpenter provisions only from
/// NodePools whose node class is Ready: `NewScheduler` in
/// `pkg/controllers/provisioning/provisioner.go`).
pub const NODE_CLASS_NOT_READY: &str = "NodeClassNotReady";

/// One object left out of a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Exclusion {
    /// What is reported.
    pub object: ExcludedObject,
    /// For a NodePool, the pool as far as it could be read (its requirements, labels and
    /// taints), to tell which pending pods needed it; `None` when it could not be read at all.
    pub node_pool: Option<NodePool>,
}

// === impl Exclusion ===

impl Exclusion {
    /// An exclusion of `kind` `namespace/name`.
    pub fn new(
        kind: &str,
        namespace: &str,
        name: &str,
        reason: &str,
        message: impl Into<String>,
        field: impl Into<String>,
    ) -> Self {
        Self {
            object: ExcludedObject {
                kind: kind.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                reason: reason.to_string(),
                message: message.into(),
                field: field.into(),
            },
            node_pool: None,
        }
    }

    fn from_rule(kind: &str, namespace: &str, name: &str, e: &validation::Error) -> Self {
        Self::new(
            kind,
            namespace,
            name,
            INVALID,
            format!("{}: {}", relative(e.field()), e.reason()),
            relative(e.field()),
        )
    }

    /// The same exclusion, keeping `pool` to tell which pods needed it.
    #[must_use]
    pub fn with_node_pool(mut self, pool: Option<NodePool>) -> Self {
        self.node_pool = pool;
        self
    }
}

/// A field path of the rules run with an empty prefix (`.requests.cpu` → `requests.cpu`).
fn relative(field: &str) -> &str {
    field.strip_prefix('.').unwrap_or(field)
}

/// Takes every object that breaks a rule out of `s`, and returns why for each.
pub fn partition(s: &mut ClusterSnapshot) -> Vec<Exclusion> {
    let mut out = Vec::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut dup = |kind: &str, ns: &str, name: &str, out: &mut Vec<Exclusion>| {
        if seen.insert((format!("{kind}/{ns}"), name.to_string())) {
            return false;
        }
        out.push(Exclusion::new(
            kind,
            ns,
            name,
            DUPLICATE,
            format!("another {kind} with this name came first; names are unique per kind"),
            "name",
        ));
        true
    };

    let pods = std::mem::take(&mut s.pods);
    for p in pods {
        if dup("Pod", &p.namespace, &p.name, &mut out) {
            continue;
        }
        match validation::pod(&p, "", "") {
            Ok(()) => s.pods.push(p),
            Err(e) => {
                out.push(Exclusion::from_rule("Pod", &p.namespace, &p.name, &e));
                if let Some(stand_in) = placeholder(&p) {
                    s.pods.push(stand_in);
                }
            }
        }
    }
    s.nodes.retain(|n| {
        if dup("Node", "", &n.name, &mut out) {
            return false;
        }
        keep(validation::node(n, "", ""), "Node", "", &n.name, &mut out)
    });
    s.node_claims.retain(|c| {
        if dup("NodeClaim", "", &c.name, &mut out) {
            return false;
        }
        keep(
            validation::node_claim(c, "", ""),
            "NodeClaim",
            "",
            &c.name,
            &mut out,
        )
    });
    let mut dropped_classes: Vec<(String, String)> = Vec::new();
    s.node_classes.retain(|c| {
        if dup("EC2NodeClass", "", &c.name, &mut out) {
            return false;
        }
        let before = out.len();
        let kept = keep(
            validation::node_class(c, "", ""),
            "EC2NodeClass",
            "",
            &c.name,
            &mut out,
        );
        if !kept {
            dropped_classes.push((c.name.clone(), out[before].object.message.clone()));
            return false;
        }
        if !c.not_ready.is_empty() {
            out.push(Exclusion::new(
                "EC2NodeClass",
                "",
                &c.name,
                NODE_CLASS_NOT_READY,
                format!("its status says it cannot launch: {}", c.not_ready),
                "status.conditions",
            ));
            dropped_classes.push((c.name.clone(), out[before].object.message.clone()));
            return false;
        }
        true
    });
    let pools = std::mem::take(&mut s.node_pools);
    for p in pools {
        if dup("NodePool", "", &p.name, &mut out) {
            continue;
        }
        if let Err(e) = validation::node_pool(&p, "", "") {
            out.push(Exclusion::from_rule("NodePool", "", &p.name, &e).with_node_pool(Some(p)));
            continue;
        }
        let class = p.node_class.as_deref().unwrap_or_default();
        let kept_class = s.node_classes.iter().any(|c| c.name == class);
        if let Some((_, why)) = dropped_classes.iter().find(|(n, _)| n == class)
            && !kept_class
        {
            out.push(
                Exclusion::new(
                    "NodePool",
                    "",
                    &p.name,
                    NODE_CLASS_EXCLUDED,
                    format!("its EC2NodeClass {class} was left out of the plan: {why}"),
                    "node_class",
                )
                .with_node_pool(Some(p)),
            );
            continue;
        }
        s.node_pools.push(p);
    }
    s.daemon_sets
        .retain(|d| !dup("DaemonSet", &d.namespace, &d.name, &mut out));
    s.pdbs
        .retain(|d| !dup("PodDisruptionBudget", &d.namespace, &d.name, &mut out));
    s.namespaces
        .retain(|n| !dup("Namespace", "", &n.name, &mut out));
    s.pvcs
        .retain(|c| !dup("PersistentVolumeClaim", &c.namespace, &c.name, &mut out));
    s.pvs
        .retain(|v| !dup("PersistentVolume", "", &v.name, &mut out));
    s.storage_classes
        .retain(|c| !dup("StorageClass", "", &c.name, &mut out));
    s.node_overlays
        .retain(|o| !dup("NodeOverlay", "", &o.name, &mut out));
    out
}

fn keep(r: validation::Result, kind: &str, ns: &str, name: &str, out: &mut Vec<Exclusion>) -> bool {
    match r {
        Ok(()) => true,
        Err(e) => {
            out.push(Exclusion::from_rule(kind, ns, name, &e));
            false
        }
    }
}

/// What stays of an excluded pod bound to a node: its identity, labels and owner, one pod
/// slot, and `karpenter.sh/do-not-disrupt`, so that its node is neither taken for empty nor
/// disrupted while the pod cannot be read. `None` for a pod that is not bound.
pub fn placeholder(p: &Pod) -> Option<Pod> {
    if p.node_name.is_none() || matches!(p.phase, PodPhase::Succeeded | PodPhase::Failed) {
        return None;
    }
    let requests = Resources {
        pods: 1,
        ..Resources::default()
    };
    let mut annotations = crate::model::Labels::new();
    annotations.insert(labels::DO_NOT_DISRUPT.to_string(), "true".to_string());
    Some(Pod {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
        labels: p.labels.clone(),
        annotations,
        owner: p.owner.clone(),
        requests,
        node_name: p.node_name.clone(),
        phase: p.phase,
        priority: p.priority,
        creation_time: p.creation_time,
        start_time: p.start_time,
        deletion_time: p.deletion_time,
        ..Pod::default()
    })
}

/// Whether pending pod `p` could have used NodePool `np`: it tolerates the pool's taints and
/// its node selector and some term of its required node affinity meet the pool's template.
fn could_use(p: &Pod, np: &NodePool) -> bool {
    if taints::first_untolerated(&np.taints, &p.tolerations).is_some() {
        return false;
    }
    let Ok(mut template) = Requirements::from_input(&np.requirements) else {
        return true;
    };
    for (k, v) in &np.labels {
        template.add(crate::requirements::Requirement::is_in(
            k.clone(),
            [v.clone()],
        ));
    }
    template.add(crate::requirements::Requirement::is_in(
        labels::NODEPOOL,
        [np.name.clone()],
    ));
    let selector = Requirements::from_labels(&p.node_selector);
    if template.intersects(&selector).is_err() {
        return false;
    }
    p.required_node_affinity.is_empty()
        || p.required_node_affinity.iter().any(|term| {
            Requirements::from_term(term).is_ok_and(|r| template.intersects(&r).is_ok())
        })
}

/// Writes `excluded` into `plan` (sorted) and names, in the reason of each pod the plan could
/// not place, every excluded NodePool the pod could have used.
pub fn explain(plan: &mut Plan, snapshot: &ClusterSnapshot, excluded: &[Exclusion]) {
    let pools: Vec<&Exclusion> = excluded
        .iter()
        .filter(|e| e.object.kind == "NodePool")
        .collect();
    if !pools.is_empty() && !plan.unschedulable.is_empty() {
        let by_key: std::collections::HashMap<String, &Pod> =
            snapshot.pods.iter().map(|p| (p.key(), p)).collect();
        for u in &mut plan.unschedulable {
            let pod = by_key.get(&u.pod).copied();
            for e in &pools {
                let needed = match (pod, &e.node_pool) {
                    (Some(p), Some(np)) => could_use(p, np),
                    _ => true,
                };
                if needed {
                    u.reason.push_str(&format!(
                        "; NodePool {} was left out of the plan: {}",
                        e.object.name, e.object.message
                    ));
                }
            }
        }
    }
    let mut objects: Vec<ExcludedObject> = excluded.iter().map(|e| e.object.clone()).collect();
    objects.sort();
    objects.dedup();
    plan.excluded = objects;
}

#[cfg(test)]
mod tests;
