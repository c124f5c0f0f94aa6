//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`, read as JSON): ResourceClaims,
//! DeviceClasses and ResourceSlices, with what Karpenter v1.14's allocator reads of them
//! (kubernetes-sigs/karpenter `pkg/scheduling/dynamicresources`): requests in their `exactly`
//! form, CEL selectors, `matchAttribute` constraints, the allocation's devices and
//! `nodeSelector` (`matchExpressions`, as Karpenter's `nodeSelectorsToRequirements` reads it),
//! `reservedFor`; a slice's driver, pool, reachability, owning Node and devices' attributes.

use proto::v1 as pb;
use serde_json::Value;

use super::karpenter::{at, requirements, str_at};
use super::{Result, field_err};

/// The API group of DRA objects.
pub const GROUP: &str = "resource.k8s.io";

/// The API version of DRA objects Karpenter v1.14 reads.
pub const VERSION: &str = "v1";

fn array(v: Option<&Value>) -> impl Iterator<Item = &Value> {
    v.and_then(Value::as_array).into_iter().flatten()
}

fn string(v: &Value, path: &[&str]) -> String {
    str_at(v, path).unwrap_or_default().to_string()
}

/// CEL expressions of a `selectors` list; true in the second place when one is not CEL.
fn selectors(v: Option<&Value>) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut other = false;
    for s in array(v) {
        match str_at(s, &["cel", "expression"]) {
            Some(e) => out.push(e.to_string()),
            None => other = true,
        }
    }
    (out, other)
}

/// A `nodeSelector`'s terms, their `matchExpressions`.
fn node_selector(v: Option<&Value>, base: &str) -> Result<Vec<pb::NodeSelectorTerm>> {
    array(v.and_then(|v| v.get("nodeSelectorTerms")))
        .enumerate()
        .map(|(i, t)| {
            Ok(pb::NodeSelectorTerm {
                requirements: requirements(
                    t.get("matchExpressions"),
                    &format!("{base}.nodeSelectorTerms[{i}].matchExpressions"),
                )?,
            })
        })
        .collect()
}

/// Converts a ResourceClaim.
///
/// # Errors
/// A field the planner cannot use, named by its path.
pub fn resource_claim(v: &Value) -> Result<pb::ResourceClaim> {
    let devices = at(v, &["spec", "devices"]);
    let mut requests = Vec::new();
    for (i, r) in array(devices.and_then(|d| d.get("requests"))).enumerate() {
        let base = format!("spec.devices.requests[{i}]");
        let exactly = r.get("exactly");
        let first_available = exactly.is_none() && r.get("firstAvailable").is_some();
        let count = match exactly.and_then(|e| e.get("count")) {
            None | Some(Value::Null) => 1,
            Some(c) => c.as_i64().filter(|c| *c >= 1).ok_or_else(|| {
                field_err(
                    format!("{base}.exactly.count"),
                    format!("expected a count, got {c}"),
                )
            })?,
        };
        let mode = exactly
            .and_then(|e| str_at(e, &["allocationMode"]))
            .unwrap_or("ExactCount");
        let all = match mode {
            "ExactCount" | "" => false,
            "All" => true,
            other => {
                return Err(field_err(
                    format!("{base}.exactly.allocationMode"),
                    format!("unknown allocation mode {other:?} (ExactCount or All)"),
                ));
            }
        };
        requests.push(pb::DeviceRequest {
            name: string(r, &["name"]),
            device_class_name: exactly
                .map(|e| string(e, &["deviceClassName"]))
                .unwrap_or_default(),
            count,
            all,
            selectors: selectors(exactly.and_then(|e| e.get("selectors"))).0,
            first_available,
        });
    }
    let mut match_attributes = Vec::new();
    let mut unsupported_constraint = false;
    for c in array(devices.and_then(|d| d.get("constraints"))) {
        let names: Vec<String> = array(c.get("requests"))
            .filter_map(|r| r.as_str().map(String::from))
            .collect();
        match str_at(c, &["matchAttribute"]) {
            Some(a) => match_attributes.push(pb::MatchAttribute {
                attribute: a.to_string(),
                requests: names,
            }),
            None => unsupported_constraint = true,
        }
    }
    let allocation = at(v, &["status", "allocation"]).filter(|a| !a.is_null());
    let allocated_devices = array(allocation.and_then(|a| at(a, &["devices", "results"])))
        .map(|r| pb::AllocatedDevice {
            driver: string(r, &["driver"]),
            pool: string(r, &["pool"]),
            device: string(r, &["device"]),
        })
        .collect();
    let mut reserved_for_pods = Vec::new();
    let mut reserved_by_other = false;
    for r in array(at(v, &["status", "reservedFor"])) {
        let group = str_at(r, &["apiGroup"]).unwrap_or_default();
        if group.is_empty() && str_at(r, &["resource"]) == Some("pods") {
            reserved_for_pods.push(string(r, &["uid"]));
        } else {
            reserved_by_other = true;
        }
    }
    Ok(pb::ResourceClaim {
        namespace: string(v, &["metadata", "namespace"]),
        name: string(v, &["metadata", "name"]),
        requests,
        match_attributes,
        unsupported_constraint,
        allocated: allocation.is_some(),
        allocation_node_selector: node_selector(
            allocation.and_then(|a| a.get("nodeSelector")),
            "status.allocation.nodeSelector",
        )?,
        allocated_devices,
        reserved_for_pods,
        reserved_by_other,
        uid: string(v, &["metadata", "uid"]),
    })
}

