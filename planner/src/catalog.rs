//! The instance-type catalog: what can be launched, what it holds and what it costs.
//!
//! The built-in AWS catalog is compiled in from `data/aws/`; a catalog file
//! (`--instance-types`, format in `../shared/docs/planner-io.md`) replaces it. Loading is done
//! by the edge (the CLI or the gRPC layer) and handed to the planner as a [`Catalog`].
//!
//! - [`aws`]: the built-in AWS catalog (`aws::builtin(region)`), with Karpenter's capacity,
//!   overhead and label rules.
//! - [`overhead`]: those rules as functions, and the EC2NodeClass kubelet overrides
//!   ([`apply_kubelet`], [`Catalog::for_node_class`]).
//! - [`mod@file`]: the `--instance-types` file format (`file::parse(text, source)`).
//! - [`synthetic`]: Karpenter's scheduling-benchmark catalog, for benches and tests.

pub mod aws;
pub mod file;
pub mod overhead;
pub mod synthetic;

pub use overhead::{AmiFamily, apply_kubelet, apply_kubelet_for_family};

use serde::{Deserialize, Serialize};

use crate::model::{Labels, NodeClass, Resources};

/// Resources kept back from a node's capacity.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Overhead {
    /// kube-reserved.
    pub kube_reserved: Resources,
    /// system-reserved.
    pub system_reserved: Resources,
    /// Eviction threshold (hard).
    pub eviction_threshold: Resources,
}

// === impl Overhead ===

impl Overhead {
    /// The sum of all parts.
    pub fn total(&self) -> Resources {
        let mut r = self.kube_reserved.clone();
        r.add(&self.system_reserved);
        r.add(&self.eviction_threshold);
        r
    }
}

/// Where and how a type can be bought.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Offering {
    /// Availability zone.
    pub zone: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    /// False when known to be out of capacity.
    pub available: bool,
}

/// One instance type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceType {
    /// Name, e.g. `m5.large`.
    pub name: String,
    /// Capacity as the kubelet reports it (memory already net of the VM overhead; `pods` is
    /// the max-pods value).
    pub capacity: Resources,
    /// Reserved resources.
    pub overhead: Overhead,
    /// Labels a node of this type carries (`node.kubernetes.io/instance-type`,
    /// `kubernetes.io/arch`, `karpenter.k8s.aws/instance-*`, ...), excluding zone and capacity
    /// type which come from the offering.
    pub labels: Labels,
    /// Operating systems it can run (`linux`, `windows`).
    pub os: Vec<String>,
    /// Offerings by zone and capacity type.
    pub offerings: Vec<Offering>,
}

// === impl InstanceType ===

impl InstanceType {
    /// What pods can use: capacity minus overhead.
    pub fn allocatable(&self) -> Resources {
        let mut r = self.capacity.clone();
        r.sub(&self.overhead.total());
        r
    }

    /// The cheapest available offering, if any (ties keep the first in offering order).
    pub fn cheapest_offering(&self) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available)
            .fold(None, |best: Option<&Offering>, o| match best {
                Some(b) if b.price <= o.price => Some(b),
                _ => Some(o),
            })
    }
}

/// A whole catalog.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// Instance types, in a stable order.
    pub instance_types: Vec<InstanceType>,
    /// Notes for the plan (e.g. how spot prices were estimated).
    pub notes: Vec<String>,
}

// === impl Catalog ===

impl Catalog {
    /// The instance type with this name, if the catalog has it.
    pub fn get(&self, name: &str) -> Option<&InstanceType> {
        self.instance_types.iter().find(|it| it.name == name)
    }

    /// The catalog as NodePools that use `class` see it: the class's AMI family and kubelet
    /// settings (`maxPods`, `podsPerCore`, `kubeReserved`, `systemReserved`, `evictionHard`)
    /// applied to every type, as Karpenter's instance-type provider does per EC2NodeClass.
    /// `None` (a NodePool without a resolvable class) gives the catalog unchanged.
    ///
    /// Apply it to a base catalog (built-in, file or synthetic), not to one already adjusted:
    /// the type's `pods` capacity is taken as its default max pods.
    pub fn for_node_class(&self, class: Option<&NodeClass>) -> Catalog {
        let Some(class) = class else {
            return self.clone();
        };
        let family = AmiFamily::from_name(class.ami_family.as_deref());
        Catalog {
            instance_types: self
                .instance_types
                .iter()
                .filter_map(|it| overhead::for_family(it, &class.kubelet, family))
                .collect(),
            notes: self.notes.clone(),
        }
    }
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
    fn get_finds_by_name() {
        let c = synthetic::karpenter_benchmark(3);
        assert_eq!(c.get("fake-it-1").map(|t| t.capacity.cpu), Some(2000));
        assert!(c.get("m5.large").is_none());
    }
}
