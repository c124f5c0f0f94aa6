//! Synthetic inputs for tests, benches and the integration tests of the gRPC edge.
//!
//! Not used by the service itself. The shapes are small but touch every message type so that
//! round trips and error paths are exercised.

use planner::catalog::{Catalog, InstanceType, Offering, Overhead};
use planner::model::{
    ClusterSnapshot, Node, NodeClaim, NodePool, Operator, Pod, Requirement, Resources, Taint,
    TaintEffect, Toleration, TolerationOperator,
};
use planner::plan::{
    DisruptionDecision, ExcludedObject, ExistingNodePlacement, Plan, PlannedNodeClaim, Summary,
    TaintOut, Unschedulable,
};

const GI: i64 = 1 << 30;

/// A snapshot with `pods` pending pods (in 10 deployments of varied sizes), one NodePool with its
/// EC2NodeClass, one existing node and one in-flight NodeClaim.
pub fn snapshot(pods: usize) -> ClusterSnapshot {
    let mut s = ClusterSnapshot::default();
    for i in 0..pods {
        let app = format!("app-{}", i % 10);
        let mut p = Pod {
            namespace: "default".into(),
            name: format!("{app}-{i}"),
            uid: format!("uid-{i}"),
            requests: Resources {
                cpu: 250 * (1 + (i % 4) as i64),
                memory: (GI / 2) * (1 + (i % 3) as i64),
                pods: 1,
                ..Resources::default()
            },
            ..Pod::default()
        };
        p.labels.insert("app".into(), app);
        if i % 7 == 0 {
            p.tolerations.push(Toleration {
                key: "dedicated".into(),
                operator: TolerationOperator::Equal,
                value: "batch".into(),
                effect: Some(TaintEffect::NoSchedule),
            });
        }
        s.pods.push(p);
    }
    let mut pool = NodePool {
        name: "default".into(),
        weight: 10,
        node_class: Some("default".into()),
        requirements: vec![Requirement {
            key: planner::labels::CAPACITY_TYPE.into(),
            operator: Operator::In,
            values: vec!["spot".into(), "on-demand".into()],
            min_values: None,
        }],
        taints: vec![Taint {
            key: "dedicated".into(),
            value: "batch".into(),
            effect: TaintEffect::NoSchedule,
        }],
        expire_after: Some(720 * 3600),
        ..NodePool::default()
    };
    pool.taints.clear();
    s.node_pools.push(pool);
    s.node_classes.push(planner::model::NodeClass {
        name: "default".into(),
        ami_family: Some("AL2023".into()),
        ..planner::model::NodeClass::default()
    });
    let mut node = Node {
        name: "ip-10-0-1-5.ec2.internal".into(),
        allocatable: Resources {
            cpu: 1930,
            memory: 7 * GI,
            pods: 29,
            ..Resources::default()
        },
        ready: true,
        provider_id: Some("aws:///us-east-1a/i-0abc".into()),
        creation_time: Some(1_700_000_000),
        ..Node::default()
    };
    node.labels
        .insert(planner::labels::INSTANCE_TYPE.into(), "m5.large".into());
    node.labels
        .insert(planner::labels::ZONE.into(), "us-east-1a".into());
    s.nodes.push(node);
    s.node_claims.push(NodeClaim {
        name: "default-inflight".into(),
        requests: Resources::cpu_memory(1000, GI),
        node_class: Some("default".into()),
        ..NodeClaim::default()
    });
    s
}

/// A small catalog: three sizes of one family in two zones, spot and on-demand.
pub fn catalog() -> Catalog {
    let mut types = Vec::new();
    for (i, size) in ["large", "xlarge", "2xlarge"].iter().enumerate() {
        let mul = 1i64 << i;
        let od = 0.096 * mul as f64;
        let mut offerings = Vec::new();
        for zone in ["us-east-1a", "us-east-1b"] {
            offerings.push(Offering {
                zone: zone.into(),
                capacity_type: "on-demand".into(),
                price: od,
                available: true,
                unpriced: false,
            });
            offerings.push(Offering {
                zone: zone.into(),
                capacity_type: "spot".into(),
                price: od * 0.36,
                unpriced: false,
                available: true,
            });
        }
        let name = format!("m5.{size}");
        let mut labels = planner::model::Labels::new();
        labels.insert(planner::labels::INSTANCE_TYPE.into(), name.clone());
        labels.insert(planner::labels::ARCH.into(), "amd64".into());
        types.push(InstanceType {
            name,
            capacity: Resources {
                cpu: 2000 * mul,
                memory: 8 * GI * mul,
                pods: 29 * mul,
                ..Resources::default()
            },
            overhead: Overhead {
                kube_reserved: Resources::cpu_memory(70, 574 << 20),
                system_reserved: Resources::default(),
                eviction_threshold: Resources::cpu_memory(0, 100 << 20),
            },
            labels,
            os: vec!["linux".into()],
            offerings,
        });
    }
    Catalog {
        instance_types: types,
        notes: vec![],
    }
}

