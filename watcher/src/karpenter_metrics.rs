//! Karpenter's cluster-state metrics, by Karpenter's names and labels, computed from the mirror
//! so that the dashboards and alerts users already have keep working (kubernetes-sigs/karpenter
//! v1.14 `pkg/controllers/metrics/{node,nodepool,pod}`, `pkg/controllers/state/metrics.go`):
//!
//! - `karpenter_nodes_allocatable`, `karpenter_nodes_total_pod_requests`,
//!   `karpenter_nodes_total_daemon_requests`, `karpenter_nodes_system_overhead`
//!   {node_name, nodepool, instance_type, capacity_type, zone, arch, os, resource_type};
//! - `karpenter_pods_state` {name, namespace, node, nodepool, zone, arch, capacity_type,
//!   instance_type, phase} (1 per pod);
//! - `karpenter_nodepools_usage` and `karpenter_nodepools_limit` {nodepool, resource_type};
//! - `karpenter_cluster_state_node_count`, `karpenter_cluster_state_synced`;
//! - `karpenter_voluntary_disruption_eligible_nodes` {reason} (`drifted`, `empty`,
//!   `underutilized`), from the latest plan's candidates
//!   (`pkg/controllers/disruption/controller.go`: the candidates each method's `ShouldDisrupt`
//!   keeps, blocked ones excluded);
//! - `karpenter_nodepools_allowed_disruptions` {nodepool, reason} (`Empty`, `Drifted`,
//!   `Underutilized`), from the latest plan's `nodePoolBudgets`
//!   (`pkg/controllers/disruption/helpers.go` `BuildDisruptionBudgetMapping`).
//!
//! - `karpenter_nodes_current_lifetime_seconds` {node_name, nodepool, ...}, node age;
//! - `karpenter_cluster_utilization_percent` {resource_type}: pod requests of bound pods over the
//!   nodes' allocatable, in percent (`pkg/controllers/metrics/node/controller.go`);
//! - `karpenter_cluster_state_unsynced_time_seconds`: 0 once every informer has listed, else the
//!   seconds since the watcher first saw itself unsynced;
//! - `karpenter_nodepools_nodes_consuming_budgets` {nodepool, reason}, from the latest plan's
//!   `nodePoolBudgets` (NotReady or disrupting nodes, `helpers.go`);
//! - `karpenter_scheduler_queue_depth` {controller, scheduling_id} (the pending pods waiting for
//!   the next plan), `karpenter_scheduler_unschedulable_pods_count` {controller} and
//!   `karpenter_scheduler_ignored_pods_count` (pods the latest plan left out as invalid), with
//!   `controller="provisioner"` (`pkg/controllers/provisioning/scheduling/metrics.go`);
//! - `karpenter_build_info` {version, goversion, goarch, commit} = 1 (`goversion` holds the Rust
//!   edition's toolchain family, `rust`; `commit` is empty unless built with `DOVETAIL_COMMIT`);
//! - the pod latency metrics of [`pods`] (`karpenter_pods_*_duration_seconds`,
//!   `karpenter_pods_*_time_seconds`).
//!
//! Resource values are in base units (cores, bytes, pods), as Karpenter reports them. The
//! gauges are rebuilt from scratch on every refresh, so objects that went away leave no series.

use std::collections::BTreeMap;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use proto::v1 as pb;
use proto::v1::upsert::Object;

use crate::mirror::{Kind, State};

pub mod pods;

type Labels = Vec<(String, String)>;
type FGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The gauges, registered under the `karpenter` prefix.
#[derive(Clone, Debug, Default)]
pub struct KarpenterMetrics {
    nodes_allocatable: Family<Labels, FGauge>,
    nodes_pod_requests: Family<Labels, FGauge>,
    nodes_daemon_requests: Family<Labels, FGauge>,
    nodes_overhead: Family<Labels, FGauge>,
    pods_state: Family<Labels, FGauge>,
    nodepools_usage: Family<Labels, FGauge>,
    nodepools_limit: Family<Labels, FGauge>,
    node_count: Gauge,
    synced: Gauge,
    eligible: Family<Labels, Gauge>,
    allowed_disruptions: Family<Labels, Gauge>,
    consuming_budgets: Family<Labels, Gauge>,
    lifetime: Family<Labels, FGauge>,
    utilization: Family<Labels, FGauge>,
    unsynced: FGauge,
    unsynced_since: std::sync::Arc<std::sync::Mutex<Option<f64>>>,
    queue_depth: Family<Labels, Gauge>,
    unschedulable: Family<Labels, Gauge>,
    ignored: Gauge,
    build_info: Family<Labels, Gauge>,
    /// Karpenter's pod latency metrics.
    pub pods: pods::PodLatency,
}

