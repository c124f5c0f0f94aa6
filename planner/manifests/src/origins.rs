//! Where each object of a wire snapshot came from, so that a rule the wire decoding or the
//! model's validation applies (which name fields by their path in the snapshot,
//! `snapshot.node_pools[0].requirements[1].min_values`) is reported by file, document, object
//! and Kubernetes field (`spec.template.spec.requirements[1].minValues`).

use std::collections::BTreeMap;

use crate::Location;

/// Where one object of the snapshot came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Origin {
    /// The file, document and object.
    pub(crate) location: Location,
    /// The object's path in its document (`items[3].` for a List item), else empty.
    pub(crate) prefix: String,
    /// True for a pod made from a controller's template: its fields are the template's.
    pub(crate) from_template: bool,
}

/// Origins of the objects of a wire snapshot, by list (`pods`, `node_pools`, ...) and index.
#[derive(Clone, Debug, Default)]
pub struct Origins {
    lists: BTreeMap<&'static str, Vec<Origin>>,
}

/// Kubernetes paths of the wire fields, per list: `(wire field, Kubernetes path)`, matched by
/// the wire path's first segment (or first two, written with a dot). A field not listed maps to
/// `spec.<field in camelCase>`. A path ending in `!` stands for the whole wire field (the wire
/// gathers it from several places, e.g. host ports from every container): the rest of the
/// wire path is dropped.
const FIELDS: &[(&str, &[(&str, &str)])] = &[
    (
        "pods",
        &[
            ("requests", "spec.containers[*].resources.requests"),
            ("host_ports", "spec.containers[*].ports[*].hostPort!"),
            ("node_selector", "spec.nodeSelector"),
            (
                "required_node_affinity",
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            ),
            (
                "preferred_node_affinity",
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            ),
            (
                "pod_affinity",
                "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            ),
            (
                "preferred_pod_affinity",
                "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            ),
            (
                "pod_anti_affinity",
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            ),
            (
                "preferred_pod_anti_affinity",
                "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            ),
            ("topology_spread", "spec.topologySpreadConstraints"),
            ("volume_claims", "spec.volumes!"),
            ("phase", "status.phase"),
            ("owner", "metadata.ownerReferences!"),
        ],
    ),
    (
        "nodes",
        &[
            ("allocatable", "status.allocatable"),
            ("capacity", "status.capacity"),
            ("ready", "status.conditions"),
        ],
    ),
    (
        "node_claims",
        &[
            ("requests", "spec.resources.requests"),
            ("allocatable", "status.allocatable"),
            ("capacity", "status.capacity"),
        ],
    ),
    (
        "node_pools",
        &[
            ("labels", "spec.template.metadata.labels"),
            ("annotations", "spec.template.metadata.annotations"),
            ("requirements", "spec.template.spec.requirements"),
            ("taints", "spec.template.spec.taints"),
            ("startup_taints", "spec.template.spec.startupTaints"),
            ("node_class", "spec.template.spec.nodeClassRef"),
            ("expire_after", "spec.template.spec.expireAfter"),
            ("limits.quantities", "spec.limits"),
            ("limited_resources", "spec.limits"),
            ("disruption", "spec.disruption"),
        ],
    ),
    (
        "pdbs",
        &[
            ("min_available", "spec.minAvailable"),
            ("max_unavailable", "spec.maxUnavailable"),
        ],
    ),
    (
        "pvcs",
        &[
            ("storage_class", "spec.storageClassName"),
            ("volume_name", "spec.volumeName"),
        ],
    ),
    (
        "storage_classes",
        &[
            ("volume_binding_mode", "volumeBindingMode"),
            ("allowed_topologies", "allowedTopologies"),
        ],
    ),
    (
        "node_overlays",
        &[
            ("requirements", "spec.requirements"),
            ("price_adjustment", "spec.priceAdjustment"),
            ("price", "spec.price"),
            ("capacity", "spec.capacity"),
            ("weight", "spec.weight"),
        ],
    ),
];

/// Fields every object has in its metadata.
const METADATA: &[(&str, &str)] = &[
    ("name", "metadata.name"),
    ("namespace", "metadata.namespace"),
    ("labels", "metadata.labels"),
    ("annotations", "metadata.annotations"),
    ("uid", "metadata.uid"),
    ("creation_time", "metadata.creationTimestamp"),
    ("deletion_time", "metadata.deletionTimestamp"),
];

/// `min_values` → `minValues`.
fn camel(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    let mut upper = false;
    for c in segment.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A wire path below an object in camelCase, dropping the wire's `quantities` and `milli`
/// wrappers of a resource list.
fn camel_path(rest: &str) -> String {
    rest.split('.')
        .filter(|s| !matches!(*s, "quantities" | "milli"))
        .map(|s| match s.split_once('[') {
            Some((name, tail)) => format!("{}[{tail}", camel(name)),
            None => camel(s),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Joins a Kubernetes path and the rest of a wire path (`""`, `[1].min_values`, `.cpu`).
fn join(base: &str, rest: &str) -> String {
    if let Some(whole) = base.strip_suffix('!') {
        return whole.to_string();
    }
    let rest = camel_path(rest.trim_start_matches('.'));
    if rest.is_empty() {
        base.to_string()
    } else if rest.starts_with('[') {
        format!("{base}{rest}")
    } else {
        format!("{base}.{rest}")
    }
}

/// The Kubernetes path of a wire path `rest` below an object of `list`. A resource map's
/// milli-unit twin (`requests_milli`) names the field its text form (`requests`) does.
fn kubernetes_field(list: &str, rest: &str) -> String {
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    if let Some(field) = rest[..end].strip_suffix("_milli") {
        return kubernetes_field(list, &format!("{field}{}", &rest[end..]));
    }
    if list == "daemon_sets"
        && let Some(t) = rest.strip_prefix("template.")
    {
        return to_template(&kubernetes_field("pods", t));
    }
    let table = FIELDS
        .iter()
        .find(|(l, _)| *l == list)
        .map_or(&[][..], |(_, t)| *t);
    for (wire, k8s) in table.iter().chain(METADATA) {
        if let Some(tail) = rest.strip_prefix(wire)
            && (tail.is_empty() || tail.starts_with(['.', '[']))
        {
            return join(k8s, tail);
        }
    }
    if rest.is_empty() {
        return String::new();
    }
    join("spec", rest)
}

/// A pod's path as the path in a controller's template.
fn to_template(pod_field: &str) -> String {
    if let Some(rest) = pod_field.strip_prefix("spec.") {
        format!("spec.template.spec.{rest}")
    } else if let Some(rest) = pod_field.strip_prefix("metadata.") {
        format!("spec.template.metadata.{rest}")
    } else {
        format!("spec.template.{pod_field}")
    }
}

// === impl Origins ===

impl Origins {
    /// Records the origin of the next object of `list`.
    pub(crate) fn push(&mut self, list: &'static str, origin: Origin) {
        self.lists.entry(list).or_default().push(origin);
    }

    /// The file, document and object a wire path (`snapshot.pods[3].host_ports[0].port`, with
    /// or without the `snapshot.` prefix) points into, and the Kubernetes field it names
    /// there; `None` for a path outside the snapshot's objects.
    pub fn locate(&self, wire_path: &str) -> Option<(Location, String)> {
        let path = wire_path.strip_prefix("snapshot.").unwrap_or(wire_path);
        let (list, after) = path.split_once('[')?;
        let (index, rest) = after.split_once(']')?;
        let index: usize = index.parse().ok()?;
        let (key, origin) = self.lists.get_key_value(list)?;
        let origin = origin.get(index)?;
        let mut field = kubernetes_field(key, rest.trim_start_matches('.'));
        if origin.from_template {
            field = to_template(&field);
        }
        Some((origin.location.clone(), format!("{}{field}", origin.prefix)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(from_template: bool) -> Origins {
        let mut o = Origins::default();
        for list in ["pods", "node_pools", "daemon_sets", "nodes"] {
            o.push(
                list,
                Origin {
                    location: Location {
                        source: "a.yaml".into(),
                        document: Some(2),
                        object: Some("X".into()),
                    },
                    prefix: String::new(),
                    from_template,
                },
            );
        }
        o
    }

    #[test]
    fn wire_paths_become_kubernetes_fields() {
        let o = origins(false);
        let cases = [
            (
                "snapshot.pods[0].host_ports[0].port",
                "spec.containers[*].ports[*].hostPort",
            ),
            (
                "snapshot.pods[0].requests.cpu",
                "spec.containers[*].resources.requests.cpu",
            ),
            ("snapshot.pods[0].name", "metadata.name"),
            (
                "snapshot.node_pools[0].requirements[1].min_values",
                "spec.template.spec.requirements[1].minValues",
            ),
            (
                "snapshot.node_pools[0].disruption.budgets[0].schedule",
                "spec.disruption.budgets[0].schedule",
            ),
            (
                "snapshot.node_pools[0].limits.quantities.cpu",
                "spec.limits.cpu",
            ),
            ("snapshot.node_pools[0].weight", "spec.weight"),
            (
                "snapshot.daemon_sets[0].template.requests[\"nvidia.com/gpu\"]",
                "spec.template.spec.containers[*].resources.requests[\"nvidia.com/gpu\"]",
            ),
            (
                "snapshot.nodes[0].allocatable.memory",
                "status.allocatable.memory",
            ),
            (
                "snapshot.nodes[0].allocatable_milli.memory",
                "status.allocatable.memory",
            ),
            (
                "snapshot.pods[0].requests_milli[\"nvidia.com/gpu\"]",
                "spec.containers[*].resources.requests[\"nvidia.com/gpu\"]",
            ),
            ("snapshot.node_pools[0].limits.milli.cpu", "spec.limits.cpu"),
        ];
        for (wire, want) in cases {
            let (location, field) = o.locate(wire).expect(wire);
            assert_eq!(location.document, Some(2));
            assert_eq!(field, want, "{wire}");
        }
        assert_eq!(o.locate("snapshot.pods[7].name"), None);
        assert_eq!(o.locate("options.now"), None);
    }

    #[test]
    fn a_templated_pod_names_the_template_field() {
        let o = origins(true);
        assert_eq!(
            o.locate("snapshot.pods[0].host_ports[0].port")
                .expect("located")
                .1,
            "spec.template.spec.containers[*].ports[*].hostPort"
        );
    }
}
