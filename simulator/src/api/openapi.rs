//! The OpenAPI documents a real API server publishes, for the kinds this one serves:
//! `/openapi/v3` (the discovery root, `paths` → one document per group-version),
//! `/openapi/v3/{api/v1|apis/{group}/{version}}` and `/openapi/v2` (JSON).
//!
//! kubectl reads them: `kubectl apply` checks in the v3 document that PATCH supports the
//! `fieldValidation` parameter (then it leaves validation to the server, see [`validate`]) and
//! computes strategic merge patches from the `x-kubernetes-patch-*` extensions; `kubectl explain`
//! prints them.
//!
//! Built-in kinds take their schemas from `k8s-openapi` (its `schemars` impls: the upstream
//! schemas), with the group-version-kind and patch extensions the upstream generator adds. Custom
//! resources take theirs from the stored CustomResourceDefinitions' `openAPIV3Schema`.

pub mod validate;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::OnceLock;

use k8s_openapi::api::{apps, coordination, core, events, policy, resource, scheduling, storage};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use super::kinds::KindInfo;
use super::store::Store;

/// The definition name of ObjectMeta, which custom resources' `metadata` refers to.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Schemas of the built-in kinds: definition name → schema, for all kinds at once.
struct Builtins {
    /// Every definition the built-in kinds need, with kubectl's extensions added.
    definitions: Map<String, Value>,
    /// `(group, version, kind)` → definition name of the kind's top-level schema.
    roots: Vec<(&'static str, &'static str, &'static str, String)>,
}

fn builtins() -> &'static Builtins {
    static BUILTINS: OnceLock<Builtins> = OnceLock::new();
    BUILTINS.get_or_init(|| {
        let mut g = SchemaGenerator::new(SchemaSettings::openapi3());
        let mut roots = Vec::new();
        macro_rules! root {
            ($group:expr, $version:expr, $kind:expr, $ty:ty) => {{
                g.subschema_for::<$ty>();
                roots.push(($group, $version, $kind, <$ty>::schema_name().into_owned()));
            }};
        }
        root!("", "v1", "Namespace", core::v1::Namespace);
        root!("", "v1", "Pod", core::v1::Pod);
        root!("", "v1", "Node", core::v1::Node);
        root!("", "v1", "Event", core::v1::Event);
        root!("", "v1", "LimitRange", core::v1::LimitRange);
        root!(
            "",
            "v1",
            "PersistentVolumeClaim",
            core::v1::PersistentVolumeClaim
        );
        root!("", "v1", "PersistentVolume", core::v1::PersistentVolume);
        root!("", "v1", "ConfigMap", core::v1::ConfigMap);
        root!("", "v1", "Service", core::v1::Service);
        root!("apps", "v1", "DaemonSet", apps::v1::DaemonSet);
        root!("apps", "v1", "Deployment", apps::v1::Deployment);
        root!("apps", "v1", "ReplicaSet", apps::v1::ReplicaSet);
        root!("apps", "v1", "StatefulSet", apps::v1::StatefulSet);
        root!(
            "policy",
            "v1",
            "PodDisruptionBudget",
            policy::v1::PodDisruptionBudget
        );
        root!(
            "coordination.k8s.io",
            "v1",
            "Lease",
            coordination::v1::Lease
        );
        root!("events.k8s.io", "v1", "Event", events::v1::Event);
        root!(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            storage::v1::StorageClass
        );
        // resource.k8s.io/v1 (Kubernetes 1.34) has v1beta2's schema (1.33, the newest this
        // build of k8s-openapi has): v1 was promoted from it unchanged.
        root!(
            "resource.k8s.io",
            "v1",
            "ResourceClaim",
            resource::v1beta2::ResourceClaim
        );
        root!(
            "resource.k8s.io",
            "v1",
            "ResourceClaimTemplate",
            resource::v1beta2::ResourceClaimTemplate
        );
        root!(
            "resource.k8s.io",
            "v1",
            "DeviceClass",
            resource::v1beta2::DeviceClass
        );
        root!(
            "resource.k8s.io",
            "v1",
            "ResourceSlice",
            resource::v1beta2::ResourceSlice
        );
        root!(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            scheduling::v1::PriorityClass
        );
        root!(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            CustomResourceDefinition
        );
        g.subschema_for::<ObjectMeta>();
        let mut definitions = g.take_definitions(true);
        for (group, version, kind, name) in &roots {
            if let Some(Value::Object(s)) = definitions.get_mut(name) {
                s.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": group, "version": version, "kind": kind}]),
                );
            }
        }
        add_patch_extensions(&mut definitions);
        Builtins { definitions, roots }
    })
}

