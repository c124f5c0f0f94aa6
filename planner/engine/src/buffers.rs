//! CapacityBuffers as Karpenter v1.14 plans them (behind its `CapacityBuffer` feature gate,
//! [`PlanOptions::capacity_buffer`]), read from kubernetes-sigs/karpenter
//! `pkg/controllers/capacitybuffer/` (replicas and `ReadyForProvisioning`),
//! `pkg/state/virtualpods/` (virtual pods) and `pkg/controllers/provisioning/buffers.go` (the
//! `Provisioning` condition).
//!
//! A ready buffer becomes `status.replicas` virtual pods: copies of its template with the lowest
//! priority, the buffer's annotations and nothing that needs a real object (PVCs, a node
//! name). They are pending pods to the scheduler, placed after every real pod
//! (`scheduling::queue`), so a buffer never takes room a real pod could use; the claims they
//! need are launched like any other. The plan reports them only per buffer
//! ([`crate::plan::CapacityBufferStatus`]): no pod Event, nomination or count names them.
//!
//! Consolidation keeps what they reserve: the virtual pods placed on existing capacity are
//! bound there for the disruption search (as Karpenter's `SimulateScheduling` schedules them
//! with every candidate's pods), so removing or replacing such a node must fit them elsewhere,
//! and an empty node hosting them is not Empty (Karpenter's `Node %q has buffer pods`). Unlike
//! a real pod, a virtual pod does not hold its node back from drift or expiry (Karpenter does
//! not nominate nodes for them).

use std::collections::{BTreeMap, BTreeSet};

use crate::labels;
use crate::model::{CapacityBuffer, ClusterSnapshot, PlanOptions, Pod, PodKey, Resources};
use crate::plan::{CapacityBufferStatus, NodeDisruptionStatus, Plan};

/// `spec.provisioningStrategy`'s default (`ActiveProvisioningStrategy`).
pub const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";

/// The priority of virtual pods (`VirtualPodPriority`, `math.MinInt32`).
pub const VIRTUAL_POD_PRIORITY: i32 = i32::MIN;

/// Whether a pod is a CapacityBuffer's virtual pod (Karpenter's `IsVirtualPod`: the
/// annotation).
pub fn is_virtual(p: &Pod) -> bool {
    p.annotations
        .get(labels::CAPACITY_BUFFER_FAKE_POD)
        .is_some_and(|v| v == "true")
}

/// How many chunks a buffer asks for (Karpenter's `computeReplicas`): the larger of
/// `spec.replicas` and `spec.percentage` of the scalable workload's replicas (rounded up, at
/// least 1), capped by how many chunks fit in `spec.limits`; with neither set, as many as fit
/// in the limits (0 without limits).
pub fn desired_replicas(b: &CapacityBuffer, template: &Pod) -> i32 {
    let mut candidates: Vec<i32> = Vec::new();
    if b.pod_template_ref.is_none()
        && let (Some(pct), Some(sr)) = (b.percentage, b.scalable_replicas)
        && sr > 0
    {
        let n = (f64::from(sr) * f64::from(pct) / 100.0).ceil() as i32;
        candidates.push(if n < 1 && pct > 0 { 1 } else { n });
    }
    if let Some(r) = b.replicas {
        candidates.push(r);
    }
    let desired = candidates.iter().copied().max();
    let by_limits = b
        .limits
        .as_ref()
        .and_then(|l| limit_replicas(l, &template.requests));
    match (desired, by_limits) {
        (Some(d), Some(l)) => d.min(l),
        (None, Some(l)) => l,
        (Some(d), None) => d,
        (None, None) => 0,
    }
}

/// How many chunks fit in `limits` (Karpenter's `calculateLimitReplicas`): per resource set in
/// both, ⌊limit ÷ request⌋, the least of them; `None` when no resource is in both (the pod's
/// `pods` slot is not a request, as in Karpenter's `RequestsForSpec`).
fn limit_replicas(limits: &Resources, requests: &Resources) -> Option<i32> {
    let mut names: Vec<&str> = vec![
        crate::model::names::CPU,
        crate::model::names::MEMORY,
        crate::model::names::EPHEMERAL_STORAGE,
    ];
    names.extend(limits.extended.keys().map(String::as_str));
    names
        .into_iter()
        .filter(|n| limits.get(n) != 0 && requests.get(n) != 0)
        .map(|n| {
            let q = (limits.get(n) as f64 / requests.get(n) as f64).floor();
            q.clamp(0.0, f64::from(i32::MAX)) as i32
        })
        .min()
}