/// The node label keys Karpenter turns into metric labels (the well-known ones dashboards use).
const NODE_LABELS: [(&str, &str); 6] = [
    ("karpenter.sh/nodepool", "nodepool"),
    ("node.kubernetes.io/instance-type", "instance_type"),
    ("karpenter.sh/capacity-type", "capacity_type"),
    ("topology.kubernetes.io/zone", "zone"),
    ("kubernetes.io/arch", "arch"),
    ("kubernetes.io/os", "os"),
];

// === impl KarpenterMetrics ===

impl KarpenterMetrics {
    /// Registers the gauges in `registry`, under `karpenter_` (the registry itself must have no
    /// prefix).
    pub fn register(&self, registry: &mut Registry) {
        let k = registry.sub_registry_with_prefix("karpenter");
        k.register(
            "nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes",
            self.nodes_allocatable.clone(),
        );
        k.register(
            "nodes_total_pod_requests",
            "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods",
            self.nodes_pod_requests.clone(),
        );
        k.register(
            "nodes_total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes",
            self.nodes_daemon_requests.clone(),
        );
        k.register(
            "nodes_system_overhead",
            "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status",
            self.nodes_overhead.clone(),
        );
        k.register(
            "pods_state",
            "Pod state is the current state of pods, labeled by the pod name, namespace, node, nodepool name, zone, architecture, capacity type, instance type and pod phase",
            self.pods_state.clone(),
        );
        k.register(
            "nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type",
            self.nodepools_usage.clone(),
        );
        k.register(
            "nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type",
            self.nodepools_limit.clone(),
        );
        k.register(
            "cluster_state_node_count",
            "Current count of nodes in cluster state",
            self.node_count.clone(),
        );
        k.register(
            "cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise",
            self.synced.clone(),
        );
        k.register(
            "voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
            self.eligible.clone(),
        );
        k.register(
            "nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
            self.allowed_disruptions.clone(),
        );
        let k = registry.sub_registry_with_prefix("karpenter");
        k.register(
            "nodepools_nodes_consuming_budgets",
            "The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool.",
            self.consuming_budgets.clone(),
        );
        k.register(
            "nodes_current_lifetime_seconds",
            "Node age in seconds",
            self.lifetime.clone(),
        );
        k.register(
            "cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests",
            self.utilization.clone(),
        );
        k.register(
            "cluster_state_unsynced_time_seconds",
            "The time for which cluster state is not synced",
            self.unsynced.clone(),
        );
        k.register(
            "scheduler_queue_depth",
            "The number of pods currently waiting to be scheduled.",
            self.queue_depth.clone(),
        );
        k.register(
            "scheduler_unschedulable_pods_count",
            "The number of unschedulable Pods.",
            self.unschedulable.clone(),
        );
        k.register(
            "scheduler_ignored_pods_count",
            "Number of pods ignored during scheduling by Karpenter",
            self.ignored.clone(),
        );
        k.register(
            "build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            self.build_info.clone(),
        );
        self.build_info
            .get_or_create(&vec![
                ("version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
                ("goversion".to_string(), "rust".to_string()),
                ("goarch".to_string(), std::env::consts::ARCH.to_string()),
                (
                    "commit".to_string(),
                    option_env!("DOVETAIL_COMMIT")
                        .unwrap_or_default()
                        .to_string(),
                ),
            ])
            .set(1);
        self.pods.register(registry);
    }

    /// Sets the scheduler gauges from a plan: its unschedulable pods and the pods it left out.
    pub fn note_scheduling(&self, plan: &pb::PlanResponse) {
        self.unschedulable
            .get_or_create(&vec![("controller".to_string(), "provisioner".to_string())])
            .set(plan.unschedulable.len() as i64);
        self.ignored
            .set(plan.excluded.iter().filter(|e| e.kind == "Pod").count() as i64);
    }

    /// Sets `karpenter_nodepools_allowed_disruptions` from a plan's budgets (pools gone since
    /// the last plan leave no series).
    pub fn note_budgets(&self, budgets: &[pb::NodePoolBudgetStatus]) {
        self.allowed_disruptions.clear();
        self.consuming_budgets.clear();
        for b in budgets {
            let labels = vec![
                ("nodepool".to_string(), b.node_pool.clone()),
                ("reason".to_string(), b.reason.clone()),
            ];
            self.allowed_disruptions
                .get_or_create(&labels)
                .set(i64::from(b.allowed));
            self.consuming_budgets
                .get_or_create(&labels)
                .set(i64::from(b.disrupting));
        }
    }

    /// Sets the eligible-node gauges from a plan's candidates: drifted, empty (consolidatable,
    /// no pod to move) and underutilized (consolidatable, not empty, consolidation allowed),
    /// blocked ones left out, as Karpenter counts its candidates per method.
    pub fn note_node_status(&self, status: &[pb::NodeDisruptionStatus]) {
        let (mut drifted, mut empty, mut underutilized) = (0, 0, 0);
        for n in status.iter().filter(|n| n.blocked.is_empty()) {
            drifted += i64::from(!n.drifted.is_empty());
            if n.consolidatable && n.unconsolidatable.is_empty() {
                if n.empty {
                    empty += 1;
                } else {
                    underutilized += 1;
                }
            }
        }
        for (reason, v) in [
            ("drifted", drifted),
            ("empty", empty),
            ("underutilized", underutilized),
        ] {
            self.eligible
                .get_or_create(&vec![("reason".to_string(), reason.to_string())])
                .set(v);
        }
    }

    /// Rebuilds every gauge from the mirror at `now` (Unix seconds); `synced`: every informer
    /// has listed once.
    pub fn refresh(&self, state: &State, synced: bool, now: f64) {
        self.pods
            .refresh(now, |key| state.get(Kind::Pod, key).is_some());
        for f in [
            &self.nodes_allocatable,
            &self.nodes_pod_requests,
            &self.nodes_daemon_requests,
            &self.nodes_overhead,
            &self.pods_state,
            &self.nodepools_usage,
            &self.nodepools_limit,
            &self.lifetime,
            &self.utilization,
        ] {
            f.clear();
        }
        self.synced.set(i64::from(synced));
        {
            let mut since = self
                .unsynced_since
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if synced {
                *since = None;
                self.unsynced.set(0.0);
            } else {
                let first = *since.get_or_insert(now);
                self.unsynced.set(now - first);
            }
        }
        self.queue_depth.clear();
        self.queue_depth
            .get_or_create(&vec![
                ("controller".to_string(), "provisioner".to_string()),
                ("scheduling_id".to_string(), String::new()),
            ])
            .set(state.pending_pods() as i64);
        let nodes: BTreeMap<&str, &pb::Node> = state
            .iter(Kind::Node)
            .filter_map(|o| match o {
                Object::Node(n) => Some((n.name.as_str(), n)),
                _ => None,
            })
            .collect();
        self.node_count.set(nodes.len() as i64);
        // Requests of bound, active pods per node: (all, DaemonSet pods only).
        let mut requests: BTreeMap<&str, (Resources, Resources)> = BTreeMap::new();
        for o in state.iter(Kind::Pod) {
            let Object::Pod(p) = o else { continue };
            let node = p.node_name.as_deref().and_then(|n| nodes.get(n).copied());
            self.pods_state.get_or_create(&pod_labels(p, node)).set(1.0);
            let Some(node) = node else { continue };
            if matches!(p.phase.as_str(), "Succeeded" | "Failed") || p.deletion_time.is_some() {
                continue;
            }
            let e = requests.entry(node.name.as_str()).or_default();
            add(&mut e.0, &p.requests_milli);
            if p.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet") {
                add(&mut e.1, &p.requests_milli);
            }
        }
        let mut usage: BTreeMap<String, Resources> = BTreeMap::new();
        let (mut all_alloc, mut all_requested) = (Resources::new(), Resources::new());
        for n in nodes.values() {
            let base = node_labels(n);
            if let Some(created) = n.creation_time {
                self.lifetime.get_or_create(&base).set(now - created as f64);
            }
            let alloc = to_base(&n.allocatable_milli);
            for (resource, v) in &alloc {
                *all_alloc.entry(resource.clone()).or_default() += v;
            }
            let cap = to_base(&n.capacity_milli);
            let (pods, daemons) = requests.get(n.name.as_str()).cloned().unwrap_or_default();
            for (resource, v) in &pods {
                *all_requested.entry(resource.clone()).or_default() += v;
            }
            for (family, values) in [
                (&self.nodes_allocatable, &alloc),
                (&self.nodes_pod_requests, &pods),
                (&self.nodes_daemon_requests, &daemons),
            ] {
                for (resource, v) in values {
                    family.get_or_create(&with(&base, resource)).set(*v);
                }
            }
            for (resource, c) in &cap {
                let a = alloc.get(resource).copied().unwrap_or(0.0);
                self.nodes_overhead
                    .get_or_create(&with(&base, resource))
                    .set(c - a);
            }
            if let Some(pool) = n.labels.get("karpenter.sh/nodepool") {
                let u = usage.entry(pool.clone()).or_default();
                for (resource, c) in &cap {
                    *u.entry(resource.clone()).or_default() += c;
                }
                *u.entry("nodes".into()).or_default() += 1.0;
            }
        }
        for (resource, a) in all_alloc.iter().filter(|(_, a)| **a > 0.0) {
            let used = all_requested.get(resource).copied().unwrap_or(0.0);
            self.utilization
                .get_or_create(&vec![("resource_type".to_string(), resource.clone())])
                .set(100.0 * used / a);
        }
        for o in state.iter(Kind::NodePool) {
            let Object::NodePool(p) = o else { continue };
            let pool = vec![("nodepool".to_string(), p.name.clone())];
            for (resource, v) in usage.get(&p.name).cloned().unwrap_or_default() {
                self.nodepools_usage
                    .get_or_create(&with(&pool, &resource))
                    .set(v);
            }
            if let Some(limits) = &p.limits {
                for (resource, v) in to_base(&limits.milli) {
                    self.nodepools_limit
                        .get_or_create(&with(&pool, &resource))
                        .set(v);
                }
            }
        }
    }
}

