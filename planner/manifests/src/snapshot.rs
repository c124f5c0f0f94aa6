//! The objects of an input, completed as an API server and the controllers would complete
//! them, through the running system's conversion: `k8s-reader` (objects → `dovetail.v1`),
//! `planner-wire` (→ model) and the model's validation. Every refusal is named by file,
//! document, object and field.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_reader::PriorityClasses;
use planner_wire::At;
use proto::v1 as pb;
use serde_json::Value;

use crate::objects::Objects;
use crate::origins::{Origin, Origins};
use crate::workloads::{self, Controller};
use crate::{Error, Loaded, Location, Result};

/// The annotation that marks the default StorageClass.
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// A refusal of one object's field (its path in the object) at `origin`.
fn refuse(origin: &Origin, field: &str, message: impl Into<String>) -> Error {
    Error::Field {
        location: origin.location.clone(),
        path: format!("{}{field}", origin.prefix),
        message: message.into(),
    }
}

/// A `k8s-reader` refusal at `origin` (a templated pod's fields are its template's).
fn reader_error(origin: &Origin, e: &k8s_reader::Error) -> Error {
    let k8s_reader::Error::Field { field, message } = e;
    let field = if origin.from_template {
        field.strip_prefix("spec.").map_or_else(
            || format!("spec.template.{field}"),
            |rest| format!("spec.template.spec.{rest}"),
        )
    } else {
        field.clone()
    };
    refuse(origin, &field, message.clone())
}

/// A refusal of the wire decoding or the model's validation, which name the field by its
/// path in the snapshot (`snapshot.pods[3].requests.cpu`), named by the object's origin.
fn wire_error(origins: &Origins, field: &str, message: &str) -> Error {
    match origins.locate(field) {
        Some((location, path)) => Error::Field {
            location,
            path,
            message: message.to_string(),
        },
        None => Error::Field {
            location: Location {
                source: "(input)".into(),
                document: None,
                object: None,
            },
            path: field.to_string(),
            message: message.to_string(),
        },
    }
}

/// Refuses a second controller of one kind with the same namespace and name, as two pods
/// with one name are refused: a cluster holds one, and expanding both would plan its pods
/// twice.
fn unique_controllers(objects: &Objects) -> Result<()> {
    let mut seen = BTreeSet::new();
    for (c, origin) in &objects.controllers {
        if !seen.insert((c.kind.as_str(), c.namespace.as_str(), c.name.as_str())) {
            return Err(refuse(
                origin,
                "metadata.name",
                format!(
                    "duplicate {} {}: names are unique per kind and namespace",
                    c.kind,
                    common::key::namespaced(&c.namespace, &c.name)
                ),
            ));
        }
    }
    Ok(())
}

/// The name of the default StorageClass, with a warning when there are several.
fn default_storage_class(objects: &Objects, warnings: &mut Vec<String>) -> Option<String> {
    let defaults: Vec<String> = objects
        .storage_classes
        .iter()
        .filter(|(c, _)| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true")
        })
        .filter_map(|(c, _)| c.metadata.name.clone())
        .collect();
    if defaults.len() > 1 {
        warnings.push(format!(
            "several default StorageClasses ({}); using {}",
            defaults.join(", "),
            defaults[0]
        ));
    }
    defaults.into_iter().next()
}

/// Fills each NodeClaim's absent `spec.expireAfter` with its NodePool's (the claim's
/// `karpenter.sh/nodepool` label, else its Node's), else Karpenter's 720h, as Karpenter sets
/// it when it creates the claim.
fn claim_expiry(objects: &mut Objects) {
    let pool_of_node: BTreeMap<String, String> = objects
        .nodes
        .iter()
        .filter_map(|(n, _)| {
            let pool = n.metadata.labels.as_ref()?.get(common::labels::NODEPOOL)?;
            Some((n.metadata.name.clone()?, pool.clone()))
        })
        .collect();
    let pool_expiry: BTreeMap<String, Value> = objects
        .node_pools
        .iter()
        .filter_map(|(p, _)| {
            let name = p.pointer("/metadata/name")?.as_str()?.to_string();
            let e = p
                .pointer("/spec/template/spec/expireAfter")
                .cloned()
                .unwrap_or_else(|| "720h".into());
            Some((name, e))
        })
        .collect();
    for (claim, _) in &mut objects.node_claims {
        if claim.pointer("/spec/expireAfter").is_some() {
            continue;
        }
        let pool = claim
            .pointer(&format!(
                "/metadata/labels/{}",
                common::labels::NODEPOOL.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                let node = claim.pointer("/status/nodeName")?.as_str()?;
                pool_of_node.get(node).cloned()
            });
        let expiry = pool
            .and_then(|p| pool_expiry.get(&p).cloned())
            .unwrap_or_else(|| "720h".into());
        if let Some(spec) = claim
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert_with(|| serde_json::json!({})))
            .and_then(Value::as_object_mut)
        {
            spec.insert("expireAfter".into(), expiry);
        }
    }
}