/// The strategic-merge-patch metadata of the upstream types (their `patchStrategy` and
/// `patchMergeKey` struct tags), which the upstream OpenAPI generator publishes as extensions and
/// `kubectl apply` reads to merge lists by key instead of replacing them.
const PATCH_EXTENSIONS: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "io.k8s.api.core.v1.PodSpec",
        "containers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "hostAliases",
        "merge",
        Some("ip"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        "merge",
        Some("topologyKey"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        "merge",
        Some("name"),
    ),
    ("io.k8s.api.core.v1.Container", "env", "merge", Some("name")),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        "merge",
        Some("containerPort"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ports",
        "merge",
        Some("port"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "addresses",
        "merge",
        Some("type"),
    ),
    ("io.k8s.api.core.v1.NodeSpec", "podCIDRs", "merge", None),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        "strategy",
        "retainKeys",
        None,
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        "merge",
        None,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        "merge",
        Some("uid"),
    ),
];

fn add_patch_extensions(definitions: &mut Map<String, Value>) {
    for (def, field, strategy, key) in PATCH_EXTENSIONS {
        let Some(Value::Object(prop)) = definitions
            .get_mut(*def)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(*field))
        else {
            continue;
        };
        prop.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        if let Some(key) = key {
            prop.insert("x-kubernetes-patch-merge-key".into(), json!(key));
        }
    }
}

/// The path of a group-version in `/openapi/v3`: `api/v1` or `apis/{group}/{version}`.
pub fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The name of a custom resource's definition, upstream style (`sh.karpenter.v1.NodePool`:
/// the reversed group, the version and the kind).
fn crd_definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// The schemas of a group-version: definition name → schema, and the kinds it serves with the
/// name of their top-level definition.
pub(crate) fn schemas(
    store: &Store,
    group: &str,
    version: &str,
) -> (Map<String, Value>, Vec<(KindInfo, String)>) {
    let kinds: Vec<KindInfo> = store
        .kinds()
        .all()
        .into_iter()
        .filter(|k| k.group == group && k.version == version)
        .collect();
    let b = builtins();
    let mut out = Map::new();
    let mut roots = Vec::new();
    let is_builtin = |k: &KindInfo| {
        b.roots
            .iter()
            .find(|(g, v, kind, _)| *g == k.group && *v == k.version && *kind == k.kind)
    };
    if kinds.iter().any(|k| is_builtin(k).is_some()) {
        // Built-in definitions refer to each other; a group-version's document carries all of
        // them, as upstream documents carry every definition they reach.
        out.extend(b.definitions.clone());
    }
    for k in kinds {
        if let Some((_, _, _, name)) = is_builtin(&k) {
            roots.push((k, name.clone()));
            continue;
        }
        let Some(schema) = crd_schema(store, &k) else {
            continue;
        };
        let name = crd_definition_name(&k.group, &k.version, &k.kind);
        out.insert(name.clone(), schema);
        if let Some(meta) = b.definitions.get(OBJECT_META) {
            out.entry(OBJECT_META).or_insert_with(|| meta.clone());
        }
        roots.push((k, name));
    }
    (out, roots)
}

