//! The live catalog as `dovetail.v1.LiveCatalog` (raw facts and offerings, no allocatable).

use cloud::InstanceTypeFacts;
use proto::v1 as pb;

use crate::catalog::Served;

/// The wire form of a served catalog.
pub(crate) fn live_catalog(served: &Served) -> pb::LiveCatalog {
    let facts = &served.facts;
    pb::LiveCatalog {
        region: facts.region.clone(),
        instance_types: facts.instance_types.iter().map(instance_type).collect(),
        notes: facts.notes.clone(),
        shifted_zones: served.shifted_zones.clone(),
    }
}

fn instance_type(t: &InstanceTypeFacts) -> pb::InstanceTypeFacts {
    let i = &t.info;
    pb::InstanceTypeFacts {
        name: i.name.clone(),
        vcpu: i.vcpu,
        memory_mib: i.memory_mib,
        architectures: i.architectures.clone(),
        manufacturer: i.manufacturer.clone(),
        hypervisor: i.hypervisor.clone(),
        usage_classes: i.usage_classes.clone(),
        max_network_interfaces: i.max_network_interfaces,
        ipv4_per_interface: i.ipv4_per_interface,
        network_cards: i
            .network_cards
            .iter()
            .map(|c| pb::NetworkCardFacts {
                index: c.index,
                max_interfaces: c.max_interfaces,
                baseline_gbps: c.baseline_gbps,
            })
            .collect(),
        network_performance: i.network_performance.clone(),
        efa_supported: i.efa_supported,
        encryption_in_transit: i.encryption_in_transit,
        local_nvme_gib: i.local_nvme_gib,
        sustained_clock_speed_mhz: i.sustained_clock_speed_mhz,
        ebs_bandwidth_mbps: i.ebs_bandwidth_mbps,
        gpus: i
            .gpus
            .iter()
            .map(|g| pb::GpuFacts {
                manufacturer: g.manufacturer.clone(),
                name: g.name.clone(),
                count: g.count,
                memory_mib: g.memory_mib,
            })
            .collect(),
        accelerators: i
            .accelerators
            .iter()
            .map(|a| pb::AcceleratorFacts {
                manufacturer: a.manufacturer.clone(),
                name: a.name.clone(),
                count: a.count,
            })
            .collect(),
        offerings: t
            .offerings
            .iter()
            .map(|o| pb::Offering {
                zone: o.zone.clone(),
                capacity_type: o.capacity_type.clone(),
                price: o.price,
                available: o.available,
                unpriced: o.unpriced,
            })
            .collect(),
    }
}