/// The snapshot's pods: the input's, then the ones the controllers would create, converted one
/// at a time.
fn pods(
    objects: &Objects,
    classes: &PriorityClasses,
    out: &mut pb::ClusterSnapshot,
    origins: &mut Origins,
    unknown_classes: &mut BTreeMap<String, Vec<String>>,
) -> Result<Vec<workloads::TemplatedClaim>> {
    let mut note_class = |p: &core::Pod| {
        let spec = p.spec.as_ref();
        if let Some(c) = spec.and_then(|s| s.priority_class_name.as_deref())
            && spec.and_then(|s| s.priority).is_none()
            && !classes.is_known(c)
        {
            unknown_classes
                .entry(c.to_string())
                .or_default()
                .push(common::key::namespaced(
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default(),
                ));
        }
    };
    for (p, origin) in &objects.pods {
        note_class(p);
        let converted = k8s_reader::pod(p, classes).map_err(|e| reader_error(origin, &e))?;
        out.pods.push(converted);
        origins.push("pods", origin.clone());
    }
    let controllers: Vec<&Controller> = objects.controllers.iter().map(|(c, _)| c).collect();
    let given: Vec<&core::Pod> = objects.pods.iter().map(|(p, _)| p).collect();
    workloads::expand(&controllers, &given, |i, pod| {
        let origin = Origin {
            from_template: true,
            ..objects.controllers[i].1.clone()
        };
        note_class(&pod);
        let converted = k8s_reader::pod(&pod, classes).map_err(|e| reader_error(&origin, &e))?;
        out.pods.push(converted);
        origins.push("pods", origin);
        Ok(())
    })
}

/// A CapacityBuffer with its reference resolved among the input's PodTemplates and workloads,
/// as the watcher resolves it against the API (a missing referent is reported as the API
/// would: `podtemplates "x" not found`).
fn capacity_buffer(
    objects: &Objects,
    b: &Value,
    classes: &PriorityClasses,
) -> std::result::Result<pb::CapacityBuffer, k8s_reader::Error> {
    use k8s_reader::buffer::{Reference, Referent};
    let namespace = b
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let missing;
    let referent = match k8s_reader::buffer::reference(b) {
        Reference::PodTemplate(name) => match objects.pod_templates.iter().find(|(t, _)| {
            t.metadata.namespace.as_deref() == Some(namespace)
                && t.metadata.name.as_deref() == Some(name.as_str())
        }) {
            Some((t, _)) => Referent::PodTemplate(t),
            None => {
                missing = format!("podtemplates {name:?} not found");
                Referent::Unresolved(&missing)
            }
        },
        Reference::Workload { kind, name } => match objects
            .controllers
            .iter()
            .find(|(c, _)| c.kind == kind && c.namespace == namespace && c.name == name)
        {
            Some((c, _)) => Referent::Workload {
                template: &c.template,
                replicas: Some(i32::try_from(c.desired).unwrap_or(i32::MAX)),
            },
            None => {
                missing = format!("{}s.apps {name:?} not found", kind.to_lowercase());
                Referent::Unresolved(&missing)
            }
        },
        Reference::Unsupported(why) => {
            missing = why;
            Referent::Unresolved(&missing)
        }
    };
    k8s_reader::buffer::capacity_buffer(b, referent, classes)
}

