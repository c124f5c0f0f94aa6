//! Dynamic Resource Allocation objects: wire → model.

use proto::v1 as pb;

use planner::model;

use super::term;
use crate::{At, Result, list, non_empty};

/// Decodes a wire `ResourceClaim`; errors name the field below `at`.
pub fn resource_claim(c: pb::ResourceClaim, at: At<'_>) -> Result<model::ResourceClaim> {
    Ok(model::ResourceClaim {
        namespace: non_empty(c.namespace, at.field("namespace"))?,
        name: non_empty(c.name, at.field("name"))?,
        requests: list(c.requests, at.field("requests"), request)?,
        match_attributes: list(c.match_attributes, at.field("match_attributes"), |m, a| {
            Ok(model::MatchAttribute {
                attribute: non_empty(m.attribute, a.field("attribute"))?,
                requests: m.requests,
            })
        })?,
        unsupported_constraint: c.unsupported_constraint,
        allocated: c.allocated,
        allocation_node_selector: list(
            c.allocation_node_selector,
            at.field("allocation_node_selector"),
            term,
        )?,
        allocated_devices: list(
            c.allocated_devices,
            at.field("allocated_devices"),
            |d, _| Ok(device_id(d)),
        )?,
        reserved_for_pods: c.reserved_for_pods,
        reserved_by_other: c.reserved_by_other,
    })
}

fn request(r: pb::DeviceRequest, at: At<'_>) -> Result<model::DeviceRequest> {
    if r.count < 0 {
        return Err(at.field("count").err("must not be negative"));
    }
    Ok(model::DeviceRequest {
        name: non_empty(r.name, at.field("name"))?,
        device_class_name: if r.first_available {
            r.device_class_name
        } else {
            non_empty(r.device_class_name, at.field("device_class_name"))?
        },
        count: r.count,
        all: r.all,
        selectors: r.selectors,
        first_available: r.first_available,
    })
}

fn device_id(d: pb::AllocatedDevice) -> model::DeviceId {
    model::DeviceId {
        driver: d.driver,
        pool: d.pool,
        device: d.device,
    }
}

/// Decodes a wire `DeviceClass`; errors name the field below `at`.
pub fn device_class(c: pb::DeviceClass, at: At<'_>) -> Result<model::DeviceClass> {
    Ok(model::DeviceClass {
        name: non_empty(c.name, at.field("name"))?,
        selectors: c.selectors,
        unsupported_selector: c.unsupported_selector,
    })
}

/// Decodes a wire `ResourceSlice`; errors name the field below `at`.
pub fn resource_slice(s: pb::ResourceSlice, at: At<'_>) -> Result<model::ResourceSlice> {
    Ok(model::ResourceSlice {
        name: non_empty(s.name, at.field("name"))?,
        driver: non_empty(s.driver, at.field("driver"))?,
        pool: non_empty(s.pool, at.field("pool"))?,
        pool_generation: s.pool_generation,
        resource_slice_count: s.resource_slice_count,
        node_name: s.node_name,
        all_nodes: s.all_nodes,
        node_selector: list(s.node_selector, at.field("node_selector"), term)?,
        owner_node: s.owner_node,
        devices: list(s.devices, at.field("devices"), |d, a| {
            Ok(model::Device {
                name: non_empty(d.name, a.field("name"))?,
                attributes: d.attributes.into_iter().collect(),
            })
        })?,
        shared_counters: s.shared_counters,
    })
}
