//! The instance-type catalog: what can be launched, what it holds and what it costs.
//!
//! The built-in AWS catalog is compiled in from `data/aws/`; a catalog file
//! (`--instance-types`, format in `designs/planner-io.md`) replaces it. Loading is done
//! by the edge (the CLI or the gRPC layer) and handed to the planner as a [`Catalog`] (its data types live in the shared `common`
//! crate and are re-exported here).
//!
//! - [`aws`]: the built-in AWS catalog (`aws::builtin(region)`), with Karpenter's capacity,
//!   overhead and label rules.
//! - [`overhead`]: those rules as functions, and the EC2NodeClass kubelet overrides
//!   ([`apply_kubelet`], [`ForNodeClass::for_node_class`]).
//! - [`settings`]: Karpenter's `reservedENIs` and `vmMemoryOverheadPercent`, applied for one
//!   plan from its options.
//! - [`zonal_shift`]: zones under an ARC zonal shift: no offerings, no voluntary disruption.
//! - [`overlay`]: Karpenter's NodeOverlays (prices, extended resources, preview types), per
//!   NodePool, under the `NodeOverlay` gate.
//! - [`mod@file`]: the `--instance-types` file format (`file::parse(text, source)`).
//! - [`synthetic`]: Karpenter's scheduling-benchmark catalog, for benches and tests.

pub mod aws;
pub mod file;
pub mod overhead;
pub mod overlay;
pub mod settings;
pub mod synthetic;
pub mod zonal_shift;

pub use overhead::{AmiFamily, apply_kubelet, apply_kubelet_for_family};

pub use common::catalog::{Catalog, InstanceType, Offering, Overhead};

use crate::model::NodeClass;

/// The catalog as NodePools that use an EC2NodeClass see it (an extension of [`Catalog`],
/// whose data lives in the shared `common` crate).
pub trait ForNodeClass {
    /// The catalog as NodePools that use `class` see it: the class's AMI family and kubelet
    /// settings (`maxPods`, `podsPerCore`, `kubeReserved`, `systemReserved`, `evictionHard`)
    /// applied to every type, as Karpenter's instance-type provider does per EC2NodeClass.
    /// `None` (a NodePool without a resolvable class) gives the catalog unchanged.
    ///
    /// Apply it to a base catalog (built-in, file or synthetic), not to one already adjusted:
    /// the type's `pods` capacity is taken as its default max pods.
    fn for_node_class(&self, class: Option<&NodeClass>) -> Catalog;
}

impl ForNodeClass for Catalog {
    fn for_node_class(&self, class: Option<&NodeClass>) -> Catalog {
        let Some(class) = class else {
            return self.clone();
        };
        let family = AmiFamily::from_name(class.ami_family.as_deref());
        Catalog {
            instance_types: self
                .instance_types
                .iter()
                .filter_map(|it| overhead::for_family(it, &class.kubelet, family))
                .map(|it| with_disk_and_eviction_percent(it, class))
                .collect(),
            notes: self.notes.clone(),
        }
    }
}

/// The class's root volume as the node's ephemeral storage (Karpenter takes the node's
/// ephemeral-storage capacity from the EC2NodeClass block device mapping), keeping the default
/// `nodefs` eviction threshold proportional to it, then the class's `evictionHard` percentages
/// (`memory.available: 5%` is 5% of the memory capacity, `nodefs.available` of the disk).
fn with_disk_and_eviction_percent(mut it: InstanceType, class: &NodeClass) -> InstanceType {
    if let Some(size) = class.root_volume_size.filter(|s| *s > 0) {
        let old = it.capacity.ephemeral_storage;
        let eviction = &mut it.overhead.eviction_threshold.ephemeral_storage;
        if *eviction == overhead::eviction_nodefs(old) {
            *eviction = overhead::eviction_nodefs(size);
        }
        it.capacity.ephemeral_storage = size;
    }
    for (resource, milli_percent) in &class.kubelet.eviction_hard_percent {
        let capacity = match resource.as_str() {
            crate::model::names::MEMORY => it.capacity.memory,
            crate::model::names::EPHEMERAL_STORAGE => it.capacity.ephemeral_storage,
            _ => continue,
        };
        let threshold = (capacity as f64 * *milli_percent as f64 / 100_000.0).ceil() as i64;
        match resource.as_str() {
            crate::model::names::MEMORY => it.overhead.eviction_threshold.memory = threshold,
            _ => it.overhead.eviction_threshold.ephemeral_storage = threshold,
        }
    }
    it
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offering(zone: &str, price: f64, available: bool) -> Offering {
        Offering {
            zone: zone.to_string(),
            capacity_type: "spot".to_string(),
            price,
            available,
            unpriced: false,
        }
    }

    #[test]
    fn cheapest_offering_skips_unavailable_and_keeps_the_first_tie() {
        let mut it = synthetic::karpenter_benchmark(1).instance_types.remove(0);
        it.offerings = vec![
            offering("a", 0.5, true),
            offering("b", 0.1, false),
            offering("c", 0.2, true),
            offering("d", 0.2, true),
        ];
        assert_eq!(it.cheapest_offering().map(|o| o.zone.as_str()), Some("c"));
        it.offerings.iter_mut().for_each(|o| o.available = false);
        assert!(it.cheapest_offering().is_none());
    }

    #[test]
    fn node_class_root_volume_and_eviction_percentages() {
        let mut base = synthetic::karpenter_benchmark(1);
        base.instance_types[0].capacity.ephemeral_storage = overhead::DEFAULT_EPHEMERAL_STORAGE;
        base.instance_types[0].overhead =
            overhead::default_overhead(2000, 20, overhead::DEFAULT_EPHEMERAL_STORAGE);
        let it = &base.instance_types[0];
        let mut class = NodeClass {
            root_volume_size: Some(100 * 1024 * 1024 * 1024),
            ..NodeClass::default()
        };
        class
            .kubelet
            .eviction_hard_percent
            .insert("memory".to_string(), 5_000);
        let got = base.for_node_class(Some(&class));
        let got = &got.instance_types[0];
        assert_eq!(got.capacity.ephemeral_storage, 100 * 1024 * 1024 * 1024);
        assert_eq!(
            got.overhead.eviction_threshold.ephemeral_storage,
            overhead::eviction_nodefs(100 * 1024 * 1024 * 1024)
        );
        let five_percent = (got.capacity.memory as f64 * 0.05).ceil() as i64;
        assert_eq!(got.overhead.eviction_threshold.memory, five_percent);
        // Without a root volume the type's disk is kept.
        let plain = base.for_node_class(Some(&NodeClass::default()));
        assert_eq!(
            plain.instance_types[0].capacity.ephemeral_storage,
            it.capacity.ephemeral_storage
        );
    }

    #[test]
    fn get_finds_by_name() {
        let c = synthetic::karpenter_benchmark(3);
        assert_eq!(c.get("fake-it-1").map(|t| t.capacity.cpu), Some(2000));
        assert!(c.get("m5.large").is_none());
    }
}