/// The published schema of a custom resource: the CRD version's `openAPIV3Schema` with
/// `apiVersion`, `kind` and `metadata` (a reference to ObjectMeta) as the API server adds them.
fn crd_schema(store: &Store, kind: &KindInfo) -> Option<Value> {
    let crds = store
        .kinds()
        .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    let crd = store.get(&crds, "", &kind.qualified()).ok()?;
    let version = crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == kind.version.as_str())?;
    let mut schema = version["schema"]["openAPIV3Schema"].clone();
    if !schema.is_object() {
        schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    }
    {
        schema["type"] = json!("object");
        schema["properties"]["apiVersion"] = json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."});
        schema["properties"]["kind"] = json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."});
        schema["properties"]["metadata"] = json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata."});
    }
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": kind.group, "version": kind.version, "kind": kind.kind}]);
    Some(schema)
}

fn query_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": schema, "uniqueItems": true})
}

fn write_params() -> Vec<Value> {
    vec![
        query_param(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
            json!({"type": "string"}),
        ),
        query_param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
            json!({"type": "string"}),
        ),
        query_param(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn and Strict.",
            json!({"type": "string"}),
        ),
    ]
}

fn operation(
    kind: &KindInfo,
    action: &str,
    id: String,
    params: Vec<Value>,
    body_ref: Option<&str>,
) -> Value {
    let mut op = json!({
        "operationId": id,
        "tags": [kind.api_version().replace('/', "_")],
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": body_ref.map_or_else(String::new, |r| format!("#/components/schemas/{r}"))}}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
    });
    if let Some(r) = body_ref
        && matches!(action, "post" | "put")
    {
        op["requestBody"] = json!({"content": {"*/*": {"schema": {"$ref": format!("#/components/schemas/{r}")}}}, "required": true});
    }
    if action == "patch" {
        op["requestBody"] = json!({"content": {
            "application/apply-patch+yaml": {"schema": {"type": "object"}},
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/strategic-merge-patch+json": {"schema": {"type": "object"}},
        }, "required": true});
        op["parameters"].as_array_mut().into_iter().for_each(|p| {
            p.push(query_param(
                "force",
                "Force is going to \"force\" Apply requests.",
                json!({"type": "boolean"}),
            ))
        });
    }
    op
}

/// The paths of a kind: its collection and its items (and `status`), with the operations the
/// server supports.
fn paths_of(kind: &KindInfo, def: &str, paths: &mut Map<String, Value>) {
    let base = format!("/{}", gv_path(&kind.group, &kind.version));
    let prefix = if kind.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", kind.resource)
    } else {
        format!("{base}/{}", kind.resource)
    };
    let id = |verb: &str, suffix: &str| {
        let ns = if kind.namespaced { "Namespaced" } else { "" };
        format!(
            "{verb}{}{ns}{}{suffix}",
            kind.api_version().replace(['/', '.'], "_"),
            kind.kind
        )
    };
    let mut path_params =
        vec![json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}})];
    if kind.namespaced {
        path_params.push(json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}}));
    }
    paths.insert(
        prefix.clone(),
        json!({
            "get": operation(kind, "list", id("list", ""), vec![], None),
            "post": operation(kind, "post", id("create", ""), write_params(), Some(def)),
            "delete": operation(kind, "deletecollection", id("deleteCollection", ""), vec![], None),
            "parameters": if kind.namespaced { json!([path_params[1]]) } else { json!([]) },
        }),
    );
    let item = json!({
        "get": operation(kind, "get", id("read", ""), vec![], Some(def)),
        "put": operation(kind, "put", id("replace", ""), write_params(), Some(def)),
        "patch": operation(kind, "patch", id("patch", ""), write_params(), Some(def)),
        "delete": operation(kind, "delete", id("delete", ""), vec![], None),
        "parameters": path_params,
    });
    paths.insert(format!("{prefix}/{{name}}"), item);
    if kind.status_subresource {
        paths.insert(
            format!("{prefix}/{{name}}/status"),
            json!({
                "get": operation(kind, "get", id("read", "Status"), vec![], Some(def)),
                "put": operation(kind, "put", id("replace", "Status"), write_params(), Some(def)),
                "patch": operation(kind, "patch", id("patch", "Status"), write_params(), Some(def)),
                "parameters": path_params,
            }),
        );
    }
}