type Resources = BTreeMap<String, f64>;

/// Amounts in milli-units (as k8s-reader reads them) in base units (cores, bytes, counts).
fn to_base(q: &BTreeMap<String, i64>) -> Resources {
    q.iter()
        .map(|(k, m)| (k.clone(), *m as f64 / 1000.0))
        .collect()
}

fn add(sum: &mut Resources, q: &BTreeMap<String, i64>) {
    for (k, v) in to_base(q) {
        *sum.entry(k).or_default() += v;
    }
}

fn node_labels(n: &pb::Node) -> Labels {
    let mut out = vec![("node_name".to_string(), n.name.clone())];
    for (key, name) in NODE_LABELS {
        out.push((
            name.to_string(),
            n.labels.get(key).cloned().unwrap_or_default(),
        ));
    }
    out
}

fn pod_labels(p: &pb::Pod, node: Option<&pb::Node>) -> Labels {
    let label = |key: &str| {
        node.and_then(|n| n.labels.get(key).cloned())
            .unwrap_or_default()
    };
    vec![
        ("name".into(), p.name.clone()),
        ("namespace".into(), p.namespace.clone()),
        ("node".into(), p.node_name.clone().unwrap_or_default()),
        ("nodepool".into(), label("karpenter.sh/nodepool")),
        ("zone".into(), label("topology.kubernetes.io/zone")),
        ("arch".into(), label("kubernetes.io/arch")),
        ("capacity_type".into(), label("karpenter.sh/capacity-type")),
        (
            "instance_type".into(),
            label("node.kubernetes.io/instance-type"),
        ),
        (
            "phase".into(),
            if p.phase.is_empty() {
                "Pending".into()
            } else {
                p.phase.clone()
            },
        ),
    ]
}