/// A plan that uses every output field: claims, placements, unschedulable pods, a disruption
/// with a replacement, notes and fractional prices.
pub fn plan() -> Plan {
    let claim = |name: &str, pods: &[&str], price: f64| {
        let mut labels = planner::model::Labels::new();
        labels.insert("karpenter.sh/nodepool".into(), "default".into());
        labels.insert("team".into(), "web".into());
        PlannedNodeClaim {
            name: name.into(),
            node_pool: "default".into(),
            instance_types: vec!["m5.large".into(), "m5a.large".into(), "m6i.large".into()],
            zones: vec!["us-east-1a".into()],
            capacity_types: vec!["spot".into(), "on-demand".into()],
            price,
            labels,
            taints: vec![TaintOut {
                key: "example.com/special".into(),
                value: "true".into(),
                effect: "NoSchedule".into(),
            }],
            pods: pods.iter().map(|p| p.to_string()).collect(),
        }
    };
    Plan {
        node_claims: vec![
            claim("default-7x2kq", &["default/web-0", "default/web-1"], 0.035),
            claim("default-9p4zz", &["default/web-2"], 0.1),
        ],
        existing_nodes: vec![ExistingNodePlacement {
            name: "ip-10-0-1-5.ec2.internal".into(),
            pods: vec!["default/api-3".into()],
        }],
        unschedulable: vec![Unschedulable {
            pod: "default/big-0".into(),
            reason: "no instance type in NodePool default fits cpu=200".into(),
        }],
        disruptions: vec![
            DisruptionDecision {
                reason: "Underutilized".into(),
                nodes: vec!["ip-10-0-1-7.ec2.internal".into()],
                replacements: vec![],
                savings_per_hour: 0.096,
                destinations: vec![ExistingNodePlacement {
                    name: "ip-10-0-1-9.ec2.internal".into(),
                    pods: vec!["default/web-1".into()],
                }],
            },
            DisruptionDecision {
                reason: "Drifted".into(),
                nodes: vec!["ip-10-0-1-8.ec2.internal".into()],
                replacements: vec![claim("default-r3pl4", &["default/db-0"], 0.0)],
                savings_per_hour: 0.0,
                destinations: vec![ExistingNodePlacement {
                    name: "default-r3pl4".into(),
                    pods: vec!["default/db-0".into()],
                }],
            },
        ],
        summary: Summary {
            pending_pods: 4,
            scheduled_pods: 3,
            new_node_claims: 2,
            cost_per_hour: 0.135,
            lower_bound_cost_per_hour: 0.031,
        },
        notes: vec!["spot prices are estimates".into()],
        catalog_version: None,
        excluded: vec![ExcludedObject {
            kind: "NodePool".into(),
            namespace: String::new(),
            name: "balanced".into(),
            reason: "Unsupported".into(),
            message: "consolidationPolicy \"Sometimes\" is not supported by this planner".into(),
            field: "disruption.consolidation_policy".into(),
        }],
        node_status: vec![planner::plan::NodeDisruptionStatus {
            node: "ip-10-0-1-5".into(),
            node_claim: "default-abcde".into(),
            node_pool: "default".into(),
            drifted: "NodePoolDrifted".into(),
            drift_message:
                "karpenter.sh/nodepool-hash 1 (version v3) differs from NodePool default's 2".into(),
            consolidatable: true,
            blocked: String::new(),
            unconsolidatable: String::new(),
            empty: false,
        }],
        options: Some(planner::plan::OptionsUsed {
            preference_policy: "Respect".into(),
            min_values_policy: "Strict".into(),
            reserved_enis: 1,
            vm_memory_overhead_percent: 0.075,
            node_overlay: true,
            ..planner::plan::OptionsUsed::default()
        }),
        node_overlays: vec![planner::catalog::overlay::NodeOverlayStatus {
            name: "preview-price".into(),
            validation_succeeded: false,
            reason: "Conflict".into(),
            message: "conflict with another overlay".into(),
        }],
        capacity_buffers: vec![planner::plan::CapacityBufferStatus {
            namespace: "default".into(),
            name: "spare".into(),
            ready_for_provisioning: true,
            ready_reason: "Resolved".into(),
            ready_message: "Pod template resolved successfully".into(),
            replicas: Some(2),
            pod_template: "spare-chunk".into(),
            pod_template_generation: Some(1),
            provisioning_strategy: String::new(),
            provisioning: "True".into(),
            provisioning_reason: "FitsExistingCapacity".into(),
            provisioning_message: "All 2 virtual pods fit on existing capacity".into(),
            nodes: vec!["ip-10-0-1-5.ec2.internal".into()],
        }],
        node_pool_budgets: vec![planner::plan::NodePoolBudgetStatus {
            node_pool: "default".into(),
            reason: "Empty".into(),
            allowed: 1,
            nodes: 3,
            disrupting: 0,
        }],
        consolidation_moves: vec![planner::plan::ConsolidationMove {
            decision: "approved".into(),
            nodes: vec!["ip-10-0-1-9.ec2.internal".into()],
            node_claims: vec!["default-x7k2p".into()],
            node_pools: vec![planner::plan::ConsolidationPoolScore {
                node_pool: "default".into(),
                policy: "Balanced".into(),
                scored: true,
                score: 0.78,
                threshold: 0.5,
                k: 2,
                savings_percent: 78.0,
                disruption_percent: 100.0,
            }],
        }],
    }
}