/// `/openapi/v3/{api/v1|apis/group/version}`: the OpenAPI 3 document of one group-version, if
/// it is served.
pub fn v3_group_version(store: &Store, group: &str, version: &str) -> Option<Value> {
    let (schemas, roots) = schemas(store, group, version);
    if roots.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for (kind, def) in &roots {
        paths_of(kind, def, &mut paths);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A hash that changes whenever the group-version's document does: its kinds and, for custom
/// resources, their CRDs (built-in schemas never change while the server runs).
fn hash_of(store: &Store, group: &str, version: &str) -> String {
    let mut h = DefaultHasher::new();
    let crds = store
        .kinds()
        .find("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    for k in store.kinds().all() {
        if k.group == group && k.version == version {
            format!("{k:?}").hash(&mut h);
            if let Some(crd) = crds
                .as_ref()
                .and_then(|c| store.get(c, "", &k.qualified()).ok())
            {
                crd["spec"].to_string().hash(&mut h);
            }
        }
    }
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: the discovery root, one entry per served group-version with the URL of its
/// document (a content hash in the query, as upstream, lets clients cache it).
pub fn v3_root(store: &Store) -> Value {
    let mut gvs: Vec<(String, String)> = store
        .kinds()
        .all()
        .into_iter()
        .map(|k| (k.group, k.version))
        .collect();
    gvs.sort();
    gvs.dedup();
    let mut paths = Map::new();
    for (g, v) in gvs {
        let path = gv_path(&g, &v);
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash_of(store, &g, &v))}),
        );
    }
    json!({"paths": paths})
}

/// Rewrites OpenAPI 3 references (`#/components/schemas/X`) to Swagger 2 ones
/// (`#/definitions/X`) and turns `allOf: [{$ref}]` wrappers into plain references.
fn to_v2(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                *r = r.replace("#/components/schemas/", "#/definitions/");
            }
            if let Some(Value::Array(all)) = m.get("allOf")
                && all.len() == 1
                && all[0].get("$ref").is_some()
            {
                let r = all[0]["$ref"].clone();
                m.remove("allOf");
                m.insert("$ref".into(), r);
            }
            m.remove("nullable");
            for v in m.values_mut() {
                to_v2(v);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(to_v2),
        _ => {}
    }
}

/// `/openapi/v2` as JSON: every served kind's definitions and paths in one Swagger 2 document.
pub fn v2(store: &Store) -> Value {
    let mut gvs: Vec<(String, String)> = store
        .kinds()
        .all()
        .into_iter()
        .map(|k| (k.group, k.version))
        .collect();
    gvs.sort();
    gvs.dedup();
    let mut definitions = Map::new();
    let mut paths = Map::new();
    for (g, v) in gvs {
        let (schemas, roots) = schemas(store, &g, &v);
        definitions.extend(schemas);
        for (kind, def) in &roots {
            paths_of(kind, def, &mut paths);
        }
    }
    // Swagger 2 parameters carry their type inline and have no request bodies.
    for ops in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in ops.values_mut().filter_map(Value::as_object_mut) {
            op.remove("requestBody");
            if let Some(Value::Array(params)) = op.get_mut("parameters") {
                for p in params.iter_mut().filter_map(Value::as_object_mut) {
                    if let Some(Value::Object(s)) = p.remove("schema") {
                        p.extend(s);
                    }
                }
            }
        }
    }
    let mut doc = json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "definitions": definitions,
    });
    to_v2(&mut doc);
    doc
}

/// The top-level schema of a served kind and the definitions it refers to, for validation.
pub(crate) fn schema_for(
    store: &Store,
    kind: &KindInfo,
) -> Option<(Value, &'static Map<String, Value>)> {
    let b = builtins();
    if let Some((_, _, _, name)) = b
        .roots
        .iter()
        .find(|(g, v, k, _)| *g == kind.group && *v == kind.version && *k == kind.kind)
    {
        return Some((b.definitions.get(name)?.clone(), &b.definitions));
    }
    // A custom resource's schema is inline but for `metadata`, a reference to ObjectMeta.
    Some((crd_schema(store, kind)?, &b.definitions))
}