/// Converts a DeviceClass.
pub fn device_class(v: &Value) -> pb::DeviceClass {
    let (selectors, unsupported_selector) = selectors(at(v, &["spec", "selectors"]));
    pb::DeviceClass {
        name: string(v, &["metadata", "name"]),
        selectors,
        unsupported_selector,
        uid: string(v, &["metadata", "uid"]),
    }
}

/// Converts a ResourceSlice. Attribute names are qualified with the driver's name when they
/// have no domain; values become literals (a JSON string for `string` and `version`, digits
/// for `int`, `true`/`false` for `bool`).
///
/// # Errors
/// A field the planner cannot use, named by its path.
pub fn resource_slice(v: &Value) -> Result<pb::ResourceSlice> {
    let spec = at(v, &["spec"]);
    let driver = spec.map(|s| string(s, &["driver"])).unwrap_or_default();
    let int = |path: &[&str], default: i64| -> Result<i64> {
        match spec.and_then(|s| at(s, path)) {
            None | Some(Value::Null) => Ok(default),
            Some(n) => n.as_i64().ok_or_else(|| {
                field_err(
                    format!("spec.{}", path.join(".")),
                    format!("expected an integer, got {n}"),
                )
            }),
        }
    };
    let mut devices = Vec::new();
    for (i, d) in array(spec.and_then(|s| s.get("devices"))).enumerate() {
        let mut attributes = std::collections::BTreeMap::new();
        for (k, a) in d
            .get("attributes")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let key = if k.contains('/') {
                k.clone()
            } else {
                format!("{driver}/{k}")
            };
            let literal = if let Some(s) = a.get("string").or_else(|| a.get("version")) {
                s.to_string()
            } else if let Some(n) = a.get("int").and_then(Value::as_i64) {
                n.to_string()
            } else if let Some(b) = a.get("bool").and_then(Value::as_bool) {
                b.to_string()
            } else {
                return Err(field_err(
                    format!("spec.devices[{i}].attributes.{k}"),
                    "expected one of string, version, int, bool",
                ));
            };
            attributes.insert(key, literal);
        }
        devices.push(pb::Device {
            name: string(d, &["name"]),
            attributes,
        });
    }
    let owner_node = array(at(v, &["metadata", "ownerReferences"]))
        .find(|r| str_at(r, &["kind"]) == Some("Node"))
        .map(|r| string(r, &["name"]))
        .unwrap_or_default();
    Ok(pb::ResourceSlice {
        name: string(v, &["metadata", "name"]),
        pool: spec
            .map(|s| string(s, &["pool", "name"]))
            .unwrap_or_default(),
        pool_generation: int(&["pool", "generation"], 0)?,
        resource_slice_count: int(&["pool", "resourceSliceCount"], 1)?,
        node_name: spec.map(|s| string(s, &["nodeName"])).unwrap_or_default(),
        all_nodes: spec
            .and_then(|s| s.get("allNodes"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        node_selector: node_selector(
            spec.and_then(|s| s.get("nodeSelector")),
            "spec.nodeSelector",
        )?,
        owner_node,
        devices,
        shared_counters: spec
            .and_then(|s| s.get("sharedCounters"))
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty()),
        driver,
        uid: string(v, &["metadata", "uid"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_claim_its_requests_constraints_and_allocation() {
        let c = resource_claim(&json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "gpus", "namespace": "ml", "uid": "u1"},
            "spec": {"devices": {
                "requests": [
                    {"name": "a", "exactly": {"deviceClassName": "gpu", "count": 2,
                        "selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}},
                    {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
                    {"name": "c", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]}
                ],
                "constraints": [{"requests": ["a", "b"], "matchAttribute": "gpu.example.com/numa"}]
            }},
            "status": {
                "allocation": {
                    "devices": {"results": [{"request": "a", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]},
                    "nodeSelector": {"nodeSelectorTerms": [{
                        "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}],
                        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]
                    }]}
                },
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}]
            }
        }))
        .expect("converts");
        assert_eq!(c.requests.len(), 3);
        assert_eq!((c.requests[0].count, c.requests[0].all), (2, false));
        assert_eq!(c.requests[0].selectors.len(), 1);
        assert!(c.requests[1].all);
        assert!(c.requests[2].first_available);
        assert_eq!(c.match_attributes[0].requests, ["a", "b"]);
        assert!(c.allocated);
        assert_eq!(c.allocated_devices[0].device, "gpu-0");
        assert_eq!(
            c.allocation_node_selector[0].requirements.len(),
            1,
            "matchFields are not read"
        );
        assert_eq!(c.reserved_for_pods, ["pod-uid"]);
        assert!(!c.reserved_by_other);
    }

    #[test]
    fn a_slice_with_qualified_literal_attributes_and_its_owner() {
        let s = resource_slice(&json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "n1-gpu", "ownerReferences": [{"kind": "Node", "name": "n1", "apiVersion": "v1", "uid": "x"}]},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {
                    "model": {"string": "a100"}, "memory": {"int": 80}, "mig": {"bool": true},
                    "other.example.com/v": {"version": "1.2.3"}}}]}
        }))
        .expect("converts");
        assert_eq!((s.owner_node.as_str(), s.node_name.as_str()), ("n1", "n1"));
        assert_eq!(s.pool_generation, 3);
        let a = &s.devices[0].attributes;
        assert_eq!(a["gpu.example.com/model"], "\"a100\"");
        assert_eq!(a["gpu.example.com/memory"], "80");
        assert_eq!(a["gpu.example.com/mig"], "true");
        assert_eq!(a["other.example.com/v"], "\"1.2.3\"");
    }

    #[test]
    fn a_device_class_and_a_bad_count() {
        let c = device_class(&json!({"metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": "true"}}]}}));
        assert_eq!(c.selectors, ["true"]);
        let e = resource_claim(&json!({"metadata": {"name": "x", "namespace": "d"},
            "spec": {"devices": {"requests": [{"name": "a", "exactly": {"deviceClassName": "g", "count": 0}}]}}}))
        .expect_err("refused");
        assert!(
            e.to_string()
                .starts_with("spec.devices.requests[0].exactly.count"),
            "{e}"
        );
    }
}
