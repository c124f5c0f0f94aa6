//! Wire → model for catalogs: an inline catalog of a request, and the actuator's live catalog
//! (raw EC2 facts and offerings, converted by `common::ec2` as the built-in catalog is).

#[allow(clippy::wildcard_imports)]
use super::*;

/// Decodes an inline catalog.
///
/// # Errors
/// [`Error::InvalidField`] naming the first field at fault, e.g. a negative price.
pub fn catalog(c: pb::Catalog, at: At<'_>) -> Result<Catalog> {
    let instance_types = list(c.instance_types, at.field("instance_types"), |t, at| {
        let overhead = t.overhead.unwrap_or_default();
        let oa = at.field("overhead");
        let offerings = list(t.offerings, at.field("offerings"), offering)?;
        Ok(InstanceType {
            name: non_empty(t.name, at.field("name"))?,
            capacity: resources(t.capacity, at.field("capacity"))?,
            overhead: Overhead {
                kube_reserved: resources(overhead.kube_reserved, oa.field("kube_reserved"))?,
                system_reserved: resources(overhead.system_reserved, oa.field("system_reserved"))?,
                eviction_threshold: resources(
                    overhead.eviction_threshold,
                    oa.field("eviction_threshold"),
                )?,
            },
            labels: t.labels,
            os: if t.os.is_empty() {
                vec!["linux".to_string()]
            } else {
                t.os
            },
            offerings,
        })
    })?;
    let catalog = Catalog {
        instance_types,
        notes: c.notes,
    };
    planner::validation::catalog(&catalog, &at.render())?;
    Ok(catalog)
}

/// The actuator's live catalog (raw EC2 facts per type, offerings with prices) as a catalog:
/// capacity, overhead and labels come from `common::ec2::instance_type`, the same rules as the
/// built-in catalog. Types Kubernetes cannot run (no amd64 or arm64 architecture: Mac) are left
/// out and counted in a note.
///
/// # Errors
/// The first entry the planner cannot use, named by its path and type, e.g.
/// `catalog.instance_types[3].vcpu: must be positive, got 0 (instance type m5.large)`.
pub fn live_catalog(c: pb::LiveCatalog, at: At<'_>) -> Result<Catalog> {
    let region = non_empty(c.region, at.field("region"))?;
    let types_at = at.field("instance_types");
    let facts = list(c.instance_types, types_at, |t, at| {
        let name = non_empty(t.name, at.field("name"))?;
        let named = |e: Error| Error::InvalidField {
            field: e.field().to_string(),
            reason: format!("{} (instance type {name})", e.reason()),
        };
        for (v, f) in [(t.vcpu, "vcpu"), (t.memory_mib, "memory_mib")] {
            if v <= 0 {
                return Err(named(at.field(f).err(format!("must be positive, got {v}"))));
            }
        }
        non_negative(t.max_network_interfaces, at.field("max_network_interfaces"))
            .map_err(named)?;
        non_negative(t.ipv4_per_interface, at.field("ipv4_per_interface")).map_err(named)?;
        let offerings = list(t.offerings, at.field("offerings"), offering).map_err(named)?;
        let info = common::ec2::InstanceTypeInfo {
            name,
            vcpu: t.vcpu,
            memory_mib: t.memory_mib,
            architectures: t.architectures,
            manufacturer: t.manufacturer,
            hypervisor: t.hypervisor,
            usage_classes: t.usage_classes,
            max_network_interfaces: t.max_network_interfaces,
            ipv4_per_interface: t.ipv4_per_interface,
            network_cards: t
                .network_cards
                .into_iter()
                .map(|n| common::ec2::NetworkCard {
                    index: n.index,
                    max_interfaces: n.max_interfaces,
                    baseline_gbps: n.baseline_gbps,
                })
                .collect(),
            network_performance: t.network_performance,
            efa_supported: t.efa_supported,
            encryption_in_transit: t.encryption_in_transit,
            local_nvme_gib: t.local_nvme_gib,
            sustained_clock_speed_mhz: t.sustained_clock_speed_mhz,
            ebs_bandwidth_mbps: t.ebs_bandwidth_mbps,
            gpus: t
                .gpus
                .into_iter()
                .map(|g| common::ec2::Gpu {
                    manufacturer: g.manufacturer,
                    name: g.name,
                    count: g.count,
                    memory_mib: g.memory_mib,
                })
                .collect(),
            accelerators: t
                .accelerators
                .into_iter()
                .map(|a| common::ec2::Accelerator {
                    manufacturer: a.manufacturer,
                    name: a.name,
                    count: a.count,
                })
                .collect(),
        };
        Ok((info, offerings))
    })?;
    let mut seen = std::collections::BTreeSet::new();
    for (i, (info, _)) in facts.iter().enumerate() {
        if !seen.insert(info.name.as_str()) {
            return Err(types_at
                .index(i)
                .field("name")
                .err(format!("duplicate instance type {}", info.name)));
        }
    }
    let mut skipped = Vec::new();
    let mut instance_types = Vec::with_capacity(facts.len());
    for (info, offerings) in facts {
        match common::ec2::instance_type(&info, &region, offerings) {
            Some(t) => instance_types.push(t),
            None => skipped.push(info.name),
        }
    }
    let mut notes = c.notes;
    if !skipped.is_empty() {
        notes.push(format!(
            "{} instance types have no Kubernetes architecture (Mac instances) and are left out: {}.",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    let catalog = Catalog {
        instance_types,
        notes,
    };
    planner::validation::catalog(&catalog, &at.render())?;
    Ok(catalog)
}

/// One offering of either catalog: a zone, a capacity type and a finite, non-negative price.
fn offering(o: pb::Offering, at: At<'_>) -> Result<Offering> {
    if !o.price.is_finite() || o.price < 0.0 {
        return Err(at.field("price").err(format!(
            "must be a finite, non-negative number, got {}",
            o.price
        )));
    }
    Ok(Offering {
        zone: non_empty(o.zone, at.field("zone"))?,
        capacity_type: one_of(
            &o.capacity_type,
            at.field("capacity_type"),
            &[("spot", "spot"), ("on-demand", "on-demand")],
        )?
        .to_string(),
        price: o.price,
        available: o.available,
        unpriced: o.unpriced,
    })
}
