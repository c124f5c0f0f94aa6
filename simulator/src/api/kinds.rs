//! The resource kinds the API serves, and discovery documents built from them.
//!
//! Built-in kinds are fixed; custom resources are served as soon as their
//! CustomResourceDefinition is stored (the Karpenter ones are stored at start).

use std::sync::RwLock;

use serde_json::{Value, json};

/// One served resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindInfo {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name (`pods`).
    pub resource: String,
    /// Singular name (`pod`).
    pub singular: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Whether `status` is a subresource (main-resource writes keep the stored status).
    pub status_subresource: bool,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// Everything but `status` (when the kind has a status subresource).
    Main,
    /// Only `status`.
    Status,
    /// Spec and status together (in-process controllers, the binding subresource).
    Both,
}

// === impl KindInfo ===

impl KindInfo {
    fn builtin(
        group: &str,
        version: &str,
        resource: &str,
        kind: &str,
        namespaced: bool,
        status: bool,
        short: &[&str],
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            namespaced,
            status_subresource: status,
            short_names: short.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `nodepools.karpenter.sh`: the name used in error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// The storage key: group and resource (one stored version per resource).
    pub fn key(&self) -> ResKey {
        ResKey {
            group: self.group.clone(),
            resource: self.resource.clone(),
        }
    }
}

/// Storage key of a resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResKey {
    /// API group.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

// === impl ResKey ===

impl ResKey {
    /// A key from its parts.
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

/// The registry of served kinds.
#[derive(Debug)]
pub struct Kinds {
    list: RwLock<Vec<KindInfo>>,
}

// === impl Kinds ===

impl Kinds {
    /// The built-in kinds.
    pub fn new() -> Self {
        let b = KindInfo::builtin;
        let list = vec![
            b("", "v1", "namespaces", "Namespace", false, true, &["ns"]),
            b("", "v1", "pods", "Pod", true, true, &["po"]),
            b("", "v1", "nodes", "Node", false, true, &["no"]),
            b("", "v1", "events", "Event", true, false, &["ev"]),
            b(
                "",
                "v1",
                "limitranges",
                "LimitRange",
                true,
                false,
                &["limits"],
            ),
            b(
                "",
                "v1",
                "persistentvolumeclaims",
                "PersistentVolumeClaim",
                true,
                true,
                &["pvc"],
            ),
            b(
                "",
                "v1",
                "persistentvolumes",
                "PersistentVolume",
                false,
                true,
                &["pv"],
            ),
            b("", "v1", "configmaps", "ConfigMap", true, false, &["cm"]),
            b("", "v1", "podtemplates", "PodTemplate", true, false, &[]),
            b("", "v1", "services", "Service", true, true, &["svc"]),
            b("apps", "v1", "daemonsets", "DaemonSet", true, true, &["ds"]),
            b(
                "apps",
                "v1",
                "deployments",
                "Deployment",
                true,
                true,
                &["deploy"],
            ),
            b(
                "apps",
                "v1",
                "replicasets",
                "ReplicaSet",
                true,
                true,
                &["rs"],
            ),
            b(
                "apps",
                "v1",
                "statefulsets",
                "StatefulSet",
                true,
                true,
                &["sts"],
            ),
            b(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                true,
                true,
                &["pdb"],
            ),
            b(
                "coordination.k8s.io",
                "v1",
                "leases",
                "Lease",
                true,
                false,
                &[],
            ),
            b(
                "events.k8s.io",
                "v1",
                "events",
                "Event",
                true,
                false,
                &["ev"],
            ),
            b(
                "storage.k8s.io",
                "v1",
                "storageclasses",
                "StorageClass",
                false,
                false,
                &["sc"],
            ),
            // Dynamic Resource Allocation (resource.k8s.io/v1, GA in Kubernetes 1.34).
            b(
                "resource.k8s.io",
                "v1",
                "resourceclaims",
                "ResourceClaim",
                true,
                true,
                &[],
            ),
            b(
                "resource.k8s.io",
                "v1",
                "resourceclaimtemplates",
                "ResourceClaimTemplate",
                true,
                false,
                &[],
            ),
            b(
                "resource.k8s.io",
                "v1",
                "deviceclasses",
                "DeviceClass",
                false,
                false,
                &[],
            ),
            b(
                "resource.k8s.io",
                "v1",
                "resourceslices",
                "ResourceSlice",
                false,
                false,
                &[],
            ),
            b(
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                "PriorityClass",
                false,
                false,
                &["pc"],
            ),
            b(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                true,
                &["crd", "crds"],
            ),
        ];
        Self {
            list: RwLock::new(list),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<KindInfo>> {
        self.list.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Every served kind.
    pub fn all(&self) -> Vec<KindInfo> {
        self.read().clone()
    }

    /// Replaces the registry (for scratch copies of a store).
    pub fn replace_all(&self, kinds: Vec<KindInfo>) {
        *self.list.write().unwrap_or_else(|p| p.into_inner()) = kinds;
    }

    /// The kind served at `group/version/resource`.
    pub fn find(&self, group: &str, version: &str, resource: &str) -> Option<KindInfo> {
        self.read()
            .iter()
            .find(|k| k.group == group && k.version == version && k.resource == resource)
            .cloned()
    }

    /// The kind by apiVersion and kind (`v1`, `Pod`).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<KindInfo> {
        self.read()
            .iter()
            .find(|k| k.api_version() == api_version && k.kind == kind)
            .cloned()
    }

    /// Registers (or replaces) the kinds of a CustomResourceDefinition object. Returns the
    /// kinds it serves; a malformed CRD registers nothing.
    pub fn register_crd(&self, crd: &Value) -> Vec<KindInfo> {
        let spec = &crd["spec"];
        let (Some(group), Some(plural), Some(kind)) = (
            spec["group"].as_str(),
            spec["names"]["plural"].as_str(),
            spec["names"]["kind"].as_str(),
        ) else {
            return Vec::new();
        };
        let namespaced = spec["scope"].as_str() != Some("Cluster");
        let singular = spec["names"]["singular"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase());
        let short: Vec<String> = spec["names"]["shortNames"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let mut added = Vec::new();
        for v in spec["versions"].as_array().into_iter().flatten() {
            if v["served"].as_bool() == Some(false) {
                continue;
            }
            let Some(version) = v["name"].as_str() else {
                continue;
            };
            added.push(KindInfo {
                group: group.into(),
                version: version.into(),
                resource: plural.into(),
                singular: singular.clone(),
                kind: kind.into(),
                namespaced,
                status_subresource: v["subresources"]["status"].is_object(),
                short_names: short.clone(),
            });
        }
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        list.retain(|k| !(k.group == group && k.resource == plural));
        list.extend(added.iter().cloned());
        added
    }

    /// Removes the kinds of a deleted CRD.
    pub fn unregister_crd(&self, crd: &Value) {
        let spec = &crd["spec"];
        if let (Some(group), Some(plural)) =
            (spec["group"].as_str(), spec["names"]["plural"].as_str())
        {
            let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
            list.retain(|k| !(k.group == group && k.resource == plural));
        }
    }

    /// `/api` (APIVersions).
    pub fn core_versions(&self, server: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
        })
    }

    /// `/apis` (APIGroupList).
    pub fn groups(&self) -> Value {
        let list = self.read();
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for k in list.iter().filter(|k| !k.group.is_empty()) {
            match groups.iter_mut().find(|(g, _)| *g == k.group) {
                Some((_, vs)) => {
                    if !vs.contains(&k.version) {
                        vs.push(k.version.clone());
                    }
                }
                None => groups.push((k.group.clone(), vec![k.version.clone()])),
            }
        }
        let groups: Vec<Value> = groups.iter().map(|(g, vs)| group_doc(g, vs)).collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/apis/{group}` (APIGroup), if the group is served.
    pub fn group(&self, group: &str) -> Option<Value> {
        let list = self.read();
        let mut vs: Vec<String> = Vec::new();
        for k in list.iter().filter(|k| k.group == group) {
            if !vs.contains(&k.version) {
                vs.push(k.version.clone());
            }
        }
        if vs.is_empty() {
            return None;
        }
        let mut doc = group_doc(group, &vs);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        Some(doc)
    }

    /// `/api/v1` or `/apis/{group}/{version}` (APIResourceList), if served.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let list = self.read();
        let kinds: Vec<&KindInfo> = list
            .iter()
            .filter(|k| k.group == group && k.version == version)
            .collect();
        if kinds.is_empty() {
            return None;
        }
        let mut resources = Vec::new();
        for k in kinds {
            let verbs = json!([
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch"
            ]);
            resources.push(json!({
                "name": k.resource,
                "singularName": k.singular,
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": verbs,
                "shortNames": k.short_names,
            }));
            if k.status_subresource {
                resources.push(json!({
                    "name": format!("{}/status", k.resource),
                    "singularName": "",
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
            if has_scale(k) {
                resources.push(json!({
                    "name": format!("{}/scale", k.resource), "singularName": "", "namespaced": k.namespaced,
                    "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
                }));
            }
            if k.group.is_empty() && k.resource == "pods" {
                resources.push(json!({
                    "name": "pods/eviction", "singularName": "", "namespaced": true,
                    "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"],
                }));
                resources.push(json!({
                    "name": "pods/binding", "singularName": "", "namespaced": true,
                    "kind": "Binding", "verbs": ["create"],
                }));
            }
        }
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": if group.is_empty() { version.to_string() } else { format!("{group}/{version}") },
            "resources": resources,
        }))
    }
}

impl Default for Kinds {
    fn default() -> Self {
        Self::new()
    }
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": {"groupVersion": format!("{group}/{}", versions[0]), "version": versions[0]},
    })
}

/// The CustomResourceDefinitions stored at start: NodePool and NodeClaim (`karpenter.sh/v1`),
/// EC2NodeClass (`karpenter.k8s.aws/v1`) and CapacityBuffer (`autoscaling.x-k8s.io/v1beta1`), exactly as `dovetail crds` prints them (crate `crds`):
/// their schemas are published in `/openapi/v3` and check `fieldValidation=Strict` requests, and
/// their printer columns lay out `kubectl get`. Defaults and CEL rules are not applied here.
pub fn karpenter_crds() -> Vec<Value> {
    crds::crds()
        .iter()
        .map(|crd| serde_json::to_value(crd).unwrap_or(Value::Null))
        .filter(Value::is_object)
        .collect()
}

/// Whether the kind has a `scale` subresource: the apps workloads, and Karpenter's NodePool
/// (its CRD declares `.spec.replicas` / `.status.nodes`).
pub(crate) fn has_scale(kind: &KindInfo) -> bool {
    (kind.group == "apps"
        && matches!(
            kind.resource.as_str(),
            "deployments" | "replicasets" | "statefulsets"
        ))
        || is_node_pool(kind)
}

/// Whether the kind is Karpenter's NodePool.
pub(crate) fn is_node_pool(kind: &KindInfo) -> bool {
    kind.group == "karpenter.sh" && kind.resource == "nodepools"
}