/// Converts every other kind, in the order of the wire snapshot's lists.
fn others(
    objects: &Objects,
    classes: &PriorityClasses,
    claims: Vec<workloads::TemplatedClaim>,
    default_class: Option<&str>,
    out: &mut pb::ClusterSnapshot,
    origins: &mut Origins,
) -> Result<()> {
    macro_rules! convert {
        ($list:ident, $from:expr, $f:expr) => {
            for (o, origin) in &$from {
                let converted = $f(o).map_err(|e| reader_error(origin, &e))?;
                out.$list.push(converted);
                origins.push(stringify!($list), origin.clone());
            }
        };
    }
    convert!(nodes, objects.nodes, k8s_reader::node);
    convert!(node_claims, objects.node_claims, k8s_reader::node_claim);
    convert!(node_pools, objects.node_pools, k8s_reader::node_pool);
    convert!(node_classes, objects.node_classes, k8s_reader::node_class);
    convert!(
        daemon_sets,
        objects.daemon_sets,
        |d| k8s_reader::daemon_set(d, classes)
    );
    convert!(pdbs, objects.pdbs, k8s_reader::pdb);
    for (n, origin) in &objects.namespaces {
        out.namespaces.push(k8s_reader::namespace(&n.metadata));
        origins.push("namespaces", origin.clone());
    }
    let with_default = |c: &core::PersistentVolumeClaim| {
        let mut c = c.clone();
        let spec = c.spec.get_or_insert_with(Default::default);
        if spec.storage_class_name.is_none() {
            spec.storage_class_name = default_class.map(str::to_string);
        }
        c
    };
    let mut known: BTreeSet<(String, String)> = BTreeSet::new();
    for (c, origin) in &objects.pvcs {
        known.insert((
            c.metadata.namespace.clone().unwrap_or_default(),
            c.metadata.name.clone().unwrap_or_default(),
        ));
        out.pvcs.push(k8s_reader::pvc(&with_default(c)));
        origins.push("pvcs", origin.clone());
    }
    // Claims the controllers would create from templates, unless the input has them: a
    // StatefulSet's pods are pinned by their volumes as soon as those exist, and until then
    // the template's storage class decides where they may go.
    for (namespace, name, class) in claims {
        if !known.insert((namespace.clone(), name.clone())) {
            continue;
        }
        let claim = core::PersistentVolumeClaim {
            metadata: meta::ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                ..Default::default()
            },
            spec: Some(core::PersistentVolumeClaimSpec {
                storage_class_name: class,
                ..Default::default()
            }),
            status: None,
        };
        out.pvcs.push(k8s_reader::pvc(&with_default(&claim)));
        origins.push(
            "pvcs",
            Origin {
                location: Location {
                    source: "(templated claim)".into(),
                    document: None,
                    object: Some(format!(
                        "PersistentVolumeClaim {}",
                        common::key::namespaced(
                            claim.metadata.namespace.as_deref().unwrap_or_default(),
                            claim.metadata.name.as_deref().unwrap_or_default()
                        )
                    )),
                },
                prefix: String::new(),
                from_template: false,
            },
        );
    }
    for (b, origin) in &objects.capacity_buffers {
        let converted =
            capacity_buffer(objects, b, classes).map_err(|e| reader_error(origin, &e))?;
        out.capacity_buffers.push(converted);
        origins.push("capacity_buffers", origin.clone());
    }
    convert!(pvs, objects.pvs, k8s_reader::pv);
    convert!(
        storage_classes,
        objects.storage_classes,
        k8s_reader::storage_class
    );
    convert!(
        node_overlays,
        objects.node_overlays,
        k8s_reader::node_overlay
    );
    convert!(
        resource_claims,
        objects.resource_claims,
        k8s_reader::dra::resource_claim
    );
    convert!(device_classes, objects.device_classes, |c| Ok::<
        _,
        k8s_reader::Error,
    >(
        k8s_reader::dra::device_class(c)
    ));
    convert!(
        resource_slices,
        objects.resource_slices,
        k8s_reader::dra::resource_slice
    );
    Ok(())
}

/// Completes, converts and validates the objects of an input.
pub(crate) fn finish(mut objects: Objects, max_pods: usize) -> Result<Loaded> {
    debug_assert!(
        objects.pod_count <= max_pods,
        "checked as documents were read"
    );
    unique_controllers(&objects)?;
    let mut warnings = std::mem::take(&mut objects.warnings);
    let mut classes = PriorityClasses::default();
    for (c, _) in &objects.priority_classes {
        let (name, value, global_default) = k8s_reader::priority_class(c);
        classes.insert(name, value, global_default);
    }
    let default_class = default_storage_class(&objects, &mut warnings);
    claim_expiry(&mut objects);

    let mut out = pb::ClusterSnapshot::default();
    let mut origins = Origins::default();
    let mut unknown_classes = BTreeMap::new();
    let claims = pods(
        &objects,
        &classes,
        &mut out,
        &mut origins,
        &mut unknown_classes,
    )?;
    others(
        &objects,
        &classes,
        claims,
        default_class.as_deref(),
        &mut out,
        &mut origins,
    )?;

    let root = At::ROOT;
    let snapshot = planner_wire::to_model::snapshot(out, root.field("snapshot"))
        .map_err(|e| wire_error(&origins, e.field(), e.reason()))?;
    planner::validation::snapshot(&snapshot)
        .map_err(|e| wire_error(&origins, e.field(), e.reason()))?;

    for (class, who) in unknown_classes {
        let more = if who.len() > 3 {
            format!(" and {} more", who.len() - 3)
        } else {
            String::new()
        };
        warnings.push(format!(
            "PriorityClass {class:?} is not in the input; priority 0 for {}{more}",
            who.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    for s in &objects.skipped {
        let noun = if s.count == 1 { "object" } else { "objects" };
        warnings.push(format!(
            "skipped {} {noun} of kind {} not used for planning (first: {})",
            s.count, s.what, s.first
        ));
    }
    Ok(Loaded {
        snapshot,
        warnings,
        origins,
    })
}
