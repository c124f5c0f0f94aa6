//! The instance-type catalog's data: what can be launched, what it holds and what it costs.
//!
//! Plain data with plain methods. The built-in AWS catalog, the catalog file format and the
//! EC2NodeClass adjustments live in the planner engine (`planner::catalog`), which re-exports
//! these types.

use serde::{Deserialize, Serialize};

use crate::Labels;
use crate::resources::Resources;

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
    /// False when known to be out of capacity, or when no price source knows its price.
    pub available: bool,
    /// No price source knows this offering's price (a preview type EC2 describes to an
    /// allow-listed account): `price` is 0 and `available` false for that reason alone. A
    /// valid NodeOverlay with a `price` for the type makes it available under the `NodeOverlay`
    /// gate, as the AWS provider's offering resolver does (`base_resolver.go`, `hasPrice`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unpriced: bool,
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
}