/// The virtual pods of one buffer (Karpenter's `BuildVirtualPods`): `replicas` copies of the
/// template named `capacity-buffer-<name>-<i>` with UID `<uid>-<i>`, the template's labels (so
/// spreads and affinities count them), only the buffer's annotations, the lowest priority, and
/// no node name or persistent volume claims.
pub fn virtual_pods(b: &CapacityBuffer, template: &Pod, replicas: i32) -> Vec<Pod> {
    (1..=replicas.max(0))
        .map(|i| {
            let mut p = template.clone();
            p.namespace = b.namespace.clone();
            p.name = format!("capacity-buffer-{}-{i}", b.name);
            p.uid = format!("{}-{i}", b.uid);
            p.annotations = [
                (labels::CAPACITY_BUFFER_FAKE_POD, "true"),
                (labels::CAPACITY_BUFFER_NAME, b.name.as_str()),
                (labels::CAPACITY_BUFFER_NAMESPACE, b.namespace.as_str()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            p.priority = VIRTUAL_POD_PRIORITY;
            p.owner = None;
            p.node_name = None;
            p.phase = Default::default();
            p.volume_claims.clear();
            p.creation_time = None;
            p.start_time = None;
            p.deletion_time = None;
            p
        })
        .collect()
}

/// One buffer as this plan sees it: what its status says, and its virtual pods' keys.
#[derive(Debug, Clone)]
struct Resolved {
    status: CapacityBufferStatus,
    pods: Vec<PodKey>,
}

/// The buffers of a plan: the snapshot with their virtual pods added, and what each buffer's
/// status says before placement.
#[derive(Debug, Clone)]
pub struct Buffers {
    /// The snapshot with every ready buffer's virtual pods, pending.
    pub snapshot: ClusterSnapshot,
    buffers: Vec<Resolved>,
    virtual_keys: BTreeSet<PodKey>,
}

/// Adds the virtual pods of the snapshot's buffers; `None` when the gate is off or there is no
/// buffer (the snapshot is used as it is).
pub fn with_virtual_pods(snapshot: &ClusterSnapshot, options: &PlanOptions) -> Option<Buffers> {
    if !options.capacity_buffer || snapshot.capacity_buffers.is_empty() {
        return None;
    }
    let mut out = snapshot.clone();
    let mut buffers: Vec<&CapacityBuffer> = snapshot.capacity_buffers.iter().collect();
    buffers.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut resolved = Vec::new();
    let mut virtual_keys = BTreeSet::new();
    for b in buffers {
        let mut status = CapacityBufferStatus {
            namespace: b.namespace.clone(),
            name: b.name.clone(),
            provisioning_strategy: b.provisioning_strategy.clone().unwrap_or_default(),
            ..Default::default()
        };
        let mut keys = Vec::new();
        match (&b.template, &b.unresolved) {
            (Some(template), None) => {
                let replicas = desired_replicas(b, template);
                status.ready_for_provisioning = true;
                status.ready_reason = "Resolved".into();
                status.ready_message = "Pod template resolved successfully".into();
                status.replicas = Some(replicas);
                if let Some(t) = &b.pod_template_ref {
                    status.pod_template = t.clone();
                    status.pod_template_generation = b.pod_template_generation;
                }
                for p in virtual_pods(b, template, replicas) {
                    keys.push(p.key());
                    virtual_keys.insert(p.key());
                    out.pods.push(p);
                }
            }
            (_, Some((reason, message))) => {
                status.ready_reason = reason.clone();
                status.ready_message = message.clone();
            }
            (None, None) => {
                status.ready_reason = "ResolutionFailed".into();
                status.ready_message = "Neither podTemplateRef nor scalableRef is set".into();
            }
        }
        resolved.push(Resolved { status, pods: keys });
    }
    Some(Buffers {
        snapshot: out,
        buffers: resolved,
        virtual_keys,
    })
}

// === impl Buffers ===

impl Buffers {
    /// How many virtual pods the snapshot holds.
    pub fn virtual_count(&self) -> usize {
        self.virtual_keys.len()
    }

    /// Whether a pod key is one of this plan's virtual pods.
    pub fn is_virtual_key(&self, key: &str) -> bool {
        self.virtual_keys.contains(key)
    }

    /// Writes each buffer's status into the plan from where its virtual pods went (Karpenter's
    /// `computeProvisioningCondition`), then takes the virtual pods out of every list of pods
    /// the plan has (they are no one's to nominate or tell), and says on each disruption
    /// candidate hosting them that it has buffer pods. Returns how many virtual pods the launch
    /// plan placed.
    pub fn finish(&self, plan: &mut Plan, snapshot: &ClusterSnapshot) -> usize {
        // Per virtual pod: (on existing capacity, on a new claim, fits nowhere).
        let mut where_: BTreeMap<PodKey, (usize, usize, usize)> = BTreeMap::new();
        // Per virtual pod, the existing node it is placed on.
        let mut host: BTreeMap<PodKey, String> = BTreeMap::new();
        for e in &plan.existing_nodes {
            for p in e.pods.iter().filter(|p| self.is_virtual_key(p)) {
                where_.entry(p.clone()).or_default().0 += 1;
                host.insert(p.clone(), e.name.clone());
            }
        }
        for c in &plan.node_claims {
            for p in c.pods.iter().filter(|p| self.is_virtual_key(p)) {
                where_.entry(p.clone()).or_default().1 += 1;
            }
        }
        for u in plan
            .unschedulable
            .iter()
            .filter(|u| self.is_virtual_key(&u.pod))
        {
            where_.entry(u.pod.clone()).or_default().2 += 1;
        }
        let placed = where_.values().map(|w| w.0 + w.1).sum();
        for b in &self.buffers {
            let mut s = b.status.clone();
            let (mut existing, mut new, mut failed) = (0, 0, 0);
            let mut nodes: BTreeSet<String> = BTreeSet::new();
            for k in &b.pods {
                let (e, n, f) = where_.get(k).copied().unwrap_or_default();
                existing += e;
                new += n;
                failed += f;
                nodes.extend(host.get(k).cloned());
            }
            let desired = s.replicas.unwrap_or(0);
            let (status, reason, message) = if !s.ready_for_provisioning {
                (
                    "False",
                    "NotReadyForProvisioning",
                    "Buffer is not ReadyForProvisioning".to_string(),
                )
            } else if desired == 0 {
                (
                    "False",
                    "BufferEmpty",
                    "Buffer has zero desired replicas".to_string(),
                )
            } else if new > 0 || failed > 0 {
                (
                    "False",
                    "RequiresNewCapacity",
                    format!("{new}/{desired} virtual pods required new capacity, {failed} failed"),
                )
            } else if i32::try_from(existing).is_ok_and(|e| e == desired) {
                (
                    "True",
                    "FitsExistingCapacity",
                    format!("All {desired} virtual pods fit on existing capacity"),
                )
            } else {
                // Karpenter leaves the condition as it is when it saw no chunk placed.
                ("", "", String::new())
            };
            s.provisioning = status.to_string();
            s.provisioning_reason = reason.to_string();
            s.provisioning_message = message;
            s.nodes = nodes.into_iter().collect();
            plan.capacity_buffers.push(s);
        }
        let hosts: BTreeSet<String> = host.into_values().collect();
        self.strip(plan);
        mark_buffer_hosts(&mut plan.node_status, &hosts, snapshot);
        placed
    }

    fn strip(&self, plan: &mut Plan) {
        let keep = |pods: &mut Vec<PodKey>| pods.retain(|p| !self.is_virtual_key(p));
        plan.existing_nodes
            .iter_mut()
            .for_each(|e| keep(&mut e.pods));
        plan.existing_nodes.retain(|e| !e.pods.is_empty());
        plan.node_claims.iter_mut().for_each(|c| keep(&mut c.pods));
        plan.unschedulable.retain(|u| !self.is_virtual_key(&u.pod));
        for d in &mut plan.disruptions {
            d.replacements.iter_mut().for_each(|c| keep(&mut c.pods));
            d.destinations.iter_mut().for_each(|e| keep(&mut e.pods));
            d.destinations.retain(|e| !e.pods.is_empty());
        }
    }
}

/// Karpenter's emptiness check (`pkg/controllers/disruption/emptiness.go`): a node of a
/// dynamic NodePool with consolidation on that hosts buffer pods is not empty, and its
/// `Unconsolidatable` Event says `Node "<name>" has buffer pods`.
fn mark_buffer_hosts(
    status: &mut [NodeDisruptionStatus],
    hosts: &BTreeSet<String>,
    snapshot: &ClusterSnapshot,
) {
    for s in status.iter_mut().filter(|s| hosts.contains(&s.node)) {
        let Some(pool) = snapshot.node_pools.iter().find(|p| p.name == s.node_pool) else {
            continue;
        };
        if pool.replicas.is_some()
            || pool.disruption.consolidate_after.is_none()
            || !s.blocked.is_empty()
        {
            continue;
        }
        s.empty = false;
        s.unconsolidatable = format!("Node {:?} has buffer pods", s.node);
    }
}

#[cfg(test)]
mod tests;