fn with(base: &Labels, resource: &str) -> Labels {
    let mut l = base.clone();
    l.push(("resource_type".to_string(), resource.to_string()));
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::State;

    fn q(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Quantities in milli-units, as k8s-reader sends them.
    fn milli(pairs: &[(&str, &str)]) -> BTreeMap<String, i64> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), common::quantity::parse_milli(v).expect(v)))
            .collect()
    }

    #[test]
    fn exports_karpenters_names_and_labels() {
        let mut state = State::default();
        state.upsert(Object::Node(pb::Node {
            name: "n1".into(),
            labels: q(&[
                ("karpenter.sh/nodepool", "default"),
                ("node.kubernetes.io/instance-type", "m5.large"),
                ("karpenter.sh/capacity-type", "spot"),
                ("topology.kubernetes.io/zone", "us-east-1a"),
                ("kubernetes.io/arch", "amd64"),
            ]),
            capacity_milli: milli(&[("cpu", "2"), ("memory", "8Gi"), ("pods", "29")]),
            allocatable_milli: milli(&[("cpu", "1930m"), ("memory", "7Gi"), ("pods", "29")]),
            creation_time: Some(1_000),
            ..Default::default()
        }));
        state.upsert(Object::Pod(pb::Pod {
            namespace: "default".into(),
            name: "web-1".into(),
            node_name: Some("n1".into()),
            phase: "Running".into(),
            requests_milli: milli(&[("cpu", "500m")]),
            ..Default::default()
        }));
        state.upsert(Object::Pod(pb::Pod {
            namespace: "default".into(),
            name: "web-2".into(),
            ..Default::default()
        }));
        state.upsert(Object::NodePool(pb::NodePool {
            name: "default".into(),
            limits: Some(pb::ResourceList {
                milli: milli(&[("cpu", "100")]),
                ..Default::default()
            }),
            ..Default::default()
        }));
        let m = KarpenterMetrics::default();
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.refresh(&state, true, 4_600.0);
        let text = service_shell::metrics::encode(&registry);
        for want in [
            r#"karpenter_nodes_allocatable{node_name="n1",nodepool="default",instance_type="m5.large",capacity_type="spot",zone="us-east-1a",arch="amd64",os="",resource_type="cpu"} 1.93"#,
            r#"karpenter_nodes_total_pod_requests{node_name="n1",nodepool="default",instance_type="m5.large",capacity_type="spot",zone="us-east-1a",arch="amd64",os="",resource_type="cpu"} 0.5"#,
            r#"karpenter_pods_state{name="web-1",namespace="default",node="n1",nodepool="default",zone="us-east-1a",arch="amd64",capacity_type="spot",instance_type="m5.large",phase="Running"} 1.0"#,
            r#"karpenter_pods_state{name="web-2",namespace="default",node="",nodepool="",zone="",arch="",capacity_type="",instance_type="",phase="Pending"} 1.0"#,
            r#"karpenter_nodepools_usage{nodepool="default",resource_type="nodes"} 1.0"#,
            r#"karpenter_nodepools_usage{nodepool="default",resource_type="cpu"} 2.0"#,
            r#"karpenter_nodepools_limit{nodepool="default",resource_type="cpu"} 100.0"#,
            "karpenter_cluster_state_node_count 1",
            "karpenter_cluster_state_synced 1",
            "karpenter_cluster_state_unsynced_time_seconds 0.0",
            r#"karpenter_cluster_utilization_percent{resource_type="cpu"} 25.906735751295338"#,
            r#"karpenter_nodes_current_lifetime_seconds{node_name="n1",nodepool="default",instance_type="m5.large",capacity_type="spot",zone="us-east-1a",arch="amd64",os=""} 3600.0"#,
            r#"karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id=""} 1"#,
            r#"karpenter_build_info{version="#,
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
        // Eligible nodes per method, from the plan's candidates (blocked ones left out).
        let n = |drifted: &str, consolidatable: bool, empty: bool, blocked: &str| {
            pb::NodeDisruptionStatus {
                drifted: drifted.into(),
                consolidatable,
                empty,
                blocked: blocked.into(),
                ..Default::default()
            }
        };
        m.note_node_status(&[
            n("NodePoolDrifted", true, false, ""),
            n("", true, true, ""),
            n("", true, false, ""),
            n("AMIDrift", true, true, "Pdb prevents pod evictions"),
        ]);
        let text = service_shell::metrics::encode(&registry);
        for want in [
            r#"karpenter_voluntary_disruption_eligible_nodes{reason="drifted"} 1"#,
            r#"karpenter_voluntary_disruption_eligible_nodes{reason="empty"} 1"#,
            r#"karpenter_voluntary_disruption_eligible_nodes{reason="underutilized"} 2"#,
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
        // A pod that went away leaves no series.
        state.delete(Kind::Pod, "default/web-2");
        m.refresh(&state, true, 0.0);
        let text = service_shell::metrics::encode(&registry);
        assert!(!text.contains(r#"name="web-2""#), "{text}");
    }

    #[test]
    fn unsynced_time_budgets_and_scheduler_gauges() {
        let state = State::default();
        let m = KarpenterMetrics::default();
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.refresh(&state, false, 10.0);
        m.refresh(&state, false, 15.5);
        let text = service_shell::metrics::encode(&registry);
        assert!(
            text.contains("karpenter_cluster_state_unsynced_time_seconds 5.5"),
            "{text}"
        );
        m.note_budgets(&[pb::NodePoolBudgetStatus {
            node_pool: "default".into(),
            reason: "Drifted".into(),
            allowed: 3,
            nodes: 10,
            disrupting: 2,
        }]);
        m.note_scheduling(&pb::PlanResponse {
            unschedulable: vec![pb::Unschedulable::default(); 4],
            excluded: vec![
                pb::ExcludedObject {
                    kind: "Pod".into(),
                    ..Default::default()
                },
                pb::ExcludedObject {
                    kind: "NodePool".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        let text = service_shell::metrics::encode(&registry);
        for want in [
            r#"karpenter_nodepools_nodes_consuming_budgets{nodepool="default",reason="Drifted"} 2"#,
            r#"karpenter_scheduler_unschedulable_pods_count{controller="provisioner"} 4"#,
            "karpenter_scheduler_ignored_pods_count 1",
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
    }
}
