//! Fixture builders for tests and benches: small catalogs, NodePools, pods and nodes with
//! sensible defaults that each test overrides.

use crate::catalog::{Catalog, InstanceType, Offering, Overhead};
use crate::labels;
use crate::model::{
    DaemonSet, Labels, Node, NodePool, OwnerRef, Pod, Requirement, Resources, Taint, TaintEffect,
    Toleration, TolerationOperator,
};

/// Bytes in a GiB.
pub const GI: i64 = 1 << 30;
/// Bytes in a MiB.
pub const MI: i64 = 1 << 20;

/// An instance type with `cpu` vCPUs, `mem_gi` GiB, `pods` max pods, no overhead, on-demand at
/// `price` and spot at 40% of it in `zone-a` and `zone-b`, arch amd64.
pub fn instance_type(name: &str, cpu: i64, mem_gi: i64, pods: i64, price: f64) -> InstanceType {
    let mut type_labels = Labels::new();
    type_labels.insert(labels::ARCH.to_string(), "amd64".to_string());
    if let Some((family, _)) = name.split_once('.') {
        type_labels.insert(labels::INSTANCE_FAMILY.to_string(), family.to_string());
    }
    let mut offerings = Vec::new();
    for zone in ["zone-a", "zone-b"] {
        offerings.push(Offering {
            zone: zone.to_string(),
            capacity_type: labels::CAPACITY_ON_DEMAND.to_string(),
            price,
            available: true,
            unpriced: false,
        });
        offerings.push(Offering {
            zone: zone.to_string(),
            capacity_type: labels::CAPACITY_SPOT.to_string(),
            price: price * 0.4,
            unpriced: false,
            available: true,
        });
    }
    InstanceType {
        name: name.to_string(),
        capacity: Resources {
            cpu: cpu * 1000,
            memory: mem_gi * GI,
            ephemeral_storage: 0,
            pods,
            extended: Default::default(),
        },
        overhead: Overhead::default(),
        labels: type_labels,
        os: vec!["linux".to_string()],
        offerings,
    }
}

/// A catalog of `m.small` (2 vCPU, 4 GiB, 0.1), `m.medium` (4, 8, 0.2), `m.large` (8, 16, 0.4),
/// `m.xlarge` (16, 32, 0.8), each with 110 pods.
pub fn small_catalog() -> Catalog {
    Catalog {
        instance_types: vec![
            instance_type("m.small", 2, 4, 110, 0.1),
            instance_type("m.medium", 4, 8, 110, 0.2),
            instance_type("m.large", 8, 16, 110, 0.4),
            instance_type("m.xlarge", 16, 32, 110, 0.8),
        ],
        notes: Vec::new(),
    }
}

/// A NodePool with no requirements.
pub fn node_pool(name: &str) -> NodePool {
    NodePool {
        name: name.to_string(),
        ..NodePool::default()
    }
}

/// A requirement.
pub fn requirement(key: &str, op: crate::model::Operator, values: &[&str]) -> Requirement {
    Requirement {
        key: key.to_string(),
        operator: op,
        values: values.iter().map(|s| s.to_string()).collect(),
        min_values: None,
    }
}

/// A pending pod in namespace `default` requesting `cpu_milli` and `mem_mi`.
pub fn pod(name: &str, cpu_milli: i64, mem_mi: i64) -> Pod {
    Pod {
        namespace: "default".to_string(),
        name: name.to_string(),
        uid: format!("uid-{name}"),
        requests: Resources {
            cpu: cpu_milli,
            memory: mem_mi * MI,
            pods: 1,
            ..Resources::default()
        },
        ..Pod::default()
    }
}

/// A pod bound to `node`.
pub fn bound_pod(name: &str, cpu_milli: i64, mem_mi: i64, node: &str) -> Pod {
    let mut p = pod(name, cpu_milli, mem_mi);
    p.node_name = Some(node.to_string());
    p.phase = crate::model::PodPhase::Running;
    p
}

/// A ready node with `cpu` vCPUs, `mem_gi` GiB and 110 pods allocatable.
pub fn node(name: &str, cpu: i64, mem_gi: i64) -> Node {
    let r = Resources {
        cpu: cpu * 1000,
        memory: mem_gi * GI,
        pods: 110,
        ..Resources::default()
    };
    let mut node_labels = Labels::new();
    node_labels.insert(labels::HOSTNAME.to_string(), name.to_string());
    Node {
        name: name.to_string(),
        labels: node_labels,
        allocatable: r.clone(),
        capacity: r,
        ready: true,
        ..Node::default()
    }
}

/// A DaemonSet whose pod requests `cpu_milli` and `mem_mi`.
pub fn daemon_set(name: &str, cpu_milli: i64, mem_mi: i64) -> DaemonSet {
    let mut template = pod(name, cpu_milli, mem_mi);
    template.owner = Some(OwnerRef {
        kind: "DaemonSet".to_string(),
        name: name.to_string(),
        controller: true,
    });
    DaemonSet {
        namespace: "default".to_string(),
        name: name.to_string(),
        template,
    }
}

/// A `NoSchedule` taint.
pub fn taint(key: &str, value: &str) -> Taint {
    Taint {
        key: key.to_string(),
        value: value.to_string(),
        effect: TaintEffect::NoSchedule,
    }
}

/// A toleration of `key=value`, any effect.
pub fn toleration(key: &str, value: &str) -> Toleration {
    Toleration {
        key: key.to_string(),
        operator: TolerationOperator::Equal,
        value: value.to_string(),
        effect: None,
    }
}

/// A tiny deterministic PRNG (SplitMix64) for benches and property-style fixtures.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }
}
