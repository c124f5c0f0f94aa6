//! Karpenter's scheduling-benchmark catalog (`fake.InstanceTypes(n)` in kubernetes-sigs/karpenter
//! `pkg/cloudprovider/fake/instancetype.go`, used by `scheduling_benchmark_test.go`), for our
//! benches and tests.
//!
//! Type `i` (0-based) is `fake-it-<i>` with `i+1` vCPU, `2(i+1)` GiB and `10(i+1)` pods, an
//! overhead of 100m cpu and 10Mi memory (kube-reserved), spot offerings in `test-zone-1` and
//! `test-zone-2` and on-demand offerings in `test-zone-1..3`. As in Karpenter's fake provider,
//! every offering costs `0.1 × vCPU + 0.1 × memory in GB (10^9 bytes)`, spot and on-demand alike.

use crate::labels;
use crate::model::{Labels, Resources};

use super::overhead::{GIB, MIB};
use super::{Catalog, InstanceType, Offering, Overhead};

/// Zones of the synthetic catalog.
pub const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

/// Karpenter's fake-provider label `size`: `large` above 4 vCPU and 8Gi, else `small`.
pub const LABEL_SIZE: &str = "size";
/// Karpenter's fake-provider label `integer`: the vCPU count.
pub const LABEL_INTEGER: &str = "integer";

/// The benchmark catalog with `count` instance types.
pub fn karpenter_benchmark(count: usize) -> Catalog {
    let instance_types = (0..count).map(fake_type).collect();
    Catalog {
        instance_types,
        notes: vec![format!(
            "Synthetic catalog of Karpenter's scheduling benchmark: {count} types fake-it-0..; \
             type i has i+1 vCPU, 2(i+1) GiB, 10(i+1) pods; price 0.1 x vCPU + 0.1 x GB."
        )],
    }
}

fn fake_type(i: usize) -> InstanceType {
    let n = i as i64 + 1;
    let name = format!("fake-it-{i}");
    let cpu = n * 1000;
    let memory = 2 * n * GIB;
    let price = 0.1 * n as f64 + 0.1 * memory as f64 / 1e9;
    let offering = |zone: &str, capacity_type: &str| Offering {
        zone: zone.to_string(),
        capacity_type: capacity_type.to_string(),
        price,
        available: true,
        unpriced: false,
    };
    let offerings = vec![
        offering(ZONES[0], labels::CAPACITY_SPOT),
        offering(ZONES[1], labels::CAPACITY_SPOT),
        offering(ZONES[0], labels::CAPACITY_ON_DEMAND),
        offering(ZONES[1], labels::CAPACITY_ON_DEMAND),
        offering(ZONES[2], labels::CAPACITY_ON_DEMAND),
    ];

    let mut l = Labels::new();
    let mut put = |k: &str, v: String| {
        l.insert(k.to_string(), v);
    };
    put(labels::INSTANCE_TYPE, name.clone());
    put(labels::ARCH, "amd64".to_string());
    put(labels::OS, "linux".to_string());
    put(labels::INSTANCE_FAMILY, "fake-it".to_string());
    put(labels::INSTANCE_CATEGORY, "fake".to_string());
    put(labels::INSTANCE_GENERATION, "1".to_string());
    put(labels::INSTANCE_SIZE, format!("{n}x"));
    put(labels::INSTANCE_CPU, n.to_string());
    put(labels::INSTANCE_MEMORY, (memory / MIB).to_string());
    let large = n > 4 && memory > 8 * GIB;
    put(
        LABEL_SIZE,
        if large { "large" } else { "small" }.to_string(),
    );
    put(LABEL_INTEGER, n.to_string());

    InstanceType {
        name,
        capacity: Resources {
            cpu,
            memory,
            pods: 10 * n,
            ..Resources::default()
        },
        overhead: Overhead {
            kube_reserved: Resources::cpu_memory(100, 10 * MIB),
            ..Overhead::default()
        },
        labels: l,
        os: vec!["linux".to_string()],
        offerings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_of_type_i_follows_karpenter() {
        let c = karpenter_benchmark(400);
        assert_eq!(c.instance_types.len(), 400);
        let it = &c.instance_types[2];
        assert_eq!(it.name, "fake-it-2");
        assert_eq!(it.capacity.cpu, 3000);
        assert_eq!(it.capacity.memory, 6 * GIB);
        assert_eq!(it.capacity.pods, 30);
        assert_eq!(it.allocatable().cpu, 2900);
        assert_eq!(it.allocatable().memory, 6 * GIB - 10 * MIB);
        let expected_price = 0.3 + 0.1 * (6 * GIB) as f64 / 1e9;
        assert!(
            it.offerings
                .iter()
                .all(|o| (o.price - expected_price).abs() < 1e-12)
        );
        let spot: Vec<_> = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == "spot")
            .map(|o| o.zone.as_str())
            .collect();
        let on_demand: Vec<_> = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == "on-demand")
            .map(|o| o.zone.as_str())
            .collect();
        assert_eq!(spot, ["test-zone-1", "test-zone-2"]);
        assert_eq!(on_demand, ["test-zone-1", "test-zone-2", "test-zone-3"]);
        assert_eq!(it.labels[labels::ARCH], "amd64");
        assert_eq!(it.labels[labels::INSTANCE_TYPE], "fake-it-2");
        assert_eq!(it.labels[labels::INSTANCE_CPU], "3");
        assert_eq!(it.labels[LABEL_SIZE], "small");
        assert_eq!(c.instance_types[4].labels[LABEL_SIZE], "large");
    }

    #[test]
    fn prices_grow_with_size_and_names_are_unique() {
        let c = karpenter_benchmark(50);
        let prices: Vec<f64> = c
            .instance_types
            .iter()
            .map(|t| t.offerings[0].price)
            .collect();
        assert!(prices.windows(2).all(|w| w[0] < w[1]));
        let names: std::collections::BTreeSet<_> =
            c.instance_types.iter().map(|t| &t.name).collect();
        assert_eq!(names.len(), 50);
        assert!(karpenter_benchmark(0).instance_types.is_empty());
    }
}
